/* `opcost-probe time`: a whole program as the operation, timed like time(1).
 *
 *   opcost-probe time [--samples N] [--warmup N] [--cpu C] [--fake-clock NS [--seed S]]
 *                     [--check] -- PROGRAM [ARGS...]
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
 * op "program run", iters 1 per sample). */
#include "clock.h"
#include "helper.h"
#include "json.h"
#include "probe.h"

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

struct topts {
	long samples, warmup;
	int cpu; /* -1: not pinned */
	double fake_ns;
	unsigned long long seed;
	int check;
	char **prog; /* argv of the program */
};

struct prun {
	uint64_t wall_ns, ticks;
	int64_t user_ns, sys_ns, nvcsw, nivcsw;
	int cpu_before, cpu_after;
};

static int64_t tvns(struct timeval tv)
{
	return (int64_t)tv.tv_sec * 1000000000LL + (int64_t)tv.tv_usec * 1000LL;
}

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

static void run_program(const struct topts *o, struct prun *r)
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
	r->ticks = t1 - t0;
	r->user_ns = tvns(ru.ru_utime);
	r->sys_ns = tvns(ru.ru_stime);
	r->nvcsw = ru.ru_nvcsw;
	r->nivcsw = ru.ru_nivcsw;
}

static void emit_run(long idx, int warm, const struct prun *r)
{
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "sample");
	jb_int(&j, "i", idx);
	jb_bool(&j, "warmup", warm);
	jb_uint(&j, "iters", 1);
	jb_num(&j, "raw_ticks", (double)r->ticks);
	jb_num(&j, "ticks", (double)r->ticks);
	jb_num(&j, "ns", (double)r->wall_ns);
	jb_uint(&j, "wall_ns", r->wall_ns);
	jb_num(&j, "ns_per_op", (double)r->wall_ns);
	jb_num(&j, "tsc_per_op", (double)r->ticks);
	jb_int(&j, "user_ns", r->user_ns);
	jb_int(&j, "sys_ns", r->sys_ns);
	jb_num(&j, "user_ns_per_op", (double)r->user_ns);
	jb_num(&j, "sys_ns_per_op", (double)r->sys_ns);
	jb_int(&j, "nvcsw", r->nvcsw);
	jb_int(&j, "nivcsw", r->nivcsw);
	jb_int(&j, "cpu_before", r->cpu_before);
	jb_int(&j, "cpu_after", r->cpu_after);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
}

static void emit_theader(const struct topts *o, double tsc_hz, int argc, char **argv)
{
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "header");
	jb_str(&j, "schema", "opcost.probe/1");
	jb_str(&j, "probe_version", PROBE_VERSION);
	jb_str(&j, "compiler", "gcc " __VERSION__);
	jb_int(&j, "pid", getpid());
	jb_str(&j, "bench", "program");
	jb_str(&j, "op", "program run");
	jb_obj_begin(&j, "params");
	jb_str(&j, "program", o->prog[0]);
	jb_obj_end(&j);
	jb_arr_begin(&j, "cpus");
	jb_int(&j, NULL, o->cpu >= 0 ? o->cpu : sched_getcpu());
	jb_arr_end(&j);
	jb_bool(&j, "pinned", o->cpu >= 0);
	jb_str(&j, "clock", o->fake_ns > 0 ? "fake" : "monotonic_raw");
	jb_num(&j, "tsc_hz", tsc_hz);
	jb_str(&j, "tsc_hz_source", o->fake_ns > 0 ? "fake clock (2 GHz)"
			 : "calibrated against CLOCK_MONOTONIC_RAW over 20 ms at start-up");
	jb_obj_begin(&j, "overhead");
	jb_num(&j, "clock_ticks", 0);
	jb_num(&j, "loop_ticks_per_iter", 0);
	jb_num(&j, "clock_ns", 0);
	jb_num(&j, "loop_ns_per_iter", 0);
	jb_str(&j, "method", "none subtracted: like time(1), a run includes fork, exec, loading and exit");
	jb_obj_end(&j);
	jb_uint(&j, "iters", 1);
	jb_str(&j, "iters_source", "one program run per sample");
	jb_int(&j, "samples", o->samples);
	jb_int(&j, "warmup", o->warmup);
	jb_bool(&j, "fake_clock", o->fake_ns > 0);
	jb_arr_begin(&j, "counters");
	jb_arr_end(&j);
	jb_arr_begin(&j, "argv");
	for (int i = 0; i < argc; i++)
		jb_str(&j, NULL, argv[i]);
	jb_arr_end(&j);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
}

static void emit_simple(const char *type)
{
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", type);
	jb_str(&j, "status", "ok");
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
}

int cmd_time(int argc, char **argv)
{
	struct topts o = {.samples = 1, .warmup = 0, .cpu = -1};
	int i;
	for (i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		} else if (strcmp(a, "--check") == 0) {
			o.check = 1;
			continue;
		} else if (!v) {
			die(EXIT_USAGE, "time: %s needs a value", a);
		} else if (strcmp(a, "--samples") == 0)
			o.samples = parse_count(a, v, 1);
		else if (strcmp(a, "--warmup") == 0)
			o.warmup = parse_count(a, v, 0);
		else if (strcmp(a, "--cpu") == 0)
			o.cpu = (int)parse_count(a, v, 0);
		else if (strcmp(a, "--seed") == 0)
			o.seed = strtoull(v, NULL, 0);
		else if (strcmp(a, "--fake-clock") == 0) {
			char *end;
			o.fake_ns = strtod(v, &end);
			if (*end || !(o.fake_ns > 0) || o.fake_ns > 1e12)
				die(EXIT_USAGE, "--fake-clock %s: expected the fake cost of one run in ns (0 < NS <= 1e12)", v);
		} else
			die(EXIT_USAGE, "time: unexpected argument '%s' (usage: opcost-probe time [options] -- PROGRAM [ARGS])", a);
		i++;
	}
	if (i >= argc)
		die(EXIT_USAGE, "time: which program? (opcost-probe time [options] -- PROGRAM [ARGS])");
	o.prog = &argv[i];

	pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		return EXIT_FAIL;
	if (o.cpu >= 0) {
		int rc = pin_self(o.cpu); /* the program inherits the affinity */
		if (rc < 0) {
			char c[16];
			snprintf(c, sizeof(c), "%d", o.cpu);
			die(EXIT_USAGE, "--cpu %s: cannot pin there: %s", c, strerror(-rc));
		}
	}
	struct prun r;
	if (o.check) {
		run_program(&o, &r);
		emit_simple("check");
		return EXIT_OK;
	}
	double tsc_hz = o.fake_ns > 0 ? 2e9 : clock_calibrate_hz();
	emit_theader(&o, tsc_hz, argc, argv);
	uint64_t rng = o.seed * 0x9E3779B97F4A7C15ull + 1;
	for (long k = 0; k < o.warmup + o.samples; k++) {
		run_program(&o, &r);
		if (o.fake_ns > 0) {
			/* Deterministic model: fake_ns per run +-1%, a quarter user, three quarters system. */
			double jit = ((double)(xorshift(&rng) % 2001) - 1000.0) / 100000.0;
			double ns = o.fake_ns * (1.0 + jit);
			r.wall_ns = (uint64_t)ns;
			r.ticks = (uint64_t)(ns * tsc_hz / 1e9);
			r.user_ns = (int64_t)(ns * 0.25);
			r.sys_ns = (int64_t)(ns * 0.75);
			r.cpu_before = r.cpu_after = o.cpu >= 0 ? o.cpu : r.cpu_before;
		}
		int warm = k < o.warmup;
		emit_run(warm ? k : k - o.warmup, warm, &r);
	}
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "trailer");
	jb_str(&j, "status", "ok");
	jb_int(&j, "samples", o.samples);
	jb_int(&j, "warmup", o.warmup);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
	return EXIT_OK;
}
