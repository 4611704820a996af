/* CPU topology from sysfs: which placement class a pair of CPUs is in.
 *   smt:  b is in cpuA/topology/thread_siblings_list
 *   numa: A and B are listed under different /sys/devices/system/node/nodeN/cpulist
 *   core: b is in A's last-level cache shared_cpu_list (highest cache/indexN/level)
 *   llc:  otherwise
 * Missing files are said in the `how` text (e.g. no node directory: one node). */
#include "topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const placement_names[PL_COUNT] = {"same", "smt", "core", "llc", "numa"};

int placement_parse(const char *name)
{
	for (int i = 0; i < PL_COUNT; i++)
		if (strcmp(placement_names[i], name) == 0)
			return i;
	return -1;
}

static const char *root(void)
{
	const char *r = getenv("OPCOST_SYSFS_ROOT");
	return r ? r : "";
}

/* Read a one-line sysfs file into buf (newline stripped); 0 or -1. */
static int read_line(const char *path, char *buf, size_t len)
{
	char full[512];
	snprintf(full, sizeof(full), "%s%s", root(), path);
	FILE *f = fopen(full, "r");
	if (!f)
		return -1;
	int ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (!ok)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* "0-3,8,10-11" -> set; 0 or -1 on a malformed list. */
static int parse_list(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	while (*s) {
		char *end;
		long a = strtol(s, &end, 10), b = a;
		if (end == s || a < 0 || a >= CPU_SETSIZE)
			return -1;
		s = end;
		if (*s == '-') {
			b = strtol(s + 1, &end, 10);
			if (end == s + 1 || b < a || b >= CPU_SETSIZE)
				return -1;
			s = end;
		}
		for (long c = a; c <= b; c++)
			CPU_SET(c, set);
		if (*s == ',')
			s++;
		else if (*s)
			return -1;
	}
	return 0;
}

/* The list file of one CPU; 0 with text in `text`, -1 if absent. */
static int cpu_list(int cpu, const char *file, cpu_set_t *set, char *text, size_t len)
{
	char path[256];
	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/%s", cpu, file);
	if (read_line(path, text, len) < 0 || parse_list(text, set) < 0)
		return -1;
	return 0;
}

/* The last-level cache's shared_cpu_list: the index with the highest level. */
static int llc_list(int cpu, cpu_set_t *set, char *text, size_t len, int *level)
{
	int best = -1, best_level = -1;
	for (int i = 0; i < 16; i++) {
		char path[256], lv[32];
		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cache/index%d/level", cpu, i);
		if (read_line(path, lv, sizeof(lv)) < 0)
			continue;
		int l = atoi(lv);
		if (l > best_level) {
			best_level = l;
			best = i;
		}
	}
	if (best < 0)
		return -1;
	char file[64];
	snprintf(file, sizeof(file), "cache/index%d/shared_cpu_list", best);
	*level = best_level;
	return cpu_list(cpu, file, set, text, len);
}

/* NUMA node of a CPU: the nodeN whose cpulist holds it; -1 if no node info. */
static int node_of(int cpu)
{
	for (int n = 0; n < 1024; n++) {
		char path[128], text[1024];
		cpu_set_t set;
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", n);
		if (read_line(path, text, sizeof(text)) < 0) {
			if (n > 64)
				break; /* node numbers may have holes, but not that large */
			continue;
		}
		if (parse_list(text, &set) == 0 && CPU_ISSET(cpu, &set))
			return n;
	}
	return -1;
}

enum placement topo_classify(int a, int b, char *how, size_t howlen)
{
	char text[1024];
	cpu_set_t set;
	if (a == b) {
		snprintf(how, howlen, "one CPU (%d)", a);
		return PL_SAME;
	}
	if (cpu_list(a, "topology/thread_siblings_list", &set, text, sizeof(text)) == 0 && CPU_ISSET(b, &set)) {
		snprintf(how, howlen, "CPU %d is an SMT sibling of CPU %d (thread_siblings_list=%s)", b, a, text);
		return PL_SMT;
	}
	int na = node_of(a), nb = node_of(b);
	if (na >= 0 && nb >= 0 && na != nb) {
		snprintf(how, howlen, "CPU %d is on NUMA node %d, CPU %d on node %d", a, na, b, nb);
		return PL_NUMA;
	}
	int level;
	if (llc_list(a, &set, text, sizeof(text), &level) < 0) {
		snprintf(how, howlen,
			 "CPUs %d and %d are different cores; no cache information in sysfs, so one last-level cache is assumed",
			 a, b);
		return PL_CORE;
	}
	if (CPU_ISSET(b, &set)) {
		snprintf(how, howlen, "CPUs %d and %d are different cores sharing the L%d cache (shared_cpu_list=%s)", a, b,
			 level, text);
		return PL_CORE;
	}
	snprintf(how, howlen, "CPU %d is outside CPU %d's L%d cache (shared_cpu_list=%s)%s", b, a, level, text,
		 na < 0 ? "; no NUMA information" : ", same NUMA node");
	return PL_LLC;
}

int topo_partner(int a, enum placement want, const cpu_set_t *allowed, char *why, size_t whylen)
{
	char how[256];
	if (want == PL_SAME)
		return a;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (c != a && CPU_ISSET(c, allowed) && topo_classify(a, c, how, sizeof(how)) == want)
			return c;
	/* Say what the machine has instead. */
	char text[1024], avail[256] = "";
	cpu_set_t set;
	for (int c = 0, k = 0; c < CPU_SETSIZE && strlen(avail) < sizeof(avail) - 16; c++)
		if (CPU_ISSET(c, allowed))
			snprintf(avail + strlen(avail), sizeof(avail) - strlen(avail), "%s%d", k++ ? "," : "", c);
	const char *name = placement_names[want];
	int level;
	switch (want) {
	case PL_SMT:
		if (cpu_list(a, "topology/thread_siblings_list", &set, text, sizeof(text)) < 0)
			snprintf(why, whylen, "placement=smt: CPU %d has no SMT information in sysfs (thread_siblings_list)", a);
		else if (CPU_COUNT(&set) <= 1)
			snprintf(why, whylen, "placement=smt: CPU %d has no SMT sibling (thread_siblings_list=%s)", a, text);
		else
			snprintf(why, whylen, "placement=smt: CPU %d's siblings (%s) are not among the CPUs this process may use (%s)",
				 a, text, avail);
		break;
	case PL_CORE:
		snprintf(why, whylen, "placement=core: no CPU this process may use (%s) is another core sharing CPU %d's last-level cache",
			 avail, a);
		break;
	case PL_LLC:
		if (llc_list(a, &set, text, sizeof(text), &level) < 0)
			snprintf(why, whylen, "placement=llc: no cache information in sysfs for CPU %d", a);
		else
			snprintf(why, whylen,
				 "placement=llc: every other CPU this process may use (%s) shares CPU %d's L%d cache "
				 "(shared_cpu_list=%s)",
				 avail, a, level, text);
		break;
	case PL_NUMA:
		snprintf(why, whylen, "placement=numa: no CPU this process may use (%s) is on another NUMA node than CPU %d (node %d)",
			 avail, a, node_of(a));
		break;
	default:
		snprintf(why, whylen, "placement=%s: no such CPU", name);
	}
	return -1;
}
