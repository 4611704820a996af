/* See harness.h. The measured region of a batch is the benchmark's run()
 * between clock_start() and clock_end(), nothing else; everything the
 * sample also reports (usage, counters, steal, CPUs) is read outside it. */
#include "harness.h"
#include "clock.h"
#include "counters.h"
#include "cpus.h"
#include "emit.h"
#include "helper.h"
#include "marker.h"
#include "params.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <time.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

struct run {
	struct run_opts o;
	struct bench_ctx ctx;
	struct counter_set cs;
	double tsc_hz;
	double clock_ovh; /* ticks for one start/end pair with nothing between */
	double loop_ovh;  /* ticks per empty loop iteration */
	double spin_ticks; /* cost of one spin_chain(spin), measured alone */
	uint64_t fake_rng;
	struct usage helper_prev;
	struct sched_times helper_sched_prev;
	int sched_fd; /* the measuring thread's schedstat, opened once; -1: unavailable */
	char sched_why[200];
	double batch_ms; /* one batch as calibrated (0: --iters, not known) */
	int marking; /* the measured batches (warm-up included): each is a counting window (marker.h) */
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

/* How the overheads were measured and subtracted, for the header. */
static const char *overhead_method(const struct run *R)
{
	if (R->ctx.b->flags & BENCH_LOOP_HIDDEN)
		return "minimum of 2000 empty clock pairs, subtracted from every batch; the empty loop (minimum of 50 "
		       "20000-iteration loops) is not subtracted: this operation is a dependent chain that hides the "
		       "loop's bookkeeping";
	if (R->ctx.b->prepare)
		return "every iteration is timed alone after an untimed prepare step; minimum of 2000 empty clock pairs "
		       "subtracted per iteration, and the empty loop's cost (minimum of 50 20000-iteration loops) per "
		       "iteration";
	return "minimum of 2000 empty clock pairs and of 50 empty 20000-iteration loops; both subtracted from every batch";
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
	struct usage u = {tv_ns(ru.ru_utime), tv_ns(ru.ru_stime), ru.ru_nvcsw, ru.ru_nivcsw};
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

static void helper_sync(struct run *R, struct usage *out, int *valid, int *cpu, struct sched_times *sched,
			int *sched_valid)
{
	*valid = 0;
	if (sched_valid)
		*sched_valid = 0;
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
	if (h->sched_valid) {
		struct sched_times st = {h->run_ns, h->delay_ns};
		if (sched) {
			sched->run_ns = st.run_ns - R->helper_sched_prev.run_ns;
			sched->delay_ns = st.delay_ns - R->helper_sched_prev.delay_ns;
			*sched_valid = 1;
		}
		R->helper_sched_prev = st;
	}
}

/* The benchmark's run of n iterations as one counting window (marker.h).
 * Every window goes through here, the fixed part's too (harness_run), so
 * the instructions around the call are the same in each. */
static __attribute__((noinline)) void marked_run(struct run *R, uint64_t n)
{
	MARK(MARK_OPEN);
	R->ctx.b->run(&R->ctx, n);
	MARK(MARK_CLOSE);
}

/* A prepared benchmark's timed segment, run(ctx, 1), as the counted part of
 * its batch's window: every segment, and the fixed part's, goes through
 * here, so the instructions around the call are the same in each. */
static __attribute__((noinline)) void marked_segment(struct run *R, void (*run)(struct bench_ctx *, uint64_t))
{
	MARK(MARK_RESUME);
	run(&R->ctx, 1);
	MARK(MARK_PAUSE);
}

/* The reference for a prepared benchmark's fixed part: an empty run, called
 * as its run is (the counted equivalent of variants' empty opcost_op). */
static __attribute__((noinline)) void empty_run(struct bench_ctx *ctx, uint64_t iters)
{
	(void)ctx;
	(void)iters;
	__asm__ volatile("" ::: "memory");
}

/* The fixed part's window of a prepared benchmark: n segments of the empty
 * run, the window paused between them as in run_prepared. */
static void marked_empty_segments(struct run *R, int n)
{
	MARK(MARK_OPEN);
	MARK(MARK_PAUSE);
	for (int i = 0; i < n; i++)
		marked_segment(R, empty_run);
	MARK(MARK_CLOSE);
}

/* A benchmark with prepare(): every iteration is its own timed segment,
 * prepared outside it. Ticks, wall time, the measuring thread's usage and the
 * counters are summed over the segments only (c0 stays zero, c1 collects the
 * counts); *u0 and *u1 come out so that u1 - u0 is that sum. */
static void run_prepared(struct run *R, struct batch *B, struct usage *u0, struct usage *u1)
{
	struct usage sum = {0, 0, 0, 0};
	struct sched_times ssum = {0, 0};
	int sched_ok = R->sched_fd >= 0;
	memset(&B->c0, 0, sizeof(B->c0));
	memset(&B->c1, 0, sizeof(B->c1));
	B->raw_ticks = 0;
	B->wall_ns = 0;
	/* one counting window per batch, paused while each iteration is prepared */
	if (R->marking) {
		MARK(MARK_OPEN);
		MARK(MARK_PAUSE);
	}
	for (uint64_t i = 0; i < B->executed; i++) {
		if (R->ctx.b->prepare(&R->ctx) != 0)
			die(EXIT_FAIL, "%s: %s", R->ctx.b->name, R->ctx.err[0] ? R->ctx.err : "prepare failed");
		struct counter_snapshot a, b;
		struct sched_times sa, sb;
		if (sched_ok && sched_read(R->sched_fd, &sa) < 0)
			sched_ok = 0;
		struct usage ua = self_usage();
		counters_read(&R->cs, &a);
		uint64_t w = mono_raw_ns();
		uint64_t t0 = clock_start();
		if (R->marking)
			marked_segment(R, R->ctx.b->run);
		else
			R->ctx.b->run(&R->ctx, 1);
		uint64_t t1 = clock_end();
		B->wall_ns += mono_raw_ns() - w;
		counters_read(&R->cs, &b);
		struct usage ub = self_usage();
		if (sched_ok && sched_read(R->sched_fd, &sb) == 0) {
			ssum.run_ns += sb.run_ns - sa.run_ns;
			ssum.delay_ns += sb.delay_ns - sa.delay_ns;
		} else {
			sched_ok = 0;
		}
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
	if (R->marking)
		MARK(MARK_CLOSE);
	*u0 = (struct usage){0, 0, 0, 0};
	*u1 = sum;
	B->sched = ssum;
	B->sched_valid = sched_ok;
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
	struct sched_times q0 = {0, 0}, q1 = {0, 0};
	int sched_ok = R->sched_fd >= 0 && !R->ctx.b->prepare && sched_read(R->sched_fd, &q0) == 0;
	struct usage u0 = self_usage();
	counters_read(&R->cs, &B->c0);
	uint64_t w0 = mono_raw_ns();

	uint64_t t0 = 0, t1 = 0;
	struct usage u1;
	if (R->ctx.b->prepare) {
		run_prepared(R, B, &u0, &u1);
	} else {
		/* The window markers (marker.h) are NOPs on hardware, around the
		 * benchmark's loop, not in it: a QEMU with the opcount plugin counts
		 * the instructions between them. */
		t0 = clock_start();
		if (R->marking)
			marked_run(R, B->executed);
		else
			R->ctx.b->run(&R->ctx, B->executed);
		t1 = clock_end();
		B->wall_ns = mono_raw_ns() - w0;
		counters_read(&R->cs, &B->c1);
		u1 = self_usage();
		if (sched_ok && sched_read(R->sched_fd, &q1) == 0) {
			B->sched.run_ns = q1.run_ns - q0.run_ns;
			B->sched.delay_ns = q1.delay_ns - q0.delay_ns;
			B->sched_valid = 1;
		}
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
	helper_sync(R, &B->helper, &B->helper_valid, &B->helper_cpu, &B->helper_sched, &B->helper_sched_valid);

	/* a prepared benchmark pays one clock pair per iteration */
	double clocks = R->ctx.b->prepare ? (double)iters : 1.0;
	if (fake) {
		/* Deterministic model: per-op cost fake_ns, +-1% jitter per batch,
		 * plus one tick per spin add; the usual overheads added, so their
		 * subtraction is exercised too. */
		double j = ((double)(xorshift(&R->fake_rng) % 2001) - 1000.0) / 100000.0;
		double op_ticks = R->o.fake_ns * (double)ctx_ops_per_iter(&R->ctx) * R->tsc_hz / 1e9 * (1.0 + j) + R->spin_ticks;
		B->raw_ticks = (double)iters * (op_ticks + R->loop_ovh) + R->clock_ovh * clocks;
		double ns = (double)iters * op_ticks / R->tsc_hz * 1e9;
		B->wall_ns = (uint64_t)ns;
		B->self = (struct usage){(int64_t)(ns * 0.25), (int64_t)(ns * 0.75), 0, 0};
		if (B->helper_valid)
			B->helper = B->self;
		B->cpu_before = B->cpu_after = R->ctx.cpus[0];
		B->steal = 0;
		/* on the CPU the whole batch, never waiting; the same on every machine */
		B->sched = (struct sched_times){(int64_t)ns, 0};
		B->sched_valid = 1;
		B->helper_sched = (struct sched_times){(int64_t)(ns / 2), 0};
		B->helper_sched_valid = B->helper_valid;
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
	B->ns = B->net_ticks / R->tsc_hz * 1e9;
}

static uint64_t calibrate_iters(struct run *R)
{
	if (R->o.iters > 0)
		return (uint64_t)R->o.iters;
	double target_ticks = R->o.target_ms * 1e-3 * R->tsc_hz;
	R->batch_ms = R->o.target_ms;
	if (R->o.fake_ns > 0) {
		double n = R->o.target_ms * 1e6 / (R->o.fake_ns * (double)ctx_ops_per_iter(&R->ctx));
		if (n < 1) /* one fake iteration is longer than a batch should be */
			R->batch_ms = R->o.fake_ns * (double)ctx_ops_per_iter(&R->ctx) / 1e6;
		return n < 1 ? 1 : (uint64_t)n;
	}
	uint64_t n = 1;
	struct batch B;
	for (;;) {
		run_batch(R, n, &B, 0);
		double t = B.raw_ticks > 1 ? B.raw_ticks : 1;
		if (t >= target_ticks / 8 || n >= (1ull << 40)) {
			double scaled = (double)n * target_ticks / t;
			if (scaled < 1) /* one iteration is longer than a batch should be */
				R->batch_ms = t / n / R->tsc_hz * 1e3;
			return scaled < 1 ? 1 : (uint64_t)scaled;
		}
		/* grow fast while far away, then by the measured ratio */
		double grow = target_ticks / 4 / t;
		n = grow > 16 ? n * 16 : (uint64_t)((double)n * grow) + 1;
	}
}

/* One iteration takes a second or more: calibration made the batch one
 * iteration, and that is long (not a long --target-ms of short ones). */
static int long_iteration(const struct run *R, uint64_t iters)
{
	return iters == 1 && R->o.iters <= 0 && R->batch_ms >= BUDGET_LONG_MS;
}

/* --budget-ms: when one iteration takes a second or more (the batch is then
 * one iteration, as calibrated), take only the batches that fit in the
 * budget: measured batches first (at least BUDGET_MIN_SAMPLES, at most those
 * asked), warm-up with what is left; the calibration's untimed iteration
 * (it has already run the operation once) is paid from the same budget. The front end sized the budget and reads what
 * was done in the header; nothing here is timed. */
static int fit_budget(struct run *R, uint64_t iters)
{
	if (R->o.budget_ms <= 0 || !long_iteration(R, iters))
		return 0;
	double fits = R->o.budget_ms / R->batch_ms - 1.0; /* the calibration's iteration was paid from it */
	if ((double)(R->o.samples + R->o.warmup) <= fits)
		return 0;
	long n = (long)fits;
	long samples = n < BUDGET_MIN_SAMPLES ? BUDGET_MIN_SAMPLES : n > R->o.samples ? R->o.samples : n;
	long warm = n - samples;
	R->o.samples = samples;
	R->o.warmup = warm < 0 ? 0 : warm > R->o.warmup ? R->o.warmup : warm;
	return 1;
}

/* What the header says of this run, and what its samples share. */
static void describe(struct run *R, uint64_t iters, struct run_info *ri)
{
	memset(ri, 0, sizeof(*ri));
	ri->ctx = &R->ctx;
	ri->arch = PROBE_ARCH;
	ri->pinned = -1;
	ri->clock = R->o.fake_ns > 0 ? "fake" : CLOCK_NAME;
	ri->tsc_hz = R->tsc_hz;
	ri->fake = R->o.fake_ns > 0;
	ri->clock_ticks = R->clock_ovh;
	ri->loop_ticks = R->loop_ovh;
	ri->loop_subtracted = loop_subtracted(R) > 0 || R->loop_ovh == 0;
	ri->overhead_method = overhead_method(R);
	ri->spin = R->o.spin;
	ri->spin_ticks = R->spin_ticks;
	ri->iters = iters;
	ri->iters_source = R->o.iters > 0 ? "requested" : "calibrated to target_ms";
	ri->samples = R->o.samples;
	ri->warmup = R->o.warmup;
	ri->target_ms = R->o.target_ms;
	ri->batch_ms = R->batch_ms;
	ri->hold = R->o.hold;
	ri->budget_ms = R->o.budget_ms;
	ri->cs = &R->cs;
	ri->schedstat_ok = R->sched_fd >= 0 || ri->fake;
	ri->schedstat = ri->fake ? "fake clock: every batch on the CPU throughout, no run delay"
			: R->sched_fd >= 0 ? "/proc/self/task/TID/schedstat of the measuring thread (and of the helper), "
					   "read before and after every batch outside its timed region"
					 : R->sched_why;
}

/* OPCOST_QUIESCE=1 (set by opcost in a guest whose instructions are counted
 * over all its CPUs): before a measured batch, wait until the reader of our
 * output (the VM's init) has taken the last lines, then a little more for it
 * to finish sending them, so that its work is not in the next window. Up to
 * about a second; never in the timed region, never without the variable. */
static void quiesce_output(void)
{
	struct timespec ms = {0, 1000000};
	for (int i = 0; i < 1000; i++) {
		int n = 0;
		if (ioctl(1, FIONREAD, &n) < 0 || n == 0)
			break;
		nanosleep(&ms, NULL);
	}
	struct timespec settle = {0, 20000000};
	nanosleep(&settle, NULL);
}

int harness_run(const struct run_opts *o, int argc, char **argv)
{
	struct run R;
	memset(&R, 0, sizeof(R));
	R.o = *o;
	R.ctx.b = find_bench(R.o.bench);
	for (int i = 0; R.ctx.b->params && R.ctx.b->params[i].name; i++)
		R.ctx.values[i] = R.ctx.b->params[i].def;
	for (int i = 0; i < R.o.nparams; i++)
		set_param(&R.ctx, R.o.params[i]);

	char err[2048];
	if (counters_parse(R.o.counters, &R.cs, err, sizeof(err)) < 0)
		die(EXIT_USAGE, "%s", err);

	if (resolve_cpus(&R.ctx, R.o.cpus, R.ctx.err, sizeof(R.ctx.err)) < 0) {
		emit_unsupported(&R.ctx);
		return EXIT_UNSUPPORTED;
	}
	int rc = pin_self(R.ctx.cpus[0]);
	if (rc < 0)
		die(EXIT_FAIL, "cannot pin to CPU %d: %s", R.ctx.cpus[0], strerror(-rc));
	/* Run delay: opened once, here, on the measuring thread, before anything is measured. */
	R.sched_fd = sched_open(R.sched_why, sizeof(R.sched_why));

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
		emit_unsupported(&R.ctx);
		return EXIT_UNSUPPORTED;
	}
	if (s == BENCH_BADPARAM)
		die(EXIT_USAGE, "%s: %s", R.ctx.b->name, R.ctx.err);
	if (s != BENCH_OK)
		die(EXIT_FAIL, "%s: setup failed: %s", R.ctx.b->name, R.ctx.err[0] ? R.ctx.err : "unknown error");

	if (R.o.check) {
		if (R.ctx.b->teardown)
			R.ctx.b->teardown(&R.ctx);
		emit_check(&R.ctx);
		return EXIT_OK;
	}
	counters_open(&R.cs, R.ctx.shm->tid);
	int dummy_valid, dummy_cpu;
	struct usage dummy;
	helper_sync(&R, &dummy, &dummy_valid, &dummy_cpu, NULL, NULL); /* baseline */
	uint64_t iters = calibrate_iters(&R);
	long asked_samples = R.o.samples, asked_warmup = R.o.warmup;
	int fitted = fit_budget(&R, iters);
	struct run_info ri;
	describe(&R, iters, &ri);
	ri.asked_samples = asked_samples;
	ri.asked_warmup = asked_warmup;
	ri.fitted = fitted;
	ri.long_iteration = long_iteration(&R, iters);
	emit_header(&ri, argc, argv);
	if (R.o.hold)
		emit_hold();

	struct batch B;
	long total = R.o.warmup + R.o.samples;
	/* OPCOST_COUNTING=1 (opcost runs this probe under QEMU's counting
	 * plugin): first two windows, the benchmark's run of one iteration and
	 * of two: their difference is one operation, and one run less it is
	 * the fixed part every batch's window holds (the call into the loop,
	 * its set-up); opcost takes that off each batch. A prepared benchmark
	 * cannot run unprepared, and each of its iterations is a call of its
	 * own: its two windows hold one and two calls of an empty run, made as
	 * its segments are (marked_segment); their difference is the fixed part
	 * opcost takes off each iteration. */
	const char *cnt = getenv("OPCOST_COUNTING");
	if (cnt && cnt[0] == '1') {
		for (int n = 1; n <= 2; n++) {
			quiesce_output();
			if (R.ctx.b->prepare)
				marked_empty_segments(&R, n);
			else
				marked_run(&R, n);
		}
	}
	R.marking = 1;
	const char *q = getenv("OPCOST_QUIESCE");
	int quiesce = q && q[0] == '1';
	for (long i = 0; i < total; i++) {
		int warm = i < R.o.warmup;
		if (quiesce)
			quiesce_output();
		run_batch(&R, iters, &B, 1);
		emit_sample(&ri, warm ? i : i - R.o.warmup, warm, &B);
		emit_progress(i + 1, total);
	}
	R.marking = 0;
	emit_release();
	counters_close(&R.cs);
	if (R.ctx.b->teardown)
		R.ctx.b->teardown(&R.ctx);
	emit_trailer(R.o.samples, R.o.warmup);
	return EXIT_OK;
}
