/* Internal: overflow-checked 64-bit arithmetic.  Every size kvrt computes
 * goes through these, so a bad number becomes an error, never a wrapped size.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_CHECKED_H
#define KVRT_CORE_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

/* true on overflow; *out is then unspecified. */
static inline bool kvrt_mul_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

static inline bool kvrt_add_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_add_overflow(a, b, out);
}

#endif
