/* perf_event_open counters: one group for the measuring thread, read before
 * and after each batch outside the timed region. An event the machine cannot
 * count is kept in the set with its reason; timing always goes on.
 *
 * An event that the PMU refuses to add to the group (EINVAL/ENOSPC: the group
 * would need more hardware counters than exist) is opened again on its own,
 * as the leader of a one-event group. The kernel then time-shares (multiplexes)
 * it with the main group; each group's time_enabled/time_running is read with
 * it, and the probe scales every value by enabled/running (once, here in the
 * probe; the Python side never scales again) and reports the running fraction. */
#ifndef OPCOST_COUNTERS_H
#define OPCOST_COUNTERS_H
#include <stdint.h>
#include <stddef.h>

#define MAX_COUNTERS 32

enum counter_status { CTR_OK, CTR_NOT_SUPPORTED, CTR_NOT_COUNTED };

struct counter {
	char name[64];       /* as the user spelled it, modifiers included */
	uint32_t type;
	uint64_t config;
	int exclude_user, exclude_kernel;
	int fd;
	uint64_t id;
	enum counter_status status;
	char reason[160];
	int user_only_fallback; /* paranoid forced exclude_kernel */
	int group;              /* index of this counter's group leader in the set */
	int alone;              /* did not fit in the main group: its own group */
};

struct counter_snapshot {
	uint64_t value[MAX_COUNTERS];
	uint64_t enabled[MAX_COUNTERS], running[MAX_COUNTERS]; /* of the counter's group */
};

struct counter_set {
	int n;
	struct counter c[MAX_COUNTERS];
	int leader; /* the main group's leader, -1 if nothing opened */
};

/* Parse "cycles,instructions:u,r01c2". An unknown name is a usage error:
 * returns -1 and writes the message (naming the valid choices) to err. */
int counters_parse(const char *list, struct counter_set *cs, char *err, size_t errlen);
/* Open as one group (events that do not fit: alone) and enable; failures
 * are recorded per counter. */
void counters_open(struct counter_set *cs);
int counters_read(const struct counter_set *cs, struct counter_snapshot *s);
void counters_close(struct counter_set *cs);
/* Comma-separated list of the symbolic names this probe knows. */
const char *counters_known_names(int i);
#endif
