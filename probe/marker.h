/* Window markers: instructions that do nothing (a multi-byte NOP on x86, a
 * register moved to itself on Arm), executed by the probe around every
 * measured batch, outside its timed region. The probe is the same binary
 * with or without counting: on hardware, or under an emulator without the
 * plugin, a marker is a NOP. Under QEMU with the opcount plugin
 * (probe/plugin/opcount.c) the instructions executed strictly between
 * MARK_OPEN and MARK_CLOSE are counted, less those between a MARK_PAUSE and
 * the next MARK_RESUME (a prepared benchmark's untimed preparation).
 *
 *   x86_64, i386: nopl TAG(%eax,%eax,1) = 0f 1f 84 00 + TAG, 32-bit little-endian
 *   aarch64:      mov xN, xN (orr xN, xzr, xN), N = 21..24 for OPEN..RESUME
 *   arm (A32):    mov rN, rN, N = 8..11 for OPEN..RESUME
 */
#ifndef OPCOST_MARKER_H
#define OPCOST_MARKER_H

#include <stddef.h>
#include <stdint.h>

/* plain numbers, not an enum: MARK(kind) pastes them into the instruction */
#define MARK_NONE 0
#define MARK_OPEN 1
#define MARK_CLOSE 2
#define MARK_PAUSE 3
#define MARK_RESUME 4
#define MARK_A64_1 "x21"
#define MARK_A64_2 "x22"
#define MARK_A64_3 "x23"
#define MARK_A64_4 "x24"
#define MARK_A32_1 "r8"
#define MARK_A32_2 "r9"
#define MARK_A32_3 "r10"
#define MARK_A32_4 "r11"
#define MARK_CAT_(a, b) a##b
#define MARK_CAT(a, b) MARK_CAT_(a, b)

#define MARK_TAG_BASE 0x4f430000u /* "CO": TAG = base + kind */

#define MARK_STR_(x) #x
#define MARK_STR(x) MARK_STR_(x)

#if defined(__x86_64__) || defined(__i386__)
#define MARK_ASM(kind) ".byte 0x0f,0x1f,0x84,0x00\n\t.long " MARK_STR(0x4f430000 + kind)
#elif defined(__aarch64__)
#define MARK_ASM(kind) "mov " MARK_CAT(MARK_A64_, kind) ", " MARK_CAT(MARK_A64_, kind)
#elif defined(__arm__) && !defined(__thumb__)
#define MARK_ASM(kind) "mov " MARK_CAT(MARK_A32_, kind) ", " MARK_CAT(MARK_A32_, kind)
#endif

#ifdef MARK_ASM
#define MARK(kind) __asm__ volatile(MARK_ASM(kind) ::: "memory")
#else
#define MARK(kind) ((void)0)
#endif

/* The plugin's side: which marker (MARK_*) the instruction bytes p[0..len)
 * are on a guest of this family ('x' x86, 'a' aarch64, 'r' 32-bit Arm),
 * MARK_NONE for any other instruction. */
static inline int marker_kind(const uint8_t *p, size_t len, char family)
{
	if (family == 'x' && len == 8 && p[0] == 0x0f && p[1] == 0x1f && p[2] == 0x84 && p[3] == 0x00) {
		uint32_t tag = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
		if (tag > MARK_TAG_BASE && tag <= MARK_TAG_BASE + MARK_RESUME)
			return (int)(tag - MARK_TAG_BASE);
		return MARK_NONE;
	}
	if (family != 'x' && len == 4) {
		uint32_t w = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
		for (int k = MARK_OPEN; k <= MARK_RESUME; k++) {
			uint32_t x = 20u + (uint32_t)k, r = 7u + (uint32_t)k;
			if (family == 'a' && w == (0xaa0003e0u | x << 16 | x)) /* orr xN, xzr, xN */
				return k;
			if (family == 'r' && w == (0xe1a00000u | r << 12 | r)) /* A32 mov rN, rN, cond AL */
				return k;
		}
	}
	return MARK_NONE;
}

#endif
