/*
 * kvrt CPU backend — element conversions to and from fp32.
 *
 * Portable integer code: exact, independent of the FPU's rounding mode and of
 * flush-to-zero/denormals-are-zero flags a host program may have set (a
 * -ffast-math program sets them process-wide).  Narrowing conversions round
 * to nearest, ties to even.  The widening ones are written as selects so
 * compilers vectorise them in row loops.
 *
 * fp8 follows the OCP 8-bit formats: E4M3 ("fn": bias 7, no infinity, NaN =
 * S.1111.111, largest 448) and E5M2 (bias 15, IEEE-like inf/NaN).  Narrowing
 * to E4M3 saturates out-of-range values (and infinities) to +-448, the
 * "satfinite" convention of fp8 attention kernels; E5M2 overflows to inf.
 */
#ifndef KVRT_CPU_CONVERT_H
#define KVRT_CPU_CONVERT_H

#include <stdint.h>
#include <string.h>

static inline uint32_t cpu_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float cpu_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* ---- bf16: the upper half of an fp32 ---- */

static inline float cpu_bf16_to_f32(uint16_t h)
{
    return cpu_f32_from_bits((uint32_t)h << 16);
}

static inline uint16_t cpu_f32_to_bf16(float f)
{
    uint32_t u = cpu_f32_bits(f);
    /* Truncating a NaN could leave an all-zero mantissa (= inf): force the
     * quiet bit instead. */
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    /* Adding 0x7fff plus the kept LSB rounds half to even; a carry into the
     * exponent is the correct result, up to and including inf. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- fp16: IEEE binary16 ---- */

static inline float cpu_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = h & 0x7c00u;
    uint32_t mant = h & 0x03ffu;
    /* Normal: move exponent+mantissa into place and rebias 15 -> 127. */
    uint32_t normal = ((uint32_t)(h & 0x7fffu) << 13) + (112u << 23);
    /* Subnormal (and zero): mant x 2^-24, computed on normal floats only. */
    uint32_t subnormal = cpu_f32_bits((float)mant * 0x1p-24f);
    uint32_t special = 0x7f800000u | (mant << 13); /* inf, NaN keeps its payload */
    uint32_t mag = exp == 0 ? subnormal : exp == 0x7c00u ? special : normal;
    return cpu_f32_from_bits(sign | mag);
}

static inline uint16_t cpu_f32_to_f16(float f)
{
    uint32_t u = cpu_f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;

    if (a > 0x7f800000u) /* NaN: quiet, keep the top payload bits */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x03ffu));
    if (a >= 0x477ff000u) /* >= 65520 rounds past 65504: inf (inf included) */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal half: >= 2^-14 */
        uint32_t r = a - (112u << 23);
        r += 0x0fffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (a <= 0x33000000u) /* <= 2^-25: half of the smallest subnormal, ties to 0 */
        return sign;
    /* Subnormal half: value / 2^-24 = m >> (126 - e) with m the 24-bit
     * significand; round the shifted-out bits to nearest even.  A carry to
     * 0x400 is exactly the smallest normal. */
    uint32_t e = a >> 23;
    uint32_t m = (a & 0x007fffffu) | 0x00800000u;
    uint32_t shift = 126u - e; /* 14 .. 24 */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)(sign | q);
}

/* ---- fp8 ---- */

static inline float cpu_e5m2_to_f32(uint8_t b)
{
    /* E5M2 is the upper byte of an fp16. */
    return cpu_f16_to_f32((uint16_t)((uint16_t)b << 8));
}

static inline float cpu_e4m3_to_f32(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t exp = b & 0x78u;
    uint32_t mant = b & 0x07u;
    uint32_t normal = ((uint32_t)(b & 0x7fu) << 20) + (120u << 23);
    uint32_t subnormal = cpu_f32_bits((float)mant * 0x1p-9f);
    uint32_t mag = (b & 0x7fu) == 0x7fu ? 0x7fc00000u : exp == 0 ? subnormal : normal;
    return cpu_f32_from_bits(sign | mag);
}

/*
 * fp32 -> a small float with `mbits` mantissa bits and exponent bias `bias`,
 * |value| as (exponent field << mbits | mantissa), rounded to nearest even.
 * Returns the encoded magnitude, or UINT32_MAX when it overflows the
 * exponent range `emax_field` (the caller decides inf or saturation).
 */
static inline uint32_t cpu_f32_to_minifloat_mag(uint32_t a, uint32_t mbits, int32_t bias, uint32_t emax_field)
{
    /* a: |f| bits, finite.  Float exponent (unbiased); float subnormals are
     * far below every fp8 subnormal and round to zero. */
    int32_t e = (int32_t)(a >> 23) - 127;
    if ((a >> 23) == 0)
        return 0;
    int32_t emin = 1 - bias;
    uint64_t sig = (a & 0x007fffffu) | 0x00800000u; /* 1.23 fixed point */
    /* Quantum exponent: the target's spacing at this magnitude. */
    int32_t qexp = (e < emin ? emin : e) - (int32_t)mbits;
    /* value = sig * 2^(e-23); in quanta: sig * 2^(e-23-qexp). */
    int32_t shift = qexp - (e - 23);
    uint64_t q;
    if (shift <= 0) {
        q = sig << (-shift);
    } else if (shift > 40) {
        q = 0; /* far below half a quantum */
    } else {
        q = sig >> shift;
        uint64_t rem = sig & ((UINT64_C(1) << shift) - 1u);
        uint64_t half = UINT64_C(1) << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
    }
    /* q is the significand in quanta, < 2^(mbits+1) except after a carry. */
    int32_t field = (e < emin ? emin : e) + bias;
    if (q >= (UINT64_C(1) << (mbits + 1))) {
        q >>= 1;
        field++;
    }
    if (q < (UINT64_C(1) << mbits)) /* subnormal (only at emin) */
        return (uint32_t)q;
    if (field > (int32_t)emax_field)
        return UINT32_MAX;
    return ((uint32_t)field << mbits) | ((uint32_t)q & ((1u << mbits) - 1u));
}

static inline uint8_t cpu_f32_to_e4m3(float f)
{
    uint32_t u = cpu_f32_bits(f);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint8_t)(sign | 0x7fu);
    if (a == 0x7f800000u)
        return (uint8_t)(sign | 0x7eu);
    uint32_t mag = cpu_f32_to_minifloat_mag(a, 3, 7, 15);
    /* 0x7f is NaN: anything at or above it saturates to 448. */
    if (mag == UINT32_MAX || mag > 0x7eu)
        mag = 0x7eu;
    return (uint8_t)(sign | mag);
}

static inline uint8_t cpu_f32_to_e5m2(float f)
{
    uint32_t u = cpu_f32_bits(f);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint8_t)(sign | 0x7eu);
    if (a == 0x7f800000u)
        return (uint8_t)(sign | 0x7cu);
    uint32_t mag = cpu_f32_to_minifloat_mag(a, 2, 15, 30);
    if (mag == UINT32_MAX)
        mag = 0x7cu;
    return (uint8_t)(sign | mag);
}

#endif
