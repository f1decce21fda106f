/*
 * copy_blocks / gather / scatter: whole pages of one layer.
 *
 * Manager block b spans view blocks b*r .. b*r+r-1; its Nm = r * states
 * states are numbered across them (state n lives in view block b*r + n /
 * states, state n % states).  The staging page of (request i, this layer) is
 * [H, Nm, C], dense, at stage_offset + i * stage_stride.
 *
 * The host cuts each page into runs contiguous on both sides: a run is
 * `heads_per_run` heads x `states_per_run` states of C bytes (one cell, the
 * states of a view block when they are adjacent, or the whole page when the
 * layout makes it one run).  Rows are runs; `2^lane_shift` work-items share
 * a row, so the divisions happen once per run, not per unit.
 *
 * Copy reads ids as (source, destination) pairs, gather/scatter as block ids;
 * id_base selects the first entry of this launch (the host splits dependent
 * pairs into separate launches).
 */

#define KVRT_PAGES_PARAMS                                                                                              \
    kvrt_u64 mode, KVRT_GLOBAL kvrt_u8 *src, KVRT_GLOBAL kvrt_u8 *dst, KVRT_GLOBAL const kvrt_i64 *ids,                \
        kvrt_u64 id_base, kvrt_u64 rows, kvrt_u64 head_runs, kvrt_u64 heads_per_run, kvrt_u64 state_runs,              \
        kvrt_u64 states_per_run, kvrt_u64 block_states, kvrt_u64 states, kvrt_u64 r, kvrt_u64 cell_bytes,              \
        kvrt_u64 run_units, kvrt_u64 lane_shift, kvrt_u64 offset, kvrt_u64 stride_block, kvrt_u64 stride_head,         \
        kvrt_u64 stride_state, kvrt_u64 stage_offset, kvrt_u64 stage_stride

#define KVRT_PAGES_ARGS                                                                                                \
    mode, src, dst, ids, id_base, rows, head_runs, heads_per_run, state_runs, states_per_run, block_states, states, r, \
        cell_bytes, run_units, lane_shift, offset, stride_block, stride_head, stride_state, stage_offset, stage_stride

KVRT_FN void kvrt_pages_body(const kvrt_u32 unit, const int idx32, KVRT_PAGES_PARAMS)
{
    const kvrt_u64 runs_per_block = head_runs * state_runs;
    const kvrt_u32 lanes = 1u << lane_shift;
    const kvrt_u32 lane = KVRT_LOCAL_ID & (lanes - 1u);
    const kvrt_u64 per_group = KVRT_LOCAL_SIZE >> lane_shift;
    const kvrt_u64 step = KVRT_NUM_GROUPS * per_group;
    for (kvrt_u64 row = KVRT_GROUP_ID * per_group + (KVRT_LOCAL_ID >> lane_shift); row < rows; row += step) {
        const kvrt_u64 bi = kvrt_div(row, runs_per_block, idx32);
        const kvrt_u64 in_page = row - bi * runs_per_block;
        const kvrt_u64 hr = kvrt_div(in_page, state_runs, idx32);
        const kvrt_u64 h = hr * heads_per_run;
        const kvrt_u64 n = (in_page - hr * state_runs) * states_per_run;
        const kvrt_u64 sub = kvrt_div(n, states, idx32);
        /* Everything but the block: the same for source and destination. */
        const kvrt_u64 in_block = sub * stride_block + h * stride_head + (n - sub * states) * stride_state;
        const kvrt_u64 stage = stage_offset + bi * stage_stride + (h * block_states + n) * cell_bytes;
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
        for (kvrt_u64 u = lane; u < run_units; u += lanes)
            kvrt_move_unit(dst + d + u * unit, src + s + u * unit, unit);
    }
}

#define KVRT_PAGES_KERNEL(suffix, unit, idx32)                                                                         \
    KVRT_KERNEL kvrt_pages_##suffix(KVRT_PAGES_PARAMS)                                                                 \
    {                                                                                                                  \
        kvrt_pages_body(unit, idx32, KVRT_PAGES_ARGS);                                                                 \
    }
KVRT_MOVE_VARIANTS(KVRT_PAGES_KERNEL)
