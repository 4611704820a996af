/* See util.h. */
#include "util.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

void die(int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "opcost-probe: %s\n", msg);
	exit(code);
}

long parse_count(const char *opt, const char *v, long min)
{
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (errno || *end || end == v || n < min)
		die(EXIT_USAGE, "%s %s: expected an integer >= %ld", opt, v, min);
	return n;
}

void appendf(char *buf, size_t len, const char *fmt, ...)
{
	size_t off = strlen(buf);
	if (off >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + off, len - off, fmt, ap);
	va_end(ap);
}

int tie_to_parent(void)
{
	pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	return getppid() != parent ? -1 : 0;
}
