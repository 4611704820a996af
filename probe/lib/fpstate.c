#include "fpstate.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(__arm__)
#include <sys/auxv.h>
#ifndef HWCAP_ARM_NEON
#define HWCAP_ARM_NEON (1 << 12)
#endif
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xcr0(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE */
		return 0;
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}
#endif

enum fpkind fpkind_parse(const char *s)
{
	if (strcmp(s, "x87") == 0)
		return FP_X87;
	if (strcmp(s, "avx") == 0)
		return FP_AVX;
	if (strcmp(s, "avx512") == 0)
		return FP_AVX512;
	if (strcmp(s, "neon") == 0)
		return FP_NEON;
	return FP_SSE;
}

int fpkind_supported(enum fpkind k, char *why, size_t whylen)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a = 0, b = 0, c = 0, d = 0;
	uint64_t x = xcr0();
	switch (k) {
	case FP_X87:
		return 1;
	case FP_SSE:
		__get_cpuid(1, &a, &b, &c, &d);
		if (d & (1u << 25))
			return 1;
		snprintf(why, whylen, "unsupported on this CPU: no SSE (CPUID.1:EDX[25])");
		return 0;
	case FP_AVX:
		__get_cpuid(1, &a, &b, &c, &d);
		if (!(c & (1u << 28))) {
			snprintf(why, whylen, "unsupported on this CPU: no AVX (CPUID.1:ECX[28])");
			return 0;
		}
		if ((x & 6) != 6) {
			snprintf(why, whylen, "AVX is not enabled by the OS (XCR0=0x%llx lacks SSE|AVX state)", (unsigned long long)x);
			return 0;
		}
		return 1;
	case FP_AVX512:
		if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 16))) {
			snprintf(why, whylen, "unsupported on this CPU: no AVX-512F (CPUID.7.0:EBX[16])");
			return 0;
		}
		if ((x & 0xe6) != 0xe6) {
			snprintf(why, whylen, "AVX-512 is not enabled by the OS (XCR0=0x%llx lacks opmask/ZMM state)", (unsigned long long)x);
			return 0;
		}
		return 1;
	case FP_NEON:
		snprintf(why, whylen, "fpkind=neon is an aarch64 kind; this probe is x86");
		return 0;
	}
	return 0;
#elif defined(__aarch64__)
	if (k == FP_NEON)
		return 1;
	snprintf(why, whylen, "this probe is aarch64: use fpkind=neon (x87/sse/avx/avx512 are x86 kinds)");
	return 0;
#elif defined(__arm__)
	if (k != FP_NEON) {
		snprintf(why, whylen, "this probe is arm: use fpkind=neon (x87/sse/avx/avx512 are x86 kinds)");
		return 0;
	}
	if (!(getauxval(AT_HWCAP) & HWCAP_ARM_NEON)) {
		snprintf(why, whylen, "unsupported on this CPU: no NEON (HWCAP_NEON clear in AT_HWCAP)");
		return 0;
	}
	return 1;
#else
	(void)k;
	snprintf(why, whylen, "no FP kinds are implemented for this architecture");
	return 0;
#endif
}

void fp_load(enum fpkind k)
{
#if defined(__x86_64__)
	switch (k) {
	case FP_SSE: __asm__ volatile("movss %0, %%xmm15" : : "m"(fp_one[0]) : "xmm15"); break;
	case FP_AVX: __asm__ volatile("vbroadcastss %0, %%ymm15" : : "m"(fp_one[0]) : "xmm15"); break;
	case FP_AVX512: __asm__ volatile("vbroadcastss %0, %%zmm31" : : "m"(fp_one[0]) : "memory"); break;
	default: break;
	}
#elif defined(__i386__)
	switch (k) {
	case FP_SSE: __asm__ volatile("movss %0, %%xmm7" : : "m"(fp_one[0]) : "xmm7"); break;
	case FP_AVX: __asm__ volatile("vbroadcastss %0, %%ymm7" : : "m"(fp_one[0]) : "xmm7"); break;
	case FP_AVX512: __asm__ volatile("vbroadcastss %0, %%zmm7" : : "m"(fp_one[0]) : "xmm7"); break;
	default: break;
	}
#elif defined(__aarch64__)
	if (k == FP_NEON)
		__asm__ volatile("ld1r {v31.4s}, [%0]" : : "r"(fp_one) : "v31", "memory");
#elif defined(__arm__)
	if (k == FP_NEON)
		__asm__ volatile(".fpu neon\n\tvld1.32 {d30-d31}, [%0]" : : "r"(fp_one) : "memory");
#else
	(void)k;
#endif
}

void fp_clear(int have_avx)
{
#if defined(__x86_64__) || defined(__i386__)
	if (have_avx)
		__asm__ volatile("vzeroall" ::: "memory");
#else
	(void)have_avx;
#endif
}
