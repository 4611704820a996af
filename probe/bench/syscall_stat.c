/* syscall.stat: stat(2) of a path (lmbench lat_syscall stat): path lookup. */
#include "../probe.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static const struct bench_param params[] = {
	{"path", PT_STR, "file to stat", "/dev/null", NULL, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

static int setup(struct bench_ctx *ctx)
{
	struct stat sb;
	const char *path = param_str(ctx, "path");
	if (stat(path, &sb) != 0) {
		snprintf(ctx->err, sizeof(ctx->err), "path=%s cannot be stat'ed: %s", path, strerror(errno));
		return BENCH_BADPARAM;
	}
	ctx->priv = (void *)path;
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	const char *path = ctx->priv;
	struct stat sb;
	OP_LOOP(ctx->spin, iters, {
		int r = stat(path, &sb);
		__asm__ volatile("" : : "r"(r) : "memory");
	});
}

const struct bench bench_syscall_stat = {
	.name = "syscall.stat",
	.summary = "stat(2) of a path (default /dev/null)",
	.op = "stat call",
	.params = params,
	.setup = setup,
	.run = run,
};
