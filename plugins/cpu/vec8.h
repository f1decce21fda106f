/*
 * kvrt CPU backend — eight fp32 lanes, for the decode kernel.
 *
 * The kernel is written once against this interface and compiled twice: with
 * AVX2+FMA+F16C the lanes are one __m256 and the loads widen bf16/fp16 in
 * registers; otherwise they are a plain array the compiler vectorises for
 * whatever the baseline target has.
 */
#ifndef KVRT_CPU_VEC8_H
#define KVRT_CPU_VEC8_H

#include <math.h>

#include <kvrt/plugin.h>

#include "convert.h"

#if defined(__GNUC__) || defined(__clang__)
#define CPU_INLINE static inline __attribute__((always_inline))
#else
#define CPU_INLINE static inline
#endif

/* One element of a row, widened (any dtype the kernel accepts). */
CPU_INLINE float cpu_elem_to_f32(int32_t dtype, const unsigned char *row, uint64_t i)
{
    uint16_t h;
    float f;
    switch (dtype) {
    case KVRT_DTYPE_FP32:
        memcpy(&f, row + 4 * i, 4);
        return f;
    case KVRT_DTYPE_BF16:
        memcpy(&h, row + 2 * i, 2);
        return cpu_bf16_to_f32(h);
    case KVRT_DTYPE_FP16:
        memcpy(&h, row + 2 * i, 2);
        return cpu_f16_to_f32(h);
    case KVRT_DTYPE_FP8_E4M3:
        return cpu_e4m3_to_f32(row[i]);
    case KVRT_DTYPE_FP8_E5M2:
        return cpu_e5m2_to_f32(row[i]);
    default:
        return 0.0f;
    }
}

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

typedef __m256 vec8;

CPU_INLINE vec8 v8_zero(void) { return _mm256_setzero_ps(); }
CPU_INLINE vec8 v8_set1(float x) { return _mm256_set1_ps(x); }
CPU_INLINE vec8 v8_load(const float *p) { return _mm256_loadu_ps(p); }
CPU_INLINE void v8_store(float *p, vec8 v) { _mm256_storeu_ps(p, v); }
CPU_INLINE vec8 v8_add(vec8 a, vec8 b) { return _mm256_add_ps(a, b); }
CPU_INLINE vec8 v8_mul(vec8 a, vec8 b) { return _mm256_mul_ps(a, b); }
CPU_INLINE vec8 v8_fma(vec8 a, vec8 b, vec8 c) { return _mm256_fmadd_ps(a, b, c); }

/* Eight elements of a row, widened. */
CPU_INLINE vec8 v8_load_elems(int32_t dtype, const unsigned char *p)
{
    switch (dtype) {
    case KVRT_DTYPE_FP32:
        return _mm256_loadu_ps((const float *)(const void *)p);
    case KVRT_DTYPE_BF16:
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    case KVRT_DTYPE_FP16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    case KVRT_DTYPE_FP8_E5M2:
        /* E5M2 is the upper byte of an fp16. */
        return _mm256_cvtph_ps(
            _mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)p)), 8));
    default: {
        float t[8];
        for (int i = 0; i < 8; i++)
            t[i] = cpu_elem_to_f32(dtype, p, (uint64_t)i);
        return _mm256_loadu_ps(t);
    }
    }
}

/* out[i] = the sum of the lanes of v[i], for four vectors at once. */
CPU_INLINE void v8_hsum4(const vec8 v[4], float out[4])
{
    __m256 ab = _mm256_hadd_ps(v[0], v[1]);
    __m256 cd = _mm256_hadd_ps(v[2], v[3]);
    __m256 abcd = _mm256_hadd_ps(ab, cd);
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
}

/* e^x for x <= 0 (softmax arguments), within 2 ulp: x = n ln2 + r with
 * |r| <= ln2/2, e^r by a degree-6 polynomial, 2^n built in the exponent.
 * Below -87 (where e^x is not a normal float) it returns ~1e-38: nothing
 * next to the tile maximum's e^0 = 1. */
CPU_INLINE vec8 v8_exp_neg(vec8 x)
{
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

CPU_INLINE float v8_hsum(vec8 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#else

typedef struct {
    float v[8];
} vec8;

CPU_INLINE vec8 v8_zero(void)
{
    vec8 r;
    for (int i = 0; i < 8; i++)
        r.v[i] = 0.0f;
    return r;
}

CPU_INLINE vec8 v8_set1(float x)
{
    vec8 r;
    for (int i = 0; i < 8; i++)
        r.v[i] = x;
    return r;
}

CPU_INLINE vec8 v8_load(const float *p)
{
    vec8 r;
    memcpy(r.v, p, sizeof(r.v));
    return r;
}

CPU_INLINE void v8_store(float *p, vec8 v) { memcpy(p, v.v, sizeof(v.v)); }

CPU_INLINE vec8 v8_add(vec8 a, vec8 b)
{
    for (int i = 0; i < 8; i++)
        a.v[i] += b.v[i];
    return a;
}

CPU_INLINE vec8 v8_mul(vec8 a, vec8 b)
{
    for (int i = 0; i < 8; i++)
        a.v[i] *= b.v[i];
    return a;
}

CPU_INLINE vec8 v8_fma(vec8 a, vec8 b, vec8 c)
{
    for (int i = 0; i < 8; i++)
        c.v[i] += a.v[i] * b.v[i];
    return c;
}

CPU_INLINE vec8 v8_load_elems(int32_t dtype, const unsigned char *p)
{
    vec8 r;
    for (int i = 0; i < 8; i++)
        r.v[i] = cpu_elem_to_f32(dtype, p, (uint64_t)i);
    return r;
}

CPU_INLINE float v8_hsum(vec8 v)
{
    return ((v.v[0] + v.v[4]) + (v.v[1] + v.v[5])) + ((v.v[2] + v.v[6]) + (v.v[3] + v.v[7]));
}

CPU_INLINE void v8_hsum4(const vec8 v[4], float out[4])
{
    for (int i = 0; i < 4; i++)
        out[i] = v8_hsum(v[i]);
}

/* e^x lane by lane, from libm: the portable build is the reference. */
CPU_INLINE vec8 v8_exp_neg(vec8 x)
{
    for (int i = 0; i < 8; i++)
        x.v[i] = expf(x.v[i]);
    return x;
}

#endif

/* The first n (< 8) elements of a row, widened; the other lanes are 0. */
CPU_INLINE vec8 v8_load_partial(int32_t dtype, const unsigned char *p, uint64_t n)
{
    float t[8] = {0};
    for (uint64_t i = 0; i < n; i++)
        t[i] = cpu_elem_to_f32(dtype, p, i);
    return v8_load(t);
}

#endif
