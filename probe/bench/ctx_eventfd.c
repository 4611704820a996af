/* ctx.eventfd: ping-pong over two eventfds between the measuring side and a
 * helper (process or thread): write(2) 1 to the helper's eventfd, read(2) the
 * answer from ours. One operation is one round trip: on one CPU, two switches. */
#include "../helper.h"
#include "../topology.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static const char *const mode_choices[] = {"process", "thread", NULL};
static const char *const placement_choices[] = PLACEMENT_CHOICES;

static const struct bench_param params[] = {
	{"mode", PT_ENUM, "helper is a forked process or a thread", "process", mode_choices, 0, 0},
	{"placement", PT_ENUM, PLACEMENT_HELP, "same", placement_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	int to_helper, from_helper;
	struct helper helper;
};

static struct state st;

static void echo(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	uint64_t v;
	ctx->shm->ready = 1;
	for (;;) {
		if (read(s->to_helper, &v, 8) != 8)
			return;
		helper_poll_inline(ctx);
		if (ctx->shm->stop || write(s->from_helper, &v, 8) != 8)
			return;
	}
}

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	memset(s, 0, sizeof(*s));
	s->to_helper = s->from_helper = -1;
	ctx->priv = s;
	s->to_helper = eventfd(0, EFD_CLOEXEC);
	s->from_helper = eventfd(0, EFD_CLOEXEC);
	if (s->to_helper < 0 || s->from_helper < 0) {
		snprintf(ctx->err, sizeof(ctx->err), "eventfd: %s", strerror(errno));
		return errno == ENOSYS ? BENCH_UNSUPPORTED : BENCH_FAIL;
	}
	return helper_start(ctx, &s->helper, param_is(ctx, "mode", "thread"), echo);
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	uint64_t v = 1;
	OP_LOOP(ctx->spin, iters, {
		if (write(s->to_helper, &v, 8) != 8 || read(s->from_helper, &v, 8) != 8)
			break;
	});
}

static void sync_helper(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	uint64_t v = 1;
	ctx->shm->cmd = 1;
	if (write(s->to_helper, &v, 8) == 8)
		(void)!read(s->from_helper, &v, 8);
}

static void teardown(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	uint64_t v = 1;
	ctx->shm->stop = 1;
	(void)!write(s->to_helper, &v, 8); /* wakes the helper, which sees stop */
	helper_stop(&s->helper);
	close(s->to_helper);
	close(s->from_helper);
}

const struct bench bench_ctx_eventfd = {
	.name = "ctx.eventfd",
	.summary = "eventfd ping-pong (write one, read the other) between two processes or threads",
	.op = "round trip",
	.switches = 2,
	.flags = BENCH_HAS_HELPER,
	.params = params,
	.setup = setup,
	.run = run,
	.sync_helper = sync_helper,
	.teardown = teardown,
};
