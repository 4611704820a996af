/* syscall.open: open(2) + close(2) of a path (lmbench lat_syscall open). */
#include "../probe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct bench_param params[] = {
	{"path", PT_STR, "file to open read-only and close", "/dev/null", NULL, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

static int setup(struct bench_ctx *ctx)
{
	const char *path = param_str(ctx, "path");
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		snprintf(ctx->err, sizeof(ctx->err), "path=%s cannot be opened: %s", path, strerror(errno));
		return BENCH_BADPARAM;
	}
	close(fd);
	ctx->priv = (void *)path;
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	const char *path = ctx->priv;
	OP_LOOP(ctx->spin, iters, close(open(path, O_RDONLY)));
}

const struct bench bench_syscall_open = {
	.name = "syscall.open",
	.summary = "open(2) + close(2) of a path (default /dev/null)",
	.op = "open+close",
	.params = params,
	.setup = setup,
	.run = run,
};
