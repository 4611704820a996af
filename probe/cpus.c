/* See cpus.h. */
#include "cpus.h"
#include "params.h"
#include "topology.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pin_self(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) == 0 ? 0 : -errno;
}

/* cpus: "A" or "A,B"; each must be in our affinity mask. The helper's CPU
 * comes from the list, or from the benchmark's `placement` parameter resolved
 * against the sysfs topology (topology.c). Two explicit CPUs decide the
 * placement; a `placement` that contradicts them is a usage error. */
int resolve_cpus(struct bench_ctx *ctx, const char *cpus, char *why, size_t whylen)
{
	cpu_set_t allowed;
	CPU_ZERO(&allowed);
	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
		die(EXIT_FAIL, "sched_getaffinity: %s", strerror(errno));
	char valid[256] = "";
	for (int c = 0, k = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &allowed))
			appendf(valid, sizeof(valid), "%s%d", k++ ? "," : "", c);

	ctx->ncpus = 0;
	if (cpus) {
		char *copy = strdup(cpus), *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			char *end;
			long c = strtol(t, &end, 10);
			if (*end || end == t || c < 0 || c >= CPU_SETSIZE || !CPU_ISSET(c, &allowed))
				die(EXIT_USAGE, "cpu=%s is not a CPU this process may use; valid: %s", t, valid);
			if (ctx->ncpus == 2)
				die(EXIT_USAGE, "cpu=%s: give one CPU, or two (measuring side, helper)", cpus);
			ctx->cpus[ctx->ncpus++] = (int)c;
		}
		free(copy);
		if (ctx->ncpus == 0)
			die(EXIT_USAGE, "cpu= is empty; valid: %s", valid);
	} else {
		ctx->cpus[ctx->ncpus++] = sched_getcpu();
	}
	int has_placement = param_index(ctx->b, "placement") >= 0;
	if (ctx->ncpus == 2) {
		if (!(ctx->b->flags & BENCH_HAS_HELPER))
			die(EXIT_USAGE, "%s has no helper: give one CPU, not cpu=%s", ctx->b->name, cpus);
		if (has_placement) {
			enum placement got = topo_classify(ctx->cpus[0], ctx->cpus[1], ctx->placement_how,
							   sizeof(ctx->placement_how));
			const char *want = placement_names[got];
			if (!param_is(ctx, "placement", want))
				die(EXIT_USAGE, "cpu=%s contradicts placement=%s (these CPUs mean placement=%s: %s)", cpus,
				    param_str(ctx, "placement"), want, ctx->placement_how);
			snprintf(ctx->placement, sizeof(ctx->placement), "%s", want);
		}
		return 0;
	}
	ctx->cpus[1] = ctx->cpus[0];
	if (!has_placement)
		return 0;
	int want = placement_parse(param_str(ctx, "placement"));
	if (want < 0)
		die(EXIT_FAIL, "internal: %s declares placement=%s, unknown to topology.c", ctx->b->name,
		    param_str(ctx, "placement"));
	int partner = topo_partner(ctx->cpus[0], (enum placement)want, &allowed, why, whylen);
	if (partner < 0 && !cpus) {
		/* No CPU given: any allowed measuring CPU with such a partner will do. */
		char other[256];
		for (int c = 0; c < CPU_SETSIZE && partner < 0; c++)
			if (c != ctx->cpus[0] && CPU_ISSET(c, &allowed)) {
				partner = topo_partner(c, (enum placement)want, &allowed, other, sizeof(other));
				if (partner >= 0)
					ctx->cpus[0] = c;
			}
	}
	if (partner < 0)
		return -1;
	ctx->cpus[1] = partner;
	topo_classify(ctx->cpus[0], ctx->cpus[1], ctx->placement_how, sizeof(ctx->placement_how));
	snprintf(ctx->placement, sizeof(ctx->placement), "%s", placement_names[want]);
	return 0;
}
