/* ref: the hand-written reference for validation/instructions/run.py.
 *
 *   ref OP ITERS BATCHES CPU
 *
 * OP is xsave | xsavec | xrstor | fxsave, each with _hot or _cold, or
 * div_inline | div_soft. Pins itself to CPU, times BATCHES batches of ITERS
 * operations with clock_gettime(CLOCK_MONOTONIC) and prints one line per
 * batch: ns per operation. For _cold ops each line has two numbers: the
 * batch with clflush + instruction, then a batch of the same number of
 * flushes alone, timed right after it (the caller subtracts the second from
 * the first, per batch). Nothing else is subtracted.
 *
 * Conditions as opcost's defaults: mask = XCR0 without the XFD-capable
 * components (AMX tile data), state = sse (every component
 * put into its init state by an xrstor of a zeroed header, then xmm15 =
 * 1.0), area at the start of a page, sized by CPUID.0DH; cold: batch k uses
 * the (k mod 16)th of 16 such areas and flushes every line the
 * instruction writes (standard: up to the end of the highest requested
 * component; xsavec: the compacted size;
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

#define NPAGES 16 /* cold: batch k uses area k % NPAGES, one page-aligned block each */
static unsigned char *areas, *area, *end, *init;
static size_t block, span;
static uint32_t lo, hi;
enum { XSAVE, XSAVEC, XRSTOR, FXSAVE, DIV_INLINE, DIV_SOFT };
static int insn, cold;

#define FLUSH for (unsigned char *p = a; p < e; p += 64) __asm__ volatile("clflush (%0)" : : "r"(p) : "memory")

/* state=sse, set again right before every timed loop: every component to
 * its init state (xrstor of a header with XSTATE_BV = 0), then xmm15 = 1.0;
 * for xrstor the area is then written by xsave (XSTATE_BV = SSE). No libc
 * call may come between this and the loop: glibc's string functions use
 * ymm16-31 and k0-k7 on AVX-512 machines (XINUSE would then include the
 * opmask and Hi16_ZMM components, which xsavec then writes and xrstor then
 * reads). */
static void set_state(void)
{
	__asm__ volatile("xrstor64 (%0)" : : "r"(init), "a"(lo), "d"(hi) : "memory");
	__asm__ volatile("movaps %0, %%xmm15" : : "m"(ones[0]) : "xmm15");
	if (insn == XRSTOR)
		__asm__ volatile("xsave64 (%0)" : : "r"(area), "a"(lo), "d"(hi) : "memory");
}

static double batch(long k, long iters, int flush_only)
{
	if (cold) {
		area = areas + (size_t)(k % NPAGES) * block;
		end = area + span;
	}
	unsigned char *a = area, *e = end;
	uint32_t l = lo, h = hi;
	int cold_ = cold; /* locals: the asm's memory clobber would reload globals every iteration */
	if (insn < DIV_INLINE)
		set_state();
	long long t0 = now_ns();
	if (flush_only) {
		for (long i = 0; i < iters; i++) {
			FLUSH;
		}
	} else if (insn == XSAVEC) {
		for (long i = 0; i < iters; i++) {
			if (cold_) FLUSH;
			__asm__ volatile("xsavec64 (%0)" : : "r"(a), "a"(l), "d"(h) : "memory");
		}
	} else if (insn == XSAVE) {
		for (long i = 0; i < iters; i++) {
			if (cold_) FLUSH;
			__asm__ volatile("xsave64 (%0)" : : "r"(a), "a"(l), "d"(h) : "memory");
		}
	} else if (insn == XRSTOR) {
		for (long i = 0; i < iters; i++) {
			if (cold_) FLUSH;
			__asm__ volatile("xrstor64 (%0)" : : "r"(a), "a"(l), "d"(h) : "memory");
		}
	} else if (insn == FXSAVE) {
		for (long i = 0; i < iters; i++) {
			if (cold_) FLUSH;
			__asm__ volatile("fxsave64 (%0)" : : "r"(a) : "memory");
		}
	} else {
		uint64_t d = 3, k = 1ull << 62, x = k + k / 2;
		__asm__ volatile("" : "+r"(d), "+r"(k));
		if (insn == DIV_INLINE)
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
	insn = strncmp(op, "xsavec", 6) == 0 ? XSAVEC : strncmp(op, "xsave", 5) == 0 ? XSAVE
		: strncmp(op, "xrstor", 6) == 0 ? XRSTOR : strncmp(op, "fxsave", 6) == 0 ? FXSAVE
		: strcmp(op, "div_inline") == 0 ? DIV_INLINE : DIV_SOFT;
	cold = strstr(op, "_cold") != NULL;
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
	/* opcost's default mask: XCR0 without the components XFD can arm (AMX
	 * tile data, CPUID.(0DH,i):ECX[2]); with them, xsave writes 8 KiB more
	 * on an AMX machine and the two would not time the same thing. */
	uint64_t mask = xcr0;
	for (unsigned i = 2; i < 63; i++)
		if ((xcr0 >> i) & 1) {
			unsigned ea, eb, ec, ed;
			__cpuid_count(0xd, i, ea, eb, ec, ed);
			if (ec & 4)
				mask &= ~(1ull << i);
		}
	lo = (uint32_t)mask;
	hi = (uint32_t)(mask >> 32);
	/* The bytes one instruction writes: up to the end of the highest
	 * requested component (standard), the compacted size (xsavec), 512
	 * (fxsave); the probe flushes the same. */
	size = 576;
	for (unsigned i = 2; i < 63; i++)
		if ((mask >> i) & 1) {
			unsigned ea, eb, ec, ed;
			__cpuid_count(0xd, i, ea, eb, ec, ed);
			if (insn == XSAVEC) {
				if (ec & 2)
					size = (size + 63) & ~(size_t)63;
				size += ea;
			} else if (eb + ea > size) {
				size = eb + ea;
			}
		}
	if (insn == FXSAVE)
		size = 512;
	size_t alloc = (std_size + 4095) & ~(size_t)4095;
	/* each area at the start of a page; cold: NPAGES of them, the batches
	 * take them in turn (what a flush and a miss cost depends on the page) */
	areas = area = aligned_alloc(4096, alloc * NPAGES);
	init = aligned_alloc(64, alloc);
	memset(areas, 0, alloc * NPAGES);
	block = alloc;
	memset(init, 0, alloc);
	uint32_t mxcsr = 0x1f80;
	memcpy(init + 24, &mxcsr, 4);
	uint16_t fcw = 0x37f;
	memcpy(init, &fcw, 2);
	span = (size + 63) & ~(size_t)63;
	end = area + span;

	double *v = calloc((size_t)batches * 2, sizeof(double));
	for (long k = 0; k < batches; k++) {
		v[2 * k] = batch(k, iters, 0);
		if (cold)
			v[2 * k + 1] = batch(k, iters, 1);
	}
	for (long k = 0; k < batches; k++) {
		if (cold)
			printf("%.4f %.4f\n", v[2 * k], v[2 * k + 1]);
		else
			printf("%.4f\n", v[2 * k]);
	}
	return 0;
}
