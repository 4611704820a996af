/* epoll.wait: epoll_wait(2) on an epoll set whose one fd (an eventfd with a
 * non-zero count, level-triggered EPOLLIN) is always ready. One operation is
 * one epoll_wait call returning that one event: the ready-list walk and
 * re-poll of a level-triggered fd, no sleep. */
#include "../probe.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>


static const struct bench_param params[] = {
	{"fds", PT_INT, "fds in the set (one ready, the others idle eventfds)", "1", NULL, 1, 1000},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	int ep;
	int fds[1000];
	int nfds;
	uint64_t bad;
};

static struct state st;

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	memset(s, 0, sizeof(*s));
	ctx->priv = s;
	s->ep = epoll_create1(EPOLL_CLOEXEC);
	if (s->ep < 0) {
		snprintf(ctx->err, sizeof(ctx->err), "epoll_create1: %s", strerror(errno));
		return errno == ENOSYS ? BENCH_UNSUPPORTED : BENCH_FAIL;
	}
	int n = (int)param_long(ctx, "fds");
	for (int i = 0; i < n; i++) {
		int fd = eventfd(i == 0 ? 1 : 0, EFD_CLOEXEC | EFD_NONBLOCK);
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
		if (fd < 0 || epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
			snprintf(ctx->err, sizeof(ctx->err), "eventfd/epoll_ctl #%d: %s", i, strerror(errno));
			if (fd >= 0)
				close(fd);
			for (int k = 0; k < s->nfds; k++)
				close(s->fds[k]);
			close(s->ep);
			return errno == EMFILE ? BENCH_BADPARAM : BENCH_FAIL;
		}
		s->fds[s->nfds++] = fd;
	}
	struct epoll_event ev;
	if (epoll_wait(s->ep, &ev, 1, 0) != 1) {
		snprintf(ctx->err, sizeof(ctx->err), "epoll_wait did not report the ready eventfd");
		return BENCH_FAIL;
	}
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	struct epoll_event ev;
	OP_LOOP(ctx->spin, iters, {
		if (epoll_wait(s->ep, &ev, 1, 0) != 1)
			s->bad++;
	});
}

static void teardown(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	for (int k = 0; k < s->nfds; k++)
		close(s->fds[k]);
	close(s->ep);
	if (s->bad)
		fprintf(stderr, "opcost-probe: epoll.wait: %llu calls returned no event\n", (unsigned long long)s->bad);
}

const struct bench bench_epoll_wait = {
	.name = "epoll.wait",
	.summary = "epoll_wait(2) with timeout 0 returning one ready (level-triggered) eventfd",
	.op = "epoll_wait",
	.params = params,
	.setup = setup,
	.run = run,
	.teardown = teardown,
};
