/* signal.catch: deliver SIGUSR1 to ourselves and return from the handler
 * (lmbench lat_sig catch, seed 003). state= sets which register state is
 * live when the signal arrives, so the frame the kernel builds carries it:
 * clean (vzeroall: SSE/AVX in init state), sse (xmm), avx (ymm upper
 * halves), avx512 (zmm). sig=0 sends kill(self, 0) instead: the permission
 * check and nothing delivered, the send alone, which lmbench's lat_sig catch
 * measures and subtracts (its figure is signal.catch minus signal.catch:sig=0). */
#include "../probe.h"
#include "../lib/fpstate.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const state_choices[] = {"clean", "sse", "avx", "avx512", NULL};
static const char *const sig_choices[] = {"usr1", "0", NULL};

static const struct bench_param params[] = {
	{"state", PT_ENUM, "register state live at delivery: clean, sse (xmm), avx (ymm), avx512 (zmm)", "clean",
	 state_choices, 0, 0},
	{"sig", PT_ENUM,
	 "usr1: kill(self, SIGUSR1), delivered to the empty handler; 0: kill(self, 0), the send alone, nothing "
	 "delivered (lmbench lat_sig catch subtracts it)",
	 "usr1", sig_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	pid_t self;
	int sig;
	int dirty;
	int have_avx;
	enum fpkind kind;
};

static struct state st;
static volatile sig_atomic_t caught;

static void handler(int sig)
{
	(void)sig;
	caught++;
}

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	ctx->priv = s;
	s->self = getpid();
	s->sig = param_is(ctx, "sig", "0") ? 0 : SIGUSR1;
	s->dirty = !param_is(ctx, "state", "clean");
	s->kind = fpkind_parse(param_str(ctx, "state"));
	if (s->dirty && !fpkind_supported(s->kind, ctx->err, sizeof(ctx->err)))
		return BENCH_UNSUPPORTED;
	char why[160];
	s->have_avx = fpkind_supported(FP_AVX, why, sizeof(why));
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0) {
		snprintf(ctx->err, sizeof(ctx->err), "sigaction: %s", strerror(errno));
		return BENCH_FAIL;
	}
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	/* Once per batch, before the loop: the harness's own output between
	 * batches (glibc's vector memcpy ends in vzeroupper) resets it. */
	if (s->dirty)
		fp_load(s->kind);
	else
		fp_clear(s->have_avx);
	OP_LOOP(ctx->spin, iters, kill(s->self, s->sig));
}

static void teardown(struct bench_ctx *ctx)
{
	(void)ctx;
	signal(SIGUSR1, SIG_DFL);
}

const struct bench bench_signal_catch = {
	.name = "signal.catch",
	.summary = "send SIGUSR1 to self, run an empty handler, return (lmbench lat_sig catch)",
	.op = "signal delivered and handled",
	.params = params,
	.setup = setup,
	.run = run,
	.teardown = teardown,
};
