/* perf_event_open counters: one group for the measuring thread, read before
 * and after each batch outside the timed region. An event the machine cannot
 * count is kept in the set with its reason; timing always goes on. */
#ifndef OPCOST_COUNTERS_H
#define OPCOST_COUNTERS_H
#include <stdint.h>
#include <stddef.h>

#define MAX_COUNTERS 16

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
};

struct counter_snapshot {
	uint64_t value[MAX_COUNTERS];
	uint64_t enabled, running;
};

struct counter_set {
	int n;
	struct counter c[MAX_COUNTERS];
	int leader;
};

/* Parse "cycles,instructions:u,r01c2". An unknown name is a usage error:
 * returns -1 and writes the message (naming the valid choices) to err. */
int counters_parse(const char *list, struct counter_set *cs, char *err, size_t errlen);
/* Open as one group and enable; failures are recorded per counter. */
void counters_open(struct counter_set *cs);
int counters_read(const struct counter_set *cs, struct counter_snapshot *s);
void counters_close(struct counter_set *cs);
/* Comma-separated list of the symbolic names this probe knows. */
const char *counters_known_names(int i);
#endif
