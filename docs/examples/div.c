/* The README's tour of `opcost variants` (op mode): one call of opcost_op
 * with a 64-bit division by a divisor the compiler cannot see (-D DIV),
 * against the shift it would use for a known power of two (-D SHIFT).
 *   opcost variants docs/examples/div.c -D DIV -D SHIFT
 */
#include <stdint.h>

uint64_t opcost_op(uint64_t x)
{
#ifdef DIV
    volatile uint64_t d = 8;   /* read at run time: a real divide instruction */
    return x / d + x;
#else
    return (x >> 3) + x;
#endif
}
