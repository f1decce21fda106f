/*
 * Element access shared by the kernels: integer division in the call's index
 * width, moving one unit of bytes, and loading/storing fp32, fp16, bf16 and
 * fp8 as fp32.  bf16 and fp8 are handled as integers, so no API needs those
 * types; every narrowing rounds to nearest, ties to even.
 *
 * fp8 follows the OCP formats, bit for bit as the CPU backend does: E4M3
 * ("fn": bias 7, no infinity, S.1111.111 is NaN, largest 448; out-of-range
 * values saturate to +-448) and E5M2 (bias 15, IEEE-like; overflow to inf).
 */

/* a / b in 32-bit arithmetic when the host proved both fit. */
KVRT_FN kvrt_u64 kvrt_div(kvrt_u64 a, kvrt_u64 b, const int idx32)
{
    return idx32 ? (kvrt_u64)((kvrt_u32)a / (kvrt_u32)b) : a / b;
}

/* Copy one unit; `unit` is a compile-time constant after inlining, so each
 * variant keeps exactly one load/store pair. */
KVRT_FN void kvrt_move_unit(KVRT_GLOBAL kvrt_u8 *dst, KVRT_GLOBAL const kvrt_u8 *src, const kvrt_u32 unit)
{
    if (unit == 16u)
        *(KVRT_GLOBAL kvrt_u128 *)dst = *(KVRT_GLOBAL const kvrt_u128 *)src;
    else if (unit == 4u)
        *(KVRT_GLOBAL kvrt_u32 *)dst = *(KVRT_GLOBAL const kvrt_u32 *)src;
    else
        *dst = *src;
}

KVRT_FN float kvrt_bf16_to_f32(kvrt_u16 h)
{
    return KVRT_AS_FLOAT(((kvrt_u32)h) << 16);
}

/* Round to nearest, ties to even; NaN stays a (quiet) NaN of the same sign. */
KVRT_FN kvrt_u16 kvrt_f32_to_bf16(float f)
{
    kvrt_u32 u = KVRT_AS_UINT(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (kvrt_u16)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (kvrt_u16)(u >> 16);
}

/* IEEE half bits widened with integer operations (the subnormal product is
 * exact: mant * 2^-24 is a normal float), so vector loads need no half type. */
KVRT_FN float kvrt_f16_bits_to_f32(kvrt_u32 h)
{
    const kvrt_u32 sign = (h & 0x8000u) << 16;
    const kvrt_u32 exp = h & 0x7c00u;
    const kvrt_u32 mant = h & 0x03ffu;
    kvrt_u32 mag;
    if (exp == 0u)
        mag = KVRT_AS_UINT((float)mant * 5.9604644775390625e-8f); /* 2^-24 */
    else if (exp == 0x7c00u)
        mag = 0x7f800000u | (mant << 13);
    else
        mag = ((h & 0x7fffu) << 13) + (112u << 23);
    return KVRT_AS_FLOAT(sign | mag);
}

/* E5M2 is the upper byte of an fp16. */
KVRT_FN float kvrt_e5m2_to_f32(kvrt_u8 b)
{
    return kvrt_f16_bits_to_f32((kvrt_u32)b << 8);
}

KVRT_FN float kvrt_e4m3_to_f32(kvrt_u8 b)
{
    const kvrt_u32 sign = ((kvrt_u32)b & 0x80u) << 24;
    const kvrt_u32 mant = (kvrt_u32)b & 0x07u;
    kvrt_u32 mag;
    if (((kvrt_u32)b & 0x7fu) == 0x7fu)
        mag = 0x7fc00000u;
    else if (((kvrt_u32)b & 0x78u) == 0u)
        mag = KVRT_AS_UINT((float)mant * 0.001953125f); /* 2^-9 */
    else
        mag = (((kvrt_u32)b & 0x7fu) << 20) + (120u << 23);
    return KVRT_AS_FLOAT(sign | mag);
}

/*
 * |f| (bits a, finite) as a minifloat magnitude with `mbits` mantissa bits
 * and exponent bias `bias`, rounded to nearest even; 0xffffffff when the
 * exponent field would pass emax_field (the caller saturates or makes inf).
 */
KVRT_FN kvrt_u32 kvrt_minifloat_mag(kvrt_u32 a, const kvrt_u32 mbits, const int bias, const kvrt_u32 emax_field)
{
    if ((a >> 23) == 0u)
        return 0u; /* fp32 subnormals are far below every fp8 subnormal */
    const int e = (int)(a >> 23) - 127;
    const int emin = 1 - bias;
    const int eq = e < emin ? emin : e;
    const kvrt_u64 sig = (kvrt_u64)((a & 0x007fffffu) | 0x00800000u);
    /* Quanta of the target at this magnitude: sig * 2^(e - 23 - qexp). */
    const int shift = eq - (int)mbits - (e - 23); /* > 0 for mbits < 23 */
    kvrt_u64 q = 0;
    if (shift <= 40) {
        q = sig >> shift;
        const kvrt_u64 rest = sig & ((((kvrt_u64)1) << shift) - 1u);
        const kvrt_u64 halfway = ((kvrt_u64)1) << (shift - 1);
        if (rest > halfway || (rest == halfway && (q & 1u)))
            q++;
    }
    int field = eq + bias;
    if (q >= (((kvrt_u64)1) << (mbits + 1u))) {
        q >>= 1;
        field++;
    }
    if (q < (((kvrt_u64)1) << mbits))
        return (kvrt_u32)q; /* subnormal (only at emin), or zero */
    if (field > (int)emax_field)
        return 0xffffffffu;
    return ((kvrt_u32)field << mbits) | ((kvrt_u32)q & ((1u << mbits) - 1u));
}

KVRT_FN kvrt_u8 kvrt_f32_to_e4m3(float f)
{
    const kvrt_u32 u = KVRT_AS_UINT(f);
    const kvrt_u32 sign = (u >> 24) & 0x80u;
    const kvrt_u32 a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (kvrt_u8)(sign | 0x7fu);
    if (a == 0x7f800000u)
        return (kvrt_u8)(sign | 0x7eu);
    kvrt_u32 mag = kvrt_minifloat_mag(a, 3u, 7, 15u);
    if (mag > 0x7eu) /* 0x7f is NaN: saturate to 448 (also on overflow) */
        mag = 0x7eu;
    return (kvrt_u8)(sign | mag);
}

KVRT_FN kvrt_u8 kvrt_f32_to_e5m2(float f)
{
    const kvrt_u32 u = KVRT_AS_UINT(f);
    const kvrt_u32 sign = (u >> 24) & 0x80u;
    const kvrt_u32 a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (kvrt_u8)(sign | 0x7eu);
    if (a == 0x7f800000u)
        return (kvrt_u8)(sign | 0x7cu);
    kvrt_u32 mag = kvrt_minifloat_mag(a, 2u, 15, 30u);
    if (mag == 0xffffffffu)
        mag = 0x7cu;
    return (kvrt_u8)(sign | mag);
}

KVRT_FN kvrt_u64 kvrt_elem_size(const int dt)
{
    return dt == KVRT_DT_F32 ? 4u : (dt == KVRT_DT_F16 || dt == KVRT_DT_BF16) ? 2u : 1u;
}

KVRT_FN float kvrt_load(const int dt, KVRT_GLOBAL const kvrt_u8 *base, kvrt_u64 off)
{
    KVRT_GLOBAL const kvrt_u8 *p = base + off;
    if (dt == KVRT_DT_BF16)
        return kvrt_bf16_to_f32(*(KVRT_GLOBAL const kvrt_u16 *)p);
    if (dt == KVRT_DT_F16)
        return KVRT_LOAD_F16(p);
    if (dt == KVRT_DT_E4M3)
        return kvrt_e4m3_to_f32(*p);
    if (dt == KVRT_DT_E5M2)
        return kvrt_e5m2_to_f32(*p);
    return *(KVRT_GLOBAL const float *)p;
}

KVRT_FN void kvrt_store(const int dt, KVRT_GLOBAL kvrt_u8 *base, kvrt_u64 off, float v)
{
    KVRT_GLOBAL kvrt_u8 *p = base + off;
    if (dt == KVRT_DT_BF16)
        *(KVRT_GLOBAL kvrt_u16 *)p = kvrt_f32_to_bf16(v);
    else if (dt == KVRT_DT_F16)
        KVRT_STORE_F16(p, v);
    else if (dt == KVRT_DT_E4M3)
        *p = kvrt_f32_to_e4m3(v);
    else if (dt == KVRT_DT_E5M2)
        *p = kvrt_f32_to_e5m2(v);
    else
        *(KVRT_GLOBAL float *)p = v;
}
