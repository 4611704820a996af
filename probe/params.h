/* The harness's side of parameters as data (params.c): a benchmark found by
 * name, a "key=value" checked against its descriptor. Benchmarks read their
 * values with param_str/param_long/param_is (probe.h). */
#ifndef OPCOST_PARAMS_H
#define OPCOST_PARAMS_H

#include "probe.h"

/* The benchmark of that name; anything else is a usage error naming the
 * valid ones. */
const struct bench *find_bench(const char *name);
/* The index of parameter `name` in b->params, -1 if b has none such. */
int param_index(const struct bench *b, const char *name);
/* Set ctx->values from "key=value", checked against the descriptor (an
 * allowed value, an integer in range, a non-empty string); anything else is
 * a usage error naming the valid choices. */
void set_param(struct bench_ctx *ctx, const char *kv);

#endif
