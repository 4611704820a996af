/* The benchmark interface. A benchmark is one file in bench/ exporting a
 * `const struct bench`; bench/table.c lists them all, one line each. A
 * benchmark owns only its setup, its measured loop and its teardown; the
 * rest of the probe owns everything else:
 *   main.c      the command line: which command, its options
 *   harness.c   `run`: clock, overhead and batch calibration, the warm-up
 *               and measured batches around setup and teardown
 *   timecmd.c   `time`: a whole program as the operation
 *   emit.c      every protocol line, for `run` and `time` alike (json.c
 *               escapes and writes them)
 *   params.c    parameters as data: lookup, key=value validation
 *   cpus.c      cpu= and placement= resolved (topology.c), pinning
 *   helper.c    the second party of two-party benchmarks (helper.h)
 *   counters.c  perf_event_open counters; clock.c the batch clock (clock.h)
 *   spin.c      spin=N, a known injected cost; cpuid.c `opcost-probe cpuid`
 *   util.c      exit codes, die, option integers
 *   lib/        what several benchmarks share: footprint, fpstate, tinyexe
 *   user_op.c   benchmark user.op, built only for `opcost variants --mode op` */
#ifndef OPCOST_PROBE_H
#define OPCOST_PROBE_H

#include "util.h"

#include <stdint.h>
#include <sys/types.h>

#define PROBE_VERSION "0.1.0"
#if defined(__x86_64__)
#define PROBE_ARCH "x86_64"
#elif defined(__i386__)
#define PROBE_ARCH "i386"
#elif defined(__aarch64__)
#define PROBE_ARCH "aarch64"
#elif defined(__arm__)
#define PROBE_ARCH "arm"
#else
#define PROBE_ARCH "unknown"
#endif
#define MAX_PARAMS 12
#define MAX_CPUS 8

/* A parameter is data: name, help, default, and either a NULL-terminated list
 * of allowed values or an integer range. `opcost-probe list --json` prints this
 * table, and the Python side validates user input against it. */
enum param_type { PT_ENUM, PT_INT, PT_STR };

struct bench_param {
	const char *name;
	enum param_type type;
	const char *help;
	const char *def;
	const char *const *choices; /* PT_ENUM: NULL-terminated allowed values */
	long min, max;              /* PT_INT: inclusive range */
};

struct jb; /* json.h: the probe's JSON emitter */

/* Per-run state handed to every callback. `priv` is the benchmark's own
 * state, built from the parameters in setup(); no option globals. */
struct bench_ctx {
	const struct bench *b;
	const char *values[MAX_PARAMS]; /* resolved value per param (default filled in) */
	int cpus[MAX_CPUS];              /* cpus[0]: the measuring thread; cpus[1]: a helper */
	int ncpus;
	unsigned spin;                   /* spin=N: extra dependent adds per operation */
	struct helper_shm *shm;          /* shared page for helpers (process or thread) */
	void *priv;
	char err[256];                   /* reason, set when setup fails */
	/* Set by setup() when one run() iteration holds several operations (a
	 * whole hackbench run, one page per fault...): the harness divides by
	 * iters * ops_per_iter, so ns_per_op is per operation. 0 means 1. */
	uint64_t ops_per_iter;
	const char *iter_desc;           /* what one iteration is, when ops_per_iter > 1 */
	/* Set by setup() when the operation has a requested duration (a sleep):
	 * samples then also report overshoot_ns_per_op = ns_per_op - nominal_ns. */
	double nominal_ns;
	int has_nominal;
	char placement[16];              /* resolved placement class (two-party benchmarks) */
	char placement_how[256];         /* how it was resolved */
	const char *aux;                 /* set by setup when aux_run applies: what it does */
	const char *prepare;             /* set by setup with prepare(): what it does, untimed */
	/* Set by setup when the header should describe more of the run (e.g.
	 * the parent's footprint, lib/footprint.c): called while the header
	 * is written, after setup and calibration, to add members to it. */
	void (*header_extra)(struct bench_ctx *ctx, struct jb *j);
};

/* Operations in one run() iteration (ops_per_iter; 0 means 1). */
static inline uint64_t ctx_ops_per_iter(const struct bench_ctx *ctx)
{
	return ctx->ops_per_iter ? ctx->ops_per_iter : 1;
}

/* Return values of setup(). */
/* BENCH_BADPARAM: the parameters contradict each other (usage error). */
enum { BENCH_OK = 0, BENCH_FAIL = 1, BENCH_UNSUPPORTED = 2, BENCH_BADPARAM = 3 };

#define BENCH_HAS_HELPER 1u /* a second process or thread takes part */
/* The operation is a dependent chain longer than the loop's own bookkeeping
 * (counter increment, compare, branch), which the core runs beside it: the
 * empty loop's cost is not added to such a loop, so it is not subtracted
 * (subtracting it under-reports a division by the ~1 cycle of the empty
 * loop; validation/instructions checks this against a hand-written loop). */
#define BENCH_LOOP_HIDDEN 2u
/* The measuring thread sleeps inside the operation (waits for a child, a
 * thread, a timer, workers): its CPU time is not the operation's cost, so
 * the front end's figure for it is wall time less the time lost waiting for
 * a CPU, not CPU time (docs/statistics.md). A benchmark with a helper is
 * taken to block as well. */
#define BENCH_BLOCKS 4u

struct bench {
	const char *name;
	const char *summary;
	const char *op;                  /* what one operation is, e.g. "round trip" */
	unsigned switches;               /* context switches one operation implies (0: none) */
	unsigned flags;
	const struct bench_param *params; /* terminated by {NULL} */
	/* Optional, NULL-terminated: "PARAM:NAME!=VALUE", PARAM applies only when
	 * parameter NAME is not VALUE (fpkind means nothing with fp=none). `list`
	 * shows it as the parameter's applies_if; a run's header names the
	 * parameters that do not apply to it in params_unused, and the exports
	 * leave those out. */
	const char *const *applies_if;
	int (*setup)(struct bench_ctx *ctx);
	/* The measured loop: exactly `iters` operations and nothing else. */
	void (*run)(struct bench_ctx *ctx, uint64_t iters);
	/* Optional, outside the timed region: make helpers publish their usage. */
	void (*sync_helper)(struct bench_ctx *ctx);
	void (*teardown)(struct bench_ctx *ctx);
	/* Optional auxiliary cost: the same loop as run() without the measured
	 * operation (e.g. the clflushes before a cold xsave). When setup sets
	 * ctx->aux (a one-line description), the harness times aux_run alone
	 * right after every batch with the same count (overheads subtracted),
	 * subtracts that cost from the batch, reports it in the sample
	 * (aux_ns_per_op) and describes it in the header as "aux". */
	void (*aux_run)(struct bench_ctx *ctx, uint64_t iters);
	/* Optional, outside the timed region: make ready what ONE run() iteration
	 * consumes (hackbench's workers, started and waiting at a barrier, as
	 * hackbench does before it starts its clock). With prepare set, the
	 * harness times every iteration on its own: prepare, clock, run(ctx, 1),
	 * clock; a batch of N iterations sums N such timed segments (clock
	 * overhead subtracted per segment). 0, or -1 with ctx->err set: the probe
	 * stops with exit 1 (samples already printed stay valid). */
	int (*prepare)(struct bench_ctx *ctx);
};

/* Whether the measuring thread waits inside the operation (BENCH_BLOCKS). */
static inline int bench_blocks(const struct bench *b)
{
	return (b->flags & (BENCH_BLOCKS | BENCH_HAS_HELPER)) != 0;
}

/* bench/table.c: every benchmark, NULL-terminated. */
extern const struct bench *const bench_table[];

/* Parameter access (params.c; names must exist in the table; checked at startup). */
const char *param_str(const struct bench_ctx *ctx, const char *name);
long param_long(const struct bench_ctx *ctx, const char *name);
int param_is(const struct bench_ctx *ctx, const char *name, const char *value);

/* Compiler barrier: keep an operation's result alive, keep loops honest. */
#define BARRIER() __asm__ volatile("" ::: "memory")

/* ---- the measured loop ---- */

#define SPIN_MAX 1024
uint64_t spin_chain(unsigned n, uint64_t x);

/* `iters` operations: the body, plus spin_chain(spin) when spin=N asks for an
 * injected cost. Two loops, so with spin=0 nothing but the body is inside.
 * A `break` in the body ends the loop. */
#define OP_LOOP(spin, iters, ...)                                                \
	do {                                                                         \
		const unsigned spin_ = (spin);                                           \
		if (!spin_) {                                                            \
			for (uint64_t i_ = 0; i_ < (iters); i_++) { __VA_ARGS__; }           \
		} else {                                                                 \
			uint64_t x_ = 1;                                                     \
			for (uint64_t i_ = 0; i_ < (iters); i_++) { __VA_ARGS__; x_ = spin_chain(spin_, x_); } \
			__asm__ volatile("" : : "r"(x_));                                    \
		}                                                                        \
	} while (0)

#endif
