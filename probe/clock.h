/* Cycle-resolution clock for one batch. x86: `lfence; rdtsc` before and
 * `rdtscp; lfence` after, so no earlier work leaks past the start and no later
 * work starts before the end (never cpuid: it exits to the hypervisor).
 * aarch64: cntvct_el0 behind isb. arm (32-bit): CNTVCT through
 * `mrrc p15, 1, lo, hi, c14` behind isb when the kernel lets user space read
 * it (CNTKCTL.PL0VCTEN; else it traps: SIGILL), which clock.c tries once at
 * start-up behind a SIGILL handler; otherwise CLOCK_MONOTONIC_RAW, and the
 * header's "clock" says which. Elsewhere: CLOCK_MONOTONIC_RAW in ns. */
#ifndef OPCOST_CLOCK_H
#define OPCOST_CLOCK_H
#include <stdint.h>
#include <time.h>

static inline uint64_t mono_raw_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__) || defined(__i386__)
#define CLOCK_NAME "tsc"
static inline uint64_t clock_start(void)
{
	uint32_t lo, hi;
	__asm__ volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi) : : "memory");
	return ((uint64_t)hi << 32) | lo;
}
static inline uint64_t clock_end(void)
{
	uint32_t lo, hi, aux;
	__asm__ volatile("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux) : : "memory");
	return ((uint64_t)hi << 32) | lo;
}
#elif defined(__aarch64__)
#define CLOCK_NAME "cntvct"
static inline uint64_t clock_start(void)
{
	uint64_t v;
	__asm__ volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
}
static inline uint64_t clock_end(void)
{
	uint64_t v;
	__asm__ volatile("isb\n\tmrs %0, cntvct_el0\n\tisb" : "=r"(v) : : "memory");
	return v;
}
#elif defined(__arm__)
/* Decided once, before main (clock.c): 1 when CNTVCT is readable here. A
 * global flag, not a function pointer: the branch on it is predicted and its
 * cost is in the clock overhead the harness measures and subtracts. */
extern int clock_arm_cntvct;
extern const char *clock_arm_why;   /* why not CNTVCT, when not */
#define CLOCK_NAME (clock_arm_cntvct ? "cntvct" : "monotonic_raw")
static inline uint64_t arm_cntvct(void)
{
	uint32_t lo, hi;
	__asm__ volatile("isb\n\tmrrc p15, 1, %0, %1, c14" : "=r"(lo), "=r"(hi) : : "memory");
	return ((uint64_t)hi << 32) | lo;
}
static inline uint64_t clock_start(void)
{
	return clock_arm_cntvct ? arm_cntvct() : mono_raw_ns();
}
static inline uint64_t clock_end(void)
{
	if (!clock_arm_cntvct)
		return mono_raw_ns();
	uint64_t v = arm_cntvct();
	__asm__ volatile("isb" : : : "memory");
	return v;
}
#else
#define CLOCK_NAME "monotonic_raw"
#define CLOCK_IS_NS 1
static inline uint64_t clock_start(void) { return mono_raw_ns(); }
static inline uint64_t clock_end(void) { return mono_raw_ns(); }
#endif

/* Ticks per second of clock_start/clock_end against CLOCK_MONOTONIC_RAW:
 * the tightest bracket of a counter read at both ends of a 20 ms interval. */
double clock_calibrate_hz(void);

#endif
