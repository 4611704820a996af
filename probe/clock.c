/* The one TSC (or cntvct) frequency calibration, shared by `run` and `time`. */
#include "clock.h"

#include <stdint.h>

/* TSC ticks per second against CLOCK_MONOTONIC_RAW: tightest bracket of a
 * TSC read at both ends of a 20 ms interval. */
double clock_calibrate_hz(void)
{
#ifdef CLOCK_IS_NS
	return 1e9;
#else
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
