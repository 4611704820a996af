/* ctx.pipe: one byte ping-pong over two pipes between the measuring side and
 * a helper (process or thread), as in seed 000 and perf bench sched pipe.
 * One operation is one round trip: on one CPU, two context switches.
 * fp= makes either side execute one FP/vector instruction per iteration so
 * the switch has live extended state to save and restore. */
#include "../helper.h"
#include "../lib/fpstate.h"
#include "../topology.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *const mode_choices[] = {"process", "thread", NULL};
static const char *const placement_choices[] = PLACEMENT_CHOICES;
static const char *const fp_choices[] = {"none", "parent", "child", "both", NULL};
static const char *const fpkind_choices[] = FPKIND_CHOICES;

static const struct bench_param params[] = {
	{"mode", PT_ENUM, "helper is a forked process or a thread", "process", mode_choices, 0, 0},
	{"placement", PT_ENUM, PLACEMENT_HELP, "same", placement_choices, 0, 0},
	{"fp", PT_ENUM, "which side executes one FP instruction per iteration (parent = measuring side)", "none",
	 fp_choices, 0, 0},
	{"fpkind", PT_ENUM, "the FP instruction: x87 fld1+fstp, sse mulss, avx vmulps ymm, avx512 vmulps zmm, neon fmul",
	 FPKIND_DEFAULT, fpkind_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

static const char *const applies_if[] = {"fpkind:fp!=none", NULL};

struct state {
	int to_helper[2], from_helper[2];
	int parent_fp, child_fp;
	enum fpkind kind;
	struct helper helper;
};

static struct state st;

static void echo(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	char c;
	if (s->child_fp)
		fp_load(s->kind);
	ctx->shm->ready = 1;
	/* read, publish usage if asked (one load), [fp], echo */
	FP_LOOP(0, s->child_fp, s->kind, UINT64_MAX, {
		if (read(s->to_helper[0], &c, 1) != 1)
			return;
		helper_poll_inline(ctx);
		if (write(s->from_helper[1], &c, 1) != 1)
			return;
	});
}

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	memset(s, 0, sizeof(*s));
	ctx->priv = s;
	s->kind = fpkind_parse(param_str(ctx, "fpkind"));
	s->parent_fp = param_is(ctx, "fp", "parent") || param_is(ctx, "fp", "both");
	s->child_fp = param_is(ctx, "fp", "child") || param_is(ctx, "fp", "both");
	if ((s->parent_fp || s->child_fp) && !fpkind_supported(s->kind, ctx->err, sizeof(ctx->err)))
		return BENCH_UNSUPPORTED;
	if (pipe(s->to_helper) || pipe(s->from_helper)) {
		snprintf(ctx->err, sizeof(ctx->err), "pipe: %s", strerror(errno));
		return BENCH_FAIL;
	}
	return helper_start(ctx, &s->helper, param_is(ctx, "mode", "thread"), echo);
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	char c = 'x';
	if (s->parent_fp)
		fp_load(s->kind); /* harness output between batches may have cleared it */
	FP_LOOP(ctx->spin, s->parent_fp, s->kind, iters, {
		if (write(s->to_helper[1], &c, 1) != 1 || read(s->from_helper[0], &c, 1) != 1)
			break;
	});
}

static void sync_helper(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	char c = 's';
	ctx->shm->cmd = 1;
	if (write(s->to_helper[1], &c, 1) == 1)
		(void)!read(s->from_helper[0], &c, 1);
}

static void teardown(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	close(s->to_helper[1]); /* the helper's read returns 0: it ends */
	helper_stop(&s->helper);
	close(s->to_helper[0]);
	close(s->from_helper[0]);
	close(s->from_helper[1]);
}

const struct bench bench_ctx_pipe = {
	.name = "ctx.pipe",
	.summary = "pipe ping-pong between two processes or threads (seed 000, perf bench sched pipe)",
	.op = "round trip",
	.switches = 2,
	.flags = BENCH_HAS_HELPER,
	.params = params,
	.applies_if = applies_if,
	.setup = setup,
	.run = run,
	.sync_helper = sync_helper,
	.teardown = teardown,
};
