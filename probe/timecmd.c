/* `opcost-probe time`: a whole program as the operation, timed like time(1).
 *
 *   opcost-probe time [--samples N] [--warmup N] [--cpu C] [--fake-clock NS [--seed S]]
 *                     [--ops N] [--check] -- PROGRAM [ARGS...]
 *
 * One sample = one run of PROGRAM: fork, exec, wait4. Elapsed time is read with
 * CLOCK_MONOTONIC_RAW (and the TSC) from just before fork() to just after
 * wait4() returns, so it includes process creation, exec, loading and exit,
 * as `time` does; user and system time come from wait4's rusage of the
 * program (and whatever children it reaped). Nothing is subtracted.
 * The program's stdin and stdout are /dev/null; its stderr goes to an
 * anonymous memfd so the end of it can be shown when it fails. A non-zero
 * exit or a signal is a failure (exit 1), reported with the status.
 * --check runs the program once, untimed, and prints a "check" line: the
 * Python side uses it to fail before anything is measured. Output: the
 * probe's usual header / sample / trailer JSON lines (schema opcost.probe/1,
 * op "program run", iters 1 per sample). --ops N says one run performs N
 * operations (the user's loop count): the samples' per-op figures are then a
 * run's divided by N, the header says ops_per_iter N, and the run's fixed
 * costs (fork, exec, loading, exit) are spread over the N operations. */
#include "timecmd.h"
#include "clock.h"
#include "cpus.h"
#include "emit.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* `time`'s operation, described as a benchmark's is, so that emit.c writes
 * this command's lines as it writes `run`'s. It is in no table: nothing runs
 * it. */
static const struct bench_param program_params[] = {
	{"program", PT_STR, "the program run", NULL, NULL, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};
static const struct bench program_bench = {
	.name = "program",
	.summary = "a whole program, run like time(1)",
	.op = "program run",
	.params = program_params,
};
/* With --ops N: the operation is one of the N a run performs. */
static const struct bench program_ops_bench = {
	.name = "program",
	.summary = "a whole program, run like time(1), performing --ops operations per run",
	.op = "operation (program run / --ops)",
	.params = program_params,
};

/* The last line of what the program wrote to stderr, for the failure line. */
static void stderr_tail(int fd, char *out, size_t len)
{
	out[0] = '\0';
	off_t size = lseek(fd, 0, SEEK_END);
	if (size <= 0)
		return;
	char buf[512];
	off_t from = size > (off_t)sizeof(buf) - 1 ? size - (off_t)sizeof(buf) + 1 : 0;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, from);
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	char *line = strrchr(buf, '\n');
	snprintf(out, len, "%s", line ? line + 1 : buf);
}

static void run_program(const struct time_opts *o, struct batch *r)
{
	int errfd = memfd_create("opcost-program-stderr", MFD_CLOEXEC);
	if (errfd < 0)
		die(EXIT_FAIL, "memfd_create: %s", strerror(errno));
	int execpipe[2]; /* reports an exec failure; closed by a successful exec */
	if (pipe2(execpipe, O_CLOEXEC) != 0)
		die(EXIT_FAIL, "pipe: %s", strerror(errno));
	pid_t parent = getpid();

	r->cpu_before = sched_getcpu();
	uint64_t w0 = mono_raw_ns();
	uint64_t t0 = clock_start();
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* kept across exec: dies with the probe */
		if (getppid() != parent)
			_exit(127);
		int nul = open("/dev/null", O_RDWR);
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0 || dup2(errfd, 2) < 0)
			_exit(127);
		/* A path runs as it is: execvp would hand a binary the kernel cannot
		 * run (ENOEXEC: another architecture) to /bin/sh, whose "Syntax
		 * error" hides the reason; execv reports "Exec format error". */
		if (strchr(o->prog[0], '/'))
			execv(o->prog[0], o->prog);
		else
			execvp(o->prog[0], o->prog);
		int e = errno;
		if (write(execpipe[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	if (pid < 0)
		die(EXIT_FAIL, "fork: %s", strerror(errno));
	int status;
	struct rusage ru;
	pid_t w;
	do
		w = wait4(pid, &status, 0, &ru);
	while (w < 0 && errno == EINTR);
	uint64_t t1 = clock_end();
	uint64_t w1 = mono_raw_ns();
	r->cpu_after = sched_getcpu();
	if (w < 0)
		die(EXIT_FAIL, "wait4: %s", strerror(errno));

	close(execpipe[1]);
	int e = 0;
	if (read(execpipe[0], &e, sizeof(e)) == (ssize_t)sizeof(e))
		die(EXIT_FAIL, "cannot run %s: %s", o->prog[0], strerror(e));
	close(execpipe[0]);

	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char tail[512], what[96];
		stderr_tail(errfd, tail, sizeof(tail));
		if (WIFSIGNALED(status))
			snprintf(what, sizeof(what), "was killed by signal %d (%s)", WTERMSIG(status),
				 strsignal(WTERMSIG(status)));
		else
			snprintf(what, sizeof(what), "exited with status %d", WEXITSTATUS(status));
		fprintf(stderr, "opcost-probe: program %s %s%s%s\n", o->prog[0], what, tail[0] ? "; its stderr ends: " : "",
			tail);
		exit(EXIT_FAIL);
	}
	close(errfd);
	r->wall_ns = w1 - w0;
	r->raw_ticks = r->net_ticks = (double)(t1 - t0);
	r->self = (struct usage){tv_ns(ru.ru_utime), tv_ns(ru.ru_stime), ru.ru_nvcsw, ru.ru_nivcsw};
}

int time_run(const struct time_opts *o, int argc, char **argv)
{
	if (o->cpu >= 0) {
		int rc = pin_self(o->cpu); /* the program inherits the affinity */
		if (rc < 0) {
			char c[16];
			snprintf(c, sizeof(c), "%d", o->cpu);
			die(EXIT_USAGE, "--cpu %s: cannot pin there: %s", c, strerror(-rc));
		}
	}
	struct batch r;
	if (o->check) {
		run_program(o, &r);
		emit_check(NULL);
		return EXIT_OK;
	}
	double tsc_hz = o->fake_ns > 0 ? 2e9 : clock_calibrate_hz();
	struct bench_ctx ctx = {.b = o->ops ? &program_ops_bench : &program_bench, .values = {o->prog[0]}};
	ctx.cpus[0] = o->cpu >= 0 ? o->cpu : sched_getcpu();
	ctx.ops_per_iter = o->ops;
	ctx.iter_desc = "program run";
	struct run_info ri = {
		.ctx = &ctx,
		.pinned = o->cpu >= 0,
		.clock = o->fake_ns > 0 ? "fake" : "monotonic_raw",
		.tsc_hz = tsc_hz,
		.fake = o->fake_ns > 0,
		.loop_subtracted = -1,
		.overhead_method = "none subtracted: like time(1), a run includes fork, exec, loading and exit",
		.iters = 1,
		.iters_source = "one program run per sample",
		.samples = o->samples,
		.warmup = o->warmup,
	};
	emit_header(&ri, argc, argv);
	uint64_t rng = o->seed * 0x9E3779B97F4A7C15ull + 1;
	for (long k = 0; k < o->warmup + o->samples; k++) {
		memset(&r, 0, sizeof(r));
		r.iters = r.executed = 1;
		r.steal = -1;
		run_program(o, &r);
		if (o->fake_ns > 0) {
			/* Deterministic model: fake_ns per run +-1%, a quarter user, three quarters system. */
			double jit = ((double)(xorshift(&rng) % 2001) - 1000.0) / 100000.0;
			double ns = o->fake_ns * (1.0 + jit);
			r.wall_ns = (uint64_t)ns;
			r.raw_ticks = r.net_ticks = (double)(uint64_t)(ns * tsc_hz / 1e9);
			r.self.user_ns = (int64_t)(ns * 0.25);
			r.self.sys_ns = (int64_t)(ns * 0.75);
			r.cpu_before = r.cpu_after = o->cpu >= 0 ? o->cpu : r.cpu_before;
		}
		r.ns = (double)r.wall_ns; /* like time(1): nothing subtracted */
		int warm = k < o->warmup;
		emit_sample(&ri, warm ? k : k - o->warmup, warm, &r);
	}
	emit_trailer(o->samples, o->warmup);
	return EXIT_OK;
}
