/*
 * Element access shared by the kernels: integer division in the call's index
 * width, moving one unit of bytes, and loading/storing fp32, fp16 and bf16 as
 * fp32.  bf16 is stored as a 16-bit integer so no API needs a bf16 type.
 */

/* a / b in 32-bit arithmetic when the host proved both fit. */
KVRT_FN kvrt_u64 kvrt_div(kvrt_u64 a, kvrt_u64 b, const int idx32)
{
    return idx32 ? (kvrt_u64)((kvrt_u32)a / (kvrt_u32)b) : a / b;
}

/* Copy one unit; `unit` is a compile-time constant after inlining, so each
 * variant keeps exactly one load/store pair. */
KVRT_FN void kvrt_move_unit(KVRT_GLOBAL kvrt_u8 *dst, KVRT_GLOBAL const kvrt_u8 *src,
                            const kvrt_u32 unit)
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

KVRT_FN kvrt_u64 kvrt_elem_size(const int dt)
{
    return dt == KVRT_DT_F32 ? 4u : 2u;
}

KVRT_FN float kvrt_load(const int dt, KVRT_GLOBAL const kvrt_u8 *base, kvrt_u64 off)
{
    KVRT_GLOBAL const kvrt_u8 *p = base + off;
    if (dt == KVRT_DT_BF16)
        return kvrt_bf16_to_f32(*(KVRT_GLOBAL const kvrt_u16 *)p);
    if (dt == KVRT_DT_F16)
        return KVRT_LOAD_F16(p);
    return *(KVRT_GLOBAL const float *)p;
}

KVRT_FN void kvrt_store(const int dt, KVRT_GLOBAL kvrt_u8 *base, kvrt_u64 off, float v)
{
    KVRT_GLOBAL kvrt_u8 *p = base + off;
    if (dt == KVRT_DT_BF16)
        *(KVRT_GLOBAL kvrt_u16 *)p = kvrt_f32_to_bf16(v);
    else if (dt == KVRT_DT_F16)
        KVRT_STORE_F16(p, v);
    else
        *(KVRT_GLOBAL float *)p = v;
}
