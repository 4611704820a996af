/* The loop of `perf bench syscall fork`, written from its description for
 * validation/anchors/fork_parts.py: fork(); the child leaves at once; the
 * parent waitpid()s it; the whole loop timed with gettimeofday() and printed
 * as perf bench prints it ("# Executed N fork() calls", "X usecs/op").
 *
 *   fork_loop exit|_exit LOOPS
 *
 * exit: the child calls exit(0), as perf's does (atexit handlers and every
 * loaded library's destructors run in the child); _exit: it calls _exit(0),
 * as opcost's proc.fork does. Built static, or linked against the anchor's
 * own libraries to give the parent perf's shape. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "exit") && strcmp(argv[1], "_exit")) || atol(argv[2]) < 1) {
		fprintf(stderr, "usage: %s exit|_exit LOOPS (LOOPS >= 1)\n", argv[0]);
		return 2;
	}
	int use_exit = strcmp(argv[1], "exit") == 0;
	long loops = atol(argv[2]);
	struct timeval start, stop;

	/* flushed now: a child's exit() would flush a pending buffer again */
	printf("# Running fork loop, child %s(0):\n", argv[1]);
	fflush(stdout);
	gettimeofday(&start, NULL);
	for (long i = 0; i < loops; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			if (use_exit)
				exit(0);
			_exit(0);
		}
		if (waitpid(pid, NULL, 0) < 0) {
			perror("waitpid");
			return 1;
		}
	}
	gettimeofday(&stop, NULL);
	double us = ((double)(stop.tv_sec - start.tv_sec) * 1e6 + (double)(stop.tv_usec - start.tv_usec)) / (double)loops;
	printf("# Executed %ld fork() calls\n\n %14.3f usecs/op\n", loops, us);
	return 0;
}
