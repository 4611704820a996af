/* signal.install: sigaction(2) installing a handler (lmbench lat_sig install). */
#include "../probe.h"

#include <signal.h>
#include <string.h>

static const struct bench_param params[] = {{NULL, 0, NULL, NULL, NULL, 0, 0}};

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
	ctx->priv = &sa;
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
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
