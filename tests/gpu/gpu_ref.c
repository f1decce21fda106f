#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/dtype.h>

#include "gpu_ref.h"

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float half_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const int exp = (h >> 10) & 0x1f;
    const uint32_t man = h & 0x3ffu;
    if (exp == 0) /* zero or subnormal: man * 2^-24 */
        return sign ? -ldexpf((float)man, -24) : ldexpf((float)man, -24);
    if (exp == 31)
        return bits_f32(sign | 0x7f800000u | (man << 13));
    return bits_f32(sign | ((uint32_t)(exp - 15 + 127) << 23) | (man << 13));
}

/* Exact round to nearest even through double arithmetic: fine for tests. */
static uint16_t f32_to_half(float f)
{
    uint16_t sign = (f32_bits(f) >> 16) & 0x8000u;
    double a = fabs((double)f);
    if (isnan(f))
        return 0x7e00u;
    if (a >= 65520.0)
        return sign | 0x7c00u;
    if (a < ldexp(1.0, -14)) { /* subnormal: units of 2^-24 */
        double m = nearbyint(a * ldexp(1.0, 24));
        return sign | (uint16_t)m;
    }
    int e;
    double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    double mant = nearbyint((m * 2.0 - 1.0) * 1024.0);
    int exp = e - 1 + 15;
    if (mant >= 1024.0) {
        mant = 0;
        exp++;
    }
    if (exp >= 31)
        return sign | 0x7c00u;
    return sign | (uint16_t)(exp << 10) | (uint16_t)mant;
}

/* OCP E4M3 ("fn"): bias 7, no infinity, S.1111.111 is NaN. */
static double e4m3_value(uint8_t b)
{
    const int exp = (b >> 3) & 0xf, mant = b & 7;
    const double sign = (b & 0x80) ? -1.0 : 1.0;
    if ((b & 0x7f) == 0x7f)
        return NAN;
    return exp == 0 ? sign * ldexp(mant, -9) : sign * ldexp(8 + mant, exp - 10);
}

double gpu_elem_get(int dtype, const uint8_t *p)
{
    uint16_t h;
    float f;
    switch (dtype) {
    case KVRT_DTYPE_FP8_E4M3: return e4m3_value(p[0]);
    case KVRT_DTYPE_FP8_E5M2: return half_to_f32((uint16_t)(p[0] << 8));
    case KVRT_DTYPE_BF16: memcpy(&h, p, 2); return bits_f32((uint32_t)h << 16);
    case KVRT_DTYPE_FP16: memcpy(&h, p, 2); return half_to_f32(h);
    default: memcpy(&f, p, 4); return f;
    }
}

void gpu_elem_put(int dtype, uint8_t *p, double v)
{
    uint16_t h;
    float f = (float)v;
    switch (dtype) {
    case KVRT_DTYPE_BF16:
        h = f32_to_bf16(f);
        memcpy(p, &h, 2);
        break;
    case KVRT_DTYPE_FP16:
        h = f32_to_half(f);
        memcpy(p, &h, 2);
        break;
    default: memcpy(p, &f, 4);
    }
}

uint64_t gpu_elem_size(int dtype)
{
    return dtype == KVRT_DTYPE_FP32 ? 4 : dtype == KVRT_DTYPE_FP16 || dtype == KVRT_DTYPE_BF16 ? 2 : 1;
}

double gpu_elem_tiny(int dtype)
{
    switch (dtype) {
    case KVRT_DTYPE_FP8_E4M3: return ldexp(1.0, -10);
    case KVRT_DTYPE_FP8_E5M2: return ldexp(1.0, -17);
    case KVRT_DTYPE_FP16: return ldexp(1.0, -25);
    default: return 0;
    }
}

double gpu_elem_eps(int dtype)
{
    switch (dtype) {
    case KVRT_DTYPE_FP8_E4M3: return ldexp(1.0, -4);
    case KVRT_DTYPE_FP8_E5M2: return ldexp(1.0, -3);
    case KVRT_DTYPE_BF16: return ldexp(1.0, -8);
    case KVRT_DTYPE_FP16: return ldexp(1.0, -11);
    default: return ldexp(1.0, -24);
    }
}

void gpu_ref_decode(int dtype, uint64_t seqs, uint64_t q_heads, uint64_t kv_heads, uint64_t d, uint64_t dv,
                    const uint8_t *q, const int32_t *seq_lens, double scale, gpu_kv_fn kv, void *ctx, double *out)
{
    const uint64_t es = gpu_elem_size(dtype);
    const uint64_t group = q_heads / kv_heads;
    double *scores = NULL;
    for (uint64_t s = 0; s < seqs; s++) {
        const uint64_t len = (uint64_t)seq_lens[s];
        double *grown = realloc(scores, (len ? len : 1) * sizeof(double));
        if (!grown) {
            free(scores);
            abort(); /* the reference has no way to report failure: fail loudly */
        }
        scores = grown;
        for (uint64_t qh = 0; qh < q_heads; qh++) {
            const uint8_t *qrow = q + (s * q_heads + qh) * d * es;
            const uint64_t h = qh / group;
            double m = -INFINITY;
            for (uint64_t t = 0; t < len; t++) {
                const uint8_t *krow = kv(ctx, s, t, h, 0);
                double dot = 0;
                for (uint64_t x = 0; x < d; x++)
                    dot += gpu_elem_get(dtype, qrow + x * es) * gpu_elem_get(dtype, krow + x * es);
                scores[t] = dot * scale;
                if (scores[t] > m)
                    m = scores[t];
            }
            double sum = 0;
            for (uint64_t t = 0; t < len; t++) {
                scores[t] = exp(scores[t] - m);
                sum += scores[t];
            }
            double *o = out + (s * q_heads + qh) * dv;
            for (uint64_t x = 0; x < dv; x++)
                o[x] = 0;
            for (uint64_t t = 0; t < len; t++) {
                const uint8_t *vrow = kv(ctx, s, t, h, 1);
                for (uint64_t x = 0; x < dv; x++)
                    o[x] += scores[t] / sum * gpu_elem_get(dtype, vrow + x * es);
            }
        }
    }
    free(scores);
}
