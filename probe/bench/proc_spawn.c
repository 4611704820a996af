/* proc.spawn: posix_spawn(3) of a tiny static program + waitpid(2). glibc
 * spawns with clone(CLONE_VM|CLONE_VFORK), so no address space is copied.
 * The program (probe/tiny.S: _start calls exit) lives in a memfd, spawned
 * through its /proc/self/fd/N path (lib/tinyexe.c). One operation is the
 * spawn, the program's exec and exit, and the wait. resident= and mappings=
 * (lib/footprint.c) size the parent: with no copy, they should matter
 * little (compare proc.fork). */
#include "../probe.h"
#include "../lib/footprint.h"
#include "../lib/tinyexe.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct state {
	int fd;
	char path[64];
	uint64_t failed;
};

static struct state st;
static char *const child_argv[] = {"opcost-tiny", NULL};
static char *const child_envp[] = {NULL};

static int one(struct state *s, int *status)
{
	pid_t pid;
	int rc = posix_spawn(&pid, s->path, NULL, NULL, child_argv, child_envp);
	if (rc != 0) {
		*status = -rc; /* the spawn itself failed: -errno */
		return -1;
	}
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(*status) && WEXITSTATUS(*status) == 0 ? 0 : -1;
}

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	memset(s, 0, sizeof(*s));
	ctx->priv = s;
	int rc = footprint_setup(ctx);
	if (rc != BENCH_OK)
		return rc;
	s->fd = tinyexe_open(s->path, sizeof(s->path), ctx->err, sizeof(ctx->err));
	if (s->fd < 0) {
		footprint_teardown(ctx);
		return BENCH_UNSUPPORTED;
	}
	int status = 0;
	if (one(s, &status) != 0) {
		if (status < 0)
			snprintf(ctx->err, sizeof(ctx->err), "posix_spawn(%s): %s", s->path, strerror(-status));
		else
			snprintf(ctx->err, sizeof(ctx->err),
				 "the tiny program spawned from %s did not exit 0 (wait status 0x%x; 127: exec failed)", s->path,
				 status);
		close(s->fd);
		footprint_teardown(ctx);
		return BENCH_UNSUPPORTED;
	}
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	int status;
	OP_LOOP(ctx->spin, iters, {
		if (one(s, &status) != 0)
			s->failed++;
	});
}

static void teardown(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	close(s->fd);
	footprint_teardown(ctx);
	if (s->failed)
		fprintf(stderr, "opcost-probe: proc.spawn: %llu spawns failed\n", (unsigned long long)s->failed);
}

static const struct bench_param params[] = {FOOTPRINT_PARAMS, {NULL, 0, NULL, NULL, NULL, 0, 0}};

const struct bench bench_proc_spawn = {
	.name = "proc.spawn",
	.flags = BENCH_BLOCKS,
	.summary = "posix_spawn(3) of a tiny static program + waitpid (vfork-style clone, no page-table copy)",
	.op = "spawn+exec+exit+wait",
	.params = params,
	.setup = setup,
	.run = run,
	.teardown = teardown,
};
