/* thread.create: pthread_create(3) a thread that returns at once, and
 * pthread_join(3) it. One operation is create + the thread's start and exit +
 * join (glibc caches thread stacks, so after the first, no mmap). */
#include "../probe.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const struct bench_param params[] = {
	{"stack", PT_INT, "thread stack size in KiB (0: the default)", "0", NULL, 0, 1 << 20},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	pthread_attr_t attr;
	uint64_t failed;
};

static struct state st;

static void *nothing(void *arg) { return arg; }

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	memset(s, 0, sizeof(*s));
	ctx->priv = s;
	pthread_attr_init(&s->attr);
	long kib = param_long(ctx, "stack");
	if (kib) {
		int rc = pthread_attr_setstacksize(&s->attr, (size_t)kib * 1024);
		if (rc) {
			snprintf(ctx->err, sizeof(ctx->err), "stack=%ld KiB: %s (at least %ld KiB)", kib, strerror(rc),
				 (long)PTHREAD_STACK_MIN / 1024);
			pthread_attr_destroy(&s->attr);
			return BENCH_BADPARAM;
		}
	}
	pthread_t t;
	int rc = pthread_create(&t, &s->attr, nothing, NULL);
	if (rc) {
		snprintf(ctx->err, sizeof(ctx->err), "pthread_create: %s", strerror(rc));
		pthread_attr_destroy(&s->attr);
		return BENCH_FAIL;
	}
	pthread_join(t, NULL);
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	OP_LOOP(ctx->spin, iters, {
		pthread_t t;
		if (pthread_create(&t, &s->attr, nothing, NULL) != 0) {
			s->failed++;
			break;
		}
		pthread_join(t, NULL);
	});
}

static void teardown(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	pthread_attr_destroy(&s->attr);
}

const struct bench bench_thread_create = {
	.name = "thread.create",
	.flags = BENCH_BLOCKS,
	.summary = "pthread_create(3) a thread that returns at once + pthread_join(3)",
	.op = "create+exit+join",
	.params = params,
	.setup = setup,
	.run = run,
	.teardown = teardown,
};
