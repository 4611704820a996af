/* proc.exec: start a new program and reap it (lmbench lat_proc exec). One
 * operation is fork(2) (or vfork(2), via=) + execve of a tiny static program
 * whose _start only calls exit (probe/tiny.S, no libc start-up) + waitpid(2).
 * The program lives in a memfd (lib/tinyexe.c) and is run with fexecve(3)
 * (execveat(fd, "", AT_EMPTY_PATH)): no file on disk. resident= and
 * mappings= (lib/footprint.c) size the parent that forks. prog=PATH runs
 * that program instead (argv {PATH}, empty environment, stdout closed in the
 * child first, as lmbench lat_proc exec runs its dynamically linked hello):
 * what loading a real program adds. */
#include "../probe.h"
#include "../lib/footprint.h"
#include "../lib/tinyexe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const via_choices[] = {"fork", "vfork", NULL};

static const struct bench_param params[] = {
	{"via", PT_ENUM, "create the child with fork(2) or vfork(2), then fexecve the tiny program", "fork", via_choices,
	 0, 0},
	{"prog", PT_STR,
	 "tiny: the embedded tiny static program; else the path of a program to execute (argv {PATH}, empty "
	 "environment, stdout closed in the child, as lmbench lat_proc exec runs /tmp/hello); it must exit 0",
	 "tiny", NULL, 0, 0},
	FOOTPRINT_PARAMS,
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	int fd, use_vfork, close_stdout;
	char path[64];
	uint64_t failed;
};

static struct state st;
static char *child_argv[] = {"opcost-tiny", NULL};
static char *const child_envp[] = {NULL};

static __attribute__((noinline)) pid_t start(const struct state *s)
{
	pid_t pid = s->use_vfork ? vfork() : fork();
	if (pid == 0) {
		if (s->close_stdout)
			close(1);
		fexecve(s->fd, child_argv, child_envp);
		_exit(127);
	}
	return pid;
}

/* 0: the program ran and exited 0; else -1 (child status in *status). */
static int one(struct state *s, int *status)
{
	pid_t pid = start(s);
	if (pid < 0)
		return -1;
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
	s->use_vfork = param_is(ctx, "via", "vfork");
	int rc = footprint_setup(ctx);
	if (rc != BENCH_OK)
		return rc;
	const char *prog = param_str(ctx, "prog");
	if (strcmp(prog, "tiny") != 0) {
		s->close_stdout = 1;
		child_argv[0] = (char *)prog;
		s->fd = open(prog, O_RDONLY | O_CLOEXEC);
		if (s->fd < 0) {
			snprintf(ctx->err, sizeof(ctx->err), "prog=%s cannot be opened: %s", prog, strerror(errno));
			footprint_teardown(ctx);
			return BENCH_BADPARAM;
		}
	} else {
		child_argv[0] = "opcost-tiny";
		s->fd = tinyexe_open(s->path, sizeof(s->path), ctx->err, sizeof(ctx->err));
		if (s->fd < 0) {
			footprint_teardown(ctx);
			return BENCH_UNSUPPORTED;
		}
	}
	int status = 0;
	if (one(s, &status) != 0) {
		if (s->close_stdout) {
			snprintf(ctx->err, sizeof(ctx->err), "prog=%s did not run and exit 0 (wait status 0x%x; 127: exec failed)",
				 prog, status);
			close(s->fd);
			footprint_teardown(ctx);
			return BENCH_BADPARAM;
		}
		snprintf(ctx->err, sizeof(ctx->err),
			 "the tiny program in a memfd cannot be executed (wait status 0x%x; 127: exec failed: vm.memfd_noexec, or a foreign architecture without binfmt_misc)",
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
		fprintf(stderr, "opcost-probe: proc.exec: %llu executions failed\n", (unsigned long long)s->failed);
}

const struct bench bench_proc_exec = {
	.name = "proc.exec",
	.flags = BENCH_BLOCKS,
	.summary = "fork (or vfork) + execve of a tiny static program + waitpid (lmbench lat_proc exec)",
	.op = "fork+exec+exit+wait",
	.params = params,
	.setup = setup,
	.run = run,
	.teardown = teardown,
};
