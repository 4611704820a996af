/* ctx.futex: two tasks handing a turn to each other through a futex word
 * (perf bench sched messaging has no futex; this is the bare wake/wait pair
 * under a mutex/condvar). The measuring side sets turn=1 and FUTEX_WAKEs the
 * helper, then FUTEX_WAITs until the helper has set turn=0 and woken it.
 * One operation is one round trip: two wakes, on one CPU two switches.
 * mode=thread uses private futexes; mode=process a shared page. */
#include "../helper.h"
#include "../topology.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *const mode_choices[] = {"thread", "process", NULL};
static const char *const placement_choices[] = PLACEMENT_CHOICES;

static const struct bench_param params[] = {
	{"mode", PT_ENUM, "helper is a thread (private futex) or a forked process (shared futex)", "thread",
	 mode_choices, 0, 0},
	{"placement", PT_ENUM, PLACEMENT_HELP, "same", placement_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	volatile int *turn; /* 0: the measuring side's turn, 1: the helper's */
	int wait_op, wake_op;
	struct helper helper;
};

static struct state st;

static inline void fwait(struct state *s, int val)
{
	syscall(SYS_futex, s->turn, s->wait_op, val, NULL, NULL, 0);
}

static inline void fwake(struct state *s)
{
	syscall(SYS_futex, s->turn, s->wake_op, 1, NULL, NULL, 0);
}

static void partner(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	ctx->shm->ready = 1;
	for (;;) {
		while (__atomic_load_n(s->turn, __ATOMIC_ACQUIRE) != 1)
			fwait(s, 0);
		helper_poll_inline(ctx);
		if (ctx->shm->stop)
			return;
		__atomic_store_n(s->turn, 0, __ATOMIC_RELEASE);
		fwake(s);
	}
}

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	memset(s, 0, sizeof(*s));
	ctx->priv = s;
	int thread = param_is(ctx, "mode", "thread");
	s->turn = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s->turn == MAP_FAILED) {
		snprintf(ctx->err, sizeof(ctx->err), "mmap: %s", strerror(errno));
		return BENCH_FAIL;
	}
	s->wait_op = thread ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT;
	s->wake_op = thread ? FUTEX_WAKE_PRIVATE : FUTEX_WAKE;
	if (syscall(SYS_futex, s->turn, s->wake_op, 1, NULL, NULL, 0) < 0) {
		snprintf(ctx->err, sizeof(ctx->err), "futex(FUTEX_WAKE): %s", strerror(errno));
		munmap((void *)s->turn, 4096);
		return errno == ENOSYS ? BENCH_UNSUPPORTED : BENCH_FAIL;
	}
	int rc = helper_start(ctx, &s->helper, thread, partner);
	if (rc != BENCH_OK)
		munmap((void *)s->turn, 4096);
	return rc;
}

static inline void round_trip(struct state *s)
{
	__atomic_store_n(s->turn, 1, __ATOMIC_RELEASE);
	fwake(s);
	while (__atomic_load_n(s->turn, __ATOMIC_ACQUIRE) != 0)
		fwait(s, 1);
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	OP_LOOP(ctx->spin, iters, round_trip(s));
}

static void sync_helper(struct bench_ctx *ctx)
{
	ctx->shm->cmd = 1;
	round_trip(ctx->priv);
}

static void teardown(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	ctx->shm->stop = 1;
	__atomic_store_n(s->turn, 1, __ATOMIC_RELEASE);
	fwake(s);
	helper_stop(&s->helper);
	munmap((void *)s->turn, 4096);
}

const struct bench bench_ctx_futex = {
	.name = "ctx.futex",
	.summary = "two threads (or processes) waking each other through one futex word: FUTEX_WAKE + FUTEX_WAIT",
	.op = "round trip",
	.switches = 2,
	.flags = BENCH_HAS_HELPER,
	.params = params,
	.setup = setup,
	.run = run,
	.sync_helper = sync_helper,
	.teardown = teardown,
};
