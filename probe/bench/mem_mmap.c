/* mem.mmap: map and unmap memory (lmbench lat_mmap). One operation is one
 * mmap(2) + munmap(2) pair of `pages` pages: VMA creation and removal, and by
 * default no page faults (anonymous memory, untouched).
 *   backing=memfd|tmpfile  map a file of that size whose pages are already in
 *                          the page cache, MAP_SHARED, as lat_mmap maps its file
 *   touch=tenth            write one byte every 16 KiB of the mapping's first
 *                          tenth before munmap, as lat_mmap does
 *   pagetable=own|shared   where the mapping goes: own: alone in its page-table
 *                          range (4 MiB-aligned, nothing else mapped there), so
 *                          each munmap frees the page-table page its first
 *                          touch allocated; shared: beside a kept one-page
 *                          mapping in that range, so the page-table page stays.
 *                          Default any: wherever mmap puts it, which ASLR
 *                          decides per process (either of the two).
 * backing=memfd touch=tenth is lat_mmap's operation on a tmpfs file. */
#include "../probe.h"
#include "../lib/cachedfile.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define TOUCH_STRIDE (16 << 10)   /* lat_mmap's PSIZE */
#define TOUCH_PART 10             /* lat_mmap's N: the first 1/N of the mapping */

static const char *const populate_choices[] = {"no", "yes", NULL};
static const char *const backing_choices[] = {"anon", "memfd", "tmpfile", NULL};
static const char *const touch_choices[] = {"none", "tenth", NULL};
static const char *const pagetable_choices[] = {"any", "own", "shared", NULL};

/* A page-table page maps 2 MiB (x86-64, arm64 and armv7 with 4 KiB pages,
 * i386 PAE) or 4 MiB (i386 without PAE): a 4 MiB-aligned range holds whole
 * ones everywhere. */
#define PT_ALIGN ((size_t)4 << 20)

static const struct bench_param params[] = {
	{"pages", PT_INT, "pages mapped by each mmap", "1", NULL, 1, 1L << 18},
	{"populate", PT_ENUM, "yes: MAP_POPULATE (allocate every page in mmap, freed by munmap)", "no", populate_choices,
	 0, 0},
	{"backing", PT_ENUM, "anon: private anonymous memory; " CACHEDFILE_HELP ", its pages cached, mapped shared",
	 "anon", backing_choices, 0, 0},
	{"touch", PT_ENUM, "tenth: write one byte every 16 KiB of the mapping's first tenth (lmbench lat_mmap)", "none",
	 touch_choices, 0, 0},
	{"pagetable", PT_ENUM, "own: mapped alone in a 4 MiB-aligned range, so munmap frees the page-table page a "
	 "touch allocated; shared: beside a kept one-page mapping, so it stays; any: where mmap puts it (ASLR)", "any",
	 pagetable_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	size_t len, touch_end;
	int flags, fd;
	char *at;                 /* pagetable=own|shared: the fixed address; NULL: any */
	char *reserved;           /* the PROT_NONE reservation around it */
	size_t reserved_len;
	uint64_t failed;
};

/* pagetable=own|shared: reserve PROT_NONE address space with a 4 MiB-aligned
 * hole of `span` bytes a margin away from either end, unmap the hole (own),
 * or all of it but its first page (shared: that page is the neighbour that
 * keeps the page-table page), and map at the hole's start (own) or just
 * past the neighbour (shared), MAP_FIXED_NOREPLACE: nothing else is mapped
 * into a hole from the outside without this failing loudly. */
static int place(struct bench_ctx *ctx, struct state *s, int shared)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t span = (s->len + (shared ? page : 0) + PT_ALIGN - 1) / PT_ALIGN * PT_ALIGN;
	s->reserved_len = span + 3 * PT_ALIGN;
	s->reserved = mmap(NULL, s->reserved_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (s->reserved == MAP_FAILED) {
		s->reserved = NULL;
		snprintf(ctx->err, sizeof(ctx->err), "reserving %zu bytes of address space: %s", s->reserved_len,
			 strerror(errno));
		return BENCH_FAIL;
	}
	char *hole = (char *)(((uintptr_t)s->reserved + 2 * PT_ALIGN - 1) / PT_ALIGN * PT_ALIGN);
	char *from = shared ? hole + page : hole;
	if (munmap(from, (size_t)(hole + span - from)) != 0) {
		snprintf(ctx->err, sizeof(ctx->err), "munmap of the reserved hole: %s", strerror(errno));
		munmap(s->reserved, s->reserved_len);
		s->reserved = NULL;
		return BENCH_FAIL;
	}
	s->at = from;
	s->flags |= MAP_FIXED_NOREPLACE;
	return BENCH_OK;
}

static struct state st;

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	memset(s, 0, sizeof(*s));
	ctx->priv = s;
	s->fd = -1;
	s->len = (size_t)param_long(ctx, "pages") * (size_t)sysconf(_SC_PAGESIZE);
	s->touch_end = param_is(ctx, "touch", "tenth") ? s->len / TOUCH_PART : 0;
	int populate = param_is(ctx, "populate", "yes") ? MAP_POPULATE : 0;
	if (param_is(ctx, "backing", "anon")) {
		s->flags = MAP_PRIVATE | MAP_ANONYMOUS | populate;
	} else {
		s->fd = cachedfile_open(param_str(ctx, "backing"), s->len, ctx->err, sizeof(ctx->err));
		if (s->fd < 0)
			return errno == EOPNOTSUPP || errno == EISDIR || errno == ENOSYS ? BENCH_UNSUPPORTED : BENCH_FAIL;
		s->flags = MAP_SHARED | populate;
	}
	if (!param_is(ctx, "pagetable", "any")) {
		int r = place(ctx, s, param_is(ctx, "pagetable", "shared"));
		if (r != BENCH_OK) {
			if (s->fd >= 0)
				close(s->fd);
			return r;
		}
	}
	void *p = mmap(s->at, s->len, PROT_READ | PROT_WRITE, s->flags, s->fd, 0);
	if (p == MAP_FAILED || (s->at && p != s->at)) {
		snprintf(ctx->err, sizeof(ctx->err), "mmap of %zu bytes%s: %s", s->len,
			 s->at ? " at the reserved address" : "", p == MAP_FAILED ? strerror(errno) : "placed elsewhere");
		if (p != MAP_FAILED)
			munmap(p, s->len);
		if (s->reserved)
			munmap(s->reserved, s->reserved_len);
		if (s->fd >= 0)
			close(s->fd);
		return BENCH_FAIL;
	}
	munmap(p, s->len);
	if (s->touch_end)
		ctx->iter_desc = "mmap + one byte written every 16 KiB of the first tenth + munmap";
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	OP_LOOP(ctx->spin, iters, {
		char *p = mmap(s->at, s->len, PROT_READ | PROT_WRITE, s->flags, s->fd, 0);
		if (p == MAP_FAILED) {
			s->failed++;
			break;
		}
		for (size_t off = 0; off < s->touch_end; off += TOUCH_STRIDE)
			((volatile char *)p)[off] = 1;
		munmap(p, s->len);
	});
}

static void teardown(struct bench_ctx *ctx)
{
	struct state *s = ctx->priv;
	if (s->fd >= 0)
		close(s->fd);
	if (s->reserved)
		munmap(s->reserved, s->reserved_len);
	if (s->failed)
		fprintf(stderr, "opcost-probe: mem.mmap: %llu mmaps failed\n", (unsigned long long)s->failed);
}

const struct bench bench_mem_mmap = {
	.name = "mem.mmap",
	.summary = "mmap(2) + munmap(2), anonymous and untouched by default (VMA cost); a cached file and "
		   "lat_mmap's writes by backing=, touch=",
	.op = "mmap+munmap",
	.params = params,
	.setup = setup,
	.run = run,
	.teardown = teardown,
};
