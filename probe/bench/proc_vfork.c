/* proc.vfork: vfork(2) a child that _exit(2)s at once, and reap it. The child
 * borrows the parent's memory, so no page tables are copied: the difference
 * to proc.fork is the cost of copying the address space. One operation is
 * vfork + _exit + waitpid. resident= and mappings= (lib/footprint.c) size
 * the parent, as for proc.fork. */
#include "../probe.h"
#include "../lib/footprint.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static __attribute__((noinline)) pid_t do_vfork(void)
{
	pid_t pid = vfork();
	if (pid == 0)
		_exit(0);
	return pid;
}

static void run_vfork(struct bench_ctx *ctx, uint64_t iters)
{
	OP_LOOP(ctx->spin, iters, {
		pid_t pid = do_vfork();
		if (pid < 0)
			break;
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	});
}

static int setup(struct bench_ctx *ctx)
{
	int rc = footprint_setup(ctx);
	if (rc != BENCH_OK)
		return rc;
	pid_t pid = do_vfork();
	if (pid < 0) {
		snprintf(ctx->err, sizeof(ctx->err), "vfork: %s", strerror(errno));
		footprint_teardown(ctx);
		return BENCH_FAIL;
	}
	waitpid(pid, NULL, 0);
	return BENCH_OK;
}

static const struct bench_param params[] = {FOOTPRINT_PARAMS, {NULL, 0, NULL, NULL, NULL, 0, 0}};

const struct bench bench_proc_vfork = {
	.name = "proc.vfork",
	.flags = BENCH_BLOCKS,
	.summary = "vfork(2) a child that _exit(2)s at once, waitpid(2) it",
	.op = "vfork+exit+wait",
	.params = params,
	.setup = setup,
	.run = run_vfork,
	.teardown = footprint_teardown,
};
