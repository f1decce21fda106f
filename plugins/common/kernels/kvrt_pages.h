/*
 * copy_blocks / gather / scatter: whole pages of one layer.
 *
 * Manager block b spans view blocks b*r .. b*r+r-1; its Nm = r * states
 * states are numbered across them (state n lives in view block b*r + n /
 * states, state n % states).  The staging page of (request i, this layer) is
 * [H, Nm, C], dense, at stage_offset + i * stage_stride.
 *
 * Copy reads ids as (source, destination) pairs, gather/scatter as block ids;
 * id_base selects the first entry of this launch (the host splits dependent
 * pairs into separate launches).  One work-item per unit of a cell.
 */

#define KVRT_PAGES_PARAMS                                                      \
    kvrt_u64 mode, KVRT_GLOBAL kvrt_u8 *src, KVRT_GLOBAL kvrt_u8 *dst,         \
        KVRT_GLOBAL const kvrt_i64 *ids, kvrt_u64 id_base, kvrt_u64 blocks,    \
        kvrt_u64 heads, kvrt_u64 block_states, kvrt_u64 cell_units,            \
        kvrt_u64 states, kvrt_u64 r, kvrt_u64 offset, kvrt_u64 stride_block,   \
        kvrt_u64 stride_head, kvrt_u64 stride_state, kvrt_u64 stage_offset,    \
        kvrt_u64 stage_stride

#define KVRT_PAGES_ARGS                                                        \
    mode, src, dst, ids, id_base, blocks, heads, block_states, cell_units,     \
        states, r, offset, stride_block, stride_head, stride_state,            \
        stage_offset, stage_stride

KVRT_FN void kvrt_pages_body(const kvrt_u32 unit, const int idx32, KVRT_PAGES_PARAMS)
{
    const kvrt_u64 total = blocks * heads * block_states * cell_units;
    const kvrt_u64 step = KVRT_NUM_GROUPS * KVRT_LOCAL_SIZE;
    for (kvrt_u64 i = KVRT_GROUP_ID * KVRT_LOCAL_SIZE + KVRT_LOCAL_ID; i < total; i += step) {
        const kvrt_u64 cellidx = kvrt_div(i, cell_units, idx32);
        const kvrt_u64 u = i - cellidx * cell_units;
        const kvrt_u64 hn = kvrt_div(cellidx, block_states, idx32);
        const kvrt_u64 n = cellidx - hn * block_states;
        const kvrt_u64 bi = kvrt_div(hn, heads, idx32);
        const kvrt_u64 h = hn - bi * heads;
        const kvrt_u64 sub = kvrt_div(n, states, idx32);
        const kvrt_u64 j = n - sub * states;
        /* Everything but the block: the same for source and destination. */
        const kvrt_u64 in_block = sub * stride_block + h * stride_head + j * stride_state + u * unit;
        const kvrt_u64 stage = stage_offset + bi * stage_stride + (cellidx - bi * heads * block_states) * cell_units * unit + u * unit;
        kvrt_u64 s, d;
        if (mode == KVRT_PAGES_COPY) {
            s = offset + (kvrt_u64)ids[2 * (id_base + bi)] * r * stride_block + in_block;
            d = offset + (kvrt_u64)ids[2 * (id_base + bi) + 1] * r * stride_block + in_block;
        } else if (mode == KVRT_PAGES_GATHER) {
            s = offset + (kvrt_u64)ids[id_base + bi] * r * stride_block + in_block;
            d = stage;
        } else {
            s = stage;
            d = offset + (kvrt_u64)ids[id_base + bi] * r * stride_block + in_block;
        }
        kvrt_move_unit(dst + d, src + s, unit);
    }
}

#define KVRT_PAGES_KERNEL(suffix, unit, idx32)                                 \
    KVRT_KERNEL kvrt_pages_##suffix(KVRT_PAGES_PARAMS)                         \
    {                                                                          \
        kvrt_pages_body(unit, idx32, KVRT_PAGES_ARGS);                         \
    }
KVRT_MOVE_VARIANTS(KVRT_PAGES_KERNEL)
