/* See footprint.h. */
#include "footprint.h"
#include "../json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static struct {
	char *anon;
	size_t anon_len;
	void **maps;
	long nmaps;
} fp;

void footprint_teardown(struct bench_ctx *ctx)
{
	if (fp.anon)
		munmap(fp.anon, fp.anon_len);
	for (long i = 0; i < fp.nmaps; i++)
		munmap(fp.maps[i], (size_t)sysconf(_SC_PAGESIZE));
	free(fp.maps);
	memset(&fp, 0, sizeof(fp));
}

/* "Key:   N kB" of /proc/self/status, in bytes; -1 if absent. */
static long long status_bytes(const char *text, const char *key)
{
	size_t kl = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, key, kl) == 0 && p[kl] == ':')
			return strtoll(p + kl + 1, NULL, 10) * 1024;
	return -1;
}

/* Lines of /proc/self/maps (one per VMA); -1 if unreadable. */
static long count_vmas(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return -1;
	long n = 0;
	int c;
	while ((c = getc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* Mappings holding anonymous pages (a nonzero "Anonymous:" in
 * /proc/self/smaps): those whose page-table entries fork copies; -1 if
 * unreadable. */
static long count_written_vmas(void)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	if (!f)
		return -1;
	char line[256];
	long n = 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "Anonymous:", 10) == 0 && strtol(line + 10, NULL, 10) > 0)
			n++;
	fclose(f);
	return n;
}

/* The header's "parent": what the parent is now (after setup), from /proc;
 * nothing when /proc is unreadable. */
static void footprint_header(struct bench_ctx *ctx, struct jb *j)
{
	char text[8192];
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return;
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	long long rss = status_bytes(text, "VmRSS"), anon = status_bytes(text, "RssAnon");
	long vmas = count_vmas();
	if (rss < 0 || anon < 0 || vmas < 0)
		return;
	jb_obj_begin(j, "parent");
	jb_int(j, "resident_bytes", rss);
	jb_int(j, "anon_bytes", anon);
	jb_int(j, "vmas", vmas);
	long written = count_written_vmas();
	if (written >= 0)
		jb_int(j, "vmas_written", written);
	jb_obj_end(j);
}

int footprint_setup(struct bench_ctx *ctx)
{
	memset(&fp, 0, sizeof(fp));
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	long resident = param_long(ctx, "resident"), mappings = param_long(ctx, "mappings");
	long written = param_long(ctx, "written");

	if (resident > 0) {
		fp.anon_len = ((size_t)resident + page - 1) / page * page;
		void *p = mmap(NULL, fp.anon_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			snprintf(ctx->err, sizeof(ctx->err), "resident=%ld: mmap of %zu bytes: %s", resident, fp.anon_len,
				 strerror(errno));
			fp.anon_len = 0;
			return BENCH_UNSUPPORTED;
		}
		fp.anon = p;
		/* 4 KiB pages like most heaps; without THP support this fails: fine */
		(void)madvise(p, fp.anon_len, MADV_NOHUGEPAGE);
		for (size_t off = 0; off < fp.anon_len; off += page)
			((volatile char *)fp.anon)[off] = 1;
	}

	if (mappings > 0 || written > 0) {
		fp.maps = calloc((size_t)(mappings + written), sizeof(*fp.maps));
		if (!fp.maps) {
			snprintf(ctx->err, sizeof(ctx->err), "mappings=%ld,written=%ld: out of memory", mappings, written);
			footprint_teardown(ctx);
			return BENCH_UNSUPPORTED;
		}
		int fd = memfd_create("opcost-mapping", MFD_CLOEXEC);
		if (fd < 0) {
			snprintf(ctx->err, sizeof(ctx->err), "mappings=%ld,written=%ld: memfd_create: %s", mappings, written,
				 strerror(errno));
			footprint_teardown(ctx);
			return BENCH_UNSUPPORTED;
		}
		if (ftruncate(fd, (off_t)page) < 0 || pwrite(fd, "x", 1, 0) != 1) {
			snprintf(ctx->err, sizeof(ctx->err), "mappings=%ld,written=%ld: memfd of one page: %s", mappings,
				 written, strerror(errno));
			close(fd);
			footprint_teardown(ctx);
			return BENCH_UNSUPPORTED;
		}
		/* Every mapping at file offset 0: two neighbours never continue
		 * each other's offsets, so the kernel cannot merge them. The
		 * written= ones are mapped writable and written once: each gets an
		 * anon_vma and a copy-on-write anonymous page, as a shared
		 * library's data and relocations do, so fork copies their
		 * page-table entries (it skips a file mapping with none). */
		for (long i = 0; i < mappings + written; i++) {
			int w = i >= mappings;
			void *p = mmap(NULL, page, w ? PROT_READ | PROT_WRITE : PROT_READ, MAP_PRIVATE, fd, 0);
			if (p == MAP_FAILED) {
				snprintf(ctx->err, sizeof(ctx->err),
					 "%s=%ld: mmap number %ld: %s (vm.max_map_count?)", w ? "written" : "mappings",
					 w ? written : mappings, w ? i - mappings + 1 : i + 1, strerror(errno));
				close(fd);
				footprint_teardown(ctx);
				return BENCH_UNSUPPORTED;
			}
			fp.maps[fp.nmaps++] = p;
			if (w)
				*(volatile char *)p = 1;
			else
				(void)*(volatile const char *)p;
		}
		close(fd);
	}
	ctx->header_extra = footprint_header;
	return BENCH_OK;
}
