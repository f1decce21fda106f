/* Element types to and from double.  A generic IEEE-style encoder covers
 * fp16, bf16 and both fp8 formats, so every type the cache can hold gets
 * exactly the value a device would store. */
#include <math.h>
#include <string.h>

#include "numeric.h"

struct format {
    int ebits, mbits, bias;
    int finite_only; /* fp8 e4m3fn: no infinity, all-ones is NaN */
};

static const struct format fp16 = {5, 10, 15, 0};
static const struct format bf16 = {8, 7, 127, 0};
static const struct format e4m3 = {4, 3, 7, 1};
static const struct format e5m2 = {5, 2, 15, 0};

static uint32_t encode(const struct format *f, double x)
{
    const uint32_t sign = signbit(x) ? 1u << (f->ebits + f->mbits) : 0;
    const int emin = 1 - f->bias;
    /* The largest finite biased exponent and mantissa. */
    const int emax_biased = f->finite_only ? (1 << f->ebits) - 1 : (1 << f->ebits) - 2;
    const uint32_t mmax = f->finite_only ? (1u << f->mbits) - 2 : (1u << f->mbits) - 1;
    x = fabs(x);
    if (isnan(x))
        return sign | ((1u << (f->ebits + f->mbits)) - 1);
    if (x == 0)
        return sign;
    if (isinf(x))
        return f->finite_only ? sign | ((uint32_t)emax_biased << f->mbits) | mmax
                              : sign | ((uint32_t)(emax_biased + 1) << f->mbits);
    int e;
    frexp(x, &e);
    int exp = e - 1; /* x = 1.m * 2^exp */
    if (exp < emin) {
        /* Subnormal; a carry into the exponent field encodes itself. */
        return sign | (uint32_t)rint(ldexp(x, f->mbits - emin));
    }
    double m = rint(ldexp(x, f->mbits - exp));
    if (m >= ldexp(1, f->mbits + 1)) {
        m /= 2;
        exp++;
    }
    int biased = exp + f->bias;
    uint32_t mant = (uint32_t)m - (1u << f->mbits);
    if (biased > emax_biased || (biased == emax_biased && mant > mmax))
        return sign | ((uint32_t)emax_biased << f->mbits) | mmax; /* saturate */
    return sign | ((uint32_t)biased << f->mbits) | mant;
}

static double decode(const struct format *f, uint32_t bits)
{
    const uint32_t mmask = (1u << f->mbits) - 1, emask = (1u << f->ebits) - 1;
    const double sign = (bits >> (f->ebits + f->mbits)) & 1 ? -1.0 : 1.0;
    const uint32_t ex = (bits >> f->mbits) & emask, mant = bits & mmask;
    if (ex == emask && (!f->finite_only || mant == mmask))
        return f->finite_only || mant ? NAN : sign * INFINITY;
    if (ex == 0)
        return sign * ldexp((double)mant, 1 - f->bias - f->mbits);
    return sign * ldexp((double)(mant | (1u << f->mbits)), (int)ex - f->bias - f->mbits);
}

void numeric_encode(enum kvrt_dtype dtype, double x, void *dst)
{
    uint16_t h;
    uint8_t b;
    float v;
    switch (dtype) {
    case KVRT_DTYPE_FP32:
        v = (float)x;
        memcpy(dst, &v, 4);
        return;
    case KVRT_DTYPE_FP16:
        h = (uint16_t)encode(&fp16, x);
        memcpy(dst, &h, 2);
        return;
    case KVRT_DTYPE_BF16:
        h = (uint16_t)encode(&bf16, x);
        memcpy(dst, &h, 2);
        return;
    case KVRT_DTYPE_FP8_E4M3: b = (uint8_t)encode(&e4m3, x); break;
    case KVRT_DTYPE_FP8_E5M2: b = (uint8_t)encode(&e5m2, x); break;
    case KVRT_DTYPE_INT8: b = (uint8_t)(int8_t)lrint(fmax(-128, fmin(127, x * 127))); break;
    default: b = (uint8_t)lrint(fmax(0, fmin(255, (x + 1) * 127.5))); break;
    }
    memcpy(dst, &b, 1);
}

double numeric_decode(enum kvrt_dtype dtype, const void *src)
{
    uint16_t h;
    uint8_t b;
    float v;
    switch (dtype) {
    case KVRT_DTYPE_FP32: memcpy(&v, src, 4); return v;
    case KVRT_DTYPE_FP16: memcpy(&h, src, 2); return decode(&fp16, h);
    case KVRT_DTYPE_BF16: memcpy(&h, src, 2); return decode(&bf16, h);
    default: break;
    }
    memcpy(&b, src, 1);
    switch (dtype) {
    case KVRT_DTYPE_FP8_E4M3: return decode(&e4m3, b);
    case KVRT_DTYPE_FP8_E5M2: return decode(&e5m2, b);
    case KVRT_DTYPE_INT8: return (int8_t)b;
    default: return b;
    }
}

double numeric_unit_roundoff(enum kvrt_dtype dtype)
{
    switch (dtype) {
    case KVRT_DTYPE_FP32: return ldexp(1, -24);
    case KVRT_DTYPE_FP16: return ldexp(1, -11);
    case KVRT_DTYPE_BF16: return ldexp(1, -8);
    case KVRT_DTYPE_FP8_E4M3: return ldexp(1, -4);
    case KVRT_DTYPE_FP8_E5M2: return ldexp(1, -3);
    default: return 0;
    }
}

int numeric_is_float(enum kvrt_dtype dtype)
{
    return numeric_unit_roundoff(dtype) > 0;
}

uint64_t numeric_next(struct numeric_rng *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double numeric_uniform(struct numeric_rng *r)
{
    return (double)(numeric_next(r) >> 11) * ldexp(1, -52) - 1.0;
}

void numeric_fill(struct numeric_rng *r, enum kvrt_dtype dtype, void *dst, uint64_t count)
{
    const size_t es = kvrt_dtype_size(dtype);
    uint8_t *p = dst;
    if (!numeric_is_float(dtype)) {
        for (uint64_t i = 0; i < count; i++)
            p[i] = (uint8_t)numeric_next(r);
        return;
    }
    for (uint64_t i = 0; i < count; i++)
        numeric_encode(dtype, numeric_uniform(r), p + i * es);
}
