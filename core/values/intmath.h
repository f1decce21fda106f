/* Internal: integer helpers that the core and the kvrt tool share.  Static
 * inline, so each user compiles its own copy and libkvrt exports nothing
 * beyond its kvrt_ API (the tool links the shared library, which hides
 * everything else).
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_INTMATH_H
#define KVRT_CORE_INTMATH_H

#include <stdbool.h>
#include <stdint.h>

#include "checked.h"

/* Greatest common divisor; kvrt_gcd_u64(0, 0) is 0. */
static inline uint64_t kvrt_gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Least common multiple of two non-zero numbers; true on overflow (*out is
 * then unspecified).  Divides before it multiplies, so only a result that
 * does not fit in 64 bits overflows. */
static inline bool kvrt_lcm_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
    return kvrt_mul_overflow(a / kvrt_gcd_u64(a, b), b, out);
}

#endif
