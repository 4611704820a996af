/* The probe's one JSON emitter. Every line the probe writes to stdout is built
 * here into a growing buffer and written with a single write(2), so a crash can
 * never leave half a line, and every string goes through one escaper. */
#ifndef OPCOST_JSON_H
#define OPCOST_JSON_H
#include <stddef.h>
#include <stdint.h>

#define JB_MAXDEPTH 16

struct jb {
	char *buf;
	size_t len, cap;
	int depth;
	int count[JB_MAXDEPTH]; /* members emitted at each depth, for commas */
};

/* key is NULL inside arrays and for the top-level object. */
void jb_init(struct jb *j);
void jb_free(struct jb *j);
void jb_obj_begin(struct jb *j, const char *key);
void jb_obj_end(struct jb *j);
void jb_arr_begin(struct jb *j, const char *key);
void jb_arr_end(struct jb *j);
void jb_str(struct jb *j, const char *key, const char *val); /* NULL -> null */
void jb_int(struct jb *j, const char *key, int64_t val);
void jb_uint(struct jb *j, const char *key, uint64_t val);
void jb_num(struct jb *j, const char *key, double val);     /* NaN/inf -> null */
void jb_bool(struct jb *j, const char *key, int val);
void jb_null(struct jb *j, const char *key);
/* Write the finished top-level value plus '\n' to fd in one write; resets j. */
int jb_emit(struct jb *j, int fd);
/* The finished top-level value plus '\n' as text (j->buf, the returned
 * length), for a caller that keeps it (emit.c's held samples); then jb_free. */
size_t jb_line(struct jb *j);
#endif
