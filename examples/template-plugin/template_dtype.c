/*
 * fp32 / fp16 / bf16 elements as float.  Only decode needs values; every
 * other operation moves bytes and never looks at them.
 */
#include <string.h>

#include "template.h"

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13); /* inf, nan */
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        exp = 113;
        while (!(mant & 0x400u)) {
            mant <<= 1;
            exp--;
        }
        bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

/* Round to nearest, ties to even, like the hardware conversions. */
static uint16_t float_to_half(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof(bits));
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t abs = bits & 0x7fffffffu;
    if (abs >= 0x7f800000u) /* inf, nan */
        return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0);
    if (abs >= 0x477ff000u) /* rounds past the largest half */
        return sign | 0x7c00u;
    if (abs < 0x38800000u) { /* below the smallest normal half */
        if (abs < 0x33000000u)
            return sign;
        uint32_t exp = abs >> 23, mant = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - exp; /* 14..24 */
        uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1u)))
            half++;
        return sign | (uint16_t)half;
    }
    uint32_t half = ((abs >> 13) - (112u << 10));
    uint32_t rest = abs & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
        half++;
    return sign | (uint16_t)half;
}

static float bf16_to_float(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof(bits));
    if ((bits & 0x7fffffffu) > 0x7f800000u) /* keep nan a nan */
        return (uint16_t)((bits >> 16) | 0x40u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

float tpl_load(int32_t dtype, const unsigned char *src, uint64_t index)
{
    if (dtype == KVRT_DTYPE_FP32) {
        float f;
        memcpy(&f, src + index * 4, sizeof(f));
        return f;
    }
    uint16_t u;
    memcpy(&u, src + index * 2, sizeof(u));
    return dtype == KVRT_DTYPE_FP16 ? half_to_float(u) : bf16_to_float(u);
}

void tpl_store(int32_t dtype, unsigned char *dst, uint64_t index, float value)
{
    if (dtype == KVRT_DTYPE_FP32) {
        memcpy(dst + index * 4, &value, sizeof(value));
        return;
    }
    uint16_t u = dtype == KVRT_DTYPE_FP16 ? float_to_half(value) : float_to_bf16(value);
    memcpy(dst + index * 2, &u, sizeof(u));
}
