/* opcost-probe: the measurement engine. This file is the whole command
 * line: which command, and its options; the commands themselves are the
 * harness (run), timecmd.c (time), emit.c (list, placement) and cpuid.c.
 * Output is JSON lines on stdout (header, samples, trailer); errors are one
 * line on stderr and an exit code:
 *   0 ok, 1 benchmark failed, 2 usage error, 3 operation unsupported here. */
#include "emit.h"
#include "harness.h"
#include "timecmd.h"
#include "topology.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_cpuid(int fd); /* cpuid.c: 0, or 1 if the line could not be written */

static const char usage_text[] =
	"usage: opcost-probe list [--json]\n"
	"       opcost-probe run BENCH [-P key=value]... [--samples N] [--warmup N]\n"
	"                        [--target-ms MS] [--iters N] [--cpu A[,B]] [--counters LIST]\n"
	"                        [--fake-clock NS [--seed S]] [--spin N] [--check] [--hold] [--budget-ms MS]\n"
	"       (--budget-ms MS: when one iteration takes a second or more, take only the batches that fit\n"
	"        in MS: no warm-up beyond what fits, at least 3 measured batches; the header says so)\n"
	"       (--spin N: add N dependent adds per operation, a known injected cost)\n"
	"       (--check: validate parameters and CPUs and run setup/teardown; measure nothing)\n"
	"       (--hold: write the samples after the batches, a progress line at most once a second;\n"
	"        on SIGINT/SIGTERM the samples so far, then exit 128+signal)\n"
	"       opcost-probe placement CPU_A CPU_B   (placement class of a CPU pair, from sysfs)\n"
	"       opcost-probe time [--samples N] [--warmup N] [--cpu C] [--fake-clock NS [--seed S]]\n"
	"                         [--ops N] [--check] -- PROGRAM [ARGS...]   (one sample per program run;\n"
	"        --ops N: a run performs N operations, per-op figures are a run's / N)\n"
	"       opcost-probe cpuid\n"
	"       opcost-probe version\n"
	"Exit: 0 ok, 1 benchmark failed, 2 usage error, 3 unsupported on this machine.\n";

static void run_options(int argc, char **argv, struct run_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->samples = 20;
	o->warmup = 3;
	o->target_ms = 10;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int takes = 1;
		if (strcmp(a, "-P") == 0 || strcmp(a, "--param") == 0) {
			if (v && o->nparams < MAX_PARAMS * 2)
				o->params[o->nparams++] = v;
		} else if (strcmp(a, "--samples") == 0 && v)
			o->samples = parse_count(a, v, 1);
		else if (strcmp(a, "--warmup") == 0 && v)
			o->warmup = parse_count(a, v, 0);
		else if (strcmp(a, "--iters") == 0 && v)
			o->iters = parse_count(a, v, 1);
		else if (strcmp(a, "--target-ms") == 0 && v) {
			char *end;
			o->target_ms = strtod(v, &end);
			if (*end || !(o->target_ms >= 1) || o->target_ms > 60000)
				die(EXIT_USAGE, "--target-ms %s: expected a number of milliseconds in [1, 60000]", v);
		} else if (strcmp(a, "--cpu") == 0 && v)
			o->cpus = v;
		else if (strcmp(a, "--counters") == 0 && v)
			o->counters = v;
		else if (strcmp(a, "--fake-clock") == 0 && v) {
			char *end;
			o->fake_ns = strtod(v, &end);
			if (*end || !(o->fake_ns > 0) || o->fake_ns > 1e9)
				die(EXIT_USAGE, "--fake-clock %s: expected the fake cost of one operation in ns (0 < NS <= 1e9)", v);
		} else if (strcmp(a, "--budget-ms") == 0 && v) {
			char *end;
			o->budget_ms = strtod(v, &end);
			if (*end || !(o->budget_ms > 0) || o->budget_ms > 1e12)
				die(EXIT_USAGE, "--budget-ms %s: expected the milliseconds this process's batches may take "
						"(0 < MS <= 1e12)", v);
		} else if (strcmp(a, "--spin") == 0 && v) {
			o->spin = parse_count(a, v, 0);
			if (o->spin > SPIN_MAX)
				die(EXIT_USAGE, "--spin %s: at most %d dependent adds per operation", v, SPIN_MAX);
		} else if (strcmp(a, "--check") == 0) {
			o->check = 1;
			takes = 0;
		} else if (strcmp(a, "--hold") == 0) {
			o->hold = 1;
			takes = 0;
		} else if (strcmp(a, "--seed") == 0 && v)
			o->seed = strtoull(v, NULL, 0);
		else if (a[0] != '-' && !o->bench) {
			o->bench = a;
			takes = 0;
		} else
			die(EXIT_USAGE, "run: unexpected argument '%s' (see opcost-probe --help)", a);
		i += takes;
	}
	if (!o->bench)
		die(EXIT_USAGE, "run: which benchmark? (opcost-probe list)");
}

static void time_options(int argc, char **argv, struct time_opts *o)
{
	*o = (struct time_opts){.samples = 1, .warmup = 0, .cpu = -1};
	int i;
	for (i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		} else if (strcmp(a, "--check") == 0) {
			o->check = 1;
			continue;
		} else if (!v) {
			die(EXIT_USAGE, "time: %s needs a value", a);
		} else if (strcmp(a, "--samples") == 0)
			o->samples = parse_count(a, v, 1);
		else if (strcmp(a, "--warmup") == 0)
			o->warmup = parse_count(a, v, 0);
		else if (strcmp(a, "--cpu") == 0)
			o->cpu = (int)parse_count(a, v, 0);
		else if (strcmp(a, "--ops") == 0) {
			/* 64 bits on every architecture (a long is 32 on arm and i386) */
			char *end;
			errno = 0;
			o->ops = strtoull(v, &end, 10);
			if (errno || *end || end == v || *v == '-' || o->ops < 1)
				die(EXIT_USAGE, "--ops %s: expected the operations one run performs, a whole number >= 1", v);
		}
		else if (strcmp(a, "--seed") == 0)
			o->seed = strtoull(v, NULL, 0);
		else if (strcmp(a, "--fake-clock") == 0) {
			char *end;
			o->fake_ns = strtod(v, &end);
			if (*end || !(o->fake_ns > 0) || o->fake_ns > 1e12)
				die(EXIT_USAGE, "--fake-clock %s: expected the fake cost of one run in ns (0 < NS <= 1e12)", v);
		} else
			die(EXIT_USAGE, "time: unexpected argument '%s' (usage: opcost-probe time [options] -- PROGRAM [ARGS])", a);
		i++;
	}
	if (i >= argc)
		die(EXIT_USAGE, "time: which program? (opcost-probe time [options] -- PROGRAM [ARGS])");
	o->prog = &argv[i];
}

static int cmd_list(int json)
{
	if (json) {
		emit_list();
		return EXIT_OK;
	}
	for (int i = 0; bench_table[i]; i++)
		printf("%-18s %s (op: %s)\n", bench_table[i]->name, bench_table[i]->summary, bench_table[i]->op);
	return EXIT_OK;
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
	emit_placement(c[0], c[1], placement_names[p], how);
	return EXIT_OK;
}

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
	if (strcmp(argv[1], "run") == 0) {
		struct run_opts o;
		run_options(argc, argv, &o);
		if (tie_to_parent() < 0)
			return EXIT_FAIL;
		return harness_run(&o, argc, argv);
	}
	if (strcmp(argv[1], "placement") == 0)
		return cmd_placement(argc, argv);
	if (strcmp(argv[1], "time") == 0) {
		struct time_opts o;
		time_options(argc, argv, &o);
		if (tie_to_parent() < 0)
			return EXIT_FAIL;
		return time_run(&o, argc, argv);
	}
	if (strcmp(argv[1], "cpuid") == 0)
		return cmd_cpuid(1) == 0 ? EXIT_OK : EXIT_FAIL;
	if (strcmp(argv[1], "version") == 0) {
		printf("opcost-probe %s %s gcc %s\n", PROBE_VERSION, PROBE_ARCH, __VERSION__);
		return EXIT_OK;
	}
	die(EXIT_USAGE, "unknown command '%s'; valid: list, run, time, placement, cpuid, version", argv[1]);
}
