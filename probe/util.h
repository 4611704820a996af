/* Small things every part of the probe uses: its exit codes and the one
 * fatal-error exit, integer options, bounded appends, the tie to the opcost
 * process that started it, and the fake clock's jitter. */
#ifndef OPCOST_UTIL_H
#define OPCOST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

/* Exit codes of the probe (the Python side reads them). */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_UNSUPPORTED = 3 };
/* "opcost-probe: MESSAGE" on stderr, then exit(code). */
void die(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
/* Option opt's integer value v, at least min; anything else is a usage
 * error: die(EXIT_USAGE). */
long parse_count(const char *opt, const char *v, long min);
/* snprintf at the end of the string in buf (len bytes), cut to fit. */
void appendf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Never outlive the opcost process that started us: SIGKILL when it dies.
 * -1 if it is already gone. */
int tie_to_parent(void);

static inline int64_t tv_ns(struct timeval tv)
{
	return (int64_t)tv.tv_sec * 1000000000LL + (int64_t)tv.tv_usec * 1000LL;
}

/* xorshift64, for the fake clock's jitter; a zero state is seeded. */
static inline uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

#endif
