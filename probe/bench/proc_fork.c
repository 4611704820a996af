/* proc.fork: create a process that exits at once, and reap it (lmbench
 * lat_proc fork). One operation is fork(2) + the child's _exit(2) +
 * waitpid(2) in the parent: creation and teardown of a copy of the parent.
 * By default the parent is the probe (a small static binary, so few pages to
 * copy); resident= and mappings= (lib/footprint.c) make it bigger. */
#include "../probe.h"
#include "../lib/footprint.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int setup(struct bench_ctx *ctx)
{
	int rc = footprint_setup(ctx);
	if (rc != BENCH_OK)
		return rc;
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(ctx->err, sizeof(ctx->err), "fork: %s", strerror(errno));
		footprint_teardown(ctx);
		return BENCH_FAIL;
	}
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return BENCH_OK;
}

static void run_fork(struct bench_ctx *ctx, uint64_t iters)
{
	OP_LOOP(ctx->spin, iters, {
		pid_t pid = fork();
		if (pid == 0)
			_exit(0);
		if (pid < 0)
			break;
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	});
}

static const struct bench_param params[] = {FOOTPRINT_PARAMS, {NULL, 0, NULL, NULL, NULL, 0, 0}};

const struct bench bench_proc_fork = {
	.name = "proc.fork",
	.flags = BENCH_BLOCKS,
	.summary = "fork(2) a child that _exit(2)s at once, waitpid(2) it (lmbench lat_proc fork)",
	.op = "fork+exit+wait",
	.params = params,
	.setup = setup,
	.run = run_fork,
	.teardown = footprint_teardown,
};
