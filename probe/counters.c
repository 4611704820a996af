#include "counters.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct event_name {
	const char *name;
	uint32_t type;
	uint64_t config;
};

#define HWC(id, op, res) \
	((uint64_t)PERF_COUNT_HW_CACHE_##id | ((uint64_t)PERF_COUNT_HW_CACHE_OP_##op << 8) | \
	 ((uint64_t)PERF_COUNT_HW_CACHE_RESULT_##res << 16))

/* perf's own spellings, so a user can paste what `perf list` shows. */
static const struct event_name events[] = {
	{"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
	{"cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
	{"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
	{"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
	{"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
	{"branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
	{"branch-instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
	{"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
	{"bus-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BUS_CYCLES},
	{"stalled-cycles-frontend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND},
	{"stalled-cycles-backend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_BACKEND},
	{"ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES},
	{"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK},
	{"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
	{"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
	{"faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
	{"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN},
	{"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ},
	{"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
	{"cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
	{"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
	{"migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
	{"alignment-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_ALIGNMENT_FAULTS},
	{"emulation-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_EMULATION_FAULTS},
	{"L1-dcache-loads", PERF_TYPE_HW_CACHE, HWC(L1D, READ, ACCESS)},
	{"L1-dcache-load-misses", PERF_TYPE_HW_CACHE, HWC(L1D, READ, MISS)},
	{"L1-icache-load-misses", PERF_TYPE_HW_CACHE, HWC(L1I, READ, MISS)},
	{"LLC-loads", PERF_TYPE_HW_CACHE, HWC(LL, READ, ACCESS)},
	{"LLC-load-misses", PERF_TYPE_HW_CACHE, HWC(LL, READ, MISS)},
	{"dTLB-loads", PERF_TYPE_HW_CACHE, HWC(DTLB, READ, ACCESS)},
	{"dTLB-load-misses", PERF_TYPE_HW_CACHE, HWC(DTLB, READ, MISS)},
	{"iTLB-load-misses", PERF_TYPE_HW_CACHE, HWC(ITLB, READ, MISS)},
	{"branch-loads", PERF_TYPE_HW_CACHE, HWC(BPU, READ, ACCESS)},
	{"branch-load-misses", PERF_TYPE_HW_CACHE, HWC(BPU, READ, MISS)},
};

#define NEVENTS (sizeof(events) / sizeof(events[0]))

const char *counters_known_names(int i)
{
	return (i >= 0 && (size_t)i < NEVENTS) ? events[i].name : NULL;
}

static int parse_one(const char *tok, struct counter *c, char *err, size_t errlen)
{
	char base[64];
	const char *colon = strchr(tok, ':');
	size_t blen = colon ? (size_t)(colon - tok) : strlen(tok);
	if (blen == 0 || blen >= sizeof(base) || strlen(tok) >= sizeof(c->name)) {
		snprintf(err, errlen, "counter name '%s' is empty or too long", tok);
		return -1;
	}
	memcpy(base, tok, blen);
	base[blen] = '\0';
	snprintf(c->name, sizeof(c->name), "%s", tok);

	if (colon) {
		for (const char *m = colon + 1; *m; m++) {
			if (*m == 'u')
				c->exclude_kernel = 1;
			else if (*m == 'k')
				c->exclude_user = 1;
			else {
				snprintf(err, errlen, "counter '%s': unknown modifier '%c'; valid: :u (user only), :k (kernel only)", tok, *m);
				return -1;
			}
		}
		if (c->exclude_kernel && c->exclude_user) {
			/* ":uk" means both, as in perf */
			c->exclude_kernel = c->exclude_user = 0;
		}
	}

	if (base[0] == 'r' && base[1]) {
		char *end;
		unsigned long long v = strtoull(base + 1, &end, 16);
		if (*end == '\0') {
			c->type = PERF_TYPE_RAW;
			c->config = v;
			return 0;
		}
	}
	for (size_t i = 0; i < NEVENTS; i++) {
		if (strcmp(base, events[i].name) == 0) {
			c->type = events[i].type;
			c->config = events[i].config;
			return 0;
		}
	}
	size_t off = (size_t)snprintf(err, errlen, "unknown counter '%s'; valid: rNNNN (raw hex)", base);
	for (size_t i = 0; i < NEVENTS && off < errlen; i++)
		off += (size_t)snprintf(err + off, errlen - off, ", %s", events[i].name);
	return -1;
}

int counters_parse(const char *list, struct counter_set *cs, char *err, size_t errlen)
{
	memset(cs, 0, sizeof(*cs));
	cs->leader = -1;
	if (!list || !*list)
		return 0;
	char *copy = strdup(list), *save = NULL;
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (cs->n == MAX_COUNTERS) {
			snprintf(err, errlen, "too many counters (at most %d)", MAX_COUNTERS);
			free(copy);
			return -1;
		}
		struct counter *c = &cs->c[cs->n];
		c->fd = -1;
		if (parse_one(tok, c, err, errlen) < 0) {
			free(copy);
			return -1;
		}
		cs->n++;
	}
	free(copy);
	return 0;
}

static int read_paranoid(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
	int v = 99;
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 99;
		fclose(f);
	}
	return v;
}

static int open_event(struct counter *c, int group_fd, int exclude_kernel)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = c->type;
	a.config = c->config;
	a.disabled = group_fd == -1;
	a.exclude_kernel = (unsigned)exclude_kernel;
	a.exclude_user = (unsigned)c->exclude_user;
	a.exclude_hv = (unsigned)exclude_kernel;
	a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_ID | PERF_FORMAT_TOTAL_TIME_ENABLED |
			PERF_FORMAT_TOTAL_TIME_RUNNING;
	return (int)syscall(SYS_perf_event_open, &a, 0, -1, group_fd, 0);
}

static void explain(struct counter *c, int err)
{
	c->status = CTR_NOT_SUPPORTED;
	switch (err) {
	case ENOENT:
	case EOPNOTSUPP:
	case ENODEV:
		if (c->type == PERF_TYPE_SOFTWARE)
			snprintf(c->reason, sizeof(c->reason), "the kernel does not provide this software event (%s)", strerror(err));
		else
			snprintf(c->reason, sizeof(c->reason),
				 "no hardware PMU exposes this event here (perf_event_open: %s); a VM without a virtual PMU cannot count it",
				 strerror(err));
		break;
	case EACCES:
	case EPERM:
		snprintf(c->reason, sizeof(c->reason),
			 "perf_event_paranoid is %d: run as root or set it to 1 (sysctl kernel.perf_event_paranoid=1) to count this event",
			 read_paranoid());
		break;
	default:
		snprintf(c->reason, sizeof(c->reason), "perf_event_open: %s", strerror(err));
	}
}

/* Open one event into group gfd (-1: as a leader), falling back to user
 * space only when perf_event_paranoid forbids kernel counting. */
static int open_with_fallback(struct counter *c, int gfd)
{
	int fd = open_event(c, gfd, c->exclude_kernel);
	if (fd < 0 && (errno == EACCES || errno == EPERM) && !c->exclude_kernel) {
		/* paranoid 2 still allows counting our own user-space work */
		fd = open_event(c, gfd, 1);
		if (fd >= 0) {
			c->user_only_fallback = 1;
			snprintf(c->reason, sizeof(c->reason),
				 "user space only: perf_event_paranoid is %d (set it to 1 or run as root for kernel counts)",
				 read_paranoid());
		}
	}
	return fd;
}

void counters_open(struct counter_set *cs)
{
	/* Test hook: OPCOST_TEST_GROUP_MAX=N makes the main group refuse
	 * members beyond N with ENOSPC, as a PMU with N counters would, so the
	 * "opened alone" path runs on machines without one. */
	const char *gm = getenv("OPCOST_TEST_GROUP_MAX");
	int group_max = gm ? atoi(gm) : 0, in_group = 0;
	cs->leader = -1;
	for (int i = 0; i < cs->n; i++) {
		struct counter *c = &cs->c[i];
		int gfd = cs->leader >= 0 ? cs->c[cs->leader].fd : -1;
		int fd;
		if (gfd >= 0 && group_max > 0 && in_group >= group_max) {
			fd = -1;
			errno = ENOSPC;
		} else
			fd = open_with_fallback(c, gfd);
		if (fd < 0 && gfd >= 0 && (errno == EINVAL || errno == ENOSPC)) {
			/* The PMU cannot schedule the group with this event in it
			 * (more events than hardware counters, or a constraint):
			 * count it alone, time-shared with the group. */
			int why = errno;
			fd = open_with_fallback(c, -1);
			if (fd >= 0) {
				c->alone = 1;
				size_t used = c->user_only_fallback ? strlen(c->reason) : 0;
				snprintf(c->reason + used, sizeof(c->reason) - used,
					 "%sdid not fit in the event group (%s): counted in its own group, time-shared with the others (scaled by time enabled/running when multiplexed)",
					 used ? "; " : "", strerror(why));
			}
		}
		if (fd < 0) {
			explain(c, errno);
			continue;
		}
		c->fd = fd;
		c->status = CTR_OK;
		if (ioctl(fd, PERF_EVENT_IOC_ID, &c->id) < 0)
			c->id = 0;
		if (cs->leader < 0)
			cs->leader = i;
		c->group = c->alone ? i : cs->leader;
		if (!c->alone)
			in_group++;
	}
	for (int i = 0; i < cs->n; i++) {
		struct counter *c = &cs->c[i];
		if (c->status == CTR_OK && c->group == i) {
			ioctl(c->fd, PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP);
			ioctl(c->fd, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP);
		}
	}
}

int counters_read(const struct counter_set *cs, struct counter_snapshot *s)
{
	memset(s, 0, sizeof(*s));
	int rc = 0;
	for (int g = 0; g < cs->n; g++) {
		if (cs->c[g].status != CTR_OK || cs->c[g].group != g)
			continue; /* not a group leader */
		uint64_t buf[3 + 2 * MAX_COUNTERS];
		ssize_t r = read(cs->c[g].fd, buf, sizeof(buf));
		if (r < (ssize_t)(3 * sizeof(uint64_t))) {
			rc = -1;
			continue;
		}
		uint64_t nr = buf[0];
		for (uint64_t k = 0; k < nr && k < MAX_COUNTERS; k++) {
			uint64_t val = buf[3 + 2 * k], id = buf[4 + 2 * k];
			for (int i = 0; i < cs->n; i++)
				if (cs->c[i].status == CTR_OK && cs->c[i].group == g && cs->c[i].id == id) {
					s->value[i] = val;
					s->enabled[i] = buf[1];
					s->running[i] = buf[2];
				}
		}
	}
	return rc;
}

void counters_close(struct counter_set *cs)
{
	for (int i = 0; i < cs->n; i++)
		if (cs->c[i].fd >= 0) {
			close(cs->c[i].fd);
			cs->c[i].fd = -1;
		}
	cs->leader = -1;
}
