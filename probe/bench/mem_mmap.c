/* mem.mmap: map and unmap anonymous memory without touching it (lmbench
 * lat_mmap without the touch). One operation is one mmap(2) + munmap(2) pair
 * of `pages` pages: VMA creation and removal, no page faults. */
#include "../probe.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const char *const populate_choices[] = {"no", "yes", NULL};

static const struct bench_param params[] = {
	{"pages", PT_INT, "pages mapped by each mmap", "1", NULL, 1, 1L << 18},
	{"populate", PT_ENUM, "yes: MAP_POPULATE (allocate every page in mmap, freed by munmap)", "no", populate_choices,
	 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

struct state {
	size_t len;
	int flags;
	uint64_t failed;
};

static struct state st;

static int setup(struct bench_ctx *ctx)
{
	struct state *s = &st;
	memset(s, 0, sizeof(*s));
	ctx->priv = s;
	s->len = (size_t)param_long(ctx, "pages") * (size_t)sysconf(_SC_PAGESIZE);
	s->flags = MAP_PRIVATE | MAP_ANONYMOUS | (param_is(ctx, "populate", "yes") ? MAP_POPULATE : 0);
	void *p = mmap(NULL, s->len, PROT_READ | PROT_WRITE, s->flags, -1, 0);
	if (p == MAP_FAILED) {
		snprintf(ctx->err, sizeof(ctx->err), "mmap of %zu bytes: %s", s->len, strerror(errno));
		return BENCH_FAIL;
	}
	munmap(p, s->len);
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	struct state *s = ctx->priv;
	OP_LOOP(ctx->spin, iters, {
		void *p = mmap(NULL, s->len, PROT_READ | PROT_WRITE, s->flags, -1, 0);
		if (p == MAP_FAILED) {
			s->failed++;
			break;
		}
		munmap(p, s->len);
	});
}

const struct bench bench_mem_mmap = {
	.name = "mem.mmap",
	.summary = "mmap(2) + munmap(2) of anonymous memory, untouched (VMA cost; populate=yes adds the pages)",
	.op = "mmap+munmap",
	.params = params,
	.setup = setup,
	.run = run,
};
