/* Where the probe runs: the measuring and helper CPUs resolved from cpu=
 * and the benchmark's placement= against the sysfs topology, and pinning. */
#ifndef OPCOST_CPUS_H
#define OPCOST_CPUS_H

#include <stddef.h>

struct bench_ctx;

/* Pin the calling thread to one CPU; 0 or -errno. */
int pin_self(int cpu);
/* Fill ctx->cpus (and ctx->placement, ctx->placement_how) from cpus ("A",
 * "A,B" or NULL: the CPU we are on) and the benchmark's `placement`
 * parameter. A CPU outside our affinity mask, or a pair that contradicts
 * placement=, is a usage error (die). -1 with the reason in `why` when the
 * machine has no such placement (unsupported here). */
int resolve_cpus(struct bench_ctx *ctx, const char *cpus, char *why, size_t whylen);

#endif
