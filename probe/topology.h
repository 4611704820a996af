/* CPU topology from sysfs, for the `placement` dimension of two-party
 * benchmarks. OPCOST_SYSFS_ROOT (tests only) prefixes every sysfs path. */
#ifndef OPCOST_TOPOLOGY_H
#define OPCOST_TOPOLOGY_H

#include <sched.h>
#include <stddef.h>

/* From closest to farthest: one CPU; SMT siblings of one core; two cores
 * sharing a last-level cache; two LLCs of one NUMA node; two NUMA nodes. */
enum placement { PL_SAME, PL_SMT, PL_CORE, PL_LLC, PL_NUMA, PL_COUNT };

#define PLACEMENT_CHOICES {"same", "smt", "core", "llc", "numa", NULL}
#define PLACEMENT_HELP                                                                                  \
	"where the helper runs: same CPU; smt sibling; core: another core sharing the last-level cache; " \
	"llc: another LLC; numa: another NUMA node (or give cpu=A,B)"

extern const char *const placement_names[PL_COUNT];
int placement_parse(const char *name); /* -1 if unknown */

/* The class of a CPU pair, and how it was decided (sysfs values). */
enum placement topo_classify(int a, int b, char *how, size_t howlen);

/* A CPU from `allowed` whose pair with `a` has class `want`; -1 with the
 * reason in `why` if there is none. */
int topo_partner(int a, enum placement want, const cpu_set_t *allowed, char *why, size_t whylen);

#endif
