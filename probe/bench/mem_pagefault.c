/* mem.pagefault: minor page faults on fresh anonymous memory (lmbench
 * lat_pagefault's anonymous cousin; will-it-scale page_fault1). One iteration
 * maps `size` bytes (MAP_PRIVATE|MAP_ANONYMOUS), touches one byte per page,
 * and unmaps; one operation is one page: its fault (page allocation and
 * zeroing for access=write, the shared zero page for access=read), plus its
 * share of the mmap/munmap and of freeing the page. Transparent huge pages
 * are off for the mapping unless thp=yes (then most faults map 2 MiB). */
#include "../probe.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *const access_choices[] = {"write", "read", NULL};
static const char *const thp_choices[] = {"no", "yes", NULL};

static const struct bench_param params[] = {
	{"size", PT_INT, "bytes mapped and faulted per iteration (rounded up to pages)", "4194304", NULL, 4096,
	 1L << 30},
	{"access", PT_ENUM, "write: allocate and zero a page; read: map the shared zero page", "write", access_choices,
	 0, 0},
	{"thp", PT_ENUM, "no: MADV_NOHUGEPAGE on the mapping; yes: MADV_HUGEPAGE", "no", thp_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	size_t len, page, pages;
	int write, advice;
	uint64_t failed;
};

static struct state st;

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	memset(s, 0, sizeof(*s));
	ctx->priv = s;
	s->page = (size_t)sysconf(_SC_PAGESIZE);
	s->len = ((size_t)param_long(ctx, "size") + s->page - 1) / s->page * s->page;
	s->pages = s->len / s->page;
	s->write = param_is(ctx, "access", "write");
	s->advice = param_is(ctx, "thp", "yes") ? MADV_HUGEPAGE : MADV_NOHUGEPAGE;
	void *p = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		snprintf(ctx->err, sizeof(ctx->err), "mmap of %zu bytes: %s", s->len, strerror(errno));
		return BENCH_FAIL;
	}
	if (madvise(p, s->len, s->advice) != 0 && s->advice == MADV_HUGEPAGE) {
		snprintf(ctx->err, sizeof(ctx->err), "thp=yes: madvise(MADV_HUGEPAGE): %s", strerror(errno));
		munmap(p, s->len);
		return BENCH_UNSUPPORTED;
	}
	munmap(p, s->len);
	ctx->ops_per_iter = s->pages;
	ctx->iter_desc = "mmap + one fault per page + munmap";
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	for (uint64_t it = 0; it < iters; it++) {
		char *p = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) {
			s->failed++;
			break;
		}
		madvise(p, s->len, s->advice); /* on a fresh VMA: no pages yet */
		volatile char *q = p;
		size_t page = s->page;
		if (s->write) {
			OP_LOOP(ctx->spin, s->pages, q[i_ * page] = 1);
		} else {
			OP_LOOP(ctx->spin, s->pages, (void)q[i_ * page]);
		}
		munmap(p, s->len);
	}
}

static void teardown(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	if (s->failed)
		fprintf(stderr, "opcost-probe: mem.pagefault: %llu mmaps failed\n", (unsigned long long)s->failed);
}

const struct bench bench_mem_pagefault = {
	.name = "mem.pagefault",
	.summary = "minor page fault per page of fresh anonymous memory (mmap, touch each page, munmap)",
	.op = "page faulted",
	.params = params,
	.setup = setup,
	.run = run,
	.teardown = teardown,
};
