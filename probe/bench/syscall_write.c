/* syscall.write: write(2) of one byte to /dev/null (lmbench lat_syscall write). */
#include "../probe.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

static const struct bench_param params[] = {{NULL, 0, NULL, NULL, NULL, 0, 0}};

struct state {
	int fd;
};

static struct state st;

static int setup(struct bench_ctx *ctx)
{
	st.fd = open("/dev/null", O_WRONLY);
	if (st.fd < 0) {
		snprintf(ctx->err, sizeof(ctx->err), "open /dev/null: %s", strerror(errno));
		return BENCH_FAIL;
	}
	ctx->priv = &st;
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	char c = 0;
	OP_LOOP(ctx->spin, iters, {
		ssize_t r = write(s->fd, &c, 1);
		__asm__ volatile("" : : "r"(r));
	});
}

static void teardown(struct bench_ctx *ctx)
{
	close(((struct state *)ctx->priv)->fd);
}

const struct bench bench_syscall_write = {
	.name = "syscall.write",
	.summary = "write(2) of 1 byte to /dev/null",
	.op = "write call",
	.params = params,
	.setup = setup,
	.run = run,
	.teardown = teardown,
};
