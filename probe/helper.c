/* See helper.h. */
#include "helper.h"
#include "cpus.h"
#include "emit.h"

#include <fcntl.h>
#include <sys/syscall.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int sched_open(char *err, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%ld/schedstat", (long)syscall(SYS_gettid));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, len, "%s: %s (a kernel without CONFIG_SCHED_INFO, or /proc not mounted)", path,
			 strerror(errno));
		return -1;
	}
	struct sched_times t;
	if (sched_read(fd, &t) < 0) {
		snprintf(err, len, "%s: not in the expected form (run ns, run delay ns, timeslices)", path);
		close(fd);
		return -1;
	}
	return fd;
}

int sched_read(int fd, struct sched_times *out)
{
	char buf[128];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	long long run, delay;
	if (sscanf(buf, "%lld %lld", &run, &delay) != 2)
		return -1;
	/* schedstat's run time of a running thread is only as fresh as its last
	 * tick; the thread's own CPU clock is exact */
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
		run = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
	out->run_ns = run;
	out->delay_ns = delay;
	return 0;
}

/* The helper thread's own schedstat fd, opened on its first publish (a
 * helper process or thread of its own: thread-local). -2: not yet tried. */
static __thread int helper_sched_fd = -2;

void helper_publish(struct bench_ctx *ctx)
{
	if (helper_sched_fd == -2) {
		char err[160];
		helper_sched_fd = sched_open(err, sizeof(err));
	}
	struct sched_times st;
	if (helper_sched_fd >= 0 && sched_read(helper_sched_fd, &st) == 0) {
		ctx->shm->run_ns = st.run_ns;
		ctx->shm->delay_ns = st.delay_ns;
		ctx->shm->sched_valid = 1;
	}
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	ctx->shm->user_ns = tv_ns(ru.ru_utime);
	ctx->shm->sys_ns = tv_ns(ru.ru_stime);
	ctx->shm->nvcsw = ru.ru_nvcsw;
	ctx->shm->nivcsw = ru.ru_nivcsw;
	ctx->shm->cpu = sched_getcpu();
	ctx->shm->valid = 1;
	__atomic_store_n(&ctx->shm->cmd, 0, __ATOMIC_RELEASE);
}

static pid_t spawn_process(int cpu, void (*fn)(struct bench_ctx *), struct bench_ctx *ctx)
{
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	/* Die with the probe, even when it is killed with SIGKILL; and close the
	 * race where the probe died before prctl took effect. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	if (pin_self(cpu) != 0)
		_exit(3);
	ctx->shm->tid = (int)syscall(SYS_gettid);
	ctx->shm->cpu = sched_getcpu();
	fn(ctx);
	_exit(0);
}

static void reap_process(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

struct thread_start {
	int cpu;
	void (*fn)(struct bench_ctx *);
	struct bench_ctx *ctx;
};

static void *thread_main(void *arg)
{
	struct thread_start st = *(struct thread_start *)arg;
	free(arg);
	if (pin_self(st.cpu) == 0) {
		st.ctx->shm->tid = (int)syscall(SYS_gettid);
		st.ctx->shm->cpu = sched_getcpu();
		st.fn(st.ctx);
	}
	return NULL;
}

static int spawn_thread(unsigned long *tid, int cpu, void (*fn)(struct bench_ctx *), struct bench_ctx *ctx)
{
	struct thread_start *st = malloc(sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->cpu = cpu;
	st->fn = fn;
	st->ctx = ctx;
	pthread_t t;
	int rc = pthread_create(&t, NULL, thread_main, st);
	if (rc != 0) {
		free(st);
		return -rc;
	}
	*tid = (unsigned long)t;
	return 0;
}

int helper_start(struct bench_ctx *ctx, struct helper *h, int thread, void (*fn)(struct bench_ctx *))
{
	memset(h, 0, sizeof(*h));
	h->thread = thread;
	if (thread) {
		int rc = spawn_thread(&h->tid, helper_cpu(ctx), fn, ctx);
		if (rc) {
			snprintf(ctx->err, sizeof(ctx->err), "pthread_create: %s", strerror(-rc));
			return BENCH_FAIL;
		}
	} else {
		h->pid = spawn_process(helper_cpu(ctx), fn, ctx);
		if (h->pid < 0) {
			snprintf(ctx->err, sizeof(ctx->err), "fork: %s", strerror(errno));
			return BENCH_FAIL;
		}
	}
	while (!ctx->shm->ready)
		sched_yield();
	return BENCH_OK;
}

void helper_stop(struct helper *h)
{
	if (h->thread)
		pthread_join((pthread_t)h->tid, NULL);
	else
		reap_process(h->pid);
}
