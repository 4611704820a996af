/* user.op: an operation the user wrote, `uint64_t opcost_op(uint64_t x)`,
 * linked in by `opcost variants --mode op` (make USER_OP=file.c
 * USER_CFLAGS="-O2 -DNAME"). Built only then (with OPCOST_USER_OP defined,
 * which lists it in bench/table.c), so the ordinary probe has no such
 * benchmark; it lives outside bench/ for that reason.
 *
 * Why the call survives the compiler: opcost_op lives in its own translation
 * unit, and it is called through a pointer read from a volatile variable, so
 * even -flto cannot inline it or hoist it out of the loop; each call's result
 * is the next call's argument, so no call can be dropped, and when the
 * operation depends on x the calls run one after another (latency). The call
 * itself (an indirect call and a return) is part of every operation: opcost
 * measures an empty opcost_op compiled the same way as a reference. */
#include "probe.h"

#include <stddef.h>

uint64_t opcost_op(uint64_t x);

static uint64_t (*volatile op_ptr)(uint64_t) = opcost_op;

static void user_op_run(struct bench_ctx *ctx, uint64_t iters)
{
	uint64_t (*op)(uint64_t) = op_ptr;
	uint64_t x = iters; /* not a constant the user's code could specialise on */
	OP_LOOP(ctx->spin, iters, x = op(x));
	__asm__ volatile("" : : "r"(x));
}

static const struct bench_param params[] = {
	{NULL, 0, NULL, NULL, NULL, 0, 0},
};

const struct bench bench_user_op = {
	.name = "user.op",
	.summary = "opcost_op(x) from the user's source, called in a dependent chain",
	.op = "opcost_op call",
	.params = params,
	.run = user_op_run,
};
