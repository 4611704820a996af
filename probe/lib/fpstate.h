/* Floating-point / vector register use for benchmarks whose cost depends on
 * the extended state a task carries (seed 000: lazy FPU; seed 003: signal
 * frames). One instruction per use, on a register the compiler never
 * allocates in this non-vector code, so nothing else changes. */
#ifndef OPCOST_FPSTATE_H
#define OPCOST_FPSTATE_H
#include <stddef.h>

enum fpkind { FP_X87, FP_SSE, FP_AVX, FP_AVX512, FP_NEON };

#if defined(__aarch64__) || defined(__arm__)
#define FPKIND_DEFAULT "neon"
#else
#define FPKIND_DEFAULT "sse"
#endif
#define FPKIND_CHOICES {"x87", "sse", "avx", "avx512", "neon", NULL}

enum fpkind fpkind_parse(const char *s);
/* 1 if the CPU and the OS (XCR0) enable this kind; else 0 and a reason. */
int fpkind_supported(enum fpkind k, char *why, size_t whylen);
/* Load 1.0 into the register the kind uses (its value then never changes). */
void fp_load(enum fpkind k);
/* SSE/AVX registers to their init (zero) state: vzeroall when have_avx
 * (decided once in setup: the CPUID check must stay out of timed code). */
void fp_clear(int have_avx);

static const float fp_one[16] __attribute__((aligned(64))) = {
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

#if defined(__x86_64__)
#define FP_OP_X87() __asm__ volatile("fld1\n\tfstp %%st(0)" ::: "st")
#define FP_OP_SSE() __asm__ volatile("mulss %%xmm15, %%xmm15" ::: "xmm15")
#define FP_OP_AVX() __asm__ volatile("vmulps %%ymm15, %%ymm15, %%ymm15" ::: "xmm15")
#define FP_OP_AVX512() __asm__ volatile("vmulps %%zmm31, %%zmm31, %%zmm31" ::: "memory")
#define FP_OP_NEON() ((void)0)
#elif defined(__i386__)
#define FP_OP_X87() __asm__ volatile("fld1\n\tfstp %%st(0)" ::: "st")
#define FP_OP_SSE() __asm__ volatile("mulss %%xmm7, %%xmm7" ::: "xmm7")
#define FP_OP_AVX() __asm__ volatile("vmulps %%ymm7, %%ymm7, %%ymm7" ::: "xmm7")
#define FP_OP_AVX512() __asm__ volatile("vmulps %%zmm7, %%zmm7, %%zmm7" ::: "xmm7")
#define FP_OP_NEON() ((void)0)
#elif defined(__aarch64__)
#define FP_OP_X87() ((void)0)
#define FP_OP_SSE() ((void)0)
#define FP_OP_AVX() ((void)0)
#define FP_OP_AVX512() ((void)0)
#define FP_OP_NEON() __asm__ volatile("fmul v31.4s, v31.4s, v31.4s" ::: "v31")
#elif defined(__arm__)
/* q15 (d30-d31): armhf code is built for VFPv3-D16, so the compiler never
 * allocates d16-d31 (nor can it name them in a clobber); `.fpu neon` lets
 * the assembler take the instruction, and fpkind_supported checks that the
 * CPU has NEON (HWCAP_NEON) before any of it runs. */
#define FP_OP_X87() ((void)0)
#define FP_OP_SSE() ((void)0)
#define FP_OP_AVX() ((void)0)
#define FP_OP_AVX512() ((void)0)
#define FP_OP_NEON() __asm__ volatile(".fpu neon\n\tvmul.f32 q15, q15, q15")
#else
#define FP_OP_X87() ((void)0)
#define FP_OP_SSE() ((void)0)
#define FP_OP_AVX() ((void)0)
#define FP_OP_AVX512() ((void)0)
#define FP_OP_NEON() ((void)0)
#endif

/* One loop per kind (and per spin, through OP_LOOP), so the loop holds
 * nothing but the operation and, when use_fp, its one FP instruction. */
#define FP_LOOP(spin, use_fp, kind, iters, ...)                                    \
	do {                                                                         \
		if (!(use_fp)) {                                                         \
			OP_LOOP(spin, iters, __VA_ARGS__);                                   \
			break;                                                               \
		}                                                                        \
		switch (kind) {                                                          \
		case FP_X87: OP_LOOP(spin, iters, FP_OP_X87(); __VA_ARGS__); break;      \
		case FP_SSE: OP_LOOP(spin, iters, FP_OP_SSE(); __VA_ARGS__); break;      \
		case FP_AVX: OP_LOOP(spin, iters, FP_OP_AVX(); __VA_ARGS__); break;      \
		case FP_AVX512: OP_LOOP(spin, iters, FP_OP_AVX512(); __VA_ARGS__); break; \
		case FP_NEON: OP_LOOP(spin, iters, FP_OP_NEON(); __VA_ARGS__); break;    \
		}                                                                        \
	} while (0)
#endif
