/* syscall.null: the cheapest round trip into the kernel, getppid(2) (never
 * cached by libc). via=libc goes through glibc's syscall(); via=inline issues
 * the instruction in the loop. They differ: after the kernel returns, the libc
 * path executes a `ret`, which pays for return-stack mitigations.
 *
 * via=inline is the tightest loop there is, written out in assembly
 * (syscall_null_inline_loop below) so that neither the compiler nor the
 * link order decides its shape or its place: the loop starts on a 64-byte
 * boundary (one cache line, one decoded-instruction window on AMD and Intel
 * alike, no branch across a 32-byte boundary) and holds the system call
 * number's load (x86: the kernel returns in eax), the instruction and a
 * count down to zero. Nothing else: no memory operand, no stack. */
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

/* n >= 1 system calls in the aligned loop (spin=0 only: the spin=N loop is
 * OP_LOOP's). noinline and named, so the disassembly test finds it. */
static __attribute__((noinline)) void syscall_null_inline_loop(uint64_t n)
{
#if defined(__x86_64__)
	__asm__ volatile("\t.p2align 6\n"
			 "1:\tmovl %[nr], %%eax\n"
			 "\tsyscall\n"
			 "\tsubq $1, %[n]\n"
			 "\tjnz 1b\n"
			 : [n] "+r"(n)
			 : [nr] "i"(SYS_getppid)
			 : "rax", "rcx", "r11", "memory", "cc");
#elif defined(__i386__)
	/* a 32-bit count: the batch is taken in chunks (one, in practice) */
	while (n) {
		unsigned long k = n > 0x40000000u ? 0x40000000u : (unsigned long)n;
		n -= k;
		__asm__ volatile("\t.p2align 6\n"
				 "1:\tmovl %[nr], %%eax\n"
				 "\tint $0x80\n"
				 "\tsubl $1, %[k]\n"
				 "\tjnz 1b\n"
				 : [k] "+r"(k)
				 : [nr] "i"(SYS_getppid)
				 : "eax", "memory", "cc");
	}
#elif defined(__aarch64__)
	/* x8 (the number) survives the call; x0 carries the result */
	__asm__ volatile("\tmov x8, %[nr]\n"
			 "\t.p2align 6\n"
			 "1:\tsvc #0\n"
			 "\tsubs %[n], %[n], #1\n"
			 "\tb.ne 1b\n"
			 : [n] "+r"(n)
			 : [nr] "i"(SYS_getppid)
			 : "x0", "x8", "memory", "cc");
#elif defined(__arm__)
	/* A32 (the Makefile builds -marm): r7 is the number and not the frame pointer */
	while (n) {
		unsigned long k = n > 0x40000000u ? 0x40000000u : (unsigned long)n;
		n -= k;
		__asm__ volatile("\tmov r7, %[nr]\n"
				 "\t.p2align 6\n"
				 "1:\tsvc #0\n"
				 "\tsubs %[k], %[k], #1\n"
				 "\tbne 1b\n"
				 : [k] "+r"(k)
				 : [nr] "i"(SYS_getppid)
				 : "r0", "r7", "memory", "cc");
	}
#else
	for (uint64_t i = 0; i < n; i++) {
		long r = syscall(SYS_getppid);
		__asm__ volatile("" : : "r"(r));
	}
#endif
}

static int setup(struct bench_ctx *ctx)
{
	ctx->priv = param_is(ctx, "via", "inline") ? (void *)1 : NULL;
	return BENCH_OK;
}

static void run(struct bench_ctx *ctx, uint64_t iters)
{
	if (ctx->priv && !ctx->spin) {
		if (iters)
			syscall_null_inline_loop(iters);
	} else if (ctx->priv) {
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
