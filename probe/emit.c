/* See emit.h. */
#include "emit.h"
#include "json.h"
#include "clock.h"

#include <errno.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct {
	int on;
	char *buf;
	size_t len, cap;
	struct timespec last_progress;
} held;

static void hold_append(const char *line, size_t n);

#include <unistd.h>

static void emit_params(struct jb *j, const struct bench_ctx *ctx)
{
	jb_obj_begin(j, "params");
	for (int i = 0; ctx->b->params && ctx->b->params[i].name; i++)
		jb_str(j, ctx->b->params[i].name, ctx->values[i]);
	jb_obj_end(j);
}

/* The applies_if rule of parameter `name` ("NAME!=VALUE"), or NULL: it always applies. */
static const char *applies_rule(const struct bench *b, const char *name)
{
	size_t n = strlen(name);
	for (int k = 0; b->applies_if && b->applies_if[k]; k++)
		if (strncmp(b->applies_if[k], name, n) == 0 && b->applies_if[k][n] == ':')
			return b->applies_if[k] + n + 1;
	return NULL;
}

/* Whether parameter i applies given the others' values. */
static int param_applies(const struct bench_ctx *ctx, int i)
{
	const char *cond = applies_rule(ctx->b, ctx->b->params[i].name);
	const char *ne = cond ? strstr(cond, "!=") : NULL;
	if (!ne)
		return 1;
	for (int k = 0; ctx->b->params[k].name; k++)
		if (strlen(ctx->b->params[k].name) == (size_t)(ne - cond) &&
		    strncmp(ctx->b->params[k].name, cond, (size_t)(ne - cond)) == 0)
			return strcmp(ctx->values[k], ne + 2) != 0;
	return 1;
}

static void emit_unused_params(struct jb *j, const struct bench_ctx *ctx)
{
	int any = 0;
	for (int i = 0; ctx->b->params && ctx->b->params[i].name; i++)
		any |= !param_applies(ctx, i);
	if (!any)
		return;
	jb_arr_begin(j, "params_unused");
	for (int i = 0; ctx->b->params[i].name; i++)
		if (!param_applies(ctx, i))
			jb_str(j, NULL, ctx->b->params[i].name);
	jb_arr_end(j);
}

void emit_header(const struct run_info *ri, int argc, char **argv)
{
	struct bench_ctx *ctx = ri->ctx;
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "header");
	jb_str(&j, "schema", "opcost.probe/1");
	jb_str(&j, "probe_version", PROBE_VERSION);
	if (ri->arch)
		jb_str(&j, "arch", ri->arch);
	jb_str(&j, "compiler", "gcc " __VERSION__);
	jb_int(&j, "pid", getpid());
	jb_str(&j, "bench", ctx->b->name);
	jb_str(&j, "op", ctx->b->op);
	jb_bool(&j, "blocks", bench_blocks(ctx->b));
	emit_params(&j, ctx);
	emit_unused_params(&j, ctx);
	jb_arr_begin(&j, "cpus");
	jb_int(&j, NULL, ctx->cpus[0]);
	if (ctx->b->flags & BENCH_HAS_HELPER)
		jb_int(&j, NULL, ctx->cpus[1]);
	jb_arr_end(&j);
	if (ri->pinned >= 0)
		jb_bool(&j, "pinned", ri->pinned);
	if (ctx->placement[0]) {
		jb_obj_begin(&j, "placement");
		jb_str(&j, "name", ctx->placement);
		jb_arr_begin(&j, "cpus");
		jb_int(&j, NULL, ctx->cpus[0]);
		jb_int(&j, NULL, ctx->cpus[1]);
		jb_arr_end(&j);
		jb_str(&j, "how", ctx->placement_how);
		jb_obj_end(&j);
	}
	if (ctx_ops_per_iter(ctx) > 1) {
		/* ns_per_op is per operation; one iteration (ns_per_iter) holds this many */
		jb_uint(&j, "ops_per_iter", ctx_ops_per_iter(ctx));
		jb_str(&j, "iteration", ctx->iter_desc ? ctx->iter_desc : "");
	}
	if (ctx->has_nominal)
		jb_num(&j, "nominal_ns_per_op", ctx->nominal_ns);
	jb_str(&j, "clock", ri->clock);
#if defined(__arm__)
	/* arm: CNTVCT or CLOCK_MONOTONIC_RAW, decided at start-up (clock.c) */
	if (!ri->fake && !clock_arm_cntvct)
		jb_str(&j, "clock_note", clock_arm_why);
#endif
	jb_num(&j, "tsc_hz", ri->tsc_hz);
	jb_str(&j, "tsc_hz_source", ri->fake ? "fake clock (2 GHz)"
		 : "calibrated against CLOCK_MONOTONIC_RAW over 20 ms at start-up");
	jb_obj_begin(&j, "overhead");
	jb_num(&j, "clock_ticks", ri->clock_ticks);
	jb_num(&j, "loop_ticks_per_iter", ri->loop_ticks);
	jb_num(&j, "clock_ns", ri->clock_ticks / ri->tsc_hz * 1e9);
	jb_num(&j, "loop_ns_per_iter", ri->loop_ticks / ri->tsc_hz * 1e9);
	if (ri->loop_subtracted >= 0)
		jb_bool(&j, "loop_subtracted", ri->loop_subtracted);
	jb_str(&j, "method", ri->overhead_method);
	jb_obj_end(&j);
	if (ctx->b->prepare && ctx->prepare)
		jb_str(&j, "prepare", ctx->prepare);
	if (ri->spin > 0) {
		jb_obj_begin(&j, "spin");
		jb_int(&j, "n", ri->spin);
		jb_num(&j, "ticks", ri->spin_ticks);
		jb_num(&j, "ns", ri->spin_ticks / ri->tsc_hz * 1e9);
		jb_str(&j, "method", "spin_chain alone in the same loop shape, minimum of 50 batches, overheads subtracted");
		jb_obj_end(&j);
	}
	if (ctx->aux && ctx->b->aux_run) {
		jb_obj_begin(&j, "aux");
		jb_str(&j, "what", ctx->aux);
		jb_bool(&j, "subtracted", !ri->fake);
		jb_str(&j, "method", ri->fake ? "fake clock: not measured, not subtracted"
			 : "aux loop alone, timed right after every batch with the same iteration count, clock and "
			   "loop overhead subtracted; its cost per iteration is subtracted from that batch and "
			   "reported in the sample (aux_ticks_per_iter, aux_ns_per_op)");
		jb_obj_end(&j);
	}
	if (ctx->header_extra)
		ctx->header_extra(ctx, &j);
	jb_uint(&j, "iters", ri->iters);
	jb_str(&j, "iters_source", ri->iters_source);
	jb_int(&j, "samples", ri->samples);
	jb_int(&j, "warmup", ri->warmup);
	if (ri->target_ms > 0)
		jb_num(&j, "target_ms", ri->target_ms);
	if (ri->batch_ms > 0)
		jb_num(&j, "batch_ms", ri->batch_ms);
	if (ri->hold)
		jb_str(&j, "output", "held");
	if (ri->budget_ms > 0) {
		/* --budget-ms: what was asked, and whether the batches were cut to fit */
		jb_obj_begin(&j, "budget");
		jb_num(&j, "ms", ri->budget_ms);
		jb_num(&j, "long_iteration_ms", BUDGET_LONG_MS);
		jb_int(&j, "min_samples", BUDGET_MIN_SAMPLES);
		jb_bool(&j, "long_iteration", ri->long_iteration);
		jb_int(&j, "asked_samples", ri->asked_samples);
		jb_int(&j, "asked_warmup", ri->asked_warmup);
		jb_bool(&j, "fitted", ri->fitted);
		jb_obj_end(&j);
	}
	if (ri->schedstat) {
		/* run delay: the time the measuring thread was runnable but not running */
		jb_obj_begin(&j, "run_delay");
		jb_bool(&j, "available", ri->schedstat_ok);
		jb_str(&j, ri->schedstat_ok ? "source" : "reason", ri->schedstat);
		jb_obj_end(&j);
	}
	jb_bool(&j, "fake_clock", ri->fake);
	jb_arr_begin(&j, "counters");
	for (int i = 0; ri->cs && i < ri->cs->n; i++) {
		const struct counter *c = &ri->cs->c[i];
		jb_obj_begin(&j, NULL);
		jb_str(&j, "name", c->name);
		jb_str(&j, "status", c->status == CTR_OK ? "ok" : "<not supported>");
		if (c->status == CTR_OK)
			jb_str(&j, "group", ri->cs->c[c->group].name);
		if (c->alone)
			jb_bool(&j, "alone", 1);
		if (c->helper)
			jb_bool(&j, "helper", 1);
		/* the perf_event_attr as opened, so a named event can be checked */
		char hex[24];
		jb_obj_begin(&j, "attr");
		jb_uint(&j, "type", c->type);
		snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)c->config);
		jb_str(&j, "config", hex);
		if (c->config1 || c->config2) {
			snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)c->config1);
			jb_str(&j, "config1", hex);
			snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)c->config2);
			jb_str(&j, "config2", hex);
		}
		jb_obj_end(&j);
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

/* Per-op counter values. A counter whose group ran only part of the batch
 * (multiplexed) is scaled by enabled/running here, the only place values are
 * scaled; its running fraction is reported in counters_running, and the
 * smallest fraction in counters_running_fraction. */
static void emit_counters(struct jb *j, const struct run_info *ri, const struct batch *B)
{
	const struct counter_set *cs = ri->cs;
	if (!cs || cs->n == 0)
		return;
	double minfrac = 1.0;
	int mux = 0;
	jb_obj_begin(j, "counters");
	for (int i = 0; i < cs->n; i++) {
		const struct counter *c = &cs->c[i];
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
			jb_num(j, c->name, v / ((double)B->executed * (double)ctx_ops_per_iter(ri->ctx)));
		}
	}
	jb_obj_end(j);
	if (!mux)
		return;
	jb_num(j, "counters_running_fraction", minfrac);
	jb_obj_begin(j, "counters_running");
	for (int i = 0; i < cs->n; i++) {
		double enabled = (double)(B->c1.enabled[i] - B->c0.enabled[i]);
		double running = (double)(B->c1.running[i] - B->c0.running[i]);
		if (cs->c[i].status == CTR_OK && running > 0 && running < enabled)
			jb_num(j, cs->c[i].name, running / enabled);
	}
	jb_obj_end(j);
}

void emit_sample(const struct run_info *ri, long i, int warmup, const struct batch *B)
{
	const struct bench_ctx *ctx = ri->ctx;
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "sample");
	jb_int(&j, "i", i);
	jb_bool(&j, "warmup", warmup);
	jb_uint(&j, "iters", B->iters);
	if (B->executed != B->iters)
		jb_uint(&j, "executed", B->executed);
	jb_num(&j, "raw_ticks", B->raw_ticks);
	jb_num(&j, "ticks", B->net_ticks);
	double ns = B->ns;
	uint64_t opi = ctx_ops_per_iter(ctx);
	double n = (double)B->iters * (double)opi; /* operations in the batch */
	if (opi > 1)
		jb_uint(&j, "ops_per_iter", opi);
	jb_num(&j, "ns", ns);
	jb_uint(&j, "wall_ns", B->wall_ns);
	if (B->start_raw_ns)
		jb_uint(&j, "start_raw_ns", B->start_raw_ns);
	jb_num(&j, "ns_per_op", ns / n);
	jb_num(&j, "tsc_per_op", B->net_ticks / n);
	if (B->aux_valid) {
		/* per operation (ops_per_iter > 1: the aux loop's per-iteration cost / ops_per_iter) */
		jb_num(&j, "aux_ticks_per_iter", B->aux_ticks);
		jb_num(&j, "aux_ns_per_op", B->aux_ticks / ri->tsc_hz * 1e9 / (double)opi);
	}
	if (opi > 1)
		jb_num(&j, "ns_per_iter", ns / (double)B->iters);
	if (ctx->has_nominal)
		jb_num(&j, "overshoot_ns_per_op", ns / n - ctx->nominal_ns);
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
	if (B->sched_valid) {
		jb_int(&j, "run_ns", B->sched.run_ns);
		jb_int(&j, "run_delay_ns", B->sched.delay_ns);
	}
	if (B->helper_valid) {
		jb_obj_begin(&j, "helper");
		jb_int(&j, "cpu", B->helper_cpu);
		jb_int(&j, "user_ns", B->helper.user_ns);
		jb_int(&j, "sys_ns", B->helper.sys_ns);
		jb_num(&j, "user_ns_per_op", (double)B->helper.user_ns / n);
		jb_num(&j, "sys_ns_per_op", (double)B->helper.sys_ns / n);
		jb_int(&j, "nvcsw", B->helper.nvcsw);
		jb_int(&j, "nivcsw", B->helper.nivcsw);
		if (B->helper_sched_valid) {
			jb_int(&j, "run_ns", B->helper_sched.run_ns);
			jb_int(&j, "run_delay_ns", B->helper_sched.delay_ns);
		}
		jb_obj_end(&j);
	}
	emit_counters(&j, ri, B);
	jb_obj_end(&j);
	if (held.on) {
		size_t n = jb_line(&j);
		hold_append(j.buf, n);
	} else {
		jb_emit(&j, 1);
	}
	jb_free(&j);
}

/* --- held samples ------------------------------------------------------------
 * With `run --hold` the sample lines are kept in memory and written after the
 * measured batches (emit_release), so the front end is not woken up between
 * batches; a progress line at most once a second says the probe is alive. On
 * SIGINT or SIGTERM what is held is written at once and the probe exits with
 * 128 + the signal. The buffer grows between batches, never inside one, with
 * the two signals blocked while it changes. */

static void write_all(const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(1, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

static void held_signal(int sig)
{
	write_all(held.buf, held.len);
	_exit(128 + sig);
}

static void hold_append(const char *line, size_t n)
{
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &old);
	if (held.len + n > held.cap) {
		size_t cap = held.cap ? held.cap : 65536;
		while (cap < held.len + n)
			cap *= 2;
		char *b = realloc(held.buf, cap);
		if (!b)
			die(EXIT_FAIL, "out of memory holding the samples");
		held.buf = b;
		held.cap = cap;
	}
	memcpy(held.buf + held.len, line, n);
	held.len += n;
	sigprocmask(SIG_SETMASK, &old, NULL);
}

void emit_hold(void)
{
	held.on = 1;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = held_signal;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	clock_gettime(CLOCK_MONOTONIC, &held.last_progress);
}

void emit_progress(long done, long total)
{
	if (!held.on)
		return;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double since = (double)(now.tv_sec - held.last_progress.tv_sec) +
		       (double)(now.tv_nsec - held.last_progress.tv_nsec) * 1e-9;
	if (since < 1.0 && done < total)
		return;
	held.last_progress = now;
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "progress");
	jb_int(&j, "batches", done);
	jb_int(&j, "of", total);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
}

void emit_release(void)
{
	if (!held.on)
		return;
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &old);
	write_all(held.buf, held.len);
	held.len = 0;
	sigprocmask(SIG_SETMASK, &old, NULL);
}

void emit_trailer(long samples, long warmup)
{
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "trailer");
	jb_str(&j, "status", "ok");
	jb_int(&j, "samples", samples);
	jb_int(&j, "warmup", warmup);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
}

void emit_check(const struct bench_ctx *ctx)
{
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "check");
	jb_str(&j, "status", "ok");
	if (ctx)
		emit_params(&j, ctx);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
}

void emit_unsupported(const struct bench_ctx *ctx)
{
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "unsupported");
	jb_str(&j, "bench", ctx->b->name);
	emit_params(&j, ctx);
	jb_str(&j, "reason", ctx->err);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
}

static void emit_param(struct jb *j, const struct bench *b, const struct bench_param *p)
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
	if (applies_rule(b, p->name))
		jb_str(j, "applies_if", applies_rule(b, p->name));
	jb_obj_end(j);
}

void emit_list(void)
{
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "schema", "opcost.probe-list/1");
	jb_str(&j, "probe_version", PROBE_VERSION);
	jb_str(&j, "arch", PROBE_ARCH);
	jb_int(&j, "spin_max", SPIN_MAX);
	jb_arr_begin(&j, "benchmarks");
	for (int i = 0; bench_table[i]; i++) {
		const struct bench *b = bench_table[i];
		jb_obj_begin(&j, NULL);
		jb_str(&j, "name", b->name);
		jb_str(&j, "summary", b->summary);
		jb_str(&j, "op", b->op);
		jb_bool(&j, "helper", (b->flags & BENCH_HAS_HELPER) != 0);
		jb_bool(&j, "blocks", bench_blocks(b));
		jb_int(&j, "switches_per_op", b->switches);
		jb_arr_begin(&j, "params");
		for (int k = 0; b->params && b->params[k].name; k++)
			emit_param(&j, b, &b->params[k]);
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
}

void emit_placement(int a, int b, const char *name, const char *how)
{
	struct jb j;
	jb_init(&j);
	jb_obj_begin(&j, NULL);
	jb_str(&j, "type", "placement");
	jb_str(&j, "name", name);
	jb_arr_begin(&j, "cpus");
	jb_int(&j, NULL, a);
	jb_int(&j, NULL, b);
	jb_arr_end(&j);
	jb_str(&j, "how", how);
	jb_obj_end(&j);
	jb_emit(&j, 1);
	jb_free(&j);
}
