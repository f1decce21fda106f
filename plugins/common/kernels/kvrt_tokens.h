/*
 * write / read: K [T, H, D] and V [T, H, Dv] rows <-> cache cells through a
 * slot mapping.  Cell of (slot s, head h) = offset + (s / k) * stride_block +
 * h * stride_head + (s % k) * stride_state, K's bytes first, then V's.
 * Negative slots are skipped (write leaves the cache alone, read leaves the
 * row alone).  No element conversion: the rows are in the cache's type.
 *
 * One work-item per unit of a (token, head) row; K units then V units.
 * Byte offsets arrive as 64-bit values; all of them are multiples of `unit`.
 */

#define KVRT_TOKENS_PARAMS                                                     \
    kvrt_u64 dir, KVRT_GLOBAL kvrt_u8 *cache, KVRT_GLOBAL kvrt_u8 *kbuf,       \
        KVRT_GLOBAL kvrt_u8 *vbuf, KVRT_GLOBAL const kvrt_i64 *slots,          \
        kvrt_u64 rows, kvrt_u64 heads, kvrt_u64 k_units, kvrt_u64 v_units,     \
        kvrt_u64 view_tokens, kvrt_u64 offset, kvrt_u64 stride_block,          \
        kvrt_u64 stride_head, kvrt_u64 stride_state, kvrt_u64 k_offset,        \
        kvrt_u64 v_offset

#define KVRT_TOKENS_ARGS                                                       \
    dir, cache, kbuf, vbuf, slots, rows, heads, k_units, v_units, view_tokens, \
        offset, stride_block, stride_head, stride_state, k_offset, v_offset

KVRT_FN void kvrt_tokens_body(const kvrt_u32 unit, const int idx32, KVRT_TOKENS_PARAMS)
{
    const kvrt_u64 row_units = k_units + v_units;
    const kvrt_u64 total = rows * row_units;
    const kvrt_u64 step = KVRT_NUM_GROUPS * KVRT_LOCAL_SIZE;
    for (kvrt_u64 i = KVRT_GROUP_ID * KVRT_LOCAL_SIZE + KVRT_LOCAL_ID; i < total; i += step) {
        const kvrt_u64 row = kvrt_div(i, row_units, idx32);
        const kvrt_u64 u = i - row * row_units;
        const kvrt_u64 t = kvrt_div(row, heads, idx32);
        const kvrt_u64 h = row - t * heads;
        const kvrt_i64 slot = slots[t];
        if (slot < 0)
            continue;
        const kvrt_u64 vb = kvrt_div((kvrt_u64)slot, view_tokens, idx32);
        const kvrt_u64 j = (kvrt_u64)slot - vb * view_tokens;
        const kvrt_u64 cell = offset + vb * stride_block + h * stride_head + j * stride_state;
        /* V's bytes follow K's inside the cell, so the cell offset of unit u
         * is the same expression for both. */
        const kvrt_u64 c = cell + u * unit;
        KVRT_GLOBAL kvrt_u8 *x = u < k_units
            ? kbuf + k_offset + (row * k_units + u) * unit
            : vbuf + v_offset + (row * v_units + (u - k_units)) * unit;
        if (dir == KVRT_TOKENS_WRITE)
            kvrt_move_unit(cache + c, x, unit);
        else
            kvrt_move_unit(x, cache + c, unit);
    }
}

#define KVRT_TOKENS_KERNEL(suffix, unit, idx32)                                \
    KVRT_KERNEL kvrt_tokens_##suffix(KVRT_TOKENS_PARAMS)                       \
    {                                                                          \
        kvrt_tokens_body(unit, idx32, KVRT_TOKENS_ARGS);                       \
    }
KVRT_MOVE_VARIANTS(KVRT_TOKENS_KERNEL)
