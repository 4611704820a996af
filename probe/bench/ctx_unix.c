/* ctx.unix: one byte ping-pong over an AF_UNIX stream socketpair between the
 * measuring side and a helper (process or thread), like ctx.pipe (lmbench
 * lat_unix). One operation is one round trip: on one CPU, two switches. */
#include "../helper.h"
#include "../topology.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *const mode_choices[] = {"process", "thread", NULL};
static const char *const placement_choices[] = PLACEMENT_CHOICES;
static const char *const type_choices[] = {"stream", "dgram", "seqpacket", NULL};

static const struct bench_param params[] = {
	{"mode", PT_ENUM, "helper is a forked process or a thread", "process", mode_choices, 0, 0},
	{"placement", PT_ENUM, PLACEMENT_HELP, "same", placement_choices, 0, 0},
	{"type", PT_ENUM, "socket type of the socketpair", "stream", type_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	int sv[2]; /* sv[0]: measuring side, sv[1]: helper */
	struct helper helper;
};

static struct state st;

static void echo(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	char c;
	ctx->shm->ready = 1;
	for (;;) {
		if (read(s->sv[1], &c, 1) != 1)
			return;
		helper_poll_inline(ctx);
		if (write(s->sv[1], &c, 1) != 1)
			return;
	}
}

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	memset(s, 0, sizeof(*s));
	ctx->priv = s;
	int type = param_is(ctx, "type", "dgram") ? SOCK_DGRAM
		   : param_is(ctx, "type", "seqpacket") ? SOCK_SEQPACKET : SOCK_STREAM;
	if (socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, s->sv)) {
		snprintf(ctx->err, sizeof(ctx->err), "socketpair(AF_UNIX): %s", strerror(errno));
		return errno == EAFNOSUPPORT || errno == EPROTONOSUPPORT ? BENCH_UNSUPPORTED : BENCH_FAIL;
	}
	return helper_start(ctx, &s->helper, param_is(ctx, "mode", "thread"), echo);
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	char c = 'x';
	OP_LOOP(ctx->spin, iters, {
		if (write(s->sv[0], &c, 1) != 1 || read(s->sv[0], &c, 1) != 1)
			break;
	});
}

static void sync_helper(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	char c = 's';
	ctx->shm->cmd = 1;
	if (write(s->sv[0], &c, 1) == 1)
		(void)!read(s->sv[0], &c, 1);
}

static void teardown(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	shutdown(s->sv[0], SHUT_RDWR); /* the helper's read returns 0: it ends */
	helper_stop(&s->helper);
	close(s->sv[0]);
	close(s->sv[1]);
}

const struct bench bench_ctx_unix = {
	.name = "ctx.unix",
	.summary = "AF_UNIX socketpair one-byte ping-pong between two processes or threads (lmbench lat_unix)",
	.op = "round trip",
	.switches = 2,
	.flags = BENCH_HAS_HELPER,
	.params = params,
	.setup = setup,
	.run = run,
	.sync_helper = sync_helper,
	.teardown = teardown,
};
