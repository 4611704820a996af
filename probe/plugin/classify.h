/* The costly classes of x86 instructions a kernel developer reasons in,
 * recognised from an instruction's bytes (legacy prefixes and REX skipped;
 * VEX/EVEX forms are none of them). Shared by the plugin and its test
 * (probe/plugin/classify_test.c). */
#ifndef OPCOST_CLASSIFY_H
#define OPCOST_CLASSIFY_H

#include <stddef.h>
#include <stdint.h>

enum {
	CLS_NONE,
	CLS_CR3_WRITE,	/* mov %reg, %cr3 */
	CLS_MSR_WRITE,	/* wrmsr */
	CLS_MSR_READ,	/* rdmsr */
	CLS_XSAVE,	/* fxsave fxrstor xsave xrstor xsaveopt xsavec xsaves xrstors */
	CLS_FENCE,	/* lfence mfence sfence */
	CLS_VERW,	/* verw (the MDS buffer clear) */
	CLS_SWAPGS,
	CLS_SYSCALL,	/* syscall sysenter int N */
	CLS_SYSRET,	/* sysret sysexit */
	CLS_IRET,
	CLS_CPUID,
	CLS_INVLPG,	/* invlpg invpcid */
	CLS_STAC_CLAC,
	CLS_RDTSC,	/* rdtsc rdtscp */
	CLS_LOCKED,	/* lock-prefixed (an atomic read-modify-write), and xchg with memory (locked without one) */
	NCLASSES
};

/* The counter names (`--counters cr3-writes:k`), by class. */
static const char *const class_names[NCLASSES] = {
	"", "cr3-writes", "msr-writes", "msr-reads", "xsave-family", "fences", "verw", "swapgs",
	"syscall", "sysret", "iret", "cpuid", "invlpg-invpcid", "stac-clac", "rdtsc", "locked",
};

static inline int classify_x86(const uint8_t *p, size_t len)
{
	size_t i = 0;
	int opsize = 0, rep = 0, lock = 0;
	for (; i < len; i++) { /* legacy prefixes */
		uint8_t b = p[i];
		if (b == 0x66)
			opsize = 1;
		else if (b == 0xf2 || b == 0xf3)
			rep = 1;
		else if (b == 0xf0)
			lock = 1;
		else if (!(b == 0x2e || b == 0x36 || b == 0x3e || b == 0x26 || b == 0x64 || b == 0x65 || b == 0x67))
			break;
	}
	/* REX (a 32-bit guest's 0x40-0x4f are inc/dec, never followed by what is matched below) */
	if (i < len && (p[i] & 0xf0) == 0x40)
		i++;
	if (i >= len)
		return CLS_NONE;
	uint8_t op = p[i];
	/* a `lock` is valid only on read-modify-writes of memory, none of the classes below; an x86
	 * kernel booted on one CPU patches its SMP `lock`s into `ds` (arch/x86/kernel/alternative.c) */
	if (lock)
		return CLS_LOCKED;
	if ((op == 0x86 || op == 0x87) && i + 1 < len && (p[i + 1] >> 6) != 3)
		return CLS_LOCKED;
	if (op == 0xcf)
		return CLS_IRET;
	if (op == 0xcd)
		return CLS_SYSCALL;
	if (op != 0x0f || i + 1 >= len)
		return CLS_NONE;
	uint8_t o2 = p[i + 1];
	int has_modrm = i + 2 < len;
	uint8_t modrm = has_modrm ? p[i + 2] : 0;
	int mod = modrm >> 6, reg = (modrm >> 3) & 7;
	switch (o2) {
	case 0x05: case 0x34: return CLS_SYSCALL;
	case 0x07: case 0x35: return CLS_SYSRET;
	case 0x30: return CLS_MSR_WRITE;
	case 0x32: return CLS_MSR_READ;
	case 0x31: return CLS_RDTSC;
	case 0xa2: return CLS_CPUID;
	case 0x22: return has_modrm && reg == 3 ? CLS_CR3_WRITE : CLS_NONE;
	case 0x00: return has_modrm && reg == 5 ? CLS_VERW : CLS_NONE;
	case 0x01:
		if (!has_modrm)
			return CLS_NONE;
		if (modrm == 0xf8)
			return CLS_SWAPGS;
		if (modrm == 0xf9)
			return CLS_RDTSC;
		if (modrm == 0xca || modrm == 0xcb)
			return CLS_STAC_CLAC;
		return mod != 3 && reg == 7 ? CLS_INVLPG : CLS_NONE;
	case 0xae:
		if (!has_modrm)
			return CLS_NONE;
		if (mod == 3)
			return !opsize && !rep && reg >= 5 ? CLS_FENCE : CLS_NONE;
		return !rep && (reg == 0 || reg == 1 || reg == 4 || reg == 5 || reg == 6) ? CLS_XSAVE : CLS_NONE;
	case 0xc7:
		return has_modrm && mod != 3 && reg >= 3 && reg <= 5 ? CLS_XSAVE : CLS_NONE;
	case 0x38: /* 66 0f 38 82: invpcid */
		return opsize && i + 2 < len && p[i + 2] == 0x82 ? CLS_INVLPG : CLS_NONE;
	}
	return CLS_NONE;
}

#endif
