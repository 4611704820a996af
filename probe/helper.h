/* A benchmark's helper: the second party of a two-party benchmark, a thread
 * or a process, pinned where the harness resolved (cpu=A,B or placement=),
 * tied to the probe's life, and able to report its own CPU time between
 * operations so a sample shows both sides' user/sys (helper.c). */
#ifndef OPCOST_HELPER_H
#define OPCOST_HELPER_H

#include "probe.h"

/* Shared between the measuring side and its helper. A helper publishes its
 * own getrusage(RUSAGE_THREAD) and CPU when `cmd` asks for it, between
 * operations, never inside the measured region of the main side. */
struct helper_shm {
	volatile int cmd;        /* 1: publish usage; helper clears it */
	volatile int stop;       /* helper exits its loop */
	volatile int ready;
	volatile int cpu;        /* CPU the helper last ran on */
	volatile int64_t user_ns, sys_ns;
	volatile int64_t nvcsw, nivcsw;
	volatile int valid;      /* usage has been published at least once */
	volatile int64_t run_ns, delay_ns; /* schedstat of the helper thread */
	volatile int sched_valid;          /* run_ns/delay_ns read (schedstat available) */
	volatile int tid;        /* the helper's kernel thread id (0: none), for its counters (:helper) */
};

/* CPU the helper should use; the harness resolves it (explicit cpu=A,B, or
 * the benchmark's `placement` parameter) before setup() runs. */
static inline int helper_cpu(const struct bench_ctx *ctx) { return ctx->cpus[1]; }
struct helper {
	int thread;
	pid_t pid;
	unsigned long tid;
};
/* Run fn as the benchmark's helper, a thread or a process, pinned to
 * helper_cpu(ctx), and wait until it sets ctx->shm->ready. A helper process
 * dies with the probe (PR_SET_PDEATHSIG). BENCH_OK, or BENCH_FAIL with
 * ctx->err set. */
int helper_start(struct bench_ctx *ctx, struct helper *h, int thread, void (*fn)(struct bench_ctx *));
/* A process is killed and reaped; a thread is joined (the benchmark has made
 * its fn return first). */
void helper_stop(struct helper *h);
/* The calling thread's run delay through fd, its open
 * /proc/self/task/TID/schedstat (2nd field), and its CPU time
 * (CLOCK_THREAD_CPUTIME_ID: exact, where schedstat's 1st field is as old as
 * the last tick), into a struct sched_times (emit.h); 0, or -1 when it
 * cannot be read. */
struct sched_times;
int sched_read(int fd, struct sched_times *out);
/* Open the calling thread's schedstat: an fd, or -1 with why in err. */
int sched_open(char *err, size_t len);
/* Called by helpers between operations (helper_poll_inline): one load,
 * and on request publishes the helper's own usage into ctx->shm. */
void helper_publish(struct bench_ctx *ctx);
static inline void helper_poll_inline(struct bench_ctx *ctx)
{
	if (__builtin_expect(ctx->shm->cmd != 0, 0))
		helper_publish(ctx);
}

#endif
