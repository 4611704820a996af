#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void jb_init(struct jb *j)
{
	memset(j, 0, sizeof(*j));
}

void jb_free(struct jb *j)
{
	free(j->buf);
	memset(j, 0, sizeof(*j));
}

static void put(struct jb *j, const char *s, size_t n)
{
	if (j->len + n + 1 > j->cap) {
		size_t cap = j->cap ? j->cap : 512;
		while (cap < j->len + n + 1)
			cap *= 2;
		char *nb = realloc(j->buf, cap);
		if (!nb) {
			/* Out of memory while formatting output: nothing sane to emit. */
			static const char msg[] = "opcost-probe: out of memory in JSON emitter\n";
			(void)!write(2, msg, sizeof(msg) - 1);
			_exit(70);
		}
		j->buf = nb;
		j->cap = cap;
	}
	memcpy(j->buf + j->len, s, n);
	j->len += n;
	j->buf[j->len] = '\0';
}

static void puts_(struct jb *j, const char *s)
{
	put(j, s, strlen(s));
}

static void put_escaped(struct jb *j, const char *s)
{
	put(j, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char tmp[8];
		switch (*p) {
		case '"': puts_(j, "\\\""); break;
		case '\\': puts_(j, "\\\\"); break;
		case '\n': puts_(j, "\\n"); break;
		case '\r': puts_(j, "\\r"); break;
		case '\t': puts_(j, "\\t"); break;
		case '\b': puts_(j, "\\b"); break;
		case '\f': puts_(j, "\\f"); break;
		default:
			if (*p < 0x20 || *p == 0x7f) {
				snprintf(tmp, sizeof(tmp), "\\u%04x", *p);
				puts_(j, tmp);
			} else if (*p >= 0x80) {
				/* Not trusted to be valid UTF-8 (argv, /proc): escape bytes
				 * as Latin-1 code points so the line always parses. */
				snprintf(tmp, sizeof(tmp), "\\u%04x", *p);
				puts_(j, tmp);
			} else {
				put(j, (const char *)p, 1);
			}
		}
	}
	put(j, "\"", 1);
}

static void member(struct jb *j, const char *key)
{
	if (j->count[j->depth]++ > 0)
		put(j, ",", 1);
	if (key) {
		put_escaped(j, key);
		put(j, ":", 1);
	}
}

void jb_obj_begin(struct jb *j, const char *key)
{
	if (j->len > 0 || j->depth > 0)
		member(j, key);
	put(j, "{", 1);
	if (j->depth + 1 < JB_MAXDEPTH)
		j->depth++;
	j->count[j->depth] = 0;
}

void jb_obj_end(struct jb *j)
{
	put(j, "}", 1);
	if (j->depth > 0)
		j->depth--;
}

void jb_arr_begin(struct jb *j, const char *key)
{
	if (j->len > 0 || j->depth > 0)
		member(j, key);
	put(j, "[", 1);
	if (j->depth + 1 < JB_MAXDEPTH)
		j->depth++;
	j->count[j->depth] = 0;
}

void jb_arr_end(struct jb *j)
{
	put(j, "]", 1);
	if (j->depth > 0)
		j->depth--;
}

void jb_str(struct jb *j, const char *key, const char *val)
{
	member(j, key);
	if (val)
		put_escaped(j, val);
	else
		puts_(j, "null");
}

void jb_int(struct jb *j, const char *key, int64_t val)
{
	char tmp[32];
	member(j, key);
	snprintf(tmp, sizeof(tmp), "%lld", (long long)val);
	puts_(j, tmp);
}

void jb_uint(struct jb *j, const char *key, uint64_t val)
{
	char tmp[32];
	member(j, key);
	snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)val);
	puts_(j, tmp);
}

void jb_num(struct jb *j, const char *key, double val)
{
	char tmp[40];
	member(j, key);
	if (!isfinite(val)) {
		puts_(j, "null");
		return;
	}
	snprintf(tmp, sizeof(tmp), "%.17g", val);
	puts_(j, tmp);
}

void jb_bool(struct jb *j, const char *key, int val)
{
	member(j, key);
	puts_(j, val ? "true" : "false");
}

void jb_null(struct jb *j, const char *key)
{
	member(j, key);
	puts_(j, "null");
}

size_t jb_line(struct jb *j)
{
	put(j, "\n", 1);
	return j->len;
}

int jb_emit(struct jb *j, int fd)
{
	put(j, "\n", 1);
	size_t off = 0;
	while (off < j->len) {
		ssize_t w = write(fd, j->buf + off, j->len - off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			j->len = 0;
			return -1;
		}
		off += (size_t)w;
	}
	j->len = 0;
	j->depth = 0;
	j->count[0] = 0;
	return 0;
}
