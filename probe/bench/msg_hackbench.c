/* msg.hackbench: hackbench (rt-tests) as one operation count. `groups`
 * groups of `fds` senders and `fds` receivers; every sender writes `loops`
 * messages of `size` bytes to each receiver of its group (over a pipe or an
 * AF_UNIX stream socketpair per receiver), every receiver reads
 * fds*loops messages, one message per read (continued after a short read).
 * One iteration is one whole hackbench run, timed as hackbench times it:
 * prepare() (untimed) creates all 2*groups*fds workers (fork, or
 * pthread_create with mode=thread), each of which reports ready on a pipe and
 * waits for the start signal; the timed run() writes the start signal, and
 * waits until every worker has delivered its messages and been reaped.
 * The operation is one message delivered: ns_per_op = run time /
 * (groups*fds*fds*loops); ns_per_iter is the time of the whole run, the
 * figure hackbench prints. Workers die with the probe (PR_SET_PDEATHSIG). */
#include "../probe.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const ipc_choices[] = {"socket", "pipe", NULL};
static const char *const mode_choices[] = {"process", "thread", NULL};
static const char *const workers_choices[] = {"all", "pinned", NULL};

static const struct bench_param params[] = {
	{"groups", PT_INT, "groups of senders and receivers", "10", NULL, 1, 1000},
	{"fds", PT_INT, "senders and receivers per group (each sender talks to every receiver)", "20", NULL, 1, 100},
	{"loops", PT_INT, "messages each sender writes to each receiver", "100", NULL, 1, 1000000},
	{"size", PT_INT, "bytes per message", "100", NULL, 1, 65536},
	{"ipc", PT_ENUM, "one AF_UNIX stream socketpair or one pipe per receiver", "socket", ipc_choices, 0, 0},
	{"mode", PT_ENUM, "workers are forked processes or threads", "process", mode_choices, 0, 0},
	{"workers_on", PT_ENUM, "all: workers may run on every CPU (as hackbench); pinned: on the measuring CPU only",
	 "all", workers_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	int groups, fds, loops, size, thread, pipe, spread;
	cpu_set_t all;     /* workers' affinity with workers_on=all */
	int *rd, *wr;      /* per receiver of the current run: read end, write end */
	pid_t *pids;
	pthread_t *tids;
	struct worker *work;
	char *buf;         /* message data for the senders */
	pid_t parent;
	int ready[2], wake[2]; /* workers report ready on one pipe, wait for a byte on the other */
	int nw;                /* workers started by prepare() for the next run */
	volatile int aborting; /* thread mode: a failed start releases its threads with this set */
	uint64_t failed;
	pthread_attr_t attr;
};

struct worker {
	struct state *s;
	int group, idx, sender;
};

static struct state st;

/* A sender writes `loops` messages to each receiver of its group. */
static int sender(const struct state *s, const int *wr)
{
	for (int l = 0; l < s->loops; l++)
		for (int r = 0; r < s->fds; r++) {
			int left = s->size;
			const char *p = s->buf;
			while (left > 0) {
				ssize_t n = write(wr[r], p, (size_t)left);
				if (n <= 0) {
					if (n < 0 && errno == EINTR)
						continue;
					return -1;
				}
				left -= (int)n;
				p += n;
			}
		}
	return 0;
}

/* A receiver reads its fds*loops messages one message at a time, as
 * hackbench does (a short read is continued until the message is complete),
 * so the count of read(2) calls matches hackbench's. */
static int receiver(const struct state *s, int rd)
{
	char buf[65536];
	long long msgs = (long long)s->fds * s->loops;
	for (long long m = 0; m < msgs; m++) {
		int done = 0;
		while (done < s->size) {
			ssize_t n = read(rd, buf + done, (size_t)(s->size - done));
			if (n <= 0) {
				if (n < 0 && errno == EINTR)
					continue;
				return -1;
			}
			done += (int)n;
		}
	}
	return 0;
}

/* hackbench's barrier: say ready, then wait until the start byte arrives
 * (it is never read, so it wakes every worker). */
static int ready_then_wait(const struct state *s)
{
	char c = 'r';
	if (write(s->ready[1], &c, 1) != 1)
		return -1;
	struct pollfd p = {.fd = s->wake[0], .events = POLLIN};
	for (;;) {
		int n = poll(&p, 1, -1);
		if (n == 1)
			return 0;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

static void *thread_main(void *arg)
{
	struct worker *w = arg;
	const struct state *s = w->s;
	if (ready_then_wait(s) != 0)
		return (void *)1;
	if (s->aborting)
		return NULL;
	int base = w->group * s->fds;
	int rc = w->sender ? sender(s, s->wr + base) : receiver(s, s->rd[base + w->idx]);
	return rc ? (void *)1 : NULL;
}

static void close_group(struct state *s, int g)
{
	for (int r = 0; r < s->fds; r++) {
		int k = g * s->fds + r;
		if (s->rd[k] >= 0)
			close(s->rd[k]);
		if (s->wr[k] >= 0)
			close(s->wr[k]);
		s->rd[k] = s->wr[k] = -1;
	}
}

static int open_group(struct state *s, int g)
{
	for (int r = 0; r < s->fds; r++) {
		int k = g * s->fds + r, fd[2];
		if (s->pipe ? pipe2(fd, O_CLOEXEC) : socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd))
			return -1;
		s->rd[k] = fd[0];
		s->wr[k] = fd[1];
	}
	return 0;
}

static pid_t fork_worker(struct state *s, int g, int idx, int is_sender)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != s->parent)
		_exit(1);
	if (s->spread)
		sched_setaffinity(0, sizeof(s->all), &s->all);
	if (ready_then_wait(s) != 0)
		_exit(1);
	int base = g * s->fds;
	int rc = is_sender ? sender(s, s->wr + base) : receiver(s, s->rd[base + idx]);
	_exit(rc ? 1 : 0);
}

static void close_pair(int fd[2])
{
	for (int k = 0; k < 2; k++)
		if (fd[k] >= 0)
			close(fd[k]);
	fd[0] = fd[1] = -1;
}

/* What a run leaves open: the barrier pipes, and in thread mode the groups'
 * fds (in process mode the workers held their own copies). */
static void close_run(struct state *s)
{
	close_pair(s->ready);
	close_pair(s->wake);
	for (int g = 0; g < s->groups; g++)
		close_group(s, g); /* only thread mode still has them: closed ones are -1 */
}

/* Wait for the first nw workers; -1 if one failed. */
static int reap(struct state *s, int nw)
{
	int bad = 0;
	for (int k = 0; k < nw; k++) {
		if (s->thread) {
			void *ret;
			pthread_join(s->tids[k], &ret);
			bad |= ret != NULL;
		} else {
			int status;
			while (waitpid(s->pids[k], &status, 0) < 0 && errno == EINTR)
				;
			bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
		}
	}
	return bad ? -1 : 0;
}

/* A start that failed part-way: stop the workers already started (processes
 * are killed; threads are released and see EOF on their fds), reap them. */
static void abort_start(struct state *s, int nw)
{
	if (!s->thread)
		for (int k = 0; k < nw; k++)
			kill(s->pids[k], SIGKILL);
	else {
		/* the threads wake at the barrier, see `aborting` and return */
		char c = 'x';
		s->aborting = 1;
		if (write(s->wake[1], &c, 1) != 1)
			die(EXIT_FAIL, "msg.hackbench: cannot release the started threads: %s", strerror(errno));
	}
	reap(s, nw);
	s->aborting = 0;
	close_run(s);
}

/* Untimed: start every worker of the next run and wait until all of them
 * are ready (hackbench's barrier). 0, or -1 with `why` set. */
static int start_workers(struct state *s, char *why, size_t whylen)
{
	close_run(s);
	s->nw = 0;
	if (pipe2(s->ready, O_CLOEXEC) || pipe2(s->wake, O_CLOEXEC)) {
		snprintf(why, whylen, "pipe: %s", strerror(errno));
		close_run(s);
		return -1;
	}
	int nw = 0;
	for (int g = 0; g < s->groups; g++) {
		if (open_group(s, g) < 0) {
			snprintf(why, whylen, "%s: %s", s->pipe ? "pipe" : "socketpair", strerror(errno));
			close_group(s, g);
			abort_start(s, nw);
			return -1;
		}
		for (int k = 0; k < 2 * s->fds; k++) {
			int is_sender = k >= s->fds, idx = k % s->fds;
			int err = 0;
			if (s->thread) {
				struct worker *w = &s->work[nw];
				*w = (struct worker){s, g, idx, is_sender};
				err = pthread_create(&s->tids[nw], &s->attr, thread_main, w);
			} else {
				s->pids[nw] = fork_worker(s, g, idx, is_sender);
				err = s->pids[nw] < 0 ? errno : 0;
			}
			if (err) {
				snprintf(why, whylen, "%s: %s", s->thread ? "pthread_create" : "fork", strerror(err));
				if (!s->thread)
					close_group(s, g);
				abort_start(s, nw);
				return -1;
			}
			nw++;
		}
		if (!s->thread)
			close_group(s, g); /* the workers hold their own copies */
	}
	for (int k = 0; k < nw; k++) {
		char c;
		ssize_t n = read(s->ready[0], &c, 1);
		if (n == 1)
			continue;
		if (n < 0 && errno == EINTR) {
			k--;
			continue;
		}
		snprintf(why, whylen, "a worker did not report ready");
		abort_start(s, nw);
		return -1;
	}
	s->nw = nw;
	return 0;
}

/* Timed: the start signal, then every message delivered and every worker
 * reaped. -1 if a worker failed. */
static int go_and_reap(struct state *s)
{
	char c = 'g';
	int bad = write(s->wake[1], &c, 1) != 1;
	bad |= reap(s, s->nw) != 0;
	s->nw = 0;
	return bad ? -1 : 0;
}

static void release(struct state *s)
{
	if (s->nw)
		abort_start(s, s->nw);
	if (s->rd && s->wr)
		close_run(s);
	free(s->rd);
	free(s->wr);
	free(s->pids);
	free(s->tids);
	free(s->work);
	free(s->buf);
	pthread_attr_destroy(&s->attr);
}

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	memset(s, 0, sizeof(*s));
	ctx->priv = s;
	if (ctx->spin) {
		snprintf(ctx->err, sizeof(ctx->err), "spin= cannot be injected: the messages are sent by worker %s",
			 "processes or threads, not the measuring loop");
		return BENCH_BADPARAM;
	}
	s->groups = (int)param_long(ctx, "groups");
	s->fds = (int)param_long(ctx, "fds");
	s->loops = (int)param_long(ctx, "loops");
	s->size = (int)param_long(ctx, "size");
	s->thread = param_is(ctx, "mode", "thread");
	s->pipe = param_is(ctx, "ipc", "pipe");
	s->parent = getpid();
	s->spread = param_is(ctx, "workers_on", "all");
	CPU_ZERO(&s->all);
	for (int c = 0; c < CPU_SETSIZE; c++)
		CPU_SET(c, &s->all); /* the kernel keeps the CPUs we may use */
	int n = s->groups * s->fds, nw = 2 * n;
	pthread_attr_init(&s->attr);
	pthread_attr_setstacksize(&s->attr, 256 * 1024); /* receivers keep a 64 KiB buffer on the stack */
	if (s->spread && s->thread) {
		/* pthread_attr_setaffinity_np rejects CPUs that do not exist */
		cpu_set_t online;
		CPU_ZERO(&online);
		long n = sysconf(_SC_NPROCESSORS_CONF);
		for (long c = 0; c < n && c < CPU_SETSIZE; c++)
			CPU_SET(c, &online);
		pthread_attr_setaffinity_np(&s->attr, sizeof(online), &online);
	}
	s->rd = malloc(sizeof(int) * (size_t)n);
	s->wr = malloc(sizeof(int) * (size_t)n);
	s->pids = calloc((size_t)nw, sizeof(pid_t));
	s->tids = calloc((size_t)nw, sizeof(pthread_t));
	s->work = calloc((size_t)nw, sizeof(struct worker));
	s->buf = malloc((size_t)s->size);
	if (!s->rd || !s->wr || !s->pids || !s->tids || !s->work || !s->buf) {
		release(s);
		snprintf(ctx->err, sizeof(ctx->err), "out of memory");
		return BENCH_FAIL;
	}
	memset(s->buf, 'h', (size_t)s->size);
	for (int k = 0; k < n; k++)
		s->rd[k] = s->wr[k] = -1;
	/* Each sender holds fds write ends, and in process mode every worker
	 * inherits the open fds of its group: need 2*fds per group at once. */
	/* A trial run with one message per pair finds fd and process limits. */
	for (int k = 0; k < 2; k++)
		s->ready[k] = s->wake[k] = -1;
	s->loops = 1;
	char why[128] = "";
	int trial = start_workers(s, why, sizeof(why));
	if (trial == 0 && go_and_reap(s) != 0) {
		trial = -1;
		snprintf(why, sizeof(why), "a worker failed");
	}
	s->loops = (int)param_long(ctx, "loops");
	if (trial != 0) {
		snprintf(ctx->err, sizeof(ctx->err),
			 "a trial run failed: %s (groups=%d fds=%d: %d workers, %d %s; check ulimit -n and -u)", why,
			 s->groups, s->fds, nw, n, s->pipe ? "pipes" : "socketpairs");
		release(s);
		return BENCH_FAIL;
	}
	ctx->ops_per_iter = (uint64_t)s->groups * (uint64_t)s->fds * (uint64_t)s->fds * (uint64_t)s->loops;
	ctx->iter_desc = "one whole hackbench run from the start signal: every message delivered, every worker reaped";
	ctx->prepare = "start every worker (fork or pthread_create) and wait until all are ready, as hackbench does "
		       "before it starts its clock";
	return BENCH_OK;
}

/* Untimed, before every run: hackbench's set-up. */
static int prepare(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	char why[128];
	if (start_workers(s, why, sizeof(why)) == 0)
		return 0;
	snprintf(ctx->err, sizeof(ctx->err), "cannot start the workers of a run: %s", why);
	return -1;
}

/* One whole run, as the harness calls it after prepare(): iters is 1. */
static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	(void)iters;
	if (go_and_reap(s) != 0)
		s->failed++;
}

static void teardown(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	if (s->failed)
		fprintf(stderr, "opcost-probe: msg.hackbench: %llu runs had a failed worker\n",
			(unsigned long long)s->failed);
	release(s);
}

const struct bench bench_msg_hackbench = {
	.name = "msg.hackbench",
	.flags = BENCH_BLOCKS,
	.summary = "hackbench: groups of senders and receivers exchanging messages over sockets or pipes (rt-tests)",
	.op = "message delivered",
	.params = params,
	.setup = setup,
	.run = run,
	.teardown = teardown,
	.prepare = prepare,
};
