/*
 * Element values.  The suite keeps its own fp16/bf16 conversions (rather
 * than sharing a backend's) so that a conversion bug in a backend cannot
 * hide behind the same bug in the reference.
 */
#include <math.h>
#include <string.h>

#include "conformance.h"

bool conf_dtype_has_values(enum kvrt_dtype t)
{
    return t == KVRT_DTYPE_FP32 || t == KVRT_DTYPE_FP16 || t == KVRT_DTYPE_BF16 || t == KVRT_DTYPE_FP8_E4M3 ||
           t == KVRT_DTYPE_FP8_E5M2;
}

static double half_value(uint16_t h)
{
    int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exp == 0x1f)
        return mant ? NAN : sign * INFINITY;
    if (exp == 0)
        return sign * ldexp(mant, -24);
    return sign * ldexp(1024 + mant, exp - 25);
}

static double bf16_value(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

/* OCP E4M3 ("fn"): bias 7, no infinity, S.1111.111 is NaN. */
static double e4m3_value(uint8_t b)
{
    int exp = (b >> 3) & 0xf, mant = b & 7;
    double sign = (b & 0x80) ? -1.0 : 1.0;
    if ((b & 0x7f) == 0x7f)
        return NAN;
    return exp == 0 ? sign * ldexp(mant, -9) : sign * ldexp(8 + mant, exp - 10);
}

/* E5M2: the upper byte of an fp16. */
static double e5m2_value(uint8_t b)
{
    return half_value((uint16_t)(b << 8));
}

double conf_load(enum kvrt_dtype t, const void *src, uint64_t index)
{
    const uint8_t *p = src;
    if (t == KVRT_DTYPE_FP8_E4M3)
        return e4m3_value(p[index]);
    if (t == KVRT_DTYPE_FP8_E5M2)
        return e5m2_value(p[index]);
    if (t == KVRT_DTYPE_FP32) {
        float f;
        memcpy(&f, p + index * 4, sizeof(f));
        return f;
    }
    uint16_t u;
    memcpy(&u, p + index * 2, sizeof(u));
    return t == KVRT_DTYPE_FP16 ? half_value(u) : bf16_value(u);
}

/* Values on a grid every type holds exactly (k / 1024 for |k| <= 1024 fits
 * fp16's 11 bits; bf16's 8 bits need a coarser grid), so the reference sees
 * exactly the values the backend stores. */
void conf_fill(struct conf_rng *r, enum kvrt_dtype t, void *dst, uint64_t count)
{
    uint8_t *p = dst;
    for (uint64_t i = 0; i < count; i++) {
        if (t == KVRT_DTYPE_FP32) {
            float f = (float)((double)(int64_t)conf_rng_below(r, 2000001) / 1e6 - 1.0);
            memcpy(p + i * 4, &f, sizeof(f));
        } else if (t == KVRT_DTYPE_FP16) {
            /* k / 1024, k in [-1024, 1024]: always a normal half. */
            int64_t k = (int64_t)conf_rng_below(r, 2049) - 1024;
            uint16_t u = 0;
            if (k != 0) {
                uint64_t a = (uint64_t)(k < 0 ? -k : k);
                int lg = 0;
                while ((a >> (lg + 1)) != 0)
                    lg++;
                /* a / 1024 = (a << (10 - lg)) / 1024 * 2^(lg - 10) */
                uint64_t mant = (a << (10 - lg)) - 1024;
                u = (uint16_t)((k < 0 ? 0x8000u : 0u) | ((unsigned)(lg + 5) << 10) | mant);
            }
            memcpy(p + i * 2, &u, sizeof(u));
        } else if (t == KVRT_DTYPE_BF16) {
            float f = (float)((double)((int64_t)conf_rng_below(r, 257) - 128) / 128.0);
            uint32_t bits;
            memcpy(&bits, &f, sizeof(bits));
            uint16_t u = (uint16_t)(bits >> 16); /* exact: |k| <= 128 needs 8 bits */
            memcpy(p + i * 2, &u, sizeof(u));
        } else if (t == KVRT_DTYPE_FP8_E4M3 || t == KVRT_DTYPE_FP8_E5M2) {
            /* Any finite value of magnitude <= 1, subnormals included. */
            double v;
            do {
                p[i] = (uint8_t)conf_rng_next(r);
                v = conf_load(t, p, i);
            } while (!(fabs(v) <= 1.0));
        } else {
            p[i * kvrt_dtype_size(t)] = (uint8_t)conf_rng_next(r);
            for (size_t b = 1; b < kvrt_dtype_size(t); b++)
                p[i * kvrt_dtype_size(t) + b] = (uint8_t)conf_rng_next(r);
        }
    }
}

double conf_tolerance(enum kvrt_dtype t)
{
    switch (t) {
    case KVRT_DTYPE_FP32: return 1e-4;
    case KVRT_DTYPE_FP16: return 2e-3;
    case KVRT_DTYPE_BF16: return 2e-2;
    /* The output is rounded to the cache type: half an ulp is 2^-4 (E4M3)
     * and 2^-3 (E5M2) of the value. */
    case KVRT_DTYPE_FP8_E4M3: return 7e-2;
    case KVRT_DTYPE_FP8_E5M2: return 1.3e-1;
    default: return 0;
    }
}
