/*
 * kvrt CPU backend — a vector of CPU_VL fp32 lanes, for the decode kernel.
 *
 * The kernel is written once against this interface and compiled once per
 * instruction set: with AVX-512 (F, BW, VL, DQ, BF16) the lanes are one
 * __m512 (16 lanes); with AVX2+FMA+F16C one __m256 (8 lanes); otherwise a
 * plain array of 8 the compiler vectorises for the baseline target.  Loads
 * widen bf16, fp16 and both fp8 formats in registers (fp16 and fp8 through
 * the F16C conversion, which is exact for all of them).
 */
#ifndef KVRT_CPU_VEC_H
#define KVRT_CPU_VEC_H

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
    case KVRT_DTYPE_FP32: memcpy(&f, row + 4 * i, 4); return f;
    case KVRT_DTYPE_BF16: memcpy(&h, row + 2 * i, 2); return cpu_bf16_to_f32(h);
    case KVRT_DTYPE_FP16: memcpy(&h, row + 2 * i, 2); return cpu_f16_to_f32(h);
    case KVRT_DTYPE_FP8_E4M3: return cpu_e4m3_to_f32(row[i]);
    case KVRT_DTYPE_FP8_E5M2: return cpu_e5m2_to_f32(row[i]);
    default: return 0.0f;
    }
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) &&                 \
    defined(__AVX512BF16__)
#include <immintrin.h>

#define CPU_VL 16
/* Accumulator registers of the V loop (of 32). */
#define CPU_ACC_REGS 16
/* bf16 dot products with vdpbf16ps: pairs of bf16 products summed into fp32
 * lanes (exact products, fp32 sums). */
#define CPU_HAVE_DPBF16 1

typedef __m512 vecf;

CPU_INLINE vecf vf_zero(void)
{
    return _mm512_setzero_ps();
}
CPU_INLINE vecf vf_set1(float x)
{
    return _mm512_set1_ps(x);
}
CPU_INLINE vecf vf_load(const float *p)
{
    return _mm512_loadu_ps(p);
}
CPU_INLINE void vf_store(float *p, vecf v)
{
    _mm512_storeu_ps(p, v);
}
CPU_INLINE vecf vf_add(vecf a, vecf b)
{
    return _mm512_add_ps(a, b);
}
CPU_INLINE vecf vf_mul(vecf a, vecf b)
{
    return _mm512_mul_ps(a, b);
}
CPU_INLINE vecf vf_fma(vecf a, vecf b, vecf c)
{
    return _mm512_fmadd_ps(a, b, c);
}

/* 16 E4M3 bytes as fp16: the magnitude's 7 bits sit one place below fp16's
 * (exponent bias 7 against 15), so the fp16 read is the value x 2^-8, exact
 * for normals and subnormals alike; S.1111.111 is NaN. */
CPU_INLINE vecf vf_e4m3x16(__m128i b)
{
    __m256i w = _mm256_cvtepu8_epi16(b);
    __m256i mag = _mm256_and_si256(w, _mm256_set1_epi16(0x7f));
    __m256i h =
        _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8), _mm256_slli_epi16(mag, 7));
    __m512 f = _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(256.0f));
    __mmask16 nan = _mm256_cmpeq_epi16_mask(mag, _mm256_set1_epi16(0x7f));
    return _mm512_mask_blend_ps(nan, f, _mm512_set1_ps(__builtin_nanf("")));
}

/* CPU_VL elements of a row, widened. */
CPU_INLINE vecf vf_load_elems(int32_t dtype, const unsigned char *p)
{
    switch (dtype) {
    case KVRT_DTYPE_FP32: return _mm512_loadu_ps((const float *)(const void *)p);
    case KVRT_DTYPE_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
    case KVRT_DTYPE_FP16: return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    case KVRT_DTYPE_FP8_E5M2:
        /* E5M2 is the upper byte of an fp16. */
        return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)p)), 8));
    case KVRT_DTYPE_FP8_E4M3: return vf_e4m3x16(_mm_loadu_si128((const __m128i *)p));
    default: return _mm512_setzero_ps();
    }
}

CPU_INLINE float vf_hsum(vecf v)
{
    return _mm512_reduce_add_ps(v);
}

/* out[i] = the sum of the lanes of v[i], for four vectors at once: halves
 * added, then the 256-bit transpose-add (13 instructions, not 4 x 8). */
CPU_INLINE void vf_hsum4(const vecf v[4], float out[4])
{
    __m256 h[4];
    for (int i = 0; i < 4; i++)
        h[i] = _mm256_add_ps(_mm512_castps512_ps256(v[i]), _mm512_extractf32x8_ps(v[i], 1));
    __m256 ab = _mm256_hadd_ps(h[0], h[1]);
    __m256 cd = _mm256_hadd_ps(h[2], h[3]);
    __m256 abcd = _mm256_hadd_ps(ab, cd);
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
}

/* e^x for x <= 0 (softmax arguments), within 2 ulp: x = n ln2 + r with
 * |r| <= ln2/2, e^r by a degree-6 polynomial, 2^n applied by vscalefps.
 * Below -87 (where e^x is not a normal float) it returns ~1e-38: nothing
 * next to the tile maximum's e^0 = 1. */
CPU_INLINE vecf vf_exp_neg(vecf x)
{
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#define CPU_VL 8
#define CPU_ACC_REGS 8

typedef __m256 vecf;

CPU_INLINE vecf vf_zero(void)
{
    return _mm256_setzero_ps();
}
CPU_INLINE vecf vf_set1(float x)
{
    return _mm256_set1_ps(x);
}
CPU_INLINE vecf vf_load(const float *p)
{
    return _mm256_loadu_ps(p);
}
CPU_INLINE void vf_store(float *p, vecf v)
{
    _mm256_storeu_ps(p, v);
}
CPU_INLINE vecf vf_add(vecf a, vecf b)
{
    return _mm256_add_ps(a, b);
}
CPU_INLINE vecf vf_mul(vecf a, vecf b)
{
    return _mm256_mul_ps(a, b);
}
CPU_INLINE vecf vf_fma(vecf a, vecf b, vecf c)
{
    return _mm256_fmadd_ps(a, b, c);
}

/* Eight elements of a row, widened. */
CPU_INLINE vecf vf_load_elems(int32_t dtype, const unsigned char *p)
{
    switch (dtype) {
    case KVRT_DTYPE_FP32: return _mm256_loadu_ps((const float *)(const void *)p);
    case KVRT_DTYPE_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    case KVRT_DTYPE_FP16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    case KVRT_DTYPE_FP8_E5M2:
        /* E5M2 is the upper byte of an fp16. */
        return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)p)), 8));
    case KVRT_DTYPE_FP8_E4M3: {
        /* As fp16 the E4M3 magnitude reads as the value x 2^-8 (see the
         * AVX-512 variant); S.1111.111 is NaN. */
        __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)p));
        __m128i mag = _mm_and_si128(w, _mm_set1_epi16(0x7f));
        __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x80)), 8), _mm_slli_epi16(mag, 7));
        __m256 f = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
        __m256 nan = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7f))));
        return _mm256_blendv_ps(f, _mm256_set1_ps(__builtin_nanf("")), nan);
    }
    default: return _mm256_setzero_ps();
    }
}

/* out[i] = the sum of the lanes of v[i], for four vectors at once. */
CPU_INLINE void vf_hsum4(const vecf v[4], float out[4])
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
CPU_INLINE vecf vf_exp_neg(vecf x)
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

CPU_INLINE float vf_hsum(vecf v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#else

#define CPU_VL 8
#define CPU_ACC_REGS 8

typedef struct {
    float v[8];
} vecf;

CPU_INLINE vecf vf_zero(void)
{
    vecf r;
    for (int i = 0; i < 8; i++)
        r.v[i] = 0.0f;
    return r;
}

CPU_INLINE vecf vf_set1(float x)
{
    vecf r;
    for (int i = 0; i < 8; i++)
        r.v[i] = x;
    return r;
}

CPU_INLINE vecf vf_load(const float *p)
{
    vecf r;
    memcpy(r.v, p, sizeof(r.v));
    return r;
}

CPU_INLINE void vf_store(float *p, vecf v)
{
    memcpy(p, v.v, sizeof(v.v));
}

CPU_INLINE vecf vf_add(vecf a, vecf b)
{
    for (int i = 0; i < 8; i++)
        a.v[i] += b.v[i];
    return a;
}

CPU_INLINE vecf vf_mul(vecf a, vecf b)
{
    for (int i = 0; i < 8; i++)
        a.v[i] *= b.v[i];
    return a;
}

CPU_INLINE vecf vf_fma(vecf a, vecf b, vecf c)
{
    for (int i = 0; i < 8; i++)
        c.v[i] += a.v[i] * b.v[i];
    return c;
}

CPU_INLINE vecf vf_load_elems(int32_t dtype, const unsigned char *p)
{
    vecf r;
    for (int i = 0; i < 8; i++)
        r.v[i] = cpu_elem_to_f32(dtype, p, (uint64_t)i);
    return r;
}

CPU_INLINE float vf_hsum(vecf v)
{
    return ((v.v[0] + v.v[4]) + (v.v[1] + v.v[5])) + ((v.v[2] + v.v[6]) + (v.v[3] + v.v[7]));
}

CPU_INLINE void vf_hsum4(const vecf v[4], float out[4])
{
    for (int i = 0; i < 4; i++)
        out[i] = vf_hsum(v[i]);
}

/* e^x lane by lane, from libm: the portable build is the reference. */
CPU_INLINE vecf vf_exp_neg(vecf x)
{
    for (int i = 0; i < 8; i++)
        x.v[i] = expf(x.v[i]);
    return x;
}

#endif

/* The first n (< CPU_VL) elements of a row, widened; the other lanes are 0. */
CPU_INLINE vecf vf_load_partial(int32_t dtype, const unsigned char *p, uint64_t n)
{
    float t[CPU_VL] = {0};
    for (uint64_t i = 0; i < n; i++)
        t[i] = cpu_elem_to_f32(dtype, p, i);
    return vf_load(t);
}

#endif
