/* ctx.yield: two tasks on one CPU calling sched_yield(2) (seed 001's ./yield).
 * One operation is one sched_yield() by the measuring side: it switches to
 * the helper, whose own yield switches back. */
#include "../helper.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>

static const char *const mode_choices[] = {"process", "thread", NULL};

static const struct bench_param params[] = {
	{"mode", PT_ENUM, "the other task is a forked process or a thread", "process", mode_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	struct helper helper;
};

static struct state st;

static void yielder(struct bench_ctx *ctx)
{
	ctx->shm->ready = 1;
	while (!ctx->shm->stop) {
		sched_yield();
		helper_poll_inline(ctx);
	}
}

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	memset(s, 0, sizeof(*s));
	ctx->priv = s;
	if (ctx->cpus[1] != ctx->cpus[0]) {
		snprintf(ctx->err, sizeof(ctx->err),
			 "both sides of a yield must share one CPU: give cpu=A (or cpu=A,A), not cpu=%d,%d",
			 ctx->cpus[0], ctx->cpus[1]);
		return BENCH_BADPARAM;
	}
	return helper_start(ctx, &s->helper, param_is(ctx, "mode", "thread"), yielder);
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	OP_LOOP(ctx->spin, iters, sched_yield());
}

static void sync_helper(struct bench_ctx *ctx)
{
	ctx->shm->cmd = 1;
	while (__atomic_load_n(&ctx->shm->cmd, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void teardown(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	ctx->shm->stop = 1;
	helper_stop(&s->helper);
}

const struct bench bench_ctx_yield = {
	.name = "ctx.yield",
	.summary = "two tasks on one CPU yielding to each other with sched_yield(2) (seed 001)",
	.op = "yield",
	.switches = 2,
	.flags = BENCH_HAS_HELPER,
	.params = params,
	.setup = setup,
	.run = run,
	.sync_helper = sync_helper,
	.teardown = teardown,
};
