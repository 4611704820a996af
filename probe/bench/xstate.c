/* xstate.*: the instructions that save and restore a task's extended
 * (FPU/vector) state, and the two that clear vector state (seed 002: lazy
 * FPU switching is only worth it if xsave/xrstor are expensive).
 *
 *   xstate.xsave, .xsaveopt, .xsavec  save with EDX:EAX = mask
 *   xstate.xrstor                     restore an area written by from=xsave|xsaveopt|xsavec
 *   xstate.fxsave, .fxrstor           the legacy 512-byte x87+SSE form
 *   xstate.vzeroupper, .vzeroall
 *
 * On x86_64 the REX.W forms (xsave64, fxsave64, ...) are used, as Linux does.
 *
 * state=x87|sse|avx|avx512: at the start of every batch all state components
 * are put into their init state (xrstor from an area whose XSTATE_BV is 0),
 * then registers of that kind are loaded: x87 = fld1;fstp (x87 only); sse =
 * xmm15; avx = ymm15 (SSE + AVX upper halves); avx512 = zmm15, zmm31 and k1
 * (SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM). (i386 has 8 vector registers: xmm7/
 * ymm7/zmm7, no Hi16_ZMM.) The loop itself does not touch the state again,
 * unless dirty=yes: then each iteration first writes one register of that
 * kind (the same instruction that loaded it), so the "modified" tracking of
 * xsaveopt sees a change every time. For xsaveopt, before the loop the area
 * is written once by xsave and restored by xrstor, so the processor's
 * tracking refers to this area (the condition for the modified optimisation).
 *
 * The area starts a page. cache=cold: before each instruction every 64-byte
 * line of the area it touches is clflushed (the bytes written for this mask
 * and format); each batch uses the next of COLD_AREAS areas (one page each).
 * The flushes (and the dirty=yes write) are the benchmark's auxiliary loop:
 * the harness times that loop alone right after every batch, on the same
 * area, and subtracts it from that batch (aux). Flushing a line the
 * instruction just dirtied writes it back, which a loop of flushes of lines
 * not in the cache does not pay: that write-back stays in the cold figure
 * (it is the save's own cost, paid later when a real area is evicted).
 *
 * The per-op tsc_per_op is TSC ticks; the TSC runs at a constant rate, not
 * the core clock, so it is a cycle proxy only (exact when the core runs at
 * the TSC rate, as on this VM: no PMU to count real cycles). */
#include "../probe.h"
#include "../lib/fpstate.h"
#include "../json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum xinsn { XI_XSAVE, XI_XSAVEOPT, XI_XSAVEC, XI_XRSTOR, XI_FXSAVE, XI_FXRSTOR, XI_VZEROUPPER, XI_VZEROALL };

static const char *const state_choices[] = {"x87", "sse", "avx", "avx512", NULL};
static const char *const cache_choices[] = {"hot", "cold", NULL};
static const char *const yesno[] = {"no", "yes", NULL};
static const char *const from_choices[] = {"xsave", "xsaveopt", "xsavec", NULL};

#define P_STATE {"state", PT_ENUM, "components in use: x87; sse (xmm); avx (+ymm uppers); avx512 (+zmm, opmask); loaded before the loop", "sse", state_choices, 0, 0}
#define P_CACHE {"cache", PT_ENUM, "hot: area stays cached; cold: clflush every line of the area before each instruction, 16 page-aligned areas in turn (flushes timed alone after every batch, subtracted, reported as aux)", "hot", cache_choices, 0, 0}
#define P_DIRTY {"dirty", PT_ENUM, "yes: write one register of the state kind before each instruction (cost subtracted as aux); no: state untouched in the loop", "no", yesno, 0, 0}
#define P_MASK {"mask", PT_STR, "requested-feature bitmap (RFBM) EDX:EAX, e.g. 0x7; xcr0: every component enabled in XCR0 except XFD-capable ones (AMX tile data), as a task that never asked for AMX has them; all: every component enabled in XCR0 (saves only; XFD-armed ones are saved in their init state)", "xcr0", NULL, 0, 0}
#define P_END {NULL, 0, NULL, NULL, NULL, 0, 0}

static const struct bench_param xsave_params[] = {P_STATE, P_CACHE, P_DIRTY, P_MASK, P_END};
static const struct bench_param xrstor_params[] = {
	P_STATE, P_CACHE, P_DIRTY, P_MASK,
	{"from", PT_ENUM, "format of the area restored: written by xsave (standard), xsaveopt (standard) or xsavec (compacted)", "xsave", from_choices, 0, 0},
	P_END};
static const struct bench_param fx_params[] = {P_STATE, P_CACHE, P_DIRTY, P_END};
static const struct bench_param vz_params[] = {P_STATE, P_DIRTY, P_END};

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* cache=cold: what a line costs to fetch and to flush depends on the
 * physical page it is in (here clflush of an uncached line takes 60-125 ns
 * depending on the page, steady for a given page), so one process with one
 * area would report the luck of its page. The batches take COLD_AREAS
 * page-aligned areas in turn: a process's median is over that many pages. */
#define COLD_AREAS 16

struct xs;
typedef void loop_fn(struct xs *s, unsigned spin, uint64_t iters);

struct xs {
	enum xinsn insn, from;
	enum fpkind kind;
	int cold, dirty, have_xsave, have_avx;
	uint32_t lo, hi;            /* mask (RFBM = mask & XCR0) */
	uint64_t usable;            /* XCR0 without XFD-capable components */
	uint64_t xcr0, xfd;         /* XCR0; its XFD-capable components */
	uint32_t rlo, rhi;          /* xsaveopt's preparing xrstor: mask & usable (never an XFD-armed one) */
	size_t std_size, touched;   /* CPUID.0DH:EBX (standard area for XCR0); bytes the instruction touches */
	unsigned char *area, *end;  /* area; end of the bytes flushed when cold */
	unsigned char *areas;       /* cold: COLD_AREAS areas, one page-aligned block each */
	size_t stride, span;        /* bytes between areas; bytes flushed */
	unsigned next;              /* cold: the area the next batch uses */
	unsigned char *init;        /* standard-format area with XSTATE_BV = 0 */
	loop_fn *loop, *aux;
	char what[160];
};

#if defined(__x86_64__)
#define W64 "64"
#define DIRTY_X87() __asm__ volatile("fld1\n\tfstp %%st(0)" ::: "st")
#define DIRTY_SSE() __asm__ volatile("movaps %0, %%xmm15" : : "m"(fp_one[0]) : "xmm15")
#define DIRTY_AVX() __asm__ volatile("vmovaps %0, %%ymm15" : : "m"(fp_one[0]) : "xmm15")
#define DIRTY_AVX512() __asm__ volatile("vmovaps %0, %%zmm15" : : "m"(fp_one[0]) : "xmm15")
#define LOAD_AVX512_EXTRA() __asm__ volatile("vmovaps %0, %%zmm31\n\tkxnorw %%k1, %%k1, %%k1" : : "m"(fp_one[0]) : "memory")
#else
#define W64 ""
#define DIRTY_X87() __asm__ volatile("fld1\n\tfstp %%st(0)" ::: "st")
/* No xmm7 clobber: the i386 baseline has no SSE, the compiler never uses it. */
#define DIRTY_SSE() __asm__ volatile("movaps %0, %%xmm7" : : "m"(fp_one[0]) : "memory")
#define DIRTY_AVX() __asm__ volatile("vmovaps %0, %%ymm7" : : "m"(fp_one[0]) : "memory")
#define DIRTY_AVX512() __asm__ volatile("vmovaps %0, %%zmm7" : : "m"(fp_one[0]) : "memory")
#define LOAD_AVX512_EXTRA() __asm__ volatile("kxnorw %%k1, %%k1, %%k1" ::: "memory")
#endif

#define OP_xsave(a, lo, hi) __asm__ volatile("xsave" W64 " (%0)" : : "r"(a), "a"(lo), "d"(hi) : "memory")
#define OP_xsaveopt(a, lo, hi) __asm__ volatile("xsaveopt" W64 " (%0)" : : "r"(a), "a"(lo), "d"(hi) : "memory")
#define OP_xsavec(a, lo, hi) __asm__ volatile("xsavec" W64 " (%0)" : : "r"(a), "a"(lo), "d"(hi) : "memory")
#define OP_xrstor(a, lo, hi) __asm__ volatile("xrstor" W64 " (%0)" : : "r"(a), "a"(lo), "d"(hi) : "memory")
#define OP_fxsave(a, lo, hi) __asm__ volatile("fxsave" W64 " (%0)" : : "r"(a) : "memory")
#define OP_fxrstor(a, lo, hi) __asm__ volatile("fxrstor" W64 " (%0)" : : "r"(a) : "memory")
#define OP_vzeroupper(a, lo, hi) __asm__ volatile("vzeroupper" ::: "memory")
#define OP_vzeroall(a, lo, hi) __asm__ volatile("vzeroall" ::: "memory")
#define OP_none(a, lo, hi) BARRIER()

#define FLUSH for (unsigned char *p_ = a; p_ < end; p_ += 64) __asm__ volatile("clflush (%0)" : : "r"(p_) : "memory")

/* One noinline loop per (instruction, cache, dirty kind), named for the
 * disassembly test: xstate_<insn>_loop_<hot|cold>[_dirty_<kind>]. */
#define XLOOP(name, PRE, OP)                                                         \
	static __attribute__((noinline)) void name(struct xs *s, unsigned spin, uint64_t iters) \
	{                                                                                \
		unsigned char *a = s->area, *end = s->end;                                   \
		uint32_t lo = s->lo, hi = s->hi;                                             \
		(void)a; (void)end; (void)lo; (void)hi;                                      \
		OP_LOOP(spin, iters, PRE; OP(a, lo, hi));                                    \
	}

#define GEN(ins)                                                                          \
	XLOOP(xstate_##ins##_loop_hot, , OP_##ins)                                            \
	XLOOP(xstate_##ins##_loop_hot_dirty_x87, DIRTY_X87(), OP_##ins)                       \
	XLOOP(xstate_##ins##_loop_hot_dirty_sse, DIRTY_SSE(), OP_##ins)                       \
	XLOOP(xstate_##ins##_loop_hot_dirty_avx, DIRTY_AVX(), OP_##ins)                       \
	XLOOP(xstate_##ins##_loop_hot_dirty_avx512, DIRTY_AVX512(), OP_##ins)                 \
	XLOOP(xstate_##ins##_loop_cold, FLUSH, OP_##ins)                                      \
	XLOOP(xstate_##ins##_loop_cold_dirty_x87, DIRTY_X87(); FLUSH, OP_##ins)               \
	XLOOP(xstate_##ins##_loop_cold_dirty_sse, DIRTY_SSE(); FLUSH, OP_##ins)               \
	XLOOP(xstate_##ins##_loop_cold_dirty_avx, DIRTY_AVX(); FLUSH, OP_##ins)               \
	XLOOP(xstate_##ins##_loop_cold_dirty_avx512, DIRTY_AVX512(); FLUSH, OP_##ins)         \
	static loop_fn *const loops_##ins[2][5] = {                                           \
		{xstate_##ins##_loop_hot, xstate_##ins##_loop_hot_dirty_x87,                      \
		 xstate_##ins##_loop_hot_dirty_sse, xstate_##ins##_loop_hot_dirty_avx,             \
		 xstate_##ins##_loop_hot_dirty_avx512},                                          \
		{xstate_##ins##_loop_cold, xstate_##ins##_loop_cold_dirty_x87,                    \
		 xstate_##ins##_loop_cold_dirty_sse, xstate_##ins##_loop_cold_dirty_avx,           \
		 xstate_##ins##_loop_cold_dirty_avx512}};

GEN(xsave)
GEN(xsaveopt)
GEN(xsavec)
GEN(xrstor)
GEN(fxsave)
GEN(fxrstor)
GEN(vzeroupper)
GEN(vzeroall)
GEN(none) /* the auxiliary loops: flushes and/or the dirtying write alone */

static loop_fn *const *const loops_by_insn[] = {
	&loops_xsave[0][0], &loops_xsaveopt[0][0], &loops_xsavec[0][0], &loops_xrstor[0][0],
	&loops_fxsave[0][0], &loops_fxrstor[0][0], &loops_vzeroupper[0][0], &loops_vzeroall[0][0]};

static void cpuid_c(unsigned leaf, unsigned sub, unsigned r[4])
{
	memset(r, 0, 4 * sizeof(unsigned));
	if (__get_cpuid_max(leaf & 0x80000000u, NULL) >= leaf)
		__cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}

/* All components to init, then the registers of the chosen kind loaded;
 * for the formats that need it, the area prepared. Outside the loop. */
static void prepare(struct xs *s)
{
	if (s->have_xsave)
		OP_xrstor(s->init, (uint32_t)s->usable, (uint32_t)(s->usable >> 32));
	else
		__asm__ volatile("fninit" ::: "memory");
	switch (s->kind) {
	case FP_X87: DIRTY_X87(); break;
	case FP_SSE: DIRTY_SSE(); break;
	case FP_AVX: DIRTY_AVX(); break;
	case FP_AVX512: DIRTY_AVX512(); LOAD_AVX512_EXTRA(); break;
	default: break;
	}
	unsigned char *a = s->area;
	if (s->insn == XI_XSAVEOPT) {
		OP_xsave(a, s->lo, s->hi);
		OP_xrstor(a, s->rlo, s->rhi); /* xsaveopt's tracking now refers to this area */
	} else if (s->insn == XI_XRSTOR) {
		switch (s->from) {
		case XI_XSAVEOPT: OP_xsaveopt(a, s->lo, s->hi); break;
		case XI_XSAVEC: OP_xsavec(a, s->lo, s->hi); break;
		default: OP_xsave(a, s->lo, s->hi); break;
		}
	} else if (s->insn == XI_FXRSTOR) {
		OP_fxsave(a, 0, 0);
	}
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct xs *s = ctx->priv;
	if (s->cold) { /* each batch on the next page; its aux batch on the same */
		s->area = s->areas + (size_t)s->next * s->stride;
		s->end = s->area + s->span;
		s->next = (s->next + 1) % COLD_AREAS;
	}
	prepare(s);
	s->loop(s, ctx->spin, iters);
}

static void aux_run(struct bench_ctx *ctx, uint64_t iters)
{
	struct xs *s = ctx->priv;
	prepare(s);
	s->aux(s, 0, iters);
}

static int has(const struct bench_ctx *ctx, const char *name)
{
	for (int i = 0; ctx->b->params[i].name; i++)
		if (strcmp(ctx->b->params[i].name, name) == 0)
			return 1;
	return 0;
}

/* The header's "xstate": what the instruction was asked for and the area's
 * sizes, so a figure says which components it saved (docs/instructions.md). */
static void xstate_header(struct bench_ctx *ctx, struct jb *j)
{
	const struct xs *s = ctx->priv;
	char hex[24];
	uint64_t mask = ((uint64_t)s->hi << 32) | s->lo;
	jb_obj_begin(j, "xstate");
	int legacy = s->insn == XI_FXSAVE || s->insn == XI_FXRSTOR;
	int compact = s->insn == XI_XSAVEC || (s->insn == XI_XRSTOR && s->from == XI_XSAVEC);
	jb_str(j, "format", legacy ? "legacy" : compact ? "compacted" : "standard");
	if (!legacy) {
		snprintf(hex, sizeof(hex), "0x%" PRIx64, mask & s->xcr0);
		jb_str(j, "rfbm", hex);
	}
	snprintf(hex, sizeof(hex), "0x%" PRIx64, s->xcr0);
	jb_str(j, "xcr0", hex);
	snprintf(hex, sizeof(hex), "0x%" PRIx64, s->xfd);
	jb_str(j, "xfd_capable", hex);
	jb_uint(j, "area_bytes", legacy ? 512 : compact ? s->touched : s->std_size);
	jb_uint(j, "touched_bytes", s->touched);
	jb_obj_end(j);
}

static const char *const insn_names[] = {"xsave", "xsaveopt", "xsavec", "xrstor", "fxsave", "fxrstor", "vzeroupper", "vzeroall"};

static int setup_insn(struct bench_ctx *ctx, int insn_)
{
	enum xinsn insn = (enum xinsn)insn_;
	struct xs *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(ctx->err, sizeof(ctx->err), "out of memory");
		return BENCH_FAIL;
	}
	ctx->priv = s;
	s->insn = insn;
	s->kind = fpkind_parse(param_str(ctx, "state"));
	s->cold = has(ctx, "cache") && param_is(ctx, "cache", "cold");
	s->dirty = param_is(ctx, "dirty", "yes");
	s->from = XI_XSAVE;
	if (has(ctx, "from"))
		s->from = param_is(ctx, "from", "xsaveopt") ? XI_XSAVEOPT : param_is(ctx, "from", "xsavec") ? XI_XSAVEC : XI_XSAVE;

	unsigned r1[4], r7[4], rd0[4], rd1[4];
	cpuid_c(1, 0, r1);
	cpuid_c(7, 0, r7);
	int fxsr = (r1[3] >> 24) & 1, xsave = (r1[2] >> 26) & 1, osxsave = (r1[2] >> 27) & 1;
	s->have_xsave = xsave && osxsave;
	uint64_t xcr0 = s->have_xsave ? xgetbv0() : 0;
	s->have_avx = ((r1[2] >> 28) & 1) && (xcr0 & 6) == 6;
	(void)r7;
	if (!fxsr) {
		snprintf(ctx->err, sizeof(ctx->err), "unsupported on this CPU: no FXSAVE/FXRSTOR (CPUID.1:EDX[24])");
		return BENCH_UNSUPPORTED;
	}
	if (!fpkind_supported(s->kind, ctx->err, sizeof(ctx->err)))
		return BENCH_UNSUPPORTED;
	int needs_xsave = insn <= XI_XRSTOR || s->kind == FP_AVX || s->kind == FP_AVX512;
	if (needs_xsave && !s->have_xsave) {
		snprintf(ctx->err, sizeof(ctx->err), "unsupported here: XSAVE %s (CPUID.1:ECX[26]=%d, OSXSAVE ECX[27]=%d)",
			 xsave ? "is not enabled by the OS" : "is not implemented by this CPU", xsave, osxsave);
		return BENCH_UNSUPPORTED;
	}
	if ((insn == XI_VZEROUPPER || insn == XI_VZEROALL) && !s->have_avx) {
		snprintf(ctx->err, sizeof(ctx->err), "unsupported here: %s needs AVX enabled (CPUID.1:ECX[28] and XCR0 bits 1-2)", insn_names[insn]);
		return BENCH_UNSUPPORTED;
	}
	cpuid_c(0xd, 0, rd0);
	cpuid_c(0xd, 1, rd1);
	int want_opt = insn == XI_XSAVEOPT || (insn == XI_XRSTOR && s->from == XI_XSAVEOPT);
	int want_c = insn == XI_XSAVEC || (insn == XI_XRSTOR && s->from == XI_XSAVEC);
	if (want_opt && !(rd1[0] & 1)) {
		snprintf(ctx->err, sizeof(ctx->err), "unsupported on this CPU: no XSAVEOPT (CPUID.(EAX=0DH,ECX=1):EAX[0])");
		return BENCH_UNSUPPORTED;
	}
	if (want_c && !(rd1[0] & 2)) {
		snprintf(ctx->err, sizeof(ctx->err), "unsupported on this CPU: no XSAVEC (CPUID.(EAX=0DH,ECX=1):EAX[1])");
		return BENCH_UNSUPPORTED;
	}

	/* Components that XFD can arm (AMX tile data): touching them without
	 * the kernel's permission kills the process; never in the default mask. */
	uint64_t xfd = 0;
	for (unsigned i = 2; i < 63 && s->have_xsave; i++) {
		unsigned ri[4];
		if (!((xcr0 >> i) & 1))
			continue;
		cpuid_c(0xd, i, ri);
		if (ri[2] & 4)
			xfd |= 1ull << i;
	}
	s->usable = xcr0 & ~xfd;
	s->xcr0 = xcr0;
	s->xfd = xfd;
	uint64_t mask = s->usable;
	if (has(ctx, "mask") && param_is(ctx, "mask", "all")) {
		/* What a context switch saves for a task that may use AMX (the kernel's
		 * RFBM is XCR0 & ~XFD, and XFD is disarmed for it): every enabled
		 * component. Saves only: an xsave* of an XFD-armed component stores it
		 * in its init state, an xrstor of one may fault (#NM). */
		if (insn == XI_XRSTOR) {
			snprintf(ctx->err, sizeof(ctx->err),
				 "mask=all is for the saves (xsave, xsaveopt, xsavec): xrstor of an XFD-armed component (AMX) "
				 "would fault; give mask=xcr0 or a number");
			return BENCH_BADPARAM;
		}
		mask = xcr0;
	} else if (has(ctx, "mask") && !param_is(ctx, "mask", "xcr0")) {
		const char *m = param_str(ctx, "mask");
		char *endp;
		mask = strtoull(m, &endp, 0);
		if (*endp || endp == m || m[0] == '-') {
			snprintf(ctx->err, sizeof(ctx->err), "mask=%s: expected xcr0, all or a number such as 0x7 (x87|SSE|AVX)", m);
			return BENCH_BADPARAM;
		}
		if (mask & ~xcr0) {
			snprintf(ctx->err, sizeof(ctx->err),
				 "mask=%s asks for components 0x%" PRIx64 " that the OS has not enabled (XCR0=0x%" PRIx64 ")", m,
				 mask & ~xcr0, xcr0);
			return BENCH_UNSUPPORTED;
		}
		if (mask & xfd) {
			snprintf(ctx->err, sizeof(ctx->err),
				 "mask=%s includes XFD-capable components 0x%" PRIx64 " (AMX): give mask=all for a save of every "
				 "enabled component", m, mask & xfd);
			return BENCH_UNSUPPORTED;
		}
	}
	s->lo = (uint32_t)mask;
	s->hi = (uint32_t)(mask >> 32);
	s->rlo = (uint32_t)(mask & s->usable);
	s->rhi = (uint32_t)((mask & s->usable) >> 32);

	/* Sizes: standard format from CPUID.0DH (EBX: for the current XCR0);
	 * the bytes one instruction touches: up to the end of the highest
	 * requested component (standard) or the compacted size for the mask. */
	size_t std_size = s->have_xsave ? rd0[1] : 512;
	size_t touched = 512;
	if (insn <= XI_XRSTOR) {
		int compact = want_c;
		size_t off = 576, top = 576;
		for (unsigned i = 2; i < 63; i++) {
			if (!((mask >> i) & 1))
				continue;
			unsigned ri[4];
			cpuid_c(0xd, i, ri);
			if (compact) {
				if (ri[2] & 2)
					off = (off + 63) & ~(size_t)63;
				off += ri[0];
			} else if (ri[1] + ri[0] > top) {
				top = ri[1] + ri[0];
			}
		}
		touched = compact ? off : top;
	}
	if (std_size < 576)
		std_size = 576;
	s->std_size = insn == XI_FXSAVE || insn == XI_FXRSTOR || !s->have_xsave ? 512 : std_size;
	s->touched = insn <= XI_XRSTOR ? touched : insn == XI_FXSAVE || insn == XI_FXRSTOR ? 512 : 0;
	/* The area starts a page: where it sits in a page changes the cold
	 * cost (an area across a 4 KiB boundary spans two physical pages, and
	 * the hardware prefetchers stop at the boundary), so one fixed choice. */
	size_t alloc = ((std_size > touched ? std_size : touched) + 4095) & ~(size_t)4095;
	s->areas = aligned_alloc(4096, alloc * (s->cold ? COLD_AREAS : 1));
	s->area = s->areas;
	s->stride = alloc;
	s->init = aligned_alloc(64, alloc);
	if (!s->areas || !s->init) {
		snprintf(ctx->err, sizeof(ctx->err), "out of memory for a %zu-byte save area", alloc);
		return BENCH_FAIL;
	}
	memset(s->areas, 0, alloc * (s->cold ? COLD_AREAS : 1));
	memset(s->init, 0, alloc);
	uint32_t mxcsr = 0x1f80; /* MXCSR is loaded even for an init SSE component */
	memcpy(s->init + 24, &mxcsr, sizeof(mxcsr));
	uint16_t fcw = 0x37f;
	memcpy(s->init, &fcw, sizeof(fcw));
	s->span = (touched + 63) & ~(size_t)63;
	s->end = s->area + s->span;

	int d = s->dirty ? 1 + (int)s->kind : 0; /* FP_X87..FP_AVX512 are 0..3 */
	s->loop = loops_by_insn[insn][s->cold * 5 + d];
	if (s->cold || s->dirty) {
		s->aux = loops_none[s->cold][d];
		size_t n = (size_t)(s->end - s->area);
		if (s->cold)
			snprintf(s->what, sizeof(s->what), "%sclflush of the %zu lines (%zu bytes) the instruction touches",
				 s->dirty ? "one register write of the state kind and " : "", n / 64, n);
		else
			snprintf(s->what, sizeof(s->what), "one register write of the state kind");
		ctx->aux = s->what;
	}
	if (insn <= XI_FXRSTOR)   /* the saves and restores: an area and, for xsave*, an RFBM */
		ctx->header_extra = xstate_header;
	return BENCH_OK;
}

static void teardown(struct bench_ctx *ctx)
{
	struct xs *s = ctx->priv;
	if (s) {
		free(s->areas);
		free(s->init);
		free(s);
	}
	ctx->priv = NULL;
}

#define SETUP(ins) static int setup_##ins(struct bench_ctx *ctx) { return setup_insn(ctx, XI_##ins); }
#else /* not x86 */
static void run(struct bench_ctx *ctx, uint64_t iters) { (void)ctx; (void)iters; }
static void aux_run(struct bench_ctx *ctx, uint64_t iters) { (void)ctx; (void)iters; }
static void teardown(struct bench_ctx *ctx) { (void)ctx; }
#define SETUP(ins)                                                                                     \
	static int setup_##ins(struct bench_ctx *ctx)                                                      \
	{                                                                                                  \
		snprintf(ctx->err, sizeof(ctx->err), "xstate.* are x86 instructions; this probe is not x86"); \
		return BENCH_UNSUPPORTED;                                                                      \
	}
#endif

enum { XI_xsave = XI_XSAVE, XI_xsaveopt = XI_XSAVEOPT, XI_xsavec = XI_XSAVEC, XI_xrstor = XI_XRSTOR,
       XI_fxsave = XI_FXSAVE, XI_fxrstor = XI_FXRSTOR, XI_vzeroupper = XI_VZEROUPPER, XI_vzeroall = XI_VZEROALL };

SETUP(xsave)
SETUP(xsaveopt)
SETUP(xsavec)
SETUP(xrstor)
SETUP(fxsave)
SETUP(fxrstor)
SETUP(vzeroupper)
SETUP(vzeroall)

#define XSTATE_BENCH(ins, params_, summary_) \
	.summary = summary_, .op = "instruction", .params = params_, .setup = setup_##ins, .run = run, \
	.teardown = teardown, .aux_run = aux_run

const struct bench bench_xstate_xsave = {.name = "xstate.xsave", XSTATE_BENCH(xsave, xsave_params,
	"xsave: save the requested state components (standard format); cycles = TSC ticks")};
const struct bench bench_xstate_xsaveopt = {.name = "xstate.xsaveopt", XSTATE_BENCH(xsaveopt, xsave_params,
	"xsaveopt: save, skipping components unmodified since the last xrstor from this area")};
const struct bench bench_xstate_xsavec = {.name = "xstate.xsavec", XSTATE_BENCH(xsavec, xsave_params,
	"xsavec: save in the compacted format")};
const struct bench bench_xstate_xrstor = {.name = "xstate.xrstor", XSTATE_BENCH(xrstor, xrstor_params,
	"xrstor: restore the requested components from an xsave/xsaveopt/xsavec area")};
const struct bench bench_xstate_fxsave = {.name = "xstate.fxsave", XSTATE_BENCH(fxsave, fx_params,
	"fxsave: save x87 and SSE state (legacy 512-byte area)")};
const struct bench bench_xstate_fxrstor = {.name = "xstate.fxrstor", XSTATE_BENCH(fxrstor, fx_params,
	"fxrstor: restore x87 and SSE state (legacy 512-byte area)")};
const struct bench bench_xstate_vzeroupper = {.name = "xstate.vzeroupper", XSTATE_BENCH(vzeroupper, vz_params,
	"vzeroupper: zero the upper halves of the ymm registers")};
const struct bench bench_xstate_vzeroall = {.name = "xstate.vzeroall", XSTATE_BENCH(vzeroall, vz_params,
	"vzeroall: zero all ymm registers")};
