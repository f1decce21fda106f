/* Host-side numbers for run and bench: element types to and from double,
 * and a small deterministic random generator. */
#ifndef KVRT_TOOLS_NUMERIC_H
#define KVRT_TOOLS_NUMERIC_H

#include <stdint.h>

#include <kvrt/dtype.h>

/* Round `x` to the nearest value of `dtype` (ties to even; out of range
 * saturates) and store it at dst (kvrt_dtype_size bytes). */
void numeric_encode(enum kvrt_dtype dtype, double x, void *dst);

/* The value of one element. */
double numeric_decode(enum kvrt_dtype dtype, const void *src);

/* Unit roundoff of a floating type (2^-(mantissa bits + 1)); 0 for integers. */
double numeric_unit_roundoff(enum kvrt_dtype dtype);

/* True for the types paged decode works in (floating point). */
int numeric_is_float(enum kvrt_dtype dtype);

/* splitmix64: fast, seedable, good enough for test data. */
struct numeric_rng {
    uint64_t state;
};

uint64_t numeric_next(struct numeric_rng *r);
/* Uniform in [-1, 1). */
double numeric_uniform(struct numeric_rng *r);

/* `count` elements of `dtype`, uniform in [-1, 1) (integers: random bytes). */
void numeric_fill(struct numeric_rng *r, enum kvrt_dtype dtype, void *dst, uint64_t count);

#endif
