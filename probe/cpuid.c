/* `opcost-probe cpuid`: what only native code can learn about the CPU, as one
 * JSON line. The Python side (env.py) stores it with every run, next to what
 * /proc and /sys say, so that two runs can be told apart by the CPU and the
 * XSAVE state the kernel enables (context-switch and signal costs depend on
 * both).
 *
 * Rules: CPUID is only queried inside the range its base leaf advertises
 * (Intel answers out-of-range leaves with another leaf's data), and XGETBV is
 * only executed when CPUID.1:ECX.OSXSAVE says the OS enabled it. */
#include "json.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif defined(__aarch64__) || defined(__arm__)
#include <sys/auxv.h>
#endif
#if defined(__arm__)
#include "clock.h"
#endif

int cmd_cpuid(int fd);

#if defined(__x86_64__) || defined(__i386__)

#if defined(__x86_64__)
#define ARCH_NAME "x86_64"
#else
#define ARCH_NAME "i386"
#endif

struct regs {
	uint32_t a, b, c, d;
};

/* Highest leaf of each CPUID range; 0 when the range is absent. */
struct limits {
	uint32_t basic, ext, hv;
};

/* CPUID(leaf, sub) if the leaf's range reaches it; zeros (and 0) otherwise,
 * which callers read as "not enumerated". */
static int query(const struct limits *lim, uint32_t leaf, uint32_t sub, struct regs *r)
{
	uint32_t max = leaf >= 0x80000000u ? lim->ext
		     : leaf >= 0x40000000u ? lim->hv
					   : lim->basic;
	memset(r, 0, sizeof(*r));
	if (max == 0 || leaf > max)
		return 0;
	__cpuid_count(leaf, sub, r->a, r->b, r->c, r->d);
	return 1;
}

static int bit(uint32_t v, unsigned n)
{
	return (v >> n) & 1u;
}

/* 12 bytes of register text, cut at the first NUL (hypervisor signatures such
 * as "KVMKVMKVM\0\0\0" are padded with NULs). */
static void regs_text(char out[13], uint32_t r0, uint32_t r1, uint32_t r2)
{
	memcpy(out, &r0, 4);
	memcpy(out + 4, &r1, 4);
	memcpy(out + 8, &r2, 4);
	out[12] = '\0';
}

static void hex64(char out[19], uint64_t v)
{
	snprintf(out, 19, "0x%llx", (unsigned long long)v);
}

static uint64_t xgetbv(uint32_t index)
{
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(index));
	return ((uint64_t)hi << 32) | lo;
}

/* XSAVE state components by bit number (Intel SDM vol. 1, 13.1; the names
 * follow Linux's xfeature names where it has one). Bits 8, 10-16 are
 * supervisor (IA32_XSS) components; the rest are user (XCR0) components. */
static const char *const xfeature_names[] = {
	"x87", "sse", "avx", "mpx_bndregs", "mpx_bndcsr",
	"avx512_opmask", "avx512_zmm_hi256", "avx512_hi16_zmm",
	"pt", "pkru", "pasid", "cet_user", "cet_supervisor", "hdc", "uintr",
	"lbr", "hwp", "amx_tilecfg", "amx_tiledata", "apx",
};
#define N_XFEATURE_NAMES (sizeof(xfeature_names) / sizeof(xfeature_names[0]))

/* The component's name, or "bit_N" (formatted into buf) for unnamed bits. */
static const char *xfeature_name(char buf[12], unsigned n)
{
	if (n < N_XFEATURE_NAMES)
		return xfeature_names[n];
	snprintf(buf, 12, "bit_%u", n);
	return buf;
}

static void emit_mask(struct jb *j, const char *key, uint64_t mask)
{
	char buf[12];
	jb_arr_begin(j, key);
	for (unsigned n = 0; n < 64; n++) {
		if ((mask >> n) & 1u)
			jb_str(j, NULL, xfeature_name(buf, n));
	}
	jb_arr_end(j);
}

/* Leaf 0xD: which components exist, the save-area sizes and each component's
 * layout. `xcr0` is 0 when the OS has not enabled XSAVE. */
static void emit_xsave(struct jb *j, const struct limits *lim, uint64_t xcr0)
{
	struct regs s0, s1, c;
	char hex[19];

	query(lim, 0xd, 0, &s0);
	query(lim, 0xd, 1, &s1);
	uint64_t user_supported = ((uint64_t)s0.d << 32) | s0.a;
	uint64_t supervisor_supported = ((uint64_t)s1.d << 32) | s1.c;

	jb_obj_begin(j, "xsave");
	hex64(hex, user_supported);
	jb_str(j, "xcr0_supported", hex);
	hex64(hex, supervisor_supported);
	jb_str(j, "xss_supported", hex);
	/* Standard-format size for the components enabled in XCR0 right now, and
	 * the size if every supported user component were enabled. */
	jb_uint(j, "size_enabled", s0.b);
	jb_uint(j, "size_max", s0.c);
	jb_bool(j, "xsaveopt", bit(s1.a, 0));
	jb_bool(j, "xsavec", bit(s1.a, 1));
	jb_bool(j, "xgetbv1", bit(s1.a, 2));
	jb_bool(j, "xsaves", bit(s1.a, 3));
	/* Compacted-format size for XCR0 | IA32_XSS (what XSAVES writes). */
	jb_uint(j, "size_compacted", s1.b);

	/* x87 and SSE (bits 0, 1) live in the fixed legacy area, and their
	 * sub-leaves are the enumeration above; components from bit 2 up have
	 * sub-leaf n describing component n. */
	jb_arr_begin(j, "components");
	for (unsigned n = 2; n < 64; n++) {
		uint64_t m = (uint64_t)1 << n;
		if (!((user_supported | supervisor_supported | xcr0) & m))
			continue;
		char buf[12];
		query(lim, 0xd, n, &c);
		jb_obj_begin(j, NULL);
		jb_uint(j, "bit", n);
		jb_str(j, "name", xfeature_name(buf, n));
		jb_uint(j, "size", c.a);
		jb_uint(j, "offset", c.b); /* standard format; 0 for supervisor */
		jb_bool(j, "supervisor", bit(c.c, 0));
		jb_bool(j, "align64", bit(c.c, 1)); /* in the compacted format */
		jb_bool(j, "enabled", (xcr0 & m) != 0);
		jb_obj_end(j);
	}
	jb_arr_end(j);
	jb_obj_end(j);
}

static void emit_tsc_leaves(struct jb *j, const struct limits *lim)
{
	struct regs r;

	/* 0x15: TSC/crystal ratio EBX/EAX and crystal Hz in ECX; EBX == 0 means
	 * the ratio is not enumerated, ECX == 0 that the crystal is not. */
	if (query(lim, 0x15, 0, &r) && r.a && r.b) {
		jb_obj_begin(j, "tsc_leaf_0x15");
		jb_uint(j, "denominator", r.a);
		jb_uint(j, "numerator", r.b);
		jb_uint(j, "crystal_hz", r.c);
		if (r.c)
			jb_uint(j, "tsc_hz", (uint64_t)r.c * r.b / r.a);
		else
			jb_null(j, "tsc_hz");
		jb_obj_end(j);
	} else {
		jb_null(j, "tsc_leaf_0x15");
	}

	/* 0x16: nominal base / max / bus frequencies in MHz (not the TSC rate). */
	if (query(lim, 0x16, 0, &r) && (r.a | r.b | r.c)) {
		jb_obj_begin(j, "tsc_leaf_0x16");
		jb_uint(j, "base_mhz", r.a & 0xffff);
		jb_uint(j, "max_mhz", r.b & 0xffff);
		jb_uint(j, "bus_mhz", r.c & 0xffff);
		jb_obj_end(j);
	} else {
		jb_null(j, "tsc_leaf_0x16");
	}
}

static void emit_cpu(struct jb *j)
{
	struct limits lim = {0, 0, 0};
	struct regs r, l1, l7, e1, e7;
	char vendor[13], text[13], hex[19];

	jb_str(j, "arch", ARCH_NAME);
	/* __get_cpuid_max also checks (on i386) that CPUID exists at all. */
	lim.basic = __get_cpuid_max(0, NULL);
	if (lim.basic == 0) {
		jb_null(j, "cpuid");
		jb_str(j, "reason", "CPUID instruction not supported");
		return;
	}
	lim.ext = __get_cpuid_max(0x80000000u, NULL);
	if (lim.ext < 0x80000000u)
		lim.ext = 0;
	jb_uint(j, "max_leaf", lim.basic);
	jb_uint(j, "max_ext_leaf", lim.ext);

	query(&lim, 0, 0, &r);
	regs_text(vendor, r.b, r.d, r.c);
	jb_str(j, "vendor", vendor);

	if (lim.ext >= 0x80000004u) {
		char brand[49];
		for (unsigned i = 0; i < 3; i++) {
			query(&lim, 0x80000002u + i, 0, &r);
			memcpy(brand + 16 * i, &r, 16); /* EAX, EBX, ECX, EDX in order */
		}
		brand[48] = '\0';
		/* Intel right-justifies the brand string with leading spaces; AMD
		 * pads with trailing ones. */
		size_t n = strlen(brand);
		while (n > 0 && brand[n - 1] == ' ')
			brand[--n] = '\0';
		jb_str(j, "brand", brand + strspn(brand, " "));
	} else {
		jb_null(j, "brand");
	}

	query(&lim, 1, 0, &l1);
	unsigned stepping = l1.a & 0xf, base_model = (l1.a >> 4) & 0xf;
	unsigned base_family = (l1.a >> 8) & 0xf;
	unsigned ext_model = (l1.a >> 16) & 0xf, ext_family = (l1.a >> 20) & 0xff;
	/* Display family/model: the extended fields count only for family 0xF
	 * (both vendors) and, for the model, also family 6 on Intel (AMD's rule
	 * is family 0xF only). */
	int amd_rule = !strcmp(vendor, "AuthenticAMD") || !strcmp(vendor, "HygonGenuine");
	unsigned family = base_family == 0xf ? base_family + ext_family : base_family;
	unsigned model = (base_family == 0xf || (!amd_rule && base_family == 6))
			 ? (ext_model << 4) | base_model : base_model;
	snprintf(hex, sizeof(hex), "0x%08x", l1.a);
	jb_str(j, "signature", hex);
	jb_uint(j, "family", family);
	jb_uint(j, "model", model);
	jb_uint(j, "stepping", stepping);

	query(&lim, 7, 0, &l7);
	query(&lim, 0x80000001u, 0, &e1);
	query(&lim, 0x80000007u, 0, &e7);
	int xsave = bit(l1.c, 26), osxsave = bit(l1.c, 27);
	jb_obj_begin(j, "features");
	jb_bool(j, "fxsr", bit(l1.d, 24));
	jb_bool(j, "sse2", bit(l1.d, 26));
	jb_bool(j, "xsave", xsave);
	jb_bool(j, "osxsave", osxsave);
	jb_bool(j, "avx", bit(l1.c, 28));
	jb_bool(j, "avx2", bit(l7.b, 5));
	jb_bool(j, "avx512f", bit(l7.b, 16));
	jb_bool(j, "rdtscp", bit(e1.d, 27));
	jb_bool(j, "invariant_tsc", bit(e7.d, 8));
	jb_obj_end(j);

	/* CPUID.1:ECX[31] is reserved on bare metal and set by hypervisors,
	 * which then answer the 0x40000000 range with their signature. */
	int hv = bit(l1.c, 31);
	jb_bool(j, "hypervisor", hv);
	if (hv) {
		lim.hv = 0x40000000u;
		query(&lim, 0x40000000u, 0, &r);
		if (r.a > lim.hv)
			lim.hv = r.a;
		regs_text(text, r.b, r.c, r.d);
		jb_str(j, "hypervisor_vendor", text);
	} else {
		jb_null(j, "hypervisor_vendor");
	}

	uint64_t xcr0 = osxsave ? xgetbv(0) : 0;
	if (osxsave) {
		hex64(hex, xcr0);
		jb_str(j, "xcr0", hex);
		emit_mask(j, "xcr0_features", xcr0);
	} else {
		jb_null(j, "xcr0");
		jb_null(j, "xcr0_features");
	}
	if (xsave && lim.basic >= 0xd)
		emit_xsave(j, &lim, xcr0);
	else
		jb_null(j, "xsave");

	emit_tsc_leaves(j, &lim);
}

#elif defined(__aarch64__)

/* Linux emulates MRS of the ID registers for EL0 and says so with
 * HWCAP_CPUID; older glibc headers may not name the bit. */
#ifndef HWCAP_CPUID
#define HWCAP_CPUID (1UL << 11)
#endif

static void emit_cpu(struct jb *j)
{
	uint64_t cntfrq;
	char hex[19];

	jb_str(j, "arch", "aarch64");
	if (getauxval(AT_HWCAP) & HWCAP_CPUID) {
		uint64_t midr;
		__asm__ volatile("mrs %0, midr_el1" : "=r"(midr));
		snprintf(hex, sizeof(hex), "0x%08llx", (unsigned long long)midr);
		jb_str(j, "midr", hex);
		jb_uint(j, "implementer", (midr >> 24) & 0xff);
		jb_uint(j, "variant", (midr >> 20) & 0xf);
		jb_uint(j, "architecture", (midr >> 16) & 0xf);
		jb_uint(j, "part", (midr >> 4) & 0xfff);
		jb_uint(j, "revision", midr & 0xf);
		jb_null(j, "midr_reason");
	} else {
		jb_null(j, "midr");
		jb_null(j, "implementer");
		jb_null(j, "variant");
		jb_null(j, "architecture");
		jb_null(j, "part");
		jb_null(j, "revision");
		jb_str(j, "midr_reason", "kernel does not emulate MRS of ID registers (no HWCAP_CPUID)");
	}
	/* CNTFRQ_EL0 is readable at EL0 on Linux: the vDSO relies on it. */
	__asm__ volatile("mrs %0, cntfrq_el0" : "=r"(cntfrq));
	jb_uint(j, "cntfrq_hz", cntfrq);
}

#elif defined(__arm__)

/* 32-bit Arm: MIDR is not readable from user space (and Linux emulates no
 * ID-register reads for 32-bit tasks): env.py reads the CPU part from
 * /proc/cpuinfo. What the probe alone knows: the kernel's HWCAPs that decide
 * what insn.div and fpkind=neon can run, and the clock it uses. */
#ifndef HWCAP_ARM_NEON
#define HWCAP_ARM_NEON (1 << 12)
#endif
#ifndef HWCAP_ARM_IDIVA
#define HWCAP_ARM_IDIVA (1 << 17)
#endif
#ifndef HWCAP_ARM_IDIVT
#define HWCAP_ARM_IDIVT (1 << 18)
#endif

static void emit_cpu(struct jb *j)
{
	unsigned long hw = getauxval(AT_HWCAP);

	jb_str(j, "arch", "arm");
	jb_null(j, "midr");
	jb_str(j, "midr_reason", "MIDR is not readable from 32-bit user space (see /proc/cpuinfo)");
	jb_uint(j, "hwcap", hw);
	jb_bool(j, "idiva", (hw & HWCAP_ARM_IDIVA) != 0);
	jb_bool(j, "idivt", (hw & HWCAP_ARM_IDIVT) != 0);
	jb_bool(j, "neon", (hw & HWCAP_ARM_NEON) != 0);
	jb_str(j, "clock", CLOCK_NAME);
	if (clock_arm_cntvct) {
		uint32_t f;
		__asm__ volatile("mrc p15, 0, %0, c14, c0, 0" : "=r"(f)); /* CNTFRQ: readable when CNTVCT is */
		jb_uint(j, "cntfrq_hz", f);
	} else {
		jb_null(j, "cntfrq_hz");
		jb_str(j, "clock_note", clock_arm_why);
	}
}

#else

static void emit_cpu(struct jb *j)
{
	struct utsname u;

	jb_str(j, "arch", uname(&u) == 0 ? u.machine : NULL);
	jb_null(j, "cpuid");
	jb_str(j, "reason", "no CPU identification support in the probe for this architecture");
}

#endif

/* Print the line to fd; returns the exit status (0, or 1 if the write failed). */
int cmd_cpuid(int fd)
{
	struct jb j;
	int rc;

	jb_init(&j);
	jb_obj_begin(&j, NULL);
	emit_cpu(&j);
	jb_obj_end(&j);
	rc = jb_emit(&j, fd);
	jb_free(&j);
	return rc == 0 ? 0 : 1;
}
