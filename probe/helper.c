/* See helper.h. */
#include "helper.h"
#include "cpus.h"

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
#include <unistd.h>

void helper_publish(struct bench_ctx *ctx)
{
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
