/* ref: the hand-written reference for validation/overhead/run.py.
 *
 *   ref OP ITERS BATCHES CPU
 *
 * OP is getppid | getppid-inline | pipe | yield | signal. Pins itself (and its child, if any)
 * to CPU, then times BATCHES batches of ITERS operations each with
 * clock_gettime(CLOCK_MONOTONIC) and prints one line per batch: ns per
 * operation. Nothing is subtracted, nothing is clever.
 *
 *   getppid  syscall(SYS_getppid) through glibc
 *   getppid-inline
 *            the system call instruction written inline in the loop
 *            (syscall / int $0x80 / svc #0), as a kernel developer's hand
 *            loop does it; the compiler places the loop
 *   pipe     parent writes 1 byte, child echoes it back: one round trip
 *   yield    child calls sched_yield() forever; parent calls it ITERS times
 *   signal   kill(pid, SIGUSR1) to self, empty handler (pid = getpid() once)
 *
 * Build: cc -O2 -o ref ref.c
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int to_child[2], from_child[2];
static pid_t child;

static void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static void handler(int sig)
{
	(void)sig;
}

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

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void start_child(int cpu, int echo)
{
	pid_t parent = getpid();
	child = fork();
	if (child < 0) {
		perror("fork");
		exit(1);
	}
	if (child > 0)
		return;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	pin(cpu);
	if (echo) {
		char c;
		while (read(to_child[0], &c, 1) == 1 && write(from_child[1], &c, 1) == 1)
			;
	} else {
		for (;;)
			sched_yield();
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: ref getppid|getppid-inline|pipe|yield|signal ITERS BATCHES CPU\n");
		return 2;
	}
	const char *op = argv[1];
	long iters = atol(argv[2]), batches = atol(argv[3]);
	int cpu = atoi(argv[4]);
	if (iters < 1 || batches < 1) {
		fprintf(stderr, "ref: ITERS and BATCHES must be >= 1\n");
		return 2;
	}
	double *ns = calloc(batches, sizeof(double));
	pin(cpu);

	pid_t self = getpid();
	char c = 'x';
	if (strcmp(op, "pipe") == 0) {
		if (pipe(to_child) || pipe(from_child)) {
			perror("pipe");
			return 1;
		}
		start_child(cpu, 1);
	} else if (strcmp(op, "yield") == 0) {
		start_child(cpu, 0);
	} else if (strcmp(op, "signal") == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = handler;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGUSR1, &sa, NULL) != 0) {
			perror("sigaction");
			return 1;
		}
	} else if (strcmp(op, "getppid-inline") == 0) {
		op = "i";
	} else if (strcmp(op, "getppid") != 0) {
		fprintf(stderr, "ref: unknown OP '%s'\n", op);
		return 2;
	}

	for (long b = 0; b < batches; b++) {
		long long t0 = now_ns();
		switch (op[0]) {
		case 'g':
			for (long i = 0; i < iters; i++)
				syscall(SYS_getppid);
			break;
		case 'i':
			for (long i = 0; i < iters; i++)
				inline_getppid();
			break;
		case 'p':
			for (long i = 0; i < iters; i++) {
				if (write(to_child[1], &c, 1) != 1 || read(from_child[0], &c, 1) != 1) {
					perror("pipe round trip");
					return 1;
				}
			}
			break;
		case 'y':
			for (long i = 0; i < iters; i++)
				sched_yield();
			break;
		case 's':
			for (long i = 0; i < iters; i++)
				kill(self, SIGUSR1);
			break;
		}
		ns[b] = (double)(now_ns() - t0) / iters;
	}

	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	for (long b = 0; b < batches; b++)
		printf("%.3f\n", ns[b]);
	return 0;
}
