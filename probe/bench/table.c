/* The one list of benchmarks. Adding one: its file in bench/, a line here. */
#include "../probe.h"

#include <stddef.h>

extern const struct bench bench_syscall_null, bench_syscall_read, bench_syscall_write, bench_syscall_stat,
	bench_syscall_fstat, bench_syscall_open, bench_ctx_pipe, bench_ctx_yield, bench_signal_catch,
	bench_signal_install;
extern const struct bench bench_msg_hackbench, bench_ctx_unix, bench_ctx_futex, bench_ctx_eventfd, bench_proc_fork,
	bench_proc_vfork, bench_proc_exec, bench_proc_spawn, bench_thread_create, bench_mem_pagefault, bench_mem_mmap,
	bench_mem_touch, bench_epoll_wait, bench_timer_nanosleep;
extern const struct bench bench_xstate_xsave, bench_xstate_xsaveopt, bench_xstate_xsavec, bench_xstate_xrstor,
	bench_xstate_fxsave, bench_xstate_fxrstor, bench_xstate_vzeroupper, bench_xstate_vzeroall, bench_insn_div,
	bench_insn_chain;
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
	&bench_msg_hackbench,
	&bench_ctx_unix,
	&bench_ctx_futex,
	&bench_ctx_eventfd,
	&bench_proc_fork,
	&bench_proc_vfork,
	&bench_proc_exec,
	&bench_proc_spawn,
	&bench_thread_create,
	&bench_mem_pagefault,
	&bench_mem_mmap,
	&bench_mem_touch,
	&bench_epoll_wait,
	&bench_timer_nanosleep,
	&bench_xstate_xsave,
	&bench_xstate_xsaveopt,
	&bench_xstate_xsavec,
	&bench_xstate_xrstor,
	&bench_xstate_fxsave,
	&bench_xstate_fxrstor,
	&bench_xstate_vzeroupper,
	&bench_xstate_vzeroall,
	&bench_insn_div,
	&bench_insn_chain,
#ifdef OPCOST_USER_OP
	&bench_user_op, /* opcost variants --mode op: ../user_op.c */
#endif
	NULL,
};
