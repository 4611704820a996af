/* insn.*: single integer instructions (seed 004: is an inline divide worth
 * patching in, compared with an out-of-line call or a software division?).
 *
 * insn.div: one division per operation.
 *   variant=inline     the divide instruction in the loop (x86 div/idiv, aarch64
 *                      and arm udiv/sdiv)
 *   variant=outofline  the same instruction in a noinline function called from
 *                      the loop (call + ret + argument moves)
 *   variant=soft       a shift-subtract restoring division (one quotient bit
 *                      per step, the generic algorithm libgcc uses where there
 *                      is no divide instruction), noinline
 *   form=latency       x = x / d + K: each quotient feeds the next dividend
 *   form=throughput    the same on four independent values taken in turn,
 *                      so four divisions are in flight
 * What one operation is, exactly: one division and one add of K (a 1-cycle
 * add in the chain; in form=latency it is part of the figure). d = 3 and
 * K = 2^30 (width=32) or 2^62 (width=64) are hidden from the compiler by an
 * asm barrier (no strength reduction into a multiply); x stays at its fixed
 * point near 1.5*K, so dividends and quotients stay large (a divider whose
 * latency depends on the quotient's size takes its slow path) and positive
 * (signed=yes uses idiv/sdiv on positive values). Same operands every time:
 * the branches of variant=soft are perfectly predicted.
 *   variant=libgcc     the compiler's run-time division routine, called as
 *                      the compiler calls it where the CPU has no divide
 *                      instruction for the width (seed 004's LIBGCC_DIV): arm
 *                      __aeabi_uidiv/__aeabi_idiv (32 bits), __aeabi_uldivmod/
 *                      __aeabi_ldivmod (64); i386 __udivdi3/__divdi3 (64).
 *                      Unsupported where the compiler divides that width with
 *                      an instruction and libgcc has no routine for it
 *                      (x86_64, aarch64, i386 width=32): soft is the generic one.
 * i386 has no 64-bit divide instruction (gcc calls libgcc's __udivdi3):
 * width=64 inline/outofline are unsupported there; soft and libgcc work.
 * arm (armv7): udiv/sdiv are 32-bit only and optional (the virtualization
 * extensions' idiv: Cortex-A7/A15/A53 have it, A8/A9 do not). The probe is
 * built for plain armv7-a, so the instruction is in inline asm (never emitted
 * by the compiler elsewhere) and runs only when the kernel reports
 * HWCAP_IDIVA; otherwise inline/outofline say "unsupported on this CPU".
 * width=64 inline/outofline are unsupported (no 64-bit divide instruction);
 * the default width there is 32, the seed's.
 *
 * insn.chain: n dependent adds (add x, x) per operation. x86_64, i386, aarch64 and arm
 * jump (one predicted indirect jump) into an unrolled block of 1024 adds so
 * that exactly n run, with no counter in the chain: the cost is linear in n.
 * Other architectures use a counted loop (its branch is in the cost). */
#include "../probe.h"

#include <stdio.h>
#include <string.h>
#if defined(__arm__)
#include <sys/auxv.h>
#ifndef HWCAP_IDIVA
#define HWCAP_IDIVA (1 << 17)
#endif
#endif

static const char *const variant_choices[] = {"inline", "outofline", "soft", "libgcc", NULL};

#if defined(__arm__)
#define DIV_WIDTH_DEFAULT "32" /* no 64-bit divide instruction; the seed's udiv */
#else
#define DIV_WIDTH_DEFAULT "64"
#endif
static const char *const width_choices[] = {"32", "64", NULL};
static const char *const yesno[] = {"no", "yes", NULL};
static const char *const form_choices[] = {"latency", "throughput", NULL};

static const struct bench_param div_params[] = {
	{"variant", PT_ENUM, "inline: divide instruction in the loop; outofline: the same in a noinline function; soft: shift-subtract software division; "
	 "libgcc: the compiler's run-time routine (arm __aeabi_uidiv, i386 __udivdi3), where it has one",
	 "inline", variant_choices, 0, 0},
	{"width", PT_ENUM, "operand width in bits (default 64; 32 on arm)", DIV_WIDTH_DEFAULT, width_choices, 0, 0},
	{"signed", PT_ENUM, "yes: signed division (idiv/sdiv) of positive values; no: unsigned (div/udiv)", "no", yesno, 0, 0},
	{"form", PT_ENUM, "latency: each quotient feeds the next dividend; throughput: four independent chains in turn",
	 "latency", form_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

/* ---- the divide instruction, out-of-line and software divisions ---- */

#define NOCALLOPT __attribute__((noinline, noclone))

#if defined(__arm__)
/* A32 udiv/sdiv, in asm: the compiler (plain armv7-a) would call libgcc. */
static inline __attribute__((always_inline)) uint32_t arm_udiv(uint32_t n, uint32_t d)
{
	uint32_t q;
	__asm__(".arch_extension idiv\n\tudiv %0, %1, %2" : "=r"(q) : "r"(n), "r"(d));
	return q;
}
static inline __attribute__((always_inline)) int32_t arm_sdiv(int32_t n, int32_t d)
{
	int32_t q;
	__asm__(".arch_extension idiv\n\tsdiv %0, %1, %2" : "=r"(q) : "r"(n), "r"(d));
	return q;
}
/* 32 bits: the instruction; 64 bits: what the compiler does (a libgcc call;
 * never measured as inline/outofline: div_setup refuses width=64 there). */
#define DIV_INLINE(T, n, d) _Generic((n), uint32_t: arm_udiv, int32_t: arm_sdiv, default: div_plain_##T)(n, d)
static inline uint64_t div_plain_uint64_t(uint64_t n, uint64_t d) { return n / d; }
static inline int64_t div_plain_int64_t(int64_t n, int64_t d) { return n / d; }
static inline uint32_t div_plain_uint32_t(uint32_t n, uint32_t d) { return n / d; }
static inline int32_t div_plain_int32_t(int32_t n, int32_t d) { return n / d; }
/* libgcc's routines by name, so the call stays a call whatever -march says */
unsigned __aeabi_uidiv(unsigned n, unsigned d);
int __aeabi_idiv(int n, int d);
#define DIV_LIB_U32(T, n, d) __aeabi_uidiv(n, d)
#define DIV_LIB_S32(T, n, d) __aeabi_idiv(n, d)
#else
#define DIV_INLINE(T, n, d) ((n) / (d))
/* never measured here (div_setup refuses): the compiler uses an instruction */
#define DIV_LIB_U32(T, n, d) ((n) / (d))
#define DIV_LIB_S32(T, n, d) ((n) / (d))
#endif
/* 64 bits: a libgcc call wherever there is no 64-bit divide instruction
 * (arm __aeabi_uldivmod, i386 __udivdi3); refused elsewhere by div_setup. */
#define DIV_LIB_U64(T, n, d) ((n) / (d))
#define DIV_LIB_S64(T, n, d) ((n) / (d))

#define OUTOFLINE(T, name) \
	NOCALLOPT T name(T n, T d) { return DIV_INLINE(T, n, d); }
OUTOFLINE(uint32_t, insn_div_call_u32)
OUTOFLINE(int32_t, insn_div_call_s32)
OUTOFLINE(uint64_t, insn_div_call_u64)
OUTOFLINE(int64_t, insn_div_call_s64)

/* d must not be 0 (as with the instruction). Aligned to 64 bytes, so the
 * layout of its inner loop (and so its branch prediction) does not depend on
 * where the linker put it; validation/instructions/ref.c does the same. */
#define SOFT_U(T, name, clz)                                                  \
	NOCALLOPT __attribute__((aligned(64))) T name(T n, T d)                   \
	{                                                                         \
		if (d > n)                                                            \
			return 0;                                                         \
		int sh = clz(d) - clz(n);                                             \
		T q = 0;                                                              \
		d <<= sh;                                                             \
		for (int i = 0; i <= sh; i++) {                                       \
			q <<= 1;                                                          \
			if (n >= d) {                                                     \
				n -= d;                                                       \
				q |= 1;                                                       \
			}                                                                 \
			d >>= 1;                                                          \
		}                                                                     \
		return q;                                                             \
	}
SOFT_U(uint32_t, insn_div_soft_u32, __builtin_clz)
SOFT_U(uint64_t, insn_div_soft_u64, __builtin_clzll)

/* Signed, as libgcc's __divdi3: divide the magnitudes, fix the sign. */
#define SOFT_S(T, U, name, uname)                                             \
	NOCALLOPT T name(T n, T d)                                                \
	{                                                                         \
		int neg = (n < 0) != (d < 0);                                         \
		U q = uname(n < 0 ? -(U)n : (U)n, d < 0 ? -(U)d : (U)d);              \
		return (T)(neg ? -q : q);                                             \
	}
SOFT_S(int32_t, uint32_t, insn_div_soft_s32, insn_div_soft_u32)
SOFT_S(int64_t, uint64_t, insn_div_soft_s64, insn_div_soft_u64)

/* ---- the loops: one noinline function per variant, named for the
 * disassembly test: insn_div_<variant>_<u|s><width>_<lat|tput>_loop ---- */

typedef void div_loop_fn(unsigned spin, uint64_t iters);

/* The compiler must not know the divisor (else a multiply replaces the
 * divide) and must keep the results. */
#define HIDE(v) __asm__ volatile("" : "+r"(v))
#define KEEP(v) __asm__ volatile("" : : "g"(v))

#define DIV_LOOPS(T, tag, K, DIVX)                                                  \
	static __attribute__((noinline)) void insn_div_##tag##_lat_loop(unsigned spin, uint64_t iters) \
	{                                                                               \
		T d = 3, k = (T)(K), x = (T)(K) + (T)(K) / 2;                               \
		HIDE(d);                                                                    \
		HIDE(k);                                                                    \
		OP_LOOP(spin, iters, x = DIVX(T, x, d) + k);                                \
		KEEP(x);                                                                    \
	}                                                                               \
	static __attribute__((noinline)) void insn_div_##tag##_tput_loop(unsigned spin, uint64_t iters) \
	{                                                                               \
		T d = 3, k = (T)(K), a = (T)(K) + (T)(K) / 2, b = a - 1, c = a - 2, e = a - 3; \
		HIDE(d);                                                                    \
		HIDE(k);                                                                    \
		OP_LOOP(spin, iters, {                                                      \
			T t_ = DIVX(T, a, d) + k;                                               \
			a = b;                                                                  \
			b = c;                                                                  \
			c = e;                                                                  \
			e = t_;                                                                 \
		});                                                                         \
		KEEP(a);                                                                    \
		KEEP(b);                                                                    \
		KEEP(c);                                                                    \
		KEEP(e);                                                                    \
	}

#define DIV_CALL_U32(T, n, d) insn_div_call_u32(n, d)
#define DIV_CALL_S32(T, n, d) insn_div_call_s32(n, d)
#define DIV_CALL_U64(T, n, d) insn_div_call_u64(n, d)
#define DIV_CALL_S64(T, n, d) insn_div_call_s64(n, d)
#define DIV_SOFT_U32(T, n, d) insn_div_soft_u32(n, d)
#define DIV_SOFT_S32(T, n, d) insn_div_soft_s32(n, d)
#define DIV_SOFT_U64(T, n, d) insn_div_soft_u64(n, d)
#define DIV_SOFT_S64(T, n, d) insn_div_soft_s64(n, d)

#define K32 0x40000000u
#define K64 0x4000000000000000ull

DIV_LOOPS(uint32_t, inline_u32, K32, DIV_INLINE)
DIV_LOOPS(int32_t, inline_s32, K32, DIV_INLINE)
DIV_LOOPS(uint64_t, inline_u64, K64, DIV_INLINE)
DIV_LOOPS(int64_t, inline_s64, K64, DIV_INLINE)
DIV_LOOPS(uint32_t, outofline_u32, K32, DIV_CALL_U32)
DIV_LOOPS(int32_t, outofline_s32, K32, DIV_CALL_S32)
DIV_LOOPS(uint64_t, outofline_u64, K64, DIV_CALL_U64)
DIV_LOOPS(int64_t, outofline_s64, K64, DIV_CALL_S64)
DIV_LOOPS(uint32_t, soft_u32, K32, DIV_SOFT_U32)
DIV_LOOPS(int32_t, soft_s32, K32, DIV_SOFT_S32)
DIV_LOOPS(uint64_t, soft_u64, K64, DIV_SOFT_U64)
DIV_LOOPS(int64_t, soft_s64, K64, DIV_SOFT_S64)
DIV_LOOPS(uint32_t, libgcc_u32, K32, DIV_LIB_U32)
DIV_LOOPS(int32_t, libgcc_s32, K32, DIV_LIB_S32)
DIV_LOOPS(uint64_t, libgcc_u64, K64, DIV_LIB_U64)
DIV_LOOPS(int64_t, libgcc_s64, K64, DIV_LIB_S64)

#define ROW(v) {{insn_div_##v##_u32_lat_loop, insn_div_##v##_u32_tput_loop}, {insn_div_##v##_s32_lat_loop, insn_div_##v##_s32_tput_loop}, \
		{insn_div_##v##_u64_lat_loop, insn_div_##v##_u64_tput_loop}, {insn_div_##v##_s64_lat_loop, insn_div_##v##_s64_tput_loop}}
/* [variant][width64*2 + signed][throughput] */
static div_loop_fn *const div_loops[4][4][2] = {ROW(inline), ROW(outofline), ROW(soft), ROW(libgcc)};

/* The software division must divide: checked against the compiler's
 * division on a few operands before anything is measured. */
static int soft_div_ok(char *why, size_t len)
{
	static const uint64_t n[] = {0, 1, 2, 3, 7, 1000, 0x5fffffffffffffffull, 0xffffffffffffffffull, 0x123456789abcdefull};
	static const uint64_t d[] = {1, 2, 3, 7, 10, 0xffffffffull, 0x100000000ull, 0x7fffffffffffffffull};
	for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++)
		for (size_t j = 0; j < sizeof(d) / sizeof(d[0]); j++) {
			uint64_t a = n[i], b = d[j];
			int ok = insn_div_soft_u64(a, b) == a / b && insn_div_soft_u32((uint32_t)a, (uint32_t)b | 1) == (uint32_t)a / ((uint32_t)b | 1) &&
				 insn_div_soft_s64(-(int64_t)(a >> 1), (int64_t)(b >> 1) | 1) == -(int64_t)(a >> 1) / ((int64_t)(b >> 1) | 1) &&
				 insn_div_soft_s32((int32_t)(a >> 33), -((int32_t)(b >> 1) | 1)) == (int32_t)(a >> 33) / -((int32_t)(b >> 1) | 1);
			if (!ok) {
				snprintf(why, len, "internal: software division wrong for %llu / %llu", (unsigned long long)a, (unsigned long long)b);
				return 0;
			}
		}
	return 1;
}

static int div_setup(struct bench_ctx *ctx)
{
	int v = param_is(ctx, "variant", "inline") ? 0 : param_is(ctx, "variant", "outofline") ? 1
		: param_is(ctx, "variant", "soft") ? 2 : 3;
	if (v == 2 && !soft_div_ok(ctx->err, sizeof(ctx->err)))
		return BENCH_FAIL;
	int w64 = param_is(ctx, "width", "64");
	int sgn = param_is(ctx, "signed", "yes");
#if defined(__i386__)
	if (w64 && v < 2) {
		snprintf(ctx->err, sizeof(ctx->err),
			 "i386 has no 64-bit divide instruction (gcc calls libgcc __%sdivdi3): width=64 needs variant=soft or libgcc here, or width=32",
			 sgn ? "" : "u");
		return BENCH_UNSUPPORTED;
	}
	if (!w64 && v == 3) {
		snprintf(ctx->err, sizeof(ctx->err),
			 "i386 divides 32-bit values with an instruction (div/idiv) and libgcc has no routine for them: variant=libgcc needs width=64 here (or variant=soft)");
		return BENCH_UNSUPPORTED;
	}
#elif defined(__arm__)
	if (w64 && v < 2) {
		snprintf(ctx->err, sizeof(ctx->err),
			 "arm has no 64-bit divide instruction (gcc calls libgcc __aeabi_%sldivmod): width=64 needs variant=libgcc or soft here, or width=32",
			 sgn ? "" : "u");
		return BENCH_UNSUPPORTED;
	}
	if (v < 2 && !(getauxval(AT_HWCAP) & HWCAP_IDIVA)) {
		snprintf(ctx->err, sizeof(ctx->err),
			 "unsupported on this CPU: no hardware divide in ARM state (HWCAP_IDIVA clear: Cortex-A7/A15 have udiv/sdiv, "
			 "Cortex-A8/A9 do not); variant=libgcc (__aeabi_%sidiv) or soft measure the software division",
			 sgn ? "" : "u");
		return BENCH_UNSUPPORTED;
	}
#else
	if (v == 3) {
		snprintf(ctx->err, sizeof(ctx->err),
			 "%s divides %s-bit values with an instruction and libgcc has no routine for them: variant=libgcc is for "
			 "arm and i386 (width=64); variant=soft is the software division", PROBE_ARCH, w64 ? "64" : "32");
		return BENCH_UNSUPPORTED;
	}
#endif
	ctx->priv = (void *)div_loops[v][w64 * 2 + sgn][param_is(ctx, "form", "throughput")];
	return BENCH_OK;
}

static void div_run(struct bench_ctx *ctx, uint64_t iters)
{
	((div_loop_fn *)ctx->priv)(ctx->spin, iters);
}

const struct bench bench_insn_div = {
	.name = "insn.div",
	.summary = "integer division: inline instruction, out-of-line call, software, or libgcc's routine; latency or throughput",
	.op = "division",
	.flags = BENCH_LOOP_HIDDEN,
	.params = div_params,
	.setup = div_setup,
	.run = div_run,
};

/* ---- insn.chain ---- */

#define CHAIN_MAX 1024

static const struct bench_param chain_params[] = {
	{"n", PT_INT, "dependent adds per operation", "100", NULL, 1, CHAIN_MAX},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

static __attribute__((noinline)) void insn_chain_loop(unsigned spin, uint64_t iters, unsigned n)
{
#if defined(__x86_64__)
	uint64_t x = 1;
	const uint64_t skip = (uint64_t)(CHAIN_MAX - n) * 3; /* add %rax,%rax is 3 bytes */
	OP_LOOP(spin, iters,
		__asm__ volatile("lea 1f(%%rip), %%rcx\n\t"
				 "add %[skip], %%rcx\n\t"
				 "jmp *%%rcx\n\t"
				 "1:\n\t"
				 ".rept 1024\n\t"
				 "add %%rax, %%rax\n\t"
				 ".endr\n\t"
				 : "+a"(x)
				 : [skip] "r"(skip)
				 : "rcx", "cc"));
#elif defined(__aarch64__)
	uint64_t x = 1;
	const uint64_t skip = (uint64_t)(CHAIN_MAX - n) * 4;
	OP_LOOP(spin, iters,
		__asm__ volatile("adr x9, 1f\n\t"
				 "add x9, x9, %[skip]\n\t"
				 "br x9\n\t"
				 "1:\n\t"
				 ".rept 1024\n\t"
				 "add %[x], %[x], %[x]\n\t"
				 ".endr\n\t"
				 : [x] "+r"(x)
				 : [skip] "r"(skip)
				 : "x9", "cc"));
#elif defined(__arm__)
	uint32_t x = 1;
	const uint32_t skip = (uint32_t)(CHAIN_MAX - n) * 4; /* A32: 4 bytes per add */
	OP_LOOP(spin, iters,
		__asm__ volatile("adr ip, 1f\n\t"
				 "add ip, ip, %[skip]\n\t"
				 "bx ip\n\t"
				 "1:\n\t"
				 ".rept 1024\n\t"
				 "add %[x], %[x], %[x]\n\t"
				 ".endr\n\t"
				 : [x] "+r"(x)
				 : [skip] "r"(skip)
				 : "ip", "cc"));
#elif defined(__i386__)
	/* No eip-relative lea: call/pop finds the block (a call to the next
	 * instruction; no ret follows inside the loop). */
	uint32_t x = 1;
	const uint32_t skip = (uint32_t)(CHAIN_MAX - n) * 2; /* add %eax,%eax is 2 bytes */
	OP_LOOP(spin, iters,
		__asm__ volatile("call 2f\n\t"
				 "2:\n\t"
				 "pop %%ecx\n\t"
				 "lea (1f-2b)(%%ecx,%[skip]), %%ecx\n\t"
				 "jmp *%%ecx\n\t"
				 "1:\n\t"
				 ".rept 1024\n\t"
				 "add %%eax, %%eax\n\t"
				 ".endr\n\t"
				 : "+a"(x)
				 : [skip] "r"(skip)
				 : "ecx", "cc"));
#else
	unsigned long x = 1;
	OP_LOOP(spin, iters, for (unsigned j_ = 0; j_ < n; j_++) __asm__ volatile("add %0, %0" : "+r"(x)));
#endif
	__asm__ volatile("" : : "r"(x));
}

static int chain_setup(struct bench_ctx *ctx)
{
	ctx->priv = (void *)(uintptr_t)param_long(ctx, "n");
	return BENCH_OK;
}

static void chain_run(struct bench_ctx *ctx, uint64_t iters)
{
	insn_chain_loop(ctx->spin, iters, (unsigned)(uintptr_t)ctx->priv);
}

const struct bench bench_insn_chain = {
	.name = "insn.chain",
	.summary = "a dependent chain of n integer adds (linear in n: the harness's own sanity check)",
	.op = "chain of n dependent adds",
	.params = chain_params,
	.setup = chain_setup,
	.run = chain_run,
};
