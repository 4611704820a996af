/* mem.touch: minor page faults on a file mapping whose pages are already in
 * the page cache (lmbench lat_pagefault). Setup writes `size` bytes to a
 * memfd (shmem) or an unnamed O_TMPFILE file in $TMPDIR (or /tmp); one
 * iteration maps it (MAP_SHARED, read-only), reads one byte per page and
 * unmaps. One operation is one page: its fault, which maps the cached page
 * (no allocation, no zeroing), with its share of mmap/munmap. The kernel's
 * fault-around maps up to fault_around_bytes (64 KiB) of cached neighbours
 * per fault, so most pages may cost no fault of their own: that is the cost
 * a program reading a cached file sees. */
#include "../probe.h"
#include "../lib/cachedfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *const backing_choices[] = CACHEDFILE_CHOICES;

static const struct bench_param params[] = {
	{"size", PT_INT, "bytes of the file mapped and touched per iteration (rounded up to pages)", "4194304", NULL,
	 4096, 1L << 30},
	{"backing", PT_ENUM, CACHEDFILE_HELP, "memfd",
	 backing_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	int fd;
	size_t len, page, pages;
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
	s->fd = cachedfile_open(param_str(ctx, "backing"), s->len, ctx->err, sizeof(ctx->err));
	if (s->fd < 0)
		return errno == EOPNOTSUPP || errno == EISDIR || errno == ENOSYS ? BENCH_UNSUPPORTED : BENCH_FAIL;
	ctx->ops_per_iter = s->pages;
	ctx->iter_desc = "mmap of the cached file + one read per page + munmap";
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	for (uint64_t it = 0; it < iters; it++) {
		char *p = mmap(NULL, s->len, PROT_READ, MAP_SHARED, s->fd, 0);
		if (p == MAP_FAILED) {
			s->failed++;
			break;
		}
		volatile char *q = p;
		size_t page = s->page;
		OP_LOOP(ctx->spin, s->pages, (void)q[i_ * page]);
		munmap(p, s->len);
	}
}

static void teardown(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	close(s->fd);
	if (s->failed)
		fprintf(stderr, "opcost-probe: mem.touch: %llu mmaps failed\n", (unsigned long long)s->failed);
}

const struct bench bench_mem_touch = {
	.name = "mem.touch",
	.summary = "minor fault per page of a cached file mapping (memfd or O_TMPFILE; lmbench lat_pagefault)",
	.op = "page touched",
	.params = params,
	.setup = setup,
	.run = run,
	.teardown = teardown,
};
