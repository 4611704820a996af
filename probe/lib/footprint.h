/* The parent's footprint, a parameter of the process-creation benchmarks
 * (proc.fork, proc.vfork, proc.exec, proc.spawn). fork's cost grows with the
 * parent: every VMA is duplicated and the page-table entries of its anonymous
 * memory are copied and write-protected. Three parameters size the parent:
 *   resident=BYTES  anonymous private memory, 4 KiB pages (MADV_NOHUGEPAGE),
 *                   one byte written per page (a heap)
 *   mappings=N      N extra VMAs, each one page of a memfd mapped read-only
 *                   at offset 0 (so none can merge), one byte read (a shared
 *                   library's mapping)
 *   written=N       N more such VMAs mapped private and writable, one byte
 *                   written: each holds a copy-on-write anonymous page (a
 *                   library's data), whose page-table entry fork copies
 * Both are set up before anything is timed; the header then reports what the
 * parent really was ("parent": resident_bytes, anon_bytes, vmas, vmas_written). */
#ifndef OPCOST_FOOTPRINT_H
#define OPCOST_FOOTPRINT_H

#include "../probe.h"

/* 1 GiB: a long on i386 is 32 bits. */
#define FOOTPRINT_RESIDENT_MAX (1L << 30)
#define FOOTPRINT_MAPPINGS_MAX 20000L

/* The three entries, inside a bench's params[] table (before its {NULL}). */
#define FOOTPRINT_PARAMS                                                                                   \
	{"resident", PT_INT,                                                                                   \
	 "bytes of anonymous private memory the parent maps (4 KiB pages) and writes before timing (max 1 GiB)", \
	 "0", NULL, 0, FOOTPRINT_RESIDENT_MAX},                                                                \
	{"mappings", PT_INT,                                                                                   \
	 "extra file-backed VMAs in the parent (one memfd page each, read-only, unmergeable)", "0", NULL, 0,   \
	 FOOTPRINT_MAPPINGS_MAX},                                                                              \
	{"written", PT_INT,                                                                                    \
	 "extra file-backed VMAs in the parent written once (one memfd page each, private: a copied page, as " \
	 "a library's data)", "0", NULL, 0, FOOTPRINT_MAPPINGS_MAX}

/* From the bench's setup(), first: map and touch the footprint, and have the
 * header report it. BENCH_OK, or BENCH_UNSUPPORTED with ctx->err set (all
 * undone). */
int footprint_setup(struct bench_ctx *ctx);
/* The teardown() of a bench with no state of its own (or called from its
 * teardown and failing setup): unmap everything. */
void footprint_teardown(struct bench_ctx *ctx);

#endif
