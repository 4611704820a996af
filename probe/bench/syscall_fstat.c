/* syscall.fstat: fstat(2) of an open descriptor (lmbench lat_syscall fstat). */
#include "../probe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct bench_param params[] = {
	{"path", PT_STR, "file to open once and fstat", "/dev/null", NULL, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

static int fd = -1;

static int setup(struct bench_ctx *ctx)
{
	const char *path = param_str(ctx, "path");
	fd = open(path, O_RDONLY);
	if (fd < 0) {
		snprintf(ctx->err, sizeof(ctx->err), "path=%s cannot be opened: %s", path, strerror(errno));
		return BENCH_BADPARAM;
	}
	ctx->priv = &fd;
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	int f = *(int *)ctx->priv;
	struct stat sb;
	OP_LOOP(ctx->spin, iters, {
		int r = fstat(f, &sb);
		__asm__ volatile("" : : "r"(r) : "memory");
	});
}

static void teardown(struct bench_ctx *ctx)
{
	close(*(int *)ctx->priv);
}

const struct bench bench_syscall_fstat = {
	.name = "syscall.fstat",
	.summary = "fstat(2) of an open file (default /dev/null)",
	.op = "fstat call",
	.params = params,
	.setup = setup,
	.run = run,
	.teardown = teardown,
};
