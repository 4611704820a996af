/* The one list of benchmarks, in `opcost-probe list` order. Adding one: its
 * file in bench/ exporting `const struct bench bench_NAME`, and one X(NAME)
 * line here. */
#include "../probe.h"

#include <stddef.h>

#define BENCHMARKS(X)           \
	X(syscall_null)         \
	X(syscall_read)         \
	X(syscall_write)        \
	X(syscall_stat)         \
	X(syscall_fstat)        \
	X(syscall_open)         \
	X(ctx_pipe)             \
	X(ctx_yield)            \
	X(signal_catch)         \
	X(signal_install)       \
	X(msg_hackbench)        \
	X(ctx_unix)             \
	X(ctx_futex)            \
	X(ctx_eventfd)          \
	X(proc_fork)            \
	X(proc_vfork)           \
	X(proc_exec)            \
	X(proc_spawn)           \
	X(thread_create)        \
	X(mem_pagefault)        \
	X(mem_mmap)             \
	X(mem_touch)            \
	X(epoll_wait)           \
	X(timer_nanosleep)      \
	X(xstate_xsave)         \
	X(xstate_xsaveopt)      \
	X(xstate_xsavec)        \
	X(xstate_xrstor)        \
	X(xstate_fxsave)        \
	X(xstate_fxrstor)       \
	X(xstate_vzeroupper)    \
	X(xstate_vzeroall)      \
	X(insn_div)             \
	X(insn_chain)           \
	USER_OP(X)

/* opcost variants --mode op: ../user_op.c, built only with USER_OP= */
#ifdef OPCOST_USER_OP
#define USER_OP(X) X(user_op)
#else
#define USER_OP(X)
#endif

#define DECLARE(name) extern const struct bench bench_##name;
BENCHMARKS(DECLARE)

#define ENTRY(name) &bench_##name,
const struct bench *const bench_table[] = {BENCHMARKS(ENTRY) NULL};
