/* spin_chain(n, x): a known extra cost to inject into any benchmark's loop
 * (`spin=N`), so statistical power and estimate accuracy can be checked
 * against a truth. n dependent adds; the value is carried from one call to
 * the next and an lfence (isb) closes the chain, so chains cannot overlap
 * each other or hide under the next operation's kernel entry.
 *
 * What is exact is the cost of the *difference* between two spin values:
 * spin=N+k costs k more dependent adds than spin=N, in any loop. The fixed
 * part (call, lfence) costs less after a syscall, whose return already
 * drained the pipeline, than in a tight loop alone. The harness measures
 * spin_chain(N) alone and reports it; compare spin=1 against spin=1+k and the
 * injected cost is alone(1+k) - alone(1). An indirect jump into an unrolled
 * block was tried first: after every kernel entry it is mispredicted (branch
 * predictor mitigations), which alone it never is. */
#include "probe.h"

#if defined(__x86_64__)
__attribute__((noinline)) uint64_t spin_chain(unsigned n, uint64_t x)
{
	uint64_t c = n;
	__asm__ volatile("1:\n\t"
			 "add %[x], %[x]\n\t"
			 "dec %[c]\n\t"
			 "jnz 1b\n\t"
			 "lfence\n\t"
			 : [x] "+r"(x), [c] "+r"(c)
			 :
			 : "cc");
	return x;
}
#elif defined(__i386__)
/* 32-bit registers: the chain runs on the low word (the count of dependent
 * adds is what matters, not their width). */
__attribute__((noinline)) uint64_t spin_chain(unsigned n, uint64_t x)
{
	uint32_t v = (uint32_t)x, c = n;
	__asm__ volatile("1:\n\t"
			 "add %[v], %[v]\n\t"
			 "dec %[c]\n\t"
			 "jnz 1b\n\t"
			 "lfence\n\t"
			 : [v] "+r"(v), [c] "+r"(c)
			 :
			 : "cc");
	return (x & ~(uint64_t)0xffffffffu) | v;
}
#elif defined(__arm__)
/* 32-bit registers, as on i386. */
__attribute__((noinline)) uint64_t spin_chain(unsigned n, uint64_t x)
{
	uint32_t v = (uint32_t)x, c = n;
	__asm__ volatile("1:\n\t"
			 "add %[v], %[v], %[v]\n\t"
			 "subs %[c], %[c], #1\n\t"
			 "bne 1b\n\t"
			 "isb\n\t"
			 : [v] "+r"(v), [c] "+r"(c)
			 :
			 : "cc");
	return (x & ~(uint64_t)0xffffffffu) | v;
}
#elif defined(__aarch64__)
__attribute__((noinline)) uint64_t spin_chain(unsigned n, uint64_t x)
{
	uint64_t c = n;
	__asm__ volatile("1:\n\t"
			 "add %[x], %[x], %[x]\n\t"
			 "subs %[c], %[c], #1\n\t"
			 "b.ne 1b\n\t"
			 "isb\n\t"
			 : [x] "+r"(x), [c] "+r"(c)
			 :
			 : "cc");
	return x;
}
#else
/* Portable form: a counted loop (its branch is part of the measured cost). */
__attribute__((noinline)) uint64_t spin_chain(unsigned n, uint64_t x)
{
	for (unsigned i = 0; i < n; i++)
		__asm__ volatile("add %0, %0" : "+r"(x));
	return x;
}
#endif
