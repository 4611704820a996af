/* syscall.null: the cheapest round trip into the kernel, getppid(2) (never
 * cached by libc). via=libc goes through glibc's syscall(); via=inline issues
 * the instruction in the loop. They differ: after the kernel returns, the libc
 * path executes a `ret`, which pays for return-stack mitigations. */
#include "../probe.h"

#include <sys/syscall.h>
#include <unistd.h>

static const char *const via_choices[] = {"libc", "inline", NULL};

static const struct bench_param params[] = {
	{"via", PT_ENUM, "libc: glibc syscall(SYS_getppid); inline: syscall/svc/int 0x80 instruction inlined in the loop",
	 "libc", via_choices, 0, 0},
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

static inline long inline_getppid(void)
{
	long r;
#if defined(__x86_64__)
	__asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_getppid) : "rcx", "r11", "memory");
#elif defined(__i386__)
	__asm__ volatile("int $0x80" : "=a"(r) : "0"((long)SYS_getppid) : "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = SYS_getppid;
	register long x0 __asm__("x0");
	__asm__ volatile("svc #0" : "=r"(x0) : "r"(x8) : "memory");
	r = x0;
#elif defined(__arm__)
	register long r7 __asm__("r7") = SYS_getppid;
	register long r0 __asm__("r0");
	__asm__ volatile("svc #0" : "=r"(r0) : "r"(r7) : "memory");
	r = r0;
#else
	r = syscall(SYS_getppid);
#endif
	return r;
}

static int setup(struct bench_ctx *ctx)
{
	ctx->priv = param_is(ctx, "via", "inline") ? (void *)1 : NULL;
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	if (ctx->priv) {
		OP_LOOP(ctx->spin, iters, {
			long r = inline_getppid();
			__asm__ volatile("" : : "r"(r));
		});
	} else {
		OP_LOOP(ctx->spin, iters, {
			long r = syscall(SYS_getppid);
			__asm__ volatile("" : : "r"(r));
		});
	}
}

const struct bench bench_syscall_null = {
	.name = "syscall.null",
	.summary = "null system call: getppid(2), through libc or an inlined instruction",
	.op = "system call",
	.params = params,
	.setup = setup,
	.run = run,
};
