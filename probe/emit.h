/* Every line of the probe's protocol is written here and only here:
 * opcost.probe/1 (header, sample, trailer, check, unsupported) for `run`
 * and `time` alike, opcost.probe-list/1 (`list --json`) and the placement
 * line. The callers measure and decide; this file says what a line holds, and
 * json.c escapes and writes it. The protocol is a public contract
 * (docs/architecture.md, "Documents"): extend it, never change what is there. */
#ifndef OPCOST_EMIT_H
#define OPCOST_EMIT_H

#include "counters.h"
#include "probe.h"

/* CPU time and context switches of a thread (or of a program and what it
 * reaped). */
struct usage {
	int64_t user_ns, sys_ns, nvcsw, nivcsw;
};

/* From /proc/self/task/TID/schedstat: time on the CPU and time runnable
 * but waiting for it (run delay), ns. */
struct sched_times {
	int64_t run_ns, delay_ns;
};

/* One sample: a batch of `run`, or one program run of `time`. */
struct batch {
	uint64_t iters, executed;  /* executed: written when it differs (the fake clock runs fewer) */
	double raw_ticks, net_ticks;
	double ns;                 /* the batch's time: net_ticks in ns (run), the wall time (time) */
	double aux_ticks; /* per iteration: the aux loop timed right after this batch */
	int aux_valid;
	uint64_t wall_ns;
	uint64_t start_raw_ns; /* CLOCK_MONOTONIC_RAW at the batch start: lines up concurrent probes; 0: not written */
	struct usage self, helper;
	int helper_valid, helper_cpu;
	/* schedstat over the batch (outside the timed region, around it):
	 * sched_valid 0: not available, not written */
	struct sched_times sched, helper_sched;
	int sched_valid, helper_sched_valid;
	int cpu_before, cpu_after;
	long long steal; /* steal time during the batch (USER_HZ ticks); < 0: unknown, not written */
	struct counter_snapshot c0, c1;
};

/* --budget-ms applies when one iteration (so one batch) takes at least
 * BUDGET_LONG_MS; it never takes fewer than BUDGET_MIN_SAMPLES measured batches. */
#define BUDGET_LONG_MS 1000.0
#define BUDGET_MIN_SAMPLES 3

/* What the header says of a run, and what its samples share. */
struct run_info {
	struct bench_ctx *ctx;     /* the benchmark, its parameters and CPUs, what setup() said */
	const char *arch;          /* NULL: not written (`time`'s header never had it) */
	int pinned;                /* < 0: not written (`run`'s header never had it) */
	const char *clock;
	double tsc_hz;
	int fake;                  /* --fake-clock */
	double clock_ticks;        /* overhead of one clock pair */
	double loop_ticks;         /* overhead of one empty loop iteration */
	int loop_subtracted;       /* < 0: not written (`time` subtracts nothing) */
	const char *overhead_method;
	long spin;                 /* spin=N (0: none), and its cost measured alone */
	double spin_ticks;
	uint64_t iters;
	const char *iters_source;
	long samples, warmup;
	double target_ms;          /* <= 0: not written */
	double batch_ms;           /* one batch as calibrated (<= 0: not known, --iters: not written) */
	int hold;                  /* --hold: samples written after the batches ("output": "held") */
	double budget_ms;          /* --budget-ms (<= 0: not given, "budget" not written) */
	long asked_samples, asked_warmup; /* what was asked, before fitting the budget */
	int fitted;                /* the budget cut the batches */
	int long_iteration;        /* one iteration takes BUDGET_LONG_MS or more: the budget applies */
	const struct counter_set *cs; /* NULL: none */
	const char *schedstat;     /* NULL: not written; else where run delay comes from, or why it is not there */
	int schedstat_ok;
};

void emit_header(const struct run_info *ri, int argc, char **argv);
/* Sample i of the warm-up (warmup) or measured batches. */
void emit_sample(const struct run_info *ri, long i, int warmup, const struct batch *B);
void emit_trailer(long samples, long warmup);
/* --hold: keep the samples in memory from now on (and write them at once on
 * SIGINT/SIGTERM, then exit 128 + the signal); emit_progress writes a
 * progress line at most once a second (and after the last batch); emit_release
 * writes the held samples. Without emit_hold both progress and release do
 * nothing. */
void emit_hold(void);
void emit_progress(long done, long total);
void emit_release(void);
/* --check passed: the parameters as resolved (ctx NULL: none, `time`). */
void emit_check(const struct bench_ctx *ctx);
/* The operation cannot be measured here: ctx->err says why. */
void emit_unsupported(const struct bench_ctx *ctx);
/* `list --json`: the benchmark table, parameters as data, known counters. */
void emit_list(void);
/* `placement A B`: the class of a CPU pair and how it was decided. */
void emit_placement(int a, int b, const char *name, const char *how);

#endif
