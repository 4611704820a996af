/* Parameters as data: see params.h and probe.h. */
#include "params.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int param_index(const struct bench *b, const char *name)
{
	for (int i = 0; b->params && b->params[i].name; i++)
		if (strcmp(b->params[i].name, name) == 0)
			return i;
	return -1;
}

const char *param_str(const struct bench_ctx *ctx, const char *name)
{
	int i = param_index(ctx->b, name);
	if (i < 0)
		die(EXIT_FAIL, "internal: benchmark %s reads undeclared parameter %s", ctx->b->name, name);
	return ctx->values[i];
}

long param_long(const struct bench_ctx *ctx, const char *name)
{
	return strtol(param_str(ctx, name), NULL, 0);
}

int param_is(const struct bench_ctx *ctx, const char *name, const char *value)
{
	return strcmp(param_str(ctx, name), value) == 0;
}

/* Validate "k=v" against the descriptor; usage error names the valid choices. */
void set_param(struct bench_ctx *ctx, const char *kv)
{
	const struct bench *b = ctx->b;
	const char *eq = strchr(kv, '=');
	if (!eq)
		die(EXIT_USAGE, "parameter '%s' must be written key=value", kv);
	char key[64];
	size_t klen = (size_t)(eq - kv);
	if (klen == 0 || klen >= sizeof(key))
		die(EXIT_USAGE, "parameter '%s' has an empty or too long name", kv);
	memcpy(key, kv, klen);
	key[klen] = '\0';
	const char *val = eq + 1;
	int i = param_index(b, key);
	if (i < 0) {
		char valid[512] = "";
		for (int k = 0; b->params && b->params[k].name; k++)
			appendf(valid, sizeof(valid), "%s%s", k ? ", " : "", b->params[k].name);
		die(EXIT_USAGE, "%s has no parameter '%s'; valid: %s", b->name, key,
		    valid[0] ? valid : "(none)");
	}
	const struct bench_param *p = &b->params[i];
	if (p->type == PT_ENUM) {
		int ok = 0;
		char valid[512] = "";
		for (int k = 0; p->choices[k]; k++) {
			ok |= strcmp(p->choices[k], val) == 0;
			appendf(valid, sizeof(valid), "%s%s", k ? "|" : "", p->choices[k]);
		}
		if (!ok)
			die(EXIT_USAGE, "%s: %s=%s is not allowed; valid: %s", b->name, key, val, valid);
	} else if (p->type == PT_INT) {
		char *end;
		errno = 0;
		long v = strtol(val, &end, 0);
		if (errno || *end || end == val || v < p->min || v > p->max)
			die(EXIT_USAGE, "%s: %s=%s must be an integer in [%ld, %ld]", b->name, key, val, p->min, p->max);
	} else if (!*val) {
		die(EXIT_USAGE, "%s: %s must not be empty", b->name, key);
	}
	ctx->values[i] = val;
}

const struct bench *find_bench(const char *name)
{
	for (int i = 0; bench_table[i]; i++)
		if (strcmp(bench_table[i]->name, name) == 0)
			return bench_table[i];
	char valid[1024] = "";
	for (int i = 0; bench_table[i]; i++)
		appendf(valid, sizeof(valid), "%s%s", i ? ", " : "", bench_table[i]->name);
	die(EXIT_USAGE, "unknown benchmark '%s'; valid: %s", name, valid);
}
