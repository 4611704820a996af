/* The harness: one `opcost-probe run` of one benchmark (harness.c). It
 * resolves the benchmark, its parameters and CPUs, calibrates the clock and
 * measures the clock-read and loop overhead, sizes the batch to target_ms,
 * and runs the warm-up and measured batches around the benchmark's setup and
 * teardown, handing each batch to the emitter (emit.c). */
#ifndef OPCOST_HARNESS_H
#define OPCOST_HARNESS_H

#include "probe.h"

/* What `run` was asked for (main.c parses the options). */
struct run_opts {
	const char *bench;
	const char *params[MAX_PARAMS * 2]; /* "key=value" */
	int nparams;
	long samples, warmup;
	double target_ms;
	long long iters; /* 0: calibrate */
	const char *cpus;
	const char *counters;
	double fake_ns; /* > 0: fake clock */
	unsigned long long seed;
	int check; /* validate and set up, measure nothing */
	long spin;  /* injected cost: spin_chain(spin) per operation */
	int hold;   /* --hold: write the samples after the batches (emit_hold) */
	double budget_ms; /* > 0: the time this process's batches may take, when one iteration is long (fit_budget) */
};

/* The whole run; its exit code. argv goes into the header as given. */
int harness_run(const struct run_opts *o, int argc, char **argv);

#endif
