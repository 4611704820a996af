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

/* The modifiers of a name: everything after the first ':' that follows its
 * last '/' (perf's pmu/terms/ spelling has no ':' inside). */
static const char *modifiers_of(const char *name)
{
	const char *slash = strrchr(name, '/');
	return strchr(slash ? slash : name, ':');
}

static int parse_mods(const char *tok, const char *mods, struct counter *c, char *err, size_t errlen)
{
	/* :u, :k, :uk, :helper, in any order, each segment once */
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", mods);
	char *save = NULL;
	int seen_uk = 0;
	for (char *seg = strtok_r(buf, ":", &save); seg; seg = strtok_r(NULL, ":", &save)) {
		if (strcmp(seg, "helper") == 0) {
			if (c->helper)
				goto bad;
			c->helper = 1;
			continue;
		}
		if (seen_uk)
			goto bad;
		seen_uk = 1;
		for (const char *m = seg; *m; m++) {
			if (*m == 'u')
				c->exclude_kernel = 1;
			else if (*m == 'k')
				c->exclude_user = 1;
			else {
				snprintf(err, errlen, "counter '%s': unknown modifier '%s'; valid: :u (user only), :k (kernel only), :helper (the benchmark's helper)", tok, seg);
				return -1;
			}
		}
	}
	if (c->exclude_kernel && c->exclude_user) {
		/* ":uk" means both, as in perf */
		c->exclude_kernel = c->exclude_user = 0;
	}
	return 0;
bad:
	snprintf(err, errlen, "counter '%s': a modifier is given twice; write at most one of :u/:k/:uk and one :helper", tok);
	return -1;
}

/* "@TYPE:CONFIG[:CONFIG1[:CONFIG2]]", numbers in C notation. */
static int parse_encoding(const char *tok, const char *enc, struct counter *c, char *err, size_t errlen)
{
	unsigned long long v[4] = {0, 0, 0, 0};
	int n = 0;
	const char *p = enc;
	while (n < 4) {
		char *end;
		errno = 0;
		v[n] = strtoull(p, &end, 0);
		if (end == p || errno || (*end != ':' && *end != '\0'))
			break;
		n++;
		if (*end == '\0') {
			if (n < 2)
				break;
			if (v[0] > 0xffffffffull)
				break;
			c->type = (uint32_t)v[0];
			c->config = v[1];
			c->config1 = v[2];
			c->config2 = v[3];
			c->encoded = 1;
			return 0;
		}
		p = end + 1;
	}
	snprintf(err, errlen, "counter '%s': bad encoding '@%s'; write @TYPE:CONFIG[:CONFIG1[:CONFIG2]] (numbers, e.g. @4:0x129)", tok, enc);
	return -1;
}

static int parse_one(const char *tok, struct counter *c, char *err, size_t errlen)
{
	char name[sizeof(c->name)], base[sizeof(c->name)];
	const char *at = strrchr(tok, '@');
	size_t nlen = at ? (size_t)(at - tok) : strlen(tok);
	if (nlen == 0 || nlen >= sizeof(name)) {
		snprintf(err, errlen, "counter name '%s' is empty or too long (at most %zu characters)", tok, sizeof(name) - 1);
		return -1;
	}
	memcpy(name, tok, nlen);
	name[nlen] = '\0';
	snprintf(c->name, sizeof(c->name), "%s", name);
	const char *mods = modifiers_of(name);
	size_t blen = mods ? (size_t)(mods - name) : strlen(name);
	if (blen == 0) {
		snprintf(err, errlen, "counter name '%s' is empty", tok);
		return -1;
	}
	memcpy(base, name, blen);
	base[blen] = '\0';
	if (mods && parse_mods(tok, mods + 1, c, err, errlen) < 0)
		return -1;
	if (at)
		return parse_encoding(tok, at + 1, c, err, errlen);

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
	size_t off = (size_t)snprintf(err, errlen, "unknown counter '%s'; valid: rNNNN (raw hex), NAME@TYPE:CONFIG", base);
	for (size_t i = 0; i < NEVENTS && off < errlen; i++)
		off += (size_t)snprintf(err + off, errlen - off, ", %s", events[i].name);
	return -1;
}

/* The next token of a counter list: up to a ',' that is not between the
 * slashes of perf's pmu/terms/ spelling. */
static char *next_token(char **p)
{
	char *s = *p;
	if (!s || !*s)
		return NULL;
	int inside = 0;
	char *q = s;
	for (; *q; q++) {
		if (*q == '/')
			inside = !inside;
		else if (*q == ',' && !inside)
			break;
	}
	if (*q) {
		*q = '\0';
		*p = q + 1;
	} else
		*p = q;
	return s;
}

int counters_parse(const char *list, struct counter_set *cs, char *err, size_t errlen)
{
	memset(cs, 0, sizeof(*cs));
	cs->leader = cs->helper_leader = -1;
	if (!list || !*list)
		return 0;
	char *copy = strdup(list), *rest = copy;
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (char *tok = next_token(&rest); tok; tok = next_token(&rest)) {
		if (!*tok)
			continue;
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

static int open_event(struct counter *c, int group_fd, int exclude_kernel, int pid)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = c->type;
	a.config = c->config;
	a.config1 = c->config1;
	a.config2 = c->config2;
	a.disabled = group_fd == -1;
	a.exclude_kernel = (unsigned)exclude_kernel;
	a.exclude_user = (unsigned)c->exclude_user;
	a.exclude_hv = (unsigned)exclude_kernel;
	a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_ID | PERF_FORMAT_TOTAL_TIME_ENABLED |
			PERF_FORMAT_TOTAL_TIME_RUNNING;
	return (int)syscall(SYS_perf_event_open, &a, pid, -1, group_fd, 0);
}

static void explain(struct counter *c, int err)
{
	c->status = CTR_NOT_SUPPORTED;
	switch (err) {
	case ESRCH:
		snprintf(c->reason, sizeof(c->reason), "the helper was gone when its counters were opened (%s)", strerror(err));
		break;
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
	case EINVAL:
		if (c->encoded) {
			snprintf(c->reason, sizeof(c->reason),
				 "perf_event_open: %s: this PMU refuses the encoding, or counts a whole CPU or socket rather than one thread",
				 strerror(err));
			break;
		}
		/* fall through */
	default:
		snprintf(c->reason, sizeof(c->reason), "perf_event_open: %s", strerror(err));
	}
}

/* Open one event into group gfd (-1: as a leader), falling back to user
 * space only when perf_event_paranoid forbids kernel counting. */
static int open_with_fallback(struct counter *c, int gfd, int pid)
{
	int fd = open_event(c, gfd, c->exclude_kernel, pid);
	if (fd < 0 && (errno == EACCES || errno == EPERM) && !c->exclude_kernel) {
		/* paranoid 2 still allows counting our own user-space work */
		fd = open_event(c, gfd, 1, pid);
		if (fd >= 0) {
			c->user_only_fallback = 1;
			snprintf(c->reason, sizeof(c->reason),
				 "user space only: perf_event_paranoid is %d (set it to 1 or run as root for kernel counts)",
				 read_paranoid());
		}
	}
	return fd;
}

void counters_open(struct counter_set *cs, int helper_tid)
{
	/* Test hook: OPCOST_TEST_GROUP_MAX=N makes a group refuse members
	 * beyond N with ENOSPC, as a PMU with N counters would, so the "opened
	 * alone" path runs on machines without one. */
	const char *gm = getenv("OPCOST_TEST_GROUP_MAX");
	int group_max = gm ? atoi(gm) : 0, in_group[2] = {0, 0};
	cs->leader = cs->helper_leader = -1;
	for (int i = 0; i < cs->n; i++) {
		struct counter *c = &cs->c[i];
		int side = c->helper ? 1 : 0;
		int *leader = side ? &cs->helper_leader : &cs->leader;
		if (side && helper_tid <= 0) {
			c->status = CTR_NOT_SUPPORTED;
			snprintf(c->reason, sizeof(c->reason),
				 "this benchmark has no helper thread or process to count (:helper is for two-party benchmarks such as ctx.pipe)");
			continue;
		}
		int pid = side ? helper_tid : 0;
		int gfd = *leader >= 0 ? cs->c[*leader].fd : -1;
		int fd;
		if (gfd >= 0 && group_max > 0 && in_group[side] >= group_max) {
			fd = -1;
			errno = ENOSPC;
		} else
			fd = open_with_fallback(c, gfd, pid);
		if (fd < 0 && gfd >= 0 && (errno == EINVAL || errno == ENOSPC)) {
			/* The PMU cannot schedule the group with this event in it
			 * (more events than hardware counters, or a constraint):
			 * count it alone, time-shared with the group. */
			int why = errno;
			fd = open_with_fallback(c, -1, pid);
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
		if (*leader < 0)
			*leader = i;
		c->group = c->alone ? i : *leader;
		if (!c->alone)
			in_group[side]++;
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
	cs->leader = cs->helper_leader = -1;
}
