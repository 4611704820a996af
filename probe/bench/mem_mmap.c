/* mem.mmap: map and unmap memory (lmbench lat_mmap). One operation is one
 * mmap(2) + munmap(2) pair of `pages` pages: VMA creation and removal, and by
 * default no page faults (anonymous memory, untouched).
 *   backing=memfd|tmpfile  map a file of that size whose pages are already in
 *                          the page cache, MAP_SHARED, as lat_mmap maps its file
 *   touch=tenth            write one byte every 16 KiB of the mapping's first
 *                          tenth before munmap, as lat_mmap does
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

static const struct bench_param params[] = {
	{"pages", PT_INT, "pages mapped by each mmap", "1", NULL, 1, 1L << 18},
	{"populate", PT_ENUM, "yes: MAP_POPULATE (allocate every page in mmap, freed by munmap)", "no", populate_choices,
	 0, 0},
	{"backing", PT_ENUM, "anon: private anonymous memory; " CACHEDFILE_HELP ", its pages cached, mapped shared",
	 "anon", backing_choices, 0, 0},
	{"touch", PT_ENUM, "tenth: write one byte every 16 KiB of the mapping's first tenth (lmbench lat_mmap)", "none",
	 touch_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	size_t len, touch_end;
	int flags, fd;
	uint64_t failed;
};

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
	void *p = mmap(NULL, s->len, PROT_READ | PROT_WRITE, s->flags, s->fd, 0);
	if (p == MAP_FAILED) {
		snprintf(ctx->err, sizeof(ctx->err), "mmap of %zu bytes: %s", s->len, strerror(errno));
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
		char *p = mmap(NULL, s->len, PROT_READ | PROT_WRITE, s->flags, s->fd, 0);
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
