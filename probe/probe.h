/* The benchmark interface. A benchmark is one file in bench/ exporting a
 * `const struct bench`; bench/table.c lists them all. The harness (main.c,
 * harness.c) owns clocks, calibration, counters, pinning and output; a
 * benchmark owns only its setup, its measured loop and its teardown. */
#ifndef OPCOST_PROBE_H
#define OPCOST_PROBE_H

#include <stdint.h>
#include <sys/types.h>

/* Exit codes of the probe (the Python side reads them). */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_UNSUPPORTED = 3 };
/* "opcost-probe: MESSAGE" on stderr, then exit(code) (main.c). */
void die(int code, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));
/* Option opt's integer value v, at least min; anything else is a usage
 * error: die(EXIT_USAGE) (main.c). */
long parse_count(const char *opt, const char *v, long min);

/* xorshift64, for the fake clock's jitter; a zero state is seeded. */
static inline uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

#define PROBE_VERSION "0.1.0"
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

struct bench {
	const char *name;
	const char *summary;
	const char *op;                  /* what one operation is, e.g. "round trip" */
	unsigned switches;               /* context switches one operation implies (0: none) */
	unsigned flags;
	const struct bench_param *params; /* terminated by {NULL} */
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

/* Parameter access (names must exist in the table; checked at startup). */
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
