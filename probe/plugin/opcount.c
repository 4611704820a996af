/* opcount: a QEMU TCG plugin that counts the guest's executed instructions
 * between the marker instructions the probe executes around every measured
 * batch (probe/marker.h), and writes one JSON line per window.
 *
 * Debian ships no qemu-plugin.h, so the few plugin-API declarations used here
 * are written below, for API version 1 (QEMU 7.2; the types and the functions
 * below are unchanged up to API 1's removal). QEMU refuses a plugin whose
 * qemu_plugin_version is outside its own range; install() refuses too, with
 * one line naming the range, where qemu_info_t.version.min/cur excludes 1.
 *
 * Counting. At translation every block gets a record (its address, its
 * instructions' classes, kernel or user by address in system emulation). A
 * callback at the start of the block adds the block's instructions to the
 * accumulator when a window is open. A marker in the middle of a block
 * corrects what the block-start callback did: OPEN adds the instructions
 * after it, CLOSE and PAUSE take off the marker and those after it. So a
 * window holds exactly the instructions strictly between its markers (less
 * a block left early by a fault, re-executed afterwards: counted twice).
 *
 * Windows. In user-mode emulation (qemu-x86_64...) every guest thread is a
 * vCPU: a window counts the vCPU (thread) that opened it, as perf counts the
 * measuring thread. In system emulation a window counts every vCPU: the
 * accumulator is one, and QEMU is run single-threaded
 * (-accel tcg,thread=single) so that no two vCPUs add at once.
 *
 * Arguments: out=PATH (the windows, appended; required), blocks=on (per
 * window the blocks executed in it, for per-function attribution),
 * kernel_from=HEX (system emulation: addresses from here up are the kernel's;
 * default by target: bit 63 on 64-bit, 0xc0000000 on 32-bit),
 * api_range=MIN:CUR (a test hook: act as if QEMU said this range). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../marker.h"

/* ---- the plugin API, version 1, as QEMU 7.2 defines it ---- */
#define EXPORT __attribute__((visibility("default")))
typedef uint64_t qemu_plugin_id_t;
typedef struct {
	const char *target_name;
	struct {
		int min;
		int cur;
	} version;
	bool system_emulation;
	union {
		struct {
			int smp_vcpus;
			int max_vcpus;
		} system;
	};
} qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
					  enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
					    enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);

#define API_VERSION 1
EXPORT int qemu_plugin_version = API_VERSION;
/* ---- end of the API ---- */

#include "classify.h"

#define MAX_VCPUS 4096

struct acc {
	uint64_t insns[2];		/* [0] user, [1] kernel */
	uint64_t cls[2][NCLASSES];
	int open, paused;
	uint64_t windows;
};

struct block {
	uint64_t vaddr;
	uint32_t n;
	uint8_t kernel;
	uint8_t *cls;			/* n classes, one per instruction */
	uint32_t ncls[NCLASSES];	/* per class, over the block */
	uint64_t win;			/* instructions executed in the open window */
	struct block *next_dirty;	/* on the dirty list while win > 0 */
};

struct mark {
	struct block *b;
	uint32_t at;			/* the marker's index in its block */
	int kind;
};

static int out_fd = -1;
static char family = 'x';
static int system_mode, want_blocks, arch_x86;
static uint64_t kernel_from = UINT64_MAX;
static struct acc global_acc;
static struct acc *vcpu_acc;
static struct block *dirty;
static pthread_mutex_t dirty_lock = PTHREAD_MUTEX_INITIALIZER;

static struct acc *acc_of(unsigned vcpu)
{
	if (system_mode || vcpu >= MAX_VCPUS)
		return &global_acc;
	return &vcpu_acc[vcpu];
}

static int counting(const struct acc *a)
{
	return a->open && !a->paused;
}

/* Add (sign +1) or take off (-1) the instructions [from, b->n) of a block. */
static void add_range(struct acc *a, struct block *b, uint32_t from, int sign)
{
	uint64_t n = b->n > from ? b->n - from : 0;
	a->insns[b->kernel] += (uint64_t)((int64_t)sign * (int64_t)n);
	for (uint32_t i = from; i < b->n; i++)
		if (b->cls[i])
			a->cls[b->kernel][b->cls[i]] += (uint64_t)(int64_t)sign;
	if (want_blocks) {
		b->win += (uint64_t)((int64_t)sign * (int64_t)n);
		if (b->win && !b->next_dirty) {
			pthread_mutex_lock(&dirty_lock);
			if (!b->next_dirty) {
				b->next_dirty = dirty ? dirty : b; /* self: the list's end */
				dirty = b;
			}
			pthread_mutex_unlock(&dirty_lock);
		}
	}
}

static void on_block(unsigned vcpu, void *udata)
{
	struct acc *a = acc_of(vcpu);
	if (counting(a))
		add_range(a, udata, 0, 1);
}

static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#include <stdarg.h>
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (*len < cap) {
		int k = vsnprintf(buf + *len, cap - *len, fmt, ap);
		if (k > 0)
			*len += (size_t)k;
	}
	va_end(ap);
}

static void write_all(const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t k = write(out_fd, buf, len);
		if (k <= 0)
			return;
		buf += k;
		len -= (size_t)k;
	}
}

/* One window as a JSON line: {"window":N,"vcpu":V,"u":..,"k":..,"classes":{"u":{..},"k":{..}},"blocks":[[addr,n],..]} */
static void emit(unsigned vcpu, struct acc *a)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	if (!buf)
		return;
	put(buf, cap, &len, "{\"window\":%" PRIu64 ",\"vcpu\":%u,\"scope\":\"%s\",\"u\":%" PRIu64 ",\"k\":%" PRIu64,
	    a->windows, vcpu, system_mode ? "all-vcpus" : "thread", a->insns[0], a->insns[1]);
	put(buf, cap, &len, ",\"classes\":{");
	for (int m = 0; m < 2; m++) {
		put(buf, cap, &len, "%s\"%s\":{", m ? "," : "", m ? "k" : "u");
		int first = 1;
		for (int c = 1; c < NCLASSES; c++) {
			if (!arch_x86)
				break;
			put(buf, cap, &len, "%s\"%s\":%" PRIu64, first ? "" : ",", class_names[c], a->cls[m][c]);
			first = 0;
		}
		put(buf, cap, &len, "}");
	}
	put(buf, cap, &len, "}");
	if (want_blocks) {
		pthread_mutex_lock(&dirty_lock);
		put(buf, cap, &len, ",\"blocks\":[");
		int first = 1;
		struct block *b = dirty;
		while (b) {
			struct block *next = b->next_dirty == b ? NULL : b->next_dirty;
			if (b->win) {
				if (len + 64 >= cap) { /* grow: a window may touch thousands of blocks */
					char *nb = realloc(buf, cap * 2);
					if (nb) {
						buf = nb;
						cap *= 2;
					}
				}
				put(buf, cap, &len, "%s[%" PRIu64 ",%" PRIu64 "]", first ? "" : ",", b->vaddr, b->win);
				first = 0;
			}
			b->win = 0;
			b->next_dirty = NULL;
			b = next;
		}
		dirty = NULL;
		pthread_mutex_unlock(&dirty_lock);
		put(buf, cap, &len, "]");
	}
	put(buf, cap, &len, "}\n");
	write_all(buf, len < cap ? len : cap);
	free(buf);
}

static void on_mark(unsigned vcpu, void *udata)
{
	struct mark *m = udata;
	struct acc *a = acc_of(vcpu);
	switch (m->kind) {
	case MARK_OPEN:
		memset(a->insns, 0, sizeof(a->insns));
		memset(a->cls, 0, sizeof(a->cls));
		a->open = 1;
		a->paused = 0;
		add_range(a, m->b, m->at + 1, 1);
		break;
	case MARK_RESUME:
		if (a->open && a->paused) {
			a->paused = 0;
			add_range(a, m->b, m->at + 1, 1);
		}
		break;
	case MARK_PAUSE:
		if (counting(a)) {
			add_range(a, m->b, m->at, -1);
			a->paused = 1;
		}
		break;
	case MARK_CLOSE:
		if (a->open) {
			if (!a->paused)
				add_range(a, m->b, m->at, -1);
			a->windows++;
			emit(vcpu, a);
			a->open = 0;
			a->paused = 0;
		}
		break;
	}
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	struct block *b = calloc(1, sizeof(*b));
	if (!b)
		return;
	b->vaddr = qemu_plugin_tb_vaddr(tb);
	b->n = (uint32_t)n;
	b->kernel = system_mode && b->vaddr >= kernel_from;
	b->cls = calloc(n ? n : 1, 1);
	if (!b->cls) {
		free(b);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		const uint8_t *p = qemu_plugin_insn_data(insn);
		size_t len = qemu_plugin_insn_size(insn);
		int kind = marker_kind(p, len, family);
		if (kind) {
			struct mark *m = malloc(sizeof(*m));
			if (m) {
				*m = (struct mark){b, (uint32_t)i, kind};
				qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark, QEMU_PLUGIN_CB_NO_REGS, m);
			}
			continue;
		}
		if (arch_x86) {
			b->cls[i] = (uint8_t)classify_x86(p, len);
			b->ncls[b->cls[i]]++;
		}
	}
	qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS, b);
}

static void on_atexit(qemu_plugin_id_t id, void *p)
{
	if (out_fd >= 0)
		close(out_fd);
	out_fd = -1;
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	const char *out = NULL;
	int vmin = info->version.min, vcur = info->version.cur;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strncmp(a, "out=", 4))
			out = a + 4;
		else if (!strcmp(a, "blocks=on") || !strcmp(a, "blocks=true"))
			want_blocks = 1;
		else if (!strcmp(a, "blocks=off") || !strcmp(a, "blocks=false"))
			want_blocks = 0;
		else if (!strncmp(a, "kernel_from=", 12))
			kernel_from = strtoull(a + 12, NULL, 16);
		else if (!strncmp(a, "api_range=", 10) && sscanf(a + 10, "%d:%d", &vmin, &vcur) == 2)
			;
		else {
			fprintf(stderr, "opcount: unknown argument %s (valid: out=PATH, blocks=on, kernel_from=HEX)\n", a);
			return -1;
		}
	}
	if (vmin > API_VERSION || vcur < API_VERSION) {
		fprintf(stderr, "opcount: written for QEMU plugin API %d, this QEMU supports API %d to %d\n",
			API_VERSION, vmin, vcur);
		return -1;
	}
	if (!out) {
		fprintf(stderr, "opcount: out=PATH is required (where the windows are written)\n");
		return -1;
	}
	out_fd = open(out, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (out_fd < 0) {
		fprintf(stderr, "opcount: cannot open %s\n", out);
		return -1;
	}
	const char *t = info->target_name ? info->target_name : "";
	arch_x86 = !strcmp(t, "x86_64") || !strcmp(t, "i386");
	family = arch_x86 ? 'x' : !strcmp(t, "aarch64") ? 'a' : !strcmp(t, "arm") ? 'r' : '?';
	int wide = !strcmp(t, "x86_64") || !strcmp(t, "aarch64");
	system_mode = info->system_emulation;
	if (system_mode && kernel_from == UINT64_MAX)
		kernel_from = wide ? (1ull << 63) : 0xc0000000ull;
	vcpu_acc = calloc(MAX_VCPUS, sizeof(*vcpu_acc));
	if (!vcpu_acc)
		return -1;
	char head[512];
	int k = snprintf(head, sizeof(head),
			 "{\"plugin\":\"opcount\",\"api\":%d,\"qemu_api\":[%d,%d],\"target\":\"%s\",\"system\":%s,"
			 "\"scope\":\"%s\",\"kernel_from\":%" PRIu64 ",\"blocks\":%s}\n",
			 API_VERSION, info->version.min, info->version.cur, t, system_mode ? "true" : "false",
			 system_mode ? "all-vcpus" : "thread", system_mode ? kernel_from : 0, want_blocks ? "true" : "false");
	write_all(head, (size_t)k);
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	qemu_plugin_register_atexit_cb(id, on_atexit, NULL);
	return 0;
}
