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
	char name[128];      /* as the user spelled it, modifiers included */
	uint32_t type;
	uint64_t config, config1, config2;
	int encoded;         /* type and config came with the name (NAME@TYPE:CONFIG...) */
	int helper;          /* :helper: counts the benchmark's helper thread or process */
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
	int helper_leader; /* the helper's group leader (:helper events), -1 if none */
};

/* Parse "cycles,instructions:u,r01c2,context-switches:helper". An unknown
 * name is a usage error: returns -1 and writes the message (naming the valid
 * choices) to err.
 *
 * A token is NAME[:MOD]...[@TYPE:CONFIG[:CONFIG1[:CONFIG2]]]. MOD is u, k
 * (uk: both) or `helper`. The @ part is the perf_event_attr the front end
 * resolved from the kernel's event lists (sysfs PMU events and formats, perf
 * list): type and config words in C notation (0x...), so NAME may be any
 * model-specific name (ls_dispatch.ld_dispatch) or perf's own spelling
 * (cpu/event=0x29,umask=1/, whose commas sit between slashes and do not
 * split the list). */
int counters_parse(const char *list, struct counter_set *cs, char *err, size_t errlen);
/* Open as one group (events that do not fit: alone) and enable; failures
 * are recorded per counter. :helper events are opened for helper_tid (0:
 * the benchmark has no helper; they are then <not supported>), in a group
 * of their own, read with the others. */
void counters_open(struct counter_set *cs, int helper_tid);
int counters_read(const struct counter_set *cs, struct counter_snapshot *s);
void counters_close(struct counter_set *cs);
/* Comma-separated list of the symbolic names this probe knows. */
const char *counters_known_names(int i);
#endif
