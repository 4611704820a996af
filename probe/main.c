/* opcost-probe: the measurement engine. It owns clocks, calibration, overhead
 * subtraction, pinning, counters and output; benchmarks (bench/) own only
 * their operation. Output is JSON lines on stdout (header, samples, trailer);
 * errors are one line on stderr and an exit code:
 *   0 ok, 1 benchmark failed, 2 usage error, 3 operation unsupported here. */
#include "clock.h"
#include "counters.h"
#include "helper.h"
#include "json.h"
#include "probe.h"
#include "topology.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

extern const struct bench *const bench_table[];
int cmd_cpuid(int fd);
int cmd_time(int argc, char **argv); /* timecmd.c */

void die(int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "opcost-probe: %s\n", msg);
	exit(code);
}

#if defined(__x86_64__)
#define ARCH "x86_64"
#elif defined(__i386__)
#define ARCH "i386"
#elif defined(__aarch64__)
#define ARCH "aarch64"
#else
#define ARCH "unknown"
#endif

/* ---------------------------------------------------------------- params */

static int param_index(const struct bench *b, const char *name)
{
	for (int i = 0; b->params && b->params[i].name; i++)
		if (strcmp(b->params[i].name, name) == 0)
			return i;
	return -1;
}

const char *param_str(const struct bench_ctx *ctx, const char *name)
{
	int i = param_index(ctx->b, name);
	if (i < 0)
		die(EXIT_FAIL, "internal: benchmark %s reads undeclared parameter %s", ctx->b->name, name);
	return ctx->values[i];
}

long param_long(const struct bench_ctx *ctx, const char *name)
{
	return strtol(param_str(ctx, name), NULL, 0);
}

int param_is(const struct bench_ctx *ctx, const char *name, const char *value)
{
	return strcmp(param_str(ctx, name), value) == 0;
}

static void append(char *buf, size_t len, const char *fmt, ...)
{
	size_t off = strlen(buf);
	if (off >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + off, len - off, fmt, ap);
	va_end(ap);
}

/* Validate "k=v" against the descriptor; usage error names the valid choices. */
static void set_param(struct bench_ctx *ctx, const char *kv)
{
	const struct bench *b = ctx->b;
	const char *eq = strchr(kv, '=');
	if (!eq)
		die(EXIT_USAGE, "parameter '%s' must be written key=value", kv);
	char key[64];
	size_t klen = (size_t)(eq - kv);
	if (klen == 0 || klen >= sizeof(key))
		die(EXIT_USAGE, "parameter '%s' has an empty or too long name", kv);
	memcpy(key, kv, klen);
	key[klen] = '\0';
	const char *val = eq + 1;
	int i = param_index(b, key);
	if (i < 0) {
		char valid[512] = "";
		for (int k = 0; b->params && b->params[k].name; k++)
			append(valid, sizeof(valid), "%s%s", k ? ", " : "", b->params[k].name);
		die(EXIT_USAGE, "%s has no parameter '%s'; valid: %s", b->name, key,
		    valid[0] ? valid : "(none)");
	}
	const struct bench_param *p = &b->params[i];
	if (p->type == PT_ENUM) {
		int ok = 0;
		char valid[512] = "";
		for (int k = 0; p->choices[k]; k++) {
			ok |= strcmp(p->choices[k], val) == 0;
			append(valid, sizeof(valid), "%s%s", k ? "|" : "", p->choices[k]);
		}
		if (!ok)
			die(EXIT_USAGE, "%s: %s=%s is not allowed; valid: %s", b->name, key, val, valid);
	} else if (p->type == PT_INT) {
		char *end;
		errno = 0;
		long v = strtol(val, &end, 0);
		if (errno || *end || end == val || v < p->min || v > p->max)
			die(EXIT_USAGE, "%s: %s=%s must be an integer in [%ld, %ld]", b->name, key, val, p->min, p->max);
	} else if (!*val) {
		die(EXIT_USAGE, "%s: %s must not be empty", b->name, key);
	}
	ctx->values[i] = val;
}

static const struct bench *find_bench(const char *name)
{
	for (int i = 0; bench_table[i]; i++)
		if (strcmp(bench_table[i]->name, name) == 0)
			return bench_table[i];
	char valid[1024] = "";
	for (int i = 0; bench_table[i]; i++)
		append(valid, sizeof(valid), "%s%s", i ? ", " : "", bench_table[i]->name);
	die(EXIT_USAGE, "unknown benchmark '%s'; valid: %s", name, valid);
	return NULL;
}

/* ----------------------------------------------------------------- list */

static void emit_param(struct jb *j, const struct bench_param *p)
{
	static const char *const tnames[] = {"enum", "int", "str"};
	jb_obj_begin(j, NULL);
	jb_str(j, "name", p->name);
	jb_str(j, "type", tnames[p->type]);
	jb_str(j, "help", p->help);
	jb_str(j, "default", p->def);
	if (p->type == PT_ENUM) {
		jb_arr_begin(j, "choices");
		for (int k = 0; p->choices[k]; k++)
			jb_str(j, NULL, p->choices[k]);
		jb_arr_end(j);
	}
	if (p->type == PT_INT) {
		jb_int(j, "min", p->min);
		jb_int(j, "max", p->max);
	}
	jb_obj_end(j);
}

static int cmd_list(int json)
{
	if (!json) {
		for (int i = 0; bench_table[i]; i++)
			printf("%-18s %s (op: %s)\n", bench_table[i]->name, bench_table[i]->summary, bench_table[i]->op);
		return EXIT_OK;
	}
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "schema", "opcost.probe-list/1");
	jb_str(&j, "probe_version", PROBE_VERSION);
	jb_str(&j, "arch", ARCH);
	jb_int(&j, "spin_max", SPIN_MAX);
	jb_arr_begin(&j, "benchmarks");
	for (int i = 0; bench_table[i]; i++) {
		const struct bench *b = bench_table[i];
		jb_obj_begin(&j, NULL);
		jb_str(&j, "name", b->name);
		jb_str(&j, "summary", b->summary);
		jb_str(&j, "op", b->op);
		jb_bool(&j, "helper", (b->flags & BENCH_HAS_HELPER) != 0);
		jb_int(&j, "switches_per_op", b->switches);
		jb_arr_begin(&j, "params");
		for (int k = 0; b->params && b->params[k].name; k++)
			emit_param(&j, &b->params[k]);
		jb_arr_end(&j);
		jb_obj_end(&j);
	}
	jb_arr_end(&j);
	jb_arr_begin(&j, "counters");
	for (int i = 0; counters_known_names(i); i++)
		jb_str(&j, NULL, counters_known_names(i));
	jb_arr_end(&j);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
	return EXIT_OK;
}

/* ------------------------------------------------------------ measuring */

struct opts {
	const char *bench;
	const char *params[MAX_PARAMS * 2];
	int nparams;
	long samples, warmup;
	double target_ms;
	long long iters; /* 0: calibrate */
	const char *cpus;
	const char *counters;
	double fake_ns; /* > 0: fake clock */
	unsigned long long seed;
	int check; /* validate and set up, measure nothing */
	long spin;  /* injected cost: spin_chain(spin) per operation */
};

struct usage {
	int64_t user_ns, sys_ns, nvcsw, nivcsw;
};

struct batch {
	uint64_t iters, executed;
	double raw_ticks, net_ticks;
	double aux_ticks; /* per iteration: the aux loop timed right after this batch */
	int aux_valid;
	uint64_t wall_ns;
	uint64_t start_raw_ns; /* CLOCK_MONOTONIC_RAW at the batch start: lines up concurrent probes */
	struct usage self, helper;
	int helper_valid, helper_cpu;
	int cpu_before, cpu_after;
	long long steal;
	struct counter_snapshot c0, c1;
};

struct run {
	struct opts o;
	struct bench_ctx ctx;
	struct counter_set cs;
	double tsc_hz;
	double clock_ovh; /* ticks for one start/end pair with nothing between */
	double loop_ovh;  /* ticks per empty loop iteration */
	double spin_ticks; /* cost of one spin_chain(spin), measured alone */
	uint64_t fake_rng;
	struct usage helper_prev;
};

/* The loop of a benchmark with nothing but spin_chain(spin) in it; with
 * spin=0 it is the empty loop whose cost is the loop overhead. */
static __attribute__((noinline)) void spin_loop(unsigned spin, uint64_t n)
{
	OP_LOOP(spin, n, BARRIER());
}

/* Minimum ticks over 50 batches of n iterations, clock overhead subtracted. */
static double min_loop_ticks(const struct run *R, unsigned spin, uint64_t n)
{
	double best = 1e18;
	for (int k = 0; k < 50; k++) {
		uint64_t a = clock_start();
		spin_loop(spin, n);
		uint64_t b = clock_end();
		if ((double)(b - a) < best)
			best = (double)(b - a);
	}
	return best - R->clock_ovh;
}

static void calibrate_clock(struct run *R)
{
	if (R->o.fake_ns > 0) {
		R->tsc_hz = 2e9;
		R->clock_ovh = 40;
		R->loop_ovh = 0.5;
		R->spin_ticks = (double)R->o.spin; /* fake: one tick per add */
		return;
	}
	R->tsc_hz = clock_calibrate_hz();
	double mn = 1e18;
	for (int k = 0; k < 2000; k++) {
		uint64_t a = clock_start();
		uint64_t b = clock_end();
		if ((double)(b - a) < mn)
			mn = (double)(b - a);
	}
	R->clock_ovh = mn;
	R->loop_ovh = min_loop_ticks(R, 0, 20000) / 20000.0;
	if (R->loop_ovh < 0)
		R->loop_ovh = 0;
	if (R->o.spin > 0)
		R->spin_ticks = min_loop_ticks(R, (unsigned)R->o.spin, 2000) / 2000.0 - R->loop_ovh;
}

/* Loop overhead subtracted per iteration: none when the benchmark's chain
 * hides the loop's bookkeeping (BENCH_LOOP_HIDDEN). */
static double loop_subtracted(const struct run *R)
{
	return (R->ctx.b->flags & BENCH_LOOP_HIDDEN) ? 0.0 : R->loop_ovh;
}

static uint64_t ops_per_iter(const struct bench_ctx *ctx)
{
	return ctx->ops_per_iter ? ctx->ops_per_iter : 1;
}

/* The benchmark's auxiliary loop (struct bench.aux_run) applies: timed
 * alone right after every batch, with the same iteration count. */
static int has_aux(const struct run *R)
{
	return R->ctx.b->aux_run && R->ctx.aux && R->o.fake_ns <= 0;
}

static struct usage self_usage(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	struct usage u = {
		(int64_t)ru.ru_utime.tv_sec * 1000000000LL + (int64_t)ru.ru_utime.tv_usec * 1000LL,
		(int64_t)ru.ru_stime.tv_sec * 1000000000LL + (int64_t)ru.ru_stime.tv_usec * 1000LL,
		ru.ru_nvcsw, ru.ru_nivcsw};
	return u;
}

/* Steal time of one CPU from /proc/stat, in USER_HZ ticks; -1 if unknown. */
static long long read_steal(int cpu)
{
	FILE *f = fopen("/proc/stat", "r");
	if (!f)
		return -1;
	char line[512], want[32];
	snprintf(want, sizeof(want), "cpu%d ", cpu);
	long long steal = -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, want, strlen(want)) == 0) {
			long long v[8] = {0};
			if (sscanf(line + strlen(want), "%lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2],
				   &v[3], &v[4], &v[5], &v[6], &v[7]) == 8)
				steal = v[7];
			break;
		}
	}
	fclose(f);
	return steal;
}

static void helper_sync(struct run *R, struct usage *out, int *valid, int *cpu)
{
	*valid = 0;
	if (!R->ctx.b->sync_helper)
		return;
	R->ctx.b->sync_helper(&R->ctx);
	struct helper_shm *h = R->ctx.shm;
	if (!h->valid)
		return;
	struct usage now = {h->user_ns, h->sys_ns, h->nvcsw, h->nivcsw};
	out->user_ns = now.user_ns - R->helper_prev.user_ns;
	out->sys_ns = now.sys_ns - R->helper_prev.sys_ns;
	out->nvcsw = now.nvcsw - R->helper_prev.nvcsw;
	out->nivcsw = now.nivcsw - R->helper_prev.nivcsw;
	R->helper_prev = now;
	*valid = 1;
	*cpu = h->cpu;
}

/* A benchmark with prepare(): every iteration is its own timed segment,
 * prepared outside it. Ticks, wall time, the measuring thread's usage and the
 * counters are summed over the segments only (c0 stays zero, c1 collects the
 * counts); *u0 and *u1 come out so that u1 - u0 is that sum. */
static void run_prepared(struct run *R, struct batch *B, struct usage *u0, struct usage *u1)
{
	struct usage sum = {0, 0, 0, 0};
	memset(&B->c0, 0, sizeof(B->c0));
	memset(&B->c1, 0, sizeof(B->c1));
	B->raw_ticks = 0;
	B->wall_ns = 0;
	for (uint64_t i = 0; i < B->executed; i++) {
		if (R->ctx.b->prepare(&R->ctx) != 0)
			die(EXIT_FAIL, "%s: %s", R->ctx.b->name, R->ctx.err[0] ? R->ctx.err : "prepare failed");
		struct counter_snapshot a, b;
		struct usage ua = self_usage();
		counters_read(&R->cs, &a);
		uint64_t w = mono_raw_ns();
		uint64_t t0 = clock_start();
		R->ctx.b->run(&R->ctx, 1);
		uint64_t t1 = clock_end();
		B->wall_ns += mono_raw_ns() - w;
		counters_read(&R->cs, &b);
		struct usage ub = self_usage();
		B->raw_ticks += (double)(t1 - t0);
		for (int k = 0; k < R->cs.n; k++) {
			B->c1.value[k] += b.value[k] - a.value[k];
			B->c1.enabled[k] += b.enabled[k] - a.enabled[k];
			B->c1.running[k] += b.running[k] - a.running[k];
		}
		sum.user_ns += ub.user_ns - ua.user_ns;
		sum.sys_ns += ub.sys_ns - ua.sys_ns;
		sum.nvcsw += ub.nvcsw - ua.nvcsw;
		sum.nivcsw += ub.nivcsw - ua.nivcsw;
	}
	*u0 = (struct usage){0, 0, 0, 0};
	*u1 = sum;
}

/* One batch of the operation; with_aux: then the aux loop alone with the
 * same count (outside the batch's wall time, usage and counters), and its
 * per-op cost subtracted from this batch. Timed per batch, next to the
 * batch it belongs to, not once per process: its cost can drift during a
 * run (a clflush of lines that have not been written for some tens of ms
 * gets cheaper on this EPYC VM), and the loop it is subtracted from sees the
 * same drift. */
static void run_batch(struct run *R, uint64_t iters, struct batch *B, int with_aux)
{
	memset(B, 0, sizeof(*B));
	B->iters = iters;
	int fake = R->o.fake_ns > 0;
	/* A fake clock still exercises the operation, briefly. */
	B->executed = fake && iters > 64 ? 64 : iters;
	B->steal = read_steal(R->ctx.cpus[0]);
	B->cpu_before = sched_getcpu();
	struct usage u0 = self_usage();
	counters_read(&R->cs, &B->c0);
	uint64_t w0 = mono_raw_ns();

	uint64_t t0 = 0, t1 = 0;
	struct usage u1;
	if (R->ctx.b->prepare) {
		run_prepared(R, B, &u0, &u1);
	} else {
		t0 = clock_start();
		R->ctx.b->run(&R->ctx, B->executed);
		t1 = clock_end();
		B->wall_ns = mono_raw_ns() - w0;
		counters_read(&R->cs, &B->c1);
		u1 = self_usage();
		B->raw_ticks = (double)(t1 - t0);
	}
	B->start_raw_ns = w0;
	B->cpu_after = sched_getcpu();
	long long s1 = read_steal(R->ctx.cpus[0]);
	B->steal = (B->steal >= 0 && s1 >= 0) ? s1 - B->steal : -1;
	B->self.user_ns = u1.user_ns - u0.user_ns;
	B->self.sys_ns = u1.sys_ns - u0.sys_ns;
	B->self.nvcsw = u1.nvcsw - u0.nvcsw;
	B->self.nivcsw = u1.nivcsw - u0.nivcsw;
	helper_sync(R, &B->helper, &B->helper_valid, &B->helper_cpu);

	/* a prepared benchmark pays one clock pair per iteration */
	double clocks = R->ctx.b->prepare ? (double)iters : 1.0;
	if (fake) {
		/* Deterministic model: per-op cost fake_ns, +-1% jitter per batch,
		 * plus one tick per spin add; the usual overheads added, so their
		 * subtraction is exercised too. */
		double j = ((double)(xorshift(&R->fake_rng) % 2001) - 1000.0) / 100000.0;
		double op_ticks = R->o.fake_ns * (double)ops_per_iter(&R->ctx) * R->tsc_hz / 1e9 * (1.0 + j) + R->spin_ticks;
		B->raw_ticks = (double)iters * (op_ticks + R->loop_ovh) + R->clock_ovh * clocks;
		double ns = (double)iters * op_ticks / R->tsc_hz * 1e9;
		B->wall_ns = (uint64_t)ns;
		B->self = (struct usage){(int64_t)(ns * 0.25), (int64_t)(ns * 0.75), 0, 0};
		if (B->helper_valid)
			B->helper = B->self;
		B->cpu_before = B->cpu_after = R->ctx.cpus[0];
		B->steal = 0;
	}
	B->net_ticks = B->raw_ticks - R->clock_ovh * clocks - loop_subtracted(R) * (double)iters;
	if (with_aux && has_aux(R)) {
		B->aux_valid = 1;
		uint64_t a0 = clock_start();
		R->ctx.b->aux_run(&R->ctx, B->executed);
		uint64_t a1 = clock_end();
		B->aux_ticks = ((double)(a1 - a0) - R->clock_ovh) / (double)B->executed - R->loop_ovh;
		B->net_ticks -= B->aux_ticks * (double)iters;
	}
}

static uint64_t calibrate_iters(struct run *R)
{
	if (R->o.iters > 0)
		return (uint64_t)R->o.iters;
	double target_ticks = R->o.target_ms * 1e-3 * R->tsc_hz;
	if (R->o.fake_ns > 0) {
		double n = R->o.target_ms * 1e6 / (R->o.fake_ns * (double)ops_per_iter(&R->ctx));
		return n < 1 ? 1 : (uint64_t)n;
	}
	uint64_t n = 1;
	struct batch B;
	for (;;) {
		run_batch(R, n, &B, 0);
		double t = B.raw_ticks > 1 ? B.raw_ticks : 1;
		if (t >= target_ticks / 8 || n >= (1ull << 40)) {
			double scaled = (double)n * target_ticks / t;
			return scaled < 1 ? 1 : (uint64_t)scaled;
		}
		/* grow fast while far away, then by the measured ratio */
		double grow = target_ticks / 4 / t;
		n = grow > 16 ? n * 16 : (uint64_t)((double)n * grow) + 1;
	}
}

/* Per-op counter values. A counter whose group ran only part of the batch
 * (multiplexed) is scaled by enabled/running here, the only place values are
 * scaled; its running fraction is reported in counters_running, and the
 * smallest fraction in counters_running_fraction. */
static void emit_counters(struct jb *j, const struct run *R, const struct batch *B)
{
	if (R->cs.n == 0)
		return;
	double minfrac = 1.0;
	int mux = 0;
	jb_obj_begin(j, "counters");
	for (int i = 0; i < R->cs.n; i++) {
		const struct counter *c = &R->cs.c[i];
		double enabled = (double)(B->c1.enabled[i] - B->c0.enabled[i]);
		double running = (double)(B->c1.running[i] - B->c0.running[i]);
		if (c->status != CTR_OK)
			jb_str(j, c->name, "<not supported>");
		else if (running <= 0)
			jb_str(j, c->name, "<not counted>");
		else {
			double v = (double)(B->c1.value[i] - B->c0.value[i]);
			if (running < enabled) {
				v *= enabled / running; /* multiplexed: scale */
				mux = 1;
				if (running / enabled < minfrac)
					minfrac = running / enabled;
			}
			jb_num(j, c->name, v / ((double)B->executed * (double)ops_per_iter(&R->ctx)));
		}
	}
	jb_obj_end(j);
	if (!mux)
		return;
	jb_num(j, "counters_running_fraction", minfrac);
	jb_obj_begin(j, "counters_running");
	for (int i = 0; i < R->cs.n; i++) {
		double enabled = (double)(B->c1.enabled[i] - B->c0.enabled[i]);
		double running = (double)(B->c1.running[i] - B->c0.running[i]);
		if (R->cs.c[i].status == CTR_OK && running > 0 && running < enabled)
			jb_num(j, R->cs.c[i].name, running / enabled);
	}
	jb_obj_end(j);
}

static void emit_sample(struct run *R, long idx, int warm, const struct batch *B)
{
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "sample");
	jb_int(&j, "i", idx);
	jb_bool(&j, "warmup", warm);
	jb_uint(&j, "iters", B->iters);
	if (B->executed != B->iters)
		jb_uint(&j, "executed", B->executed);
	jb_num(&j, "raw_ticks", B->raw_ticks);
	jb_num(&j, "ticks", B->net_ticks);
	double ns = B->net_ticks / R->tsc_hz * 1e9;
	uint64_t opi = ops_per_iter(&R->ctx);
	double n = (double)B->iters * (double)opi; /* operations in the batch */
	if (opi > 1)
		jb_uint(&j, "ops_per_iter", opi);
	jb_num(&j, "ns", ns);
	jb_uint(&j, "wall_ns", B->wall_ns);
	jb_uint(&j, "start_raw_ns", B->start_raw_ns);
	jb_num(&j, "ns_per_op", ns / n);
	jb_num(&j, "tsc_per_op", B->net_ticks / n);
	if (B->aux_valid) {
		/* per operation (ops_per_iter > 1: the aux loop's per-iteration cost / ops_per_iter) */
		jb_num(&j, "aux_ticks_per_iter", B->aux_ticks);
		jb_num(&j, "aux_ns_per_op", B->aux_ticks / R->tsc_hz * 1e9 / (double)opi);
	}
	if (opi > 1)
		jb_num(&j, "ns_per_iter", ns / (double)B->iters);
	if (R->ctx.has_nominal)
		jb_num(&j, "overshoot_ns_per_op", ns / n - R->ctx.nominal_ns);
	jb_int(&j, "user_ns", B->self.user_ns);
	jb_int(&j, "sys_ns", B->self.sys_ns);
	jb_num(&j, "user_ns_per_op", (double)B->self.user_ns / n);
	jb_num(&j, "sys_ns_per_op", (double)B->self.sys_ns / n);
	jb_int(&j, "nvcsw", B->self.nvcsw);
	jb_int(&j, "nivcsw", B->self.nivcsw);
	jb_int(&j, "cpu_before", B->cpu_before);
	jb_int(&j, "cpu_after", B->cpu_after);
	if (B->steal >= 0)
		jb_int(&j, "steal_ticks", B->steal);
	if (B->helper_valid) {
		jb_obj_begin(&j, "helper");
		jb_int(&j, "cpu", B->helper_cpu);
		jb_int(&j, "user_ns", B->helper.user_ns);
		jb_int(&j, "sys_ns", B->helper.sys_ns);
		jb_num(&j, "user_ns_per_op", (double)B->helper.user_ns / n);
		jb_num(&j, "sys_ns_per_op", (double)B->helper.sys_ns / n);
		jb_int(&j, "nvcsw", B->helper.nvcsw);
		jb_int(&j, "nivcsw", B->helper.nivcsw);
		jb_obj_end(&j);
	}
	emit_counters(&j, R, B);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
}

static void emit_params(struct jb *j, const struct bench_ctx *ctx)
{
	jb_obj_begin(j, "params");
	for (int i = 0; ctx->b->params && ctx->b->params[i].name; i++)
		jb_str(j, ctx->b->params[i].name, ctx->values[i]);
	jb_obj_end(j);
}

static void emit_header(struct run *R, uint64_t iters, int argc, char **argv)
{
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "header");
	jb_str(&j, "schema", "opcost.probe/1");
	jb_str(&j, "probe_version", PROBE_VERSION);
	jb_str(&j, "arch", ARCH);
	jb_str(&j, "compiler", "gcc " __VERSION__);
	jb_int(&j, "pid", getpid());
	jb_str(&j, "bench", R->ctx.b->name);
	jb_str(&j, "op", R->ctx.b->op);
	emit_params(&j, &R->ctx);
	jb_arr_begin(&j, "cpus");
	jb_int(&j, NULL, R->ctx.cpus[0]);
	if (R->ctx.b->flags & BENCH_HAS_HELPER)
		jb_int(&j, NULL, R->ctx.cpus[1]);
	jb_arr_end(&j);
	if (R->ctx.placement[0]) {
		jb_obj_begin(&j, "placement");
		jb_str(&j, "name", R->ctx.placement);
		jb_arr_begin(&j, "cpus");
		jb_int(&j, NULL, R->ctx.cpus[0]);
		jb_int(&j, NULL, R->ctx.cpus[1]);
		jb_arr_end(&j);
		jb_str(&j, "how", R->ctx.placement_how);
		jb_obj_end(&j);
	}
	if (ops_per_iter(&R->ctx) > 1) {
		/* ns_per_op is per operation; one iteration (ns_per_iter) holds this many */
		jb_uint(&j, "ops_per_iter", ops_per_iter(&R->ctx));
		jb_str(&j, "iteration", R->ctx.iter_desc ? R->ctx.iter_desc : "");
	}
	if (R->ctx.has_nominal)
		jb_num(&j, "nominal_ns_per_op", R->ctx.nominal_ns);
	jb_str(&j, "clock", R->o.fake_ns > 0 ? "fake" : CLOCK_NAME);
	jb_num(&j, "tsc_hz", R->tsc_hz);
	jb_str(&j, "tsc_hz_source", R->o.fake_ns > 0 ? "fake clock (2 GHz)"
			 : "calibrated against CLOCK_MONOTONIC_RAW over 20 ms at start-up");
	jb_obj_begin(&j, "overhead");
	jb_num(&j, "clock_ticks", R->clock_ovh);
	jb_num(&j, "loop_ticks_per_iter", R->loop_ovh);
	jb_num(&j, "clock_ns", R->clock_ovh / R->tsc_hz * 1e9);
	jb_num(&j, "loop_ns_per_iter", R->loop_ovh / R->tsc_hz * 1e9);
	jb_bool(&j, "loop_subtracted", loop_subtracted(R) > 0 || R->loop_ovh == 0);
	jb_str(&j, "method", (R->ctx.b->flags & BENCH_LOOP_HIDDEN)
		? "minimum of 2000 empty clock pairs, subtracted from every batch; the empty loop (minimum of 50 "
		  "20000-iteration loops) is not subtracted: this operation is a dependent chain that hides the "
		  "loop's bookkeeping"
		: R->ctx.b->prepare
		? "every iteration is timed alone after an untimed prepare step; minimum of 2000 empty clock pairs "
		  "subtracted per iteration, and the empty loop's cost (minimum of 50 20000-iteration loops) per iteration"
		: "minimum of 2000 empty clock pairs and of 50 empty 20000-iteration loops; both subtracted from every batch");
	jb_obj_end(&j);
	if (R->ctx.b->prepare && R->ctx.prepare)
		jb_str(&j, "prepare", R->ctx.prepare);
	if (R->o.spin > 0) {
		jb_obj_begin(&j, "spin");
		jb_int(&j, "n", R->o.spin);
		jb_num(&j, "ticks", R->spin_ticks);
		jb_num(&j, "ns", R->spin_ticks / R->tsc_hz * 1e9);
		jb_str(&j, "method", "spin_chain alone in the same loop shape, minimum of 50 batches, overheads subtracted");
		jb_obj_end(&j);
	}
	if (R->ctx.aux && R->ctx.b->aux_run) {
		jb_obj_begin(&j, "aux");
		jb_str(&j, "what", R->ctx.aux);
		jb_bool(&j, "subtracted", R->o.fake_ns <= 0);
		jb_str(&j, "method", R->o.fake_ns > 0 ? "fake clock: not measured, not subtracted"
			 : "aux loop alone, timed right after every batch with the same iteration count, clock and "
			   "loop overhead subtracted; its cost per iteration is subtracted from that batch and "
			   "reported in the sample (aux_ticks_per_iter, aux_ns_per_op)");
		jb_obj_end(&j);
	}
	if (R->ctx.header_extra)
		R->ctx.header_extra(&R->ctx, &j);
	jb_uint(&j, "iters", iters);
	jb_str(&j, "iters_source", R->o.iters > 0 ? "requested" : "calibrated to target_ms");
	jb_int(&j, "samples", R->o.samples);
	jb_int(&j, "warmup", R->o.warmup);
	jb_num(&j, "target_ms", R->o.target_ms);
	jb_bool(&j, "fake_clock", R->o.fake_ns > 0);
	jb_arr_begin(&j, "counters");
	for (int i = 0; i < R->cs.n; i++) {
		const struct counter *c = &R->cs.c[i];
		jb_obj_begin(&j, NULL);
		jb_str(&j, "name", c->name);
		jb_str(&j, "status", c->status == CTR_OK ? "ok" : "<not supported>");
		if (c->status == CTR_OK)
			jb_str(&j, "group", R->cs.c[c->group].name);
		if (c->alone)
			jb_bool(&j, "alone", 1);
		if (c->reason[0])
			jb_str(&j, "reason", c->reason);
		jb_obj_end(&j);
	}
	jb_arr_end(&j);
	jb_arr_begin(&j, "argv");
	for (int i = 0; i < argc; i++)
		jb_str(&j, NULL, argv[i]);
	jb_arr_end(&j);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
}

static void emit_unsupported(const struct run *R)
{
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "unsupported");
	jb_str(&j, "bench", R->ctx.b->name);
	emit_params(&j, &R->ctx);
	jb_str(&j, "reason", R->ctx.err);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
}

/* cpus: "A" or "A,B"; each must be in our affinity mask. The helper's CPU
 * comes from the list, or from the benchmark's `placement` parameter resolved
 * against the sysfs topology (topology.c). Two explicit CPUs decide the
 * placement; a `placement` that contradicts them is a usage error. */
static int resolve_cpus(struct run *R, char *why, size_t whylen)
{
	cpu_set_t allowed;
	CPU_ZERO(&allowed);
	if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
		die(EXIT_FAIL, "sched_getaffinity: %s", strerror(errno));
	char valid[256] = "";
	for (int c = 0, k = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &allowed))
			append(valid, sizeof(valid), "%s%d", k++ ? "," : "", c);

	struct bench_ctx *ctx = &R->ctx;
	ctx->ncpus = 0;
	if (R->o.cpus) {
		char *copy = strdup(R->o.cpus), *save = NULL;
		for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			char *end;
			long c = strtol(t, &end, 10);
			if (*end || end == t || c < 0 || c >= CPU_SETSIZE || !CPU_ISSET(c, &allowed))
				die(EXIT_USAGE, "cpu=%s is not a CPU this process may use; valid: %s", t, valid);
			if (ctx->ncpus == 2)
				die(EXIT_USAGE, "cpu=%s: give one CPU, or two (measuring side, helper)", R->o.cpus);
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
			die(EXIT_USAGE, "%s has no helper: give one CPU, not cpu=%s", ctx->b->name, R->o.cpus);
		if (has_placement) {
			enum placement got = topo_classify(ctx->cpus[0], ctx->cpus[1], ctx->placement_how,
							   sizeof(ctx->placement_how));
			const char *want = placement_names[got];
			if (!param_is(ctx, "placement", want))
				die(EXIT_USAGE, "cpu=%s contradicts placement=%s (these CPUs mean placement=%s: %s)", R->o.cpus,
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
	if (partner < 0 && !R->o.cpus) {
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

/* `opcost-probe placement A B`: the class of a CPU pair, from sysfs only. */
static int cmd_placement(int argc, char **argv)
{
	if (argc != 4)
		die(EXIT_USAGE, "usage: opcost-probe placement CPU_A CPU_B");
	int c[2];
	for (int i = 0; i < 2; i++) {
		char *end;
		long v = strtol(argv[2 + i], &end, 10);
		if (*end || end == argv[2 + i] || v < 0 || v >= CPU_SETSIZE)
			die(EXIT_USAGE, "placement: %s is not a CPU number in [0, %d)", argv[2 + i], CPU_SETSIZE);
		c[i] = (int)v;
	}
	char how[256];
	enum placement p = topo_classify(c[0], c[1], how, sizeof(how));
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "placement");
	jb_str(&j, "name", placement_names[p]);
	jb_arr_begin(&j, "cpus");
	jb_int(&j, NULL, c[0]);
	jb_int(&j, NULL, c[1]);
	jb_arr_end(&j);
	jb_str(&j, "how", how);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
	return EXIT_OK;
}

long parse_count(const char *opt, const char *v, long min)
{
	char *end;
	errno = 0;
	long n = strtol(v, &end, 10);
	if (errno || *end || end == v || n < min)
		die(EXIT_USAGE, "%s %s: expected an integer >= %ld", opt, v, min);
	return n;
}

static int cmd_run(int argc, char **argv)
{
	struct run R;
	memset(&R, 0, sizeof(R));
	R.o.samples = 20;
	R.o.warmup = 3;
	R.o.target_ms = 10;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int takes = 1;
		if (strcmp(a, "-P") == 0 || strcmp(a, "--param") == 0) {
			if (v && R.o.nparams < MAX_PARAMS * 2)
				R.o.params[R.o.nparams++] = v;
		} else if (strcmp(a, "--samples") == 0 && v)
			R.o.samples = parse_count(a, v, 1);
		else if (strcmp(a, "--warmup") == 0 && v)
			R.o.warmup = parse_count(a, v, 0);
		else if (strcmp(a, "--iters") == 0 && v)
			R.o.iters = parse_count(a, v, 1);
		else if (strcmp(a, "--target-ms") == 0 && v) {
			char *end;
			R.o.target_ms = strtod(v, &end);
			if (*end || !(R.o.target_ms >= 1) || R.o.target_ms > 60000)
				die(EXIT_USAGE, "--target-ms %s: expected a number of milliseconds in [1, 60000]", v);
		} else if (strcmp(a, "--cpu") == 0 && v)
			R.o.cpus = v;
		else if (strcmp(a, "--counters") == 0 && v)
			R.o.counters = v;
		else if (strcmp(a, "--fake-clock") == 0 && v) {
			char *end;
			R.o.fake_ns = strtod(v, &end);
			if (*end || !(R.o.fake_ns > 0) || R.o.fake_ns > 1e9)
				die(EXIT_USAGE, "--fake-clock %s: expected the fake cost of one operation in ns (0 < NS <= 1e9)", v);
		} else if (strcmp(a, "--spin") == 0 && v) {
			R.o.spin = parse_count(a, v, 0);
			if (R.o.spin > SPIN_MAX)
				die(EXIT_USAGE, "--spin %s: at most %d dependent adds per operation", v, SPIN_MAX);
		} else if (strcmp(a, "--check") == 0) {
			R.o.check = 1;
			takes = 0;
		} else if (strcmp(a, "--seed") == 0 && v)
			R.o.seed = strtoull(v, NULL, 0);
		else if (a[0] != '-' && !R.o.bench) {
			R.o.bench = a;
			takes = 0;
		} else
			die(EXIT_USAGE, "run: unexpected argument '%s' (see opcost-probe --help)", a);
		i += takes;
	}
	if (!R.o.bench)
		die(EXIT_USAGE, "run: which benchmark? (opcost-probe list)");

	/* Never outlive the opcost process that started us. */
	pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		return EXIT_FAIL;

	R.ctx.b = find_bench(R.o.bench);
	for (int i = 0; R.ctx.b->params && R.ctx.b->params[i].name; i++)
		R.ctx.values[i] = R.ctx.b->params[i].def;
	for (int i = 0; i < R.o.nparams; i++)
		set_param(&R.ctx, R.o.params[i]);

	char err[2048];
	if (counters_parse(R.o.counters, &R.cs, err, sizeof(err)) < 0)
		die(EXIT_USAGE, "%s", err);

	if (resolve_cpus(&R, R.ctx.err, sizeof(R.ctx.err)) < 0) {
		emit_unsupported(&R);
		return EXIT_UNSUPPORTED;
	}
	int rc = pin_self(R.ctx.cpus[0]);
	if (rc < 0)
		die(EXIT_FAIL, "cannot pin to CPU %d: %s", R.ctx.cpus[0], strerror(-rc));

	R.ctx.spin = (unsigned)R.o.spin;
	R.ctx.shm = mmap(NULL, sizeof(struct helper_shm), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (R.ctx.shm == MAP_FAILED)
		die(EXIT_FAIL, "mmap: %s", strerror(errno));
	R.fake_rng = R.o.seed * 0x9E3779B97F4A7C15ull + 1;

	/* before setup: a helper sharing our CPU must not disturb calibration */
	if (!R.o.check)
		calibrate_clock(&R);
	int s = R.ctx.b->setup ? R.ctx.b->setup(&R.ctx) : BENCH_OK;
	if (s == BENCH_UNSUPPORTED) {
		emit_unsupported(&R);
		return EXIT_UNSUPPORTED;
	}
	if (s == BENCH_BADPARAM)
		die(EXIT_USAGE, "%s: %s", R.ctx.b->name, R.ctx.err);
	if (s != BENCH_OK)
		die(EXIT_FAIL, "%s: setup failed: %s", R.ctx.b->name, R.ctx.err[0] ? R.ctx.err : "unknown error");

	if (R.o.check) {
		if (R.ctx.b->teardown)
			R.ctx.b->teardown(&R.ctx);
		struct jb j;
		jb_init(&j);
		jb_obj_begin(&j, NULL);
		jb_str(&j, "type", "check");
		jb_str(&j, "status", "ok");
		emit_params(&j, &R.ctx);
		jb_obj_end(&j);
		jb_emit(&j, 1);
		jb_free(&j);
		return EXIT_OK;
	}
	counters_open(&R.cs);
	int dummy_valid, dummy_cpu;
	struct usage dummy;
	helper_sync(&R, &dummy, &dummy_valid, &dummy_cpu); /* baseline */
	uint64_t iters = calibrate_iters(&R);
	emit_header(&R, iters, argc, argv);

	struct batch B;
	for (long i = 0; i < R.o.warmup + R.o.samples; i++) {
		int warm = i < R.o.warmup;
		run_batch(&R, iters, &B, 1);
		emit_sample(&R, warm ? i : i - R.o.warmup, warm, &B);
	}
	counters_close(&R.cs);
	if (R.ctx.b->teardown)
		R.ctx.b->teardown(&R.ctx);

	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "trailer");
	jb_str(&j, "status", "ok");
	jb_int(&j, "samples", R.o.samples);
	jb_int(&j, "warmup", R.o.warmup);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
	return EXIT_OK;
}

static const char usage_text[] =
	"usage: opcost-probe list [--json]\n"
	"       opcost-probe run BENCH [-P key=value]... [--samples N] [--warmup N]\n"
	"                        [--target-ms MS] [--iters N] [--cpu A[,B]] [--counters LIST]\n"
	"                        [--fake-clock NS [--seed S]] [--spin N] [--check]\n"
	"       (--spin N: add N dependent adds per operation, a known injected cost)\n"
	"       (--check: validate parameters and CPUs and run setup/teardown; measure nothing)\n"
	"       opcost-probe placement CPU_A CPU_B   (placement class of a CPU pair, from sysfs)\n"
	"       opcost-probe time [--samples N] [--warmup N] [--cpu C] [--fake-clock NS [--seed S]]\n"
	"                         [--check] -- PROGRAM [ARGS...]   (one sample per program run)\n"
	"       opcost-probe cpuid\n"
	"       opcost-probe version\n"
	"Exit: 0 ok, 1 benchmark failed, 2 usage error, 3 unsupported on this machine.\n";

int main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage_text, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	/* stdout carries JSON lines written with write(2); keep stdio unbuffered
	 * so the text forms never interleave. */
	setvbuf(stdout, NULL, _IONBF, 0);
	if (strcmp(argv[1], "list") == 0)
		return cmd_list(argc > 2 && strcmp(argv[2], "--json") == 0);
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc, argv);
	if (strcmp(argv[1], "placement") == 0)
		return cmd_placement(argc, argv);
	if (strcmp(argv[1], "time") == 0)
		return cmd_time(argc, argv);
	if (strcmp(argv[1], "cpuid") == 0)
		return cmd_cpuid(1) == 0 ? EXIT_OK : EXIT_FAIL;
	if (strcmp(argv[1], "version") == 0) {
		printf("opcost-probe %s %s gcc %s\n", PROBE_VERSION, ARCH, __VERSION__);
		return EXIT_OK;
	}
	die(EXIT_USAGE, "unknown command '%s'; valid: list, run, time, placement, cpuid, version", argv[1]);
	return EXIT_USAGE;
}
