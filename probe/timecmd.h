/* `opcost-probe time`: a whole program as the operation (timecmd.c). */
#ifndef OPCOST_TIMECMD_H
#define OPCOST_TIMECMD_H

/* What `time` was asked for (main.c parses the options). */
struct time_opts {
	long samples, warmup;
	int cpu; /* -1: not pinned */
	double fake_ns;
	unsigned long long seed;
	int check;
	unsigned long long ops; /* --ops N: operations one run performs (0: 1); ns_per_op = run / N */
	char **prog; /* argv of the program */
};

/* The whole command; its exit code. argv goes into the header as given. */
int time_run(const struct time_opts *o, int argc, char **argv);

#endif
