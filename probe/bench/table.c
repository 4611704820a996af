/* The one list of benchmarks. Adding one: its file in bench/, a line here. */
#include "../probe.h"

#include <stddef.h>

extern const struct bench bench_syscall_null, bench_syscall_read, bench_syscall_write, bench_syscall_stat,
	bench_syscall_fstat, bench_syscall_open, bench_ctx_pipe, bench_ctx_yield, bench_signal_catch,
	bench_signal_install;
extern const struct bench bench_user_op;

const struct bench *const bench_table[] = {
	&bench_syscall_null,
	&bench_syscall_read,
	&bench_syscall_write,
	&bench_syscall_stat,
	&bench_syscall_fstat,
	&bench_syscall_open,
	&bench_ctx_pipe,
	&bench_ctx_yield,
	&bench_signal_catch,
	&bench_signal_install,
#ifdef OPCOST_USER_OP
	&bench_user_op, /* opcost variants --mode op: ../user_op.c */
#endif
	NULL,
};
