/*
 * write / read: K [T, H, D] and V [T, H, Dv] rows <-> cache cells through a
 * slot mapping.  Cell of (slot s, head h) = offset + (s / k) * stride_block +
 * h * stride_head + (s % k) * stride_state, K's bytes first, then V's.
 * Negative slots are skipped (write leaves the cache alone, read leaves the
 * row alone).  No element conversion: the rows are in the cache's type.
 *
 * One row per (token, head): `2^lane_shift` work-items share a row (the
 * host picks the smallest power of two covering its units, at most the
 * group), so the slot lookup and divisions happen once per row, not per
 * unit.  Byte offsets arrive as 64-bit values, all multiples of `unit`.
 */

#define KVRT_TOKENS_PARAMS                                                                                             \
    kvrt_u64 dir, KVRT_GLOBAL kvrt_u8 *cache, KVRT_GLOBAL kvrt_u8 *kbuf, KVRT_GLOBAL kvrt_u8 *vbuf,                    \
        KVRT_GLOBAL const kvrt_i64 *slots, kvrt_u64 rows, kvrt_u64 heads, kvrt_u64 k_units, kvrt_u64 v_units,          \
        kvrt_u64 lane_shift, kvrt_u64 view_tokens, kvrt_u64 offset, kvrt_u64 stride_block, kvrt_u64 stride_head,       \
        kvrt_u64 stride_state, kvrt_u64 k_offset, kvrt_u64 v_offset

#define KVRT_TOKENS_ARGS                                                                                               \
    dir, cache, kbuf, vbuf, slots, rows, heads, k_units, v_units, lane_shift, view_tokens, offset, stride_block,       \
        stride_head, stride_state, k_offset, v_offset

KVRT_FN void kvrt_tokens_body(const kvrt_u32 unit, const int idx32, KVRT_TOKENS_PARAMS)
{
    const kvrt_u64 row_units = k_units + v_units;
    const kvrt_u32 lanes = 1u << lane_shift;
    const kvrt_u32 lane = KVRT_LOCAL_ID & (lanes - 1u);
    const kvrt_u64 per_group = KVRT_LOCAL_SIZE >> lane_shift;
    const kvrt_u64 step = KVRT_NUM_GROUPS * per_group;
    for (kvrt_u64 row = KVRT_GROUP_ID * per_group + (KVRT_LOCAL_ID >> lane_shift); row < rows; row += step) {
        const kvrt_u64 t = kvrt_div(row, heads, idx32);
        const kvrt_u64 h = row - t * heads;
        const kvrt_i64 slot = slots[t];
        if (slot < 0)
            continue;
        const kvrt_u64 vb = kvrt_div((kvrt_u64)slot, view_tokens, idx32);
        const kvrt_u64 j = (kvrt_u64)slot - vb * view_tokens;
        /* V's bytes follow K's inside the cell, so unit u of the row is at
         * cell + u * unit for both. */
        KVRT_GLOBAL kvrt_u8 *cell = cache + offset + vb * stride_block + h * stride_head + j * stride_state;
        const kvrt_u64 krow = k_offset + row * k_units * unit;
        const kvrt_u64 vrow = v_offset + row * v_units * unit;
        for (kvrt_u64 u = lane; u < row_units; u += lanes) {
            KVRT_GLOBAL kvrt_u8 *x = u < k_units ? kbuf + krow + u * unit : vbuf + vrow + (u - k_units) * unit;
            if (dir == KVRT_TOKENS_WRITE)
                kvrt_move_unit(cell + u * unit, x, unit);
            else
                kvrt_move_unit(x, cell + u * unit, unit);
        }
    }
}

#define KVRT_TOKENS_KERNEL(suffix, unit, idx32)                                                                        \
    KVRT_KERNEL kvrt_tokens_##suffix(KVRT_TOKENS_PARAMS)                                                               \
    {                                                                                                                  \
        kvrt_tokens_body(unit, idx32, KVRT_TOKENS_ARGS);                                                               \
    }
KVRT_MOVE_VARIANTS(KVRT_TOKENS_KERNEL)
