/* The one TSC (or cntvct) frequency calibration, shared by `run` and `time`. */
#include "clock.h"

#include <stdint.h>

#if defined(__arm__)
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <time.h>

int clock_arm_cntvct;
const char *clock_arm_why = "not tried";
static sigjmp_buf cntvct_jmp;

static void cntvct_sigill(int sig)
{
	(void)sig;
	siglongjmp(cntvct_jmp, 1);
}

/* Before main: can this process read CNTVCT? The kernel enables it for user
 * space (CNTKCTL.PL0VCTEN) when its architected timer drives the vDSO; when it
 * does not, the mrrc traps and the kernel sends SIGILL. A counter that does
 * not advance over 1 ms is no clock either. */
__attribute__((constructor)) static void clock_arm_probe(void)
{
	struct sigaction sa, old;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = cntvct_sigill;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGILL, &sa, &old) != 0) {
		clock_arm_why = "cannot install a SIGILL handler to try CNTVCT";
		return;
	}
	volatile uint64_t a = 0, b = 0;
	if (sigsetjmp(cntvct_jmp, 1) == 0) {
		a = arm_cntvct();
		uint64_t until = mono_raw_ns() + 1000000ull;
		while (mono_raw_ns() < until)
			;
		b = arm_cntvct();
		if (b > a) {
			clock_arm_cntvct = 1;
			clock_arm_why = NULL;
		} else {
			clock_arm_why = "CNTVCT does not advance";
		}
	} else {
		clock_arm_why = "CNTVCT is not readable from user space here (mrrc p15, 1, c14 traps with SIGILL: "
				"CNTKCTL.PL0VCTEN is clear, set neither by the kernel nor by an emulator)";
	}
	sigaction(SIGILL, &old, NULL);
}
#endif

/* TSC ticks per second against CLOCK_MONOTONIC_RAW: tightest bracket of a
 * TSC read at both ends of a 20 ms interval. */
double clock_calibrate_hz(void)
{
#ifdef CLOCK_IS_NS
	return 1e9;
#else
#if defined(__arm__)
	if (!clock_arm_cntvct)
		return 1e9;
#endif
	double ns[2] = {0, 0}, tk[2] = {0, 0};
	for (int end = 0; end < 2; end++) {
		uint64_t bw = UINT64_MAX;
		if (end == 1) {
			uint64_t until = (uint64_t)ns[0] + 20000000ull;
			while (mono_raw_ns() < until)
				;
		}
		for (int k = 0; k < 50; k++) {
			uint64_t a = mono_raw_ns();
			uint64_t t = clock_start();
			uint64_t b = mono_raw_ns();
			if (b - a < bw) {
				bw = b - a;
				ns[end] = (double)a + (double)(b - a) / 2;
				tk[end] = (double)t;
			}
		}
	}
	return (tk[1] - tk[0]) / (ns[1] - ns[0]) * 1e9;
#endif
}
