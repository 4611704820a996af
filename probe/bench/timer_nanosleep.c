/* timer.nanosleep: nanosleep(2) for `ns` nanoseconds (CLOCK_MONOTONIC
 * relative). One operation is one call: with ns=0 the entry, hrtimer setup
 * and the schedule round trip; otherwise also the sleep and the wake-up
 * latency. Samples report overshoot_ns_per_op = measured - requested: the
 * timer slack (50 us by default for normal threads; slack=min sets 1 ns with
 * PR_SET_TIMERSLACK) plus wake-up latency. */
#include "../probe.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

static const char *const slack_choices[] = {"default", "min", NULL};

static const struct bench_param params[] = {
	{"ns", PT_INT, "requested sleep in ns", "0", NULL, 0, 10000000},
	{"slack", PT_ENUM, "default: the thread's timer slack (normally 50 us); min: PR_SET_TIMERSLACK 1 ns", "default",
	 slack_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	struct timespec req;
	long old_slack;
};

static struct state st;

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	memset(s, 0, sizeof(*s));
	ctx->priv = s;
	long ns = param_long(ctx, "ns");
	s->req.tv_sec = ns / 1000000000L;
	s->req.tv_nsec = ns % 1000000000L;
	s->old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
	if (param_is(ctx, "slack", "min") && prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) != 0) {
		snprintf(ctx->err, sizeof(ctx->err), "slack=min: PR_SET_TIMERSLACK: %s", strerror(errno));
		return BENCH_UNSUPPORTED;
	}
	ctx->nominal_ns = (double)ns;
	ctx->has_nominal = 1;
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	OP_LOOP(ctx->spin, iters, nanosleep(&s->req, NULL));
}

static void teardown(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	if (s->old_slack > 0)
		prctl(PR_SET_TIMERSLACK, (unsigned long)s->old_slack, 0, 0, 0);
}

const struct bench bench_timer_nanosleep = {
	.name = "timer.nanosleep",
	.flags = BENCH_BLOCKS,
	.summary = "nanosleep(2) of ns= nanoseconds; samples report overshoot = measured - requested",
	.op = "nanosleep",
	.params = params,
	.setup = setup,
	.run = run,
	.teardown = teardown,
};
