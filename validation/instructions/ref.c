/* ref: the hand-written reference for validation/instructions/run.py.
 *
 *   ref OP ITERS BATCHES CPU
 *
 * OP is xsave | xsavec | xrstor | fxsave, each with _hot or _cold, or
 * div_inline | div_soft. Pins itself to CPU, times BATCHES batches of ITERS
 * operations with clock_gettime(CLOCK_MONOTONIC) and prints one line per
 * batch: ns per operation. For _cold ops each line has two numbers: the
 * batch with clflush + instruction, then a batch of the flushes alone (the
 * caller subtracts medians). Nothing else is subtracted.
 *
 * Conditions as opcost's defaults: mask = XCR0, state = sse (every component
 * put into its init state by an xrstor of a zeroed header, then xmm15 =
 * 1.0), 64-byte aligned area sized by CPUID.0DH; cold flushes every line the
 * instruction writes (standard: EBX bytes; xsavec: the compacted size;
 * fxsave: 512). div: x = x / d + K, d = 3 and K = 2^62 hidden from the
 * compiler, unsigned 64-bit, dependent chain; soft = shift-subtract.
 *
 * Build: cc -O2 -o ref ref.c   (x86_64 only)
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const float ones[16] __attribute__((aligned(64))) = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static __attribute__((noinline, aligned(64))) uint64_t soft_udiv(uint64_t n, uint64_t d)
{
	if (d > n)
		return 0;
	int sh = __builtin_clzll(d) - __builtin_clzll(n);
	uint64_t q = 0;
	d <<= sh;
	for (int i = 0; i <= sh; i++) {
		q <<= 1;
		if (n >= d) {
			n -= d;
			q |= 1;
		}
		d >>= 1;
	}
	return q;
}

static unsigned char *area, *end;
static uint32_t lo, hi;

#define FLUSH for (unsigned char *p = area; p < end; p += 64) __asm__ volatile("clflush (%0)" : : "r"(p) : "memory")

static double batch(const char *op, long iters, int flush_only)
{
	unsigned char *a = area;
	uint32_t l = lo, h = hi;
	int cold = strstr(op, "_cold") != NULL;
	long long t0 = now_ns();
	if (flush_only) {
		for (long i = 0; i < iters; i++) {
			FLUSH;
		}
	} else if (strncmp(op, "xsavec", 6) == 0) {
		for (long i = 0; i < iters; i++) {
			if (cold) FLUSH;
			__asm__ volatile("xsavec64 (%0)" : : "r"(a), "a"(l), "d"(h) : "memory");
		}
	} else if (strncmp(op, "xsave", 5) == 0) {
		for (long i = 0; i < iters; i++) {
			if (cold) FLUSH;
			__asm__ volatile("xsave64 (%0)" : : "r"(a), "a"(l), "d"(h) : "memory");
		}
	} else if (strncmp(op, "xrstor", 6) == 0) {
		for (long i = 0; i < iters; i++) {
			if (cold) FLUSH;
			__asm__ volatile("xrstor64 (%0)" : : "r"(a), "a"(l), "d"(h) : "memory");
		}
	} else if (strncmp(op, "fxsave", 6) == 0) {
		for (long i = 0; i < iters; i++) {
			if (cold) FLUSH;
			__asm__ volatile("fxsave64 (%0)" : : "r"(a) : "memory");
		}
	} else {
		uint64_t d = 3, k = 1ull << 62, x = k + k / 2;
		__asm__ volatile("" : "+r"(d), "+r"(k));
		if (strcmp(op, "div_inline") == 0)
			for (long i = 0; i < iters; i++)
				x = x / d + k;
		else
			for (long i = 0; i < iters; i++)
				x = soft_udiv(x, d) + k;
		__asm__ volatile("" : : "r"(x));
	}
	return (double)(now_ns() - t0) / (double)iters;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: ref OP ITERS BATCHES CPU\n");
		return 2;
	}
	const char *op = argv[1];
	static const char *const known[] = {"xsave_hot", "xsave_cold", "xsavec_hot", "xsavec_cold", "xrstor_hot",
		"xrstor_cold", "fxsave_hot", "fxsave_cold", "div_inline", "div_soft", NULL};
	int ok = 0;
	for (int i = 0; known[i]; i++)
		ok |= strcmp(op, known[i]) == 0;
	if (!ok) {
		fprintf(stderr, "ref: unknown OP '%s'\n", op);
		return 2;
	}
	long iters = atol(argv[2]), batches = atol(argv[3]);
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(atoi(argv[4]), &set);
	if (iters < 1 || batches < 1 || sched_setaffinity(0, sizeof(set), &set) != 0) {
		fprintf(stderr, "ref: bad ITERS/BATCHES or cannot pin\n");
		return 2;
	}
	unsigned a, b, c, d;
	__cpuid_count(0xd, 0, a, b, c, d);
	size_t std_size = b, size = b;
	uint32_t x0, x1;
	__asm__ volatile("xgetbv" : "=a"(x0), "=d"(x1) : "c"(0));
	uint64_t xcr0 = ((uint64_t)x1 << 32) | x0;
	lo = (uint32_t)xcr0;
	hi = (uint32_t)(xcr0 >> 32);
	if (strncmp(op, "xsavec", 6) == 0) {
		size = 576;
		for (unsigned i = 2; i < 63; i++)
			if ((xcr0 >> i) & 1) {
				unsigned ea, eb, ec, ed;
				__cpuid_count(0xd, i, ea, eb, ec, ed);
				if (ec & 2)
					size = (size + 63) & ~(size_t)63;
				size += ea;
			}
	} else if (strncmp(op, "fxsave", 6) == 0) {
		size = 512;
	}
	size_t alloc = (std_size + 63) & ~(size_t)63;
	area = aligned_alloc(64, alloc);
	unsigned char *init = aligned_alloc(64, alloc);
	memset(area, 0, alloc);
	memset(init, 0, alloc);
	uint32_t mxcsr = 0x1f80;
	memcpy(init + 24, &mxcsr, 4);
	uint16_t fcw = 0x37f;
	memcpy(init, &fcw, 2);
	end = area + ((size + 63) & ~(size_t)63);

	/* state=sse: all components init, then xmm15 in use */
	__asm__ volatile("xrstor64 (%0)" : : "r"(init), "a"(lo), "d"(hi) : "memory");
	__asm__ volatile("movaps %0, %%xmm15" : : "m"(ones[0]) : "xmm15");
	if (strncmp(op, "xrstor", 6) == 0)
		__asm__ volatile("xsave64 (%0)" : : "r"(area), "a"(lo), "d"(hi) : "memory");

	int cold = strstr(op, "_cold") != NULL;
	double *v = calloc((size_t)batches * 2, sizeof(double));
	for (long k = 0; k < batches; k++) {
		v[2 * k] = batch(op, iters, 0);
		if (cold)
			v[2 * k + 1] = batch(op, iters, 1);
	}
	for (long k = 0; k < batches; k++) {
		if (cold)
			printf("%.4f %.4f\n", v[2 * k], v[2 * k + 1]);
		else
			printf("%.4f\n", v[2 * k]);
	}
	return 0;
}
