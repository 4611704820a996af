/* signal.install: sigaction(2) installing a handler (lmbench lat_sig install).
 * refill=yes also fills the struct sigaction before each call (handler,
 * sigemptyset(3), flags), as lmbench's loop does. */
#include "../probe.h"

#include <signal.h>
#include <string.h>

static const char *const refill_choices[] = {"no", "yes", NULL};

static const struct bench_param params[] = {
	{"refill", PT_ENUM,
	 "yes: set the handler, sigemptyset(3) the mask and clear the flags before each call (lmbench lat_sig "
	 "install's loop); no: the struct is filled once",
	 "no", refill_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

static int refill;

static struct sigaction sa, old;

static void handler(int sig)
{
	(void)sig;
}

static int setup(struct bench_ctx *ctx)
{
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	refill = param_is(ctx, "refill", "yes");
	ctx->priv = &sa;
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	if (refill) {
		struct sigaction *m = ctx->priv;
		OP_LOOP(ctx->spin, iters, {
			m->sa_handler = handler;
			sigemptyset(&m->sa_mask);
			m->sa_flags = 0;
			int r = sigaction(SIGUSR1, m, &old);
			__asm__ volatile("" : : "r"(r) : "memory");
		});
		return;
	}
	const struct sigaction *a = ctx->priv;
	OP_LOOP(ctx->spin, iters, {
		int r = sigaction(SIGUSR1, a, &old);
		__asm__ volatile("" : : "r"(r) : "memory");
	});
}

static void teardown(struct bench_ctx *ctx)
{
	(void)ctx;
	signal(SIGUSR1, SIG_DFL);
}

const struct bench bench_signal_install = {
	.name = "signal.install",
	.summary = "install a signal handler with sigaction(2) (lmbench lat_sig install)",
	.op = "sigaction call",
	.params = params,
	.setup = setup,
	.run = run,
	.teardown = teardown,
};
