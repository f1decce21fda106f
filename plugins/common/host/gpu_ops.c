#include <stdlib.h>

#include "gpu_error.h"
#include "gpu_kernels.h"
#include "gpu_ops.h"
#include "gpu_plan.h"

/* The kernel source spells element types as the ABI values. */
_Static_assert(KVRT_DT_F32 == KVRT_DTYPE_FP32, "kernel fp32 id");
_Static_assert(KVRT_DT_F16 == KVRT_DTYPE_FP16, "kernel fp16 id");
_Static_assert(KVRT_DT_BF16 == KVRT_DTYPE_BF16, "kernel bf16 id");
_Static_assert(KVRT_DT_E4M3 == KVRT_DTYPE_FP8_E4M3, "kernel fp8 e4m3 id");
_Static_assert(KVRT_DT_E5M2 == KVRT_DTYPE_FP8_E5M2, "kernel fp8 e5m2 id");

#define ARG(x) ((struct kvrt_gpu_arg){&(x), sizeof(x)})

int kvrt_gpu_call_scratch(const char *api, struct kvrt_gpu_call *call, struct kvrt_scratch_pool *pool, uint64_t bytes,
                          struct kvrt_scratch **out, struct kvrt_gpu_arg *arg, kvrt_plugin_error *err)
{
    if (call->num_scratch == KVRT_GPU_CALL_MAX_SCRATCH)
        return kvrt_gpu_fail(err, KVRT_ERR_INTERNAL, "%s: more than %d uploads in one call", api,
                             KVRT_GPU_CALL_MAX_SCRATCH);
    int status = kvrt_scratch_acquire(pool, bytes, out, err);
    if (status != KVRT_OK)
        return status;
    call->scratch[call->num_scratch++] = *out;
    *arg = (struct kvrt_gpu_arg){&(*out)->mem, sizeof((*out)->mem)};
    return KVRT_OK;
}

static int tokens(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev, uint64_t dir,
                  const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf, uint32_t layer,
                  uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
                  kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err)
{
    const struct kvrt_plugin_layer *l = &cache->layers[layer];
    const uint64_t k_bytes = l->head_size * l->elem_size;
    const uint64_t v_bytes = l->head_size_v * l->elem_size;
    if (num_tokens == 0 || l->head_slots == 0 || k_bytes + v_bytes == 0)
        return KVRT_OK;
    if (!v)
        v_offset = 0; /* Dv == 0: V is never touched */

    const uint64_t aligned[] = {l->offset, l->stride_block, l->stride_head, l->stride_state,
                                k_bytes,   v_bytes,         k_offset,       v_offset};
    const uint32_t unit = kvrt_plan_unit(aligned, sizeof(aligned) / sizeof(aligned[0]));
    const struct kvrt_gpu_limits *lim = be->limits(dev);
    uint64_t rows = num_tokens * l->head_slots;
    uint64_t heads = l->head_slots;
    uint64_t k_units = k_bytes / unit;
    uint64_t v_units = v_bytes / unit;
    uint64_t lane_shift = kvrt_plan_lane_shift(k_units + v_units, lim->move_local);
    uint64_t view_tokens = l->view_block_tokens;
    uint64_t offset = l->offset, sb = l->stride_block, sh = l->stride_head, ss = l->stride_state;
    const uint64_t indexed[] = {rows, l->num_view_blocks * l->view_block_tokens};
    const int idx32 = kvrt_plan_idx32(indexed, 2);

    struct kvrt_gpu_call call = {0};
    struct kvrt_gpu_arg slots_arg;
    int rc = be->upload(dev, &call, slots, num_tokens * sizeof(int64_t), &slots_arg, err);
    if (rc == KVRT_OK) {
        const struct kvrt_gpu_arg cache_arg = be->buffer_arg(cache_buf);
        const struct kvrt_gpu_arg k_arg = be->buffer_arg(k);
        const struct kvrt_gpu_arg v_arg = v ? be->buffer_arg(v) : k_arg;
        const struct kvrt_gpu_arg args[] = {
            ARG(dir),   cache_arg,    k_arg,        v_arg,           slots_arg,        ARG(rows),
            ARG(heads), ARG(k_units), ARG(v_units), ARG(lane_shift), ARG(view_tokens), ARG(offset),
            ARG(sb),    ARG(sh),      ARG(ss),      ARG(k_offset),   ARG(v_offset),
        };
        const uint32_t per_group = lim->move_local >> lane_shift;
        rc = be->launch(dev, &call, kvrt_gpu_tokens_kernel(unit, idx32), args, sizeof(args) / sizeof(args[0]),
                        kvrt_plan_groups(rows, per_group, kvrt_plan_max_groups(lim->max_groups)), lim->move_local, 0,
                        err);
    }
    return be->finish(dev, &call, rc, err);
}

int kvrt_gpu_write(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                   kvrt_plugin_buffer *cache_buf, uint32_t layer, uint64_t num_tokens, const int64_t *slots,
                   kvrt_plugin_buffer *k, uint64_t k_offset, kvrt_plugin_buffer *v, uint64_t v_offset,
                   kvrt_plugin_error *err)
{
    return tokens(be, dev, KVRT_TOKENS_WRITE, cache, cache_buf, layer, num_tokens, slots, k, k_offset, v, v_offset,
                  err);
}

int kvrt_gpu_read(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                  kvrt_plugin_buffer *cache_buf, uint32_t layer, uint64_t num_tokens, const int64_t *slots,
                  kvrt_plugin_buffer *k, uint64_t k_offset, kvrt_plugin_buffer *v, uint64_t v_offset,
                  kvrt_plugin_error *err)
{
    return tokens(be, dev, KVRT_TOKENS_READ, cache, cache_buf, layer, num_tokens, slots, k, k_offset, v, v_offset, err);
}

/* Bytes of one layer's staging page: [H, r * N, C], unpadded. */
static uint64_t stage_page(const struct kvrt_plugin_layer *l)
{
    return l->head_slots * l->blocks_per_block * l->states * l->content_bytes;
}

/* One pages launch: `blocks` entries of ids from id_base, one layer. */
static int pages(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev, struct kvrt_gpu_call *call, uint64_t mode,
                 const struct kvrt_plugin_layer *l, struct kvrt_gpu_arg src, struct kvrt_gpu_arg dst,
                 struct kvrt_gpu_arg ids, uint64_t id_base, uint64_t blocks, uint64_t stage_offset,
                 uint64_t stage_stride, kvrt_plugin_error *err)
{
    if (blocks == 0 || stage_page(l) == 0)
        return KVRT_OK;
    /* Runs contiguous in the cache and in the staging page: the states of a
     * view block when they are adjacent, and then the whole page when the
     * heads are adjacent too and the block is not split (staging keeps a
     * head's Nm states together, the cache a view block's). */
    const uint64_t C = l->content_bytes;
    const int states_adjacent = l->stride_state == C;
    const int page_adjacent = states_adjacent && l->blocks_per_block == 1 && l->stride_head == l->states * C;
    uint64_t states_per_run = states_adjacent ? l->states : 1;
    uint64_t heads_per_run = page_adjacent ? l->head_slots : 1;
    uint64_t block_states = l->blocks_per_block * l->states;
    uint64_t state_runs = block_states / states_per_run;
    uint64_t head_runs = l->head_slots / heads_per_run;
    const uint64_t aligned[] = {l->offset, l->stride_block, l->stride_head, l->stride_state,
                                C,         stage_offset,    stage_stride};
    const uint32_t unit = kvrt_plan_unit(aligned, sizeof(aligned) / sizeof(aligned[0]));
    const struct kvrt_gpu_limits *lim = be->limits(dev);
    uint64_t run_units = heads_per_run * states_per_run * C / unit;
    uint64_t lane_shift = kvrt_plan_lane_shift(run_units, lim->move_local);
    uint64_t rows = blocks * head_runs * state_runs;
    uint64_t states = l->states, r = l->blocks_per_block, cell_bytes = C;
    uint64_t offset = l->offset, sb = l->stride_block, sh = l->stride_head, ss = l->stride_state;
    const int idx32 = kvrt_plan_idx32(&rows, 1);
    const struct kvrt_gpu_arg args[] = {
        ARG(mode),
        src,
        dst,
        ids,
        ARG(id_base),
        ARG(rows),
        ARG(head_runs),
        ARG(heads_per_run),
        ARG(state_runs),
        ARG(states_per_run),
        ARG(block_states),
        ARG(states),
        ARG(r),
        ARG(cell_bytes),
        ARG(run_units),
        ARG(lane_shift),
        ARG(offset),
        ARG(sb),
        ARG(sh),
        ARG(ss),
        ARG(stage_offset),
        ARG(stage_stride),
    };
    const uint32_t per_group = lim->move_local >> lane_shift;
    return be->launch(dev, call, kvrt_gpu_pages_kernel(unit, idx32), args, sizeof(args) / sizeof(args[0]),
                      kvrt_plan_groups(rows, per_group, kvrt_plan_max_groups(lim->max_groups)), lim->move_local, 0,
                      err);
}

int kvrt_gpu_copy_blocks(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev,
                         const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf, uint64_t num_pairs,
                         const int64_t *pairs, kvrt_plugin_error *err)
{
    if (num_pairs == 0)
        return KVRT_OK;
    uint8_t *marks = calloc(cache->num_blocks ? cache->num_blocks : 1, 1);
    if (!marks)
        return kvrt_gpu_fail(err, KVRT_ERR_NOMEM, "copy_blocks: out of host memory for %llu block marks",
                             (unsigned long long)cache->num_blocks);
    struct kvrt_gpu_call call = {0};
    struct kvrt_gpu_arg ids;
    int rc = be->upload(dev, &call, pairs, num_pairs * 2 * sizeof(int64_t), &ids, err);
    const struct kvrt_gpu_arg buf = be->buffer_arg(cache_buf);
    /* Pairs that depend on earlier ones (chains, overwrites) go in later
     * launches; the queue runs launches in order. */
    for (uint64_t start = 0; rc == KVRT_OK && start < num_pairs;) {
        const uint64_t end = kvrt_plan_wave(pairs, pairs + 1, 2, start, num_pairs, marks);
        for (uint64_t i = 0; rc == KVRT_OK && i < cache->num_layers; i++)
            rc =
                pages(be, dev, &call, KVRT_PAGES_COPY, &cache->layers[i], buf, buf, ids, start, end - start, 0, 0, err);
        start = end;
    }
    free(marks);
    return be->finish(dev, &call, rc, err);
}

static int stage(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev, uint64_t mode,
                 const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf, uint64_t num_blocks,
                 const int64_t *block_ids, kvrt_plugin_buffer *staging, uint64_t staging_offset, kvrt_plugin_error *err)
{
    if (num_blocks == 0)
        return KVRT_OK;
    uint64_t stride = 0;
    for (uint64_t i = 0; i < cache->num_layers; i++)
        stride += stage_page(&cache->layers[i]);
    uint8_t *marks = NULL;
    if (mode == KVRT_PAGES_SCATTER) {
        marks = calloc(cache->num_blocks ? cache->num_blocks : 1, 1);
        if (!marks)
            return kvrt_gpu_fail(err, KVRT_ERR_NOMEM, "scatter: out of host memory for %llu block marks",
                                 (unsigned long long)cache->num_blocks);
    }
    struct kvrt_gpu_call call = {0};
    struct kvrt_gpu_arg ids;
    int rc = be->upload(dev, &call, block_ids, num_blocks * sizeof(int64_t), &ids, err);
    const struct kvrt_gpu_arg c = be->buffer_arg(cache_buf);
    const struct kvrt_gpu_arg s = be->buffer_arg(staging);
    for (uint64_t start = 0; rc == KVRT_OK && start < num_blocks;) {
        /* A block scattered twice: the later page wins, as in order. */
        const uint64_t end = marks ? kvrt_plan_wave(NULL, block_ids, 1, start, num_blocks, marks) : num_blocks;
        uint64_t prefix = 0;
        for (uint64_t i = 0; rc == KVRT_OK && i < cache->num_layers; i++) {
            const struct kvrt_plugin_layer *l = &cache->layers[i];
            const uint64_t at = staging_offset + start * stride + prefix;
            rc = pages(be, dev, &call, mode, l, mode == KVRT_PAGES_GATHER ? c : s, mode == KVRT_PAGES_GATHER ? s : c,
                       ids, start, end - start, at, stride, err);
            prefix += stage_page(l);
        }
        start = end;
    }
    free(marks);
    return be->finish(dev, &call, rc, err);
}

int kvrt_gpu_gather(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                    kvrt_plugin_buffer *cache_buf, uint64_t num_blocks, const int64_t *block_ids,
                    kvrt_plugin_buffer *staging, uint64_t staging_offset, kvrt_plugin_error *err)
{
    return stage(be, dev, KVRT_PAGES_GATHER, cache, cache_buf, num_blocks, block_ids, staging, staging_offset, err);
}

int kvrt_gpu_scatter(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                     kvrt_plugin_buffer *cache_buf, uint64_t num_blocks, const int64_t *block_ids,
                     kvrt_plugin_buffer *staging, uint64_t staging_offset, kvrt_plugin_error *err)
{
    return stage(be, dev, KVRT_PAGES_SCATTER, cache, cache_buf, num_blocks, block_ids, staging, staging_offset, err);
}

int kvrt_gpu_decode(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                    kvrt_plugin_buffer *cache_buf, uint32_t layer, const struct kvrt_plugin_decode_args *a,
                    kvrt_plugin_error *err)
{
    const struct kvrt_plugin_layer *l = &cache->layers[layer];
    char name[16];
    if (kvrt_gpu_decode_kernel(l->dtype, 0) < 0)
        return kvrt_gpu_fail(err, KVRT_ERR_UNSUPPORTED,
                             "%s decode: layer %u is %s; decode computes on fp32, fp16, bf16, "
                             "fp8_e4m3 and fp8_e5m2 (int8/uint8 carry no scale to compute "
                             "with: they are stored and moved only)",
                             be->api, layer, kvrt_gpu_dtype_name(l->dtype, name));
    if (l->head_slots == 0 || a->num_q_heads % l->head_slots != 0)
        return kvrt_gpu_fail(err, KVRT_ERR_INVALID,
                             "%s decode: %u query heads is not a multiple of the %llu KV head "
                             "slots of layer %u",
                             be->api, a->num_q_heads, (unsigned long long)l->head_slots, layer);
    const uint64_t es = l->elem_size;
    const uint64_t aligned[] = {l->offset,       l->stride_block, l->stride_head,
                                l->stride_state, a->q_offset,     a->out_offset};
    for (unsigned i = 0; i < sizeof(aligned) / sizeof(aligned[0]); i++)
        if (es == 0 || aligned[i] % es != 0)
            return kvrt_gpu_fail(err, KVRT_ERR_UNSUPPORTED,
                                 "%s decode: layer %u needs every offset and stride to be a multiple of its "
                                 "%llu-byte elements (offset %llu, strides %llu/%llu/%llu, q_offset %llu, "
                                 "out_offset %llu); pad pages to a multiple of the element size",
                                 be->api, layer, (unsigned long long)es, (unsigned long long)l->offset,
                                 (unsigned long long)l->stride_block, (unsigned long long)l->stride_head,
                                 (unsigned long long)l->stride_state, (unsigned long long)a->q_offset,
                                 (unsigned long long)a->out_offset);
    if (a->num_seqs == 0 || a->num_q_heads == 0 || l->head_size_v == 0)
        return KVRT_OK; /* no output element */

    const struct kvrt_gpu_limits *lim = be->limits(dev);
    uint64_t max_len = 0;
    for (uint32_t s = 0; s < a->num_seqs; s++)
        if ((uint64_t)a->seq_lens[s] > max_len)
            max_len = (uint64_t)a->seq_lens[s];
    /* Vector loads when every K/V unit is aligned to them. */
    const uint64_t vbytes = es == 1 ? 8 : 16;
    const uint64_t vec_aligned[] = {l->offset,       l->stride_block,   l->stride_head,
                                    l->stride_state, l->head_size * es, l->head_size_v * es};
    int vec = 1;
    for (unsigned i = 0; i < sizeof(vec_aligned) / sizeof(vec_aligned[0]); i++)
        vec &= vec_aligned[i] % vbytes == 0;
    const struct kvrt_decode_shape shape = {
        a->num_seqs, a->num_q_heads, l->head_slots, l->head_size, l->head_size_v, es, max_len, vec};
    const struct kvrt_decode_device ddev = {lim->decode_local, lim->decode_lanes, lim->compute_units,
                                            kvrt_plan_shared_bytes(lim->shared_bytes),
                                            kvrt_plan_max_groups(lim->max_groups)};
    struct kvrt_decode_plan plan;
    if (kvrt_plan_decode(&shape, &ddev, &plan) != 0)
        return kvrt_gpu_fail(err, KVRT_ERR_UNSUPPORTED,
                             "%s decode: head sizes D=%llu, Dv=%llu with %llu query heads per "
                             "work-group need %llu bytes of local memory even with 32 "
                             "work-items and 8-token tiles; the device offers %llu",
                             be->api, (unsigned long long)l->head_size, (unsigned long long)l->head_size_v,
                             (unsigned long long)plan.q_chunk, (unsigned long long)plan.shared,
                             (unsigned long long)ddev.shared_bytes);

    uint64_t q_offset = a->q_offset, out_offset = a->out_offset;
    uint64_t q_heads = a->num_q_heads, group = a->num_q_heads / l->head_slots;
    uint64_t kv_heads = l->head_slots, q_chunk = plan.q_chunk, chunks = plan.chunks;
    uint64_t d = l->head_size, dv = l->head_size_v, max_blocks = a->max_blocks_per_seq;
    uint64_t block_size = cache->block_size, view_tokens = l->view_block_tokens;
    uint64_t offset = l->offset, sb = l->stride_block, sh = l->stride_head, ss = l->stride_state;
    uint64_t part_tokens = plan.part_tokens, parts = plan.parts, tile = plan.tile;
    uint64_t lane_shift = plan.lane_shift, work = plan.work;
    float scale = a->scale;

    struct kvrt_gpu_call call = {0};
    struct kvrt_gpu_arg tables, lens, partials;
    int rc = be->upload(dev, &call, a->block_tables, (uint64_t)a->num_seqs * a->max_blocks_per_seq * sizeof(int32_t),
                        &tables, err);
    if (rc == KVRT_OK)
        rc = be->upload(dev, &call, a->seq_lens, (uint64_t)a->num_seqs * sizeof(int32_t), &lens, err);
    /* Partials of every partition: (m, l, acc[Dv]) fp32 per (seq, query head). */
    const uint64_t part_bytes = plan.parts > 1 ? (uint64_t)a->num_seqs * q_heads * plan.parts * (dv + 2) * 4 : 0;
    if (rc == KVRT_OK && part_bytes)
        rc = be->upload(dev, &call, NULL, part_bytes, &partials, err);
    const struct kvrt_gpu_arg out_arg = be->buffer_arg(a->out);
    if (rc == KVRT_OK) {
        const struct kvrt_gpu_arg args[] = {
            be->buffer_arg(cache_buf),
            be->buffer_arg(a->q),
            out_arg,
            part_bytes ? partials : out_arg,
            tables,
            lens,
            ARG(q_offset),
            ARG(out_offset),
            ARG(q_heads),
            ARG(group),
            ARG(kv_heads),
            ARG(q_chunk),
            ARG(chunks),
            ARG(d),
            ARG(dv),
            ARG(max_blocks),
            ARG(block_size),
            ARG(view_tokens),
            ARG(offset),
            ARG(sb),
            ARG(sh),
            ARG(ss),
            ARG(part_tokens),
            ARG(parts),
            ARG(tile),
            ARG(lane_shift),
            ARG(work),
            ARG(scale),
        };
        rc = be->launch(dev, &call, kvrt_gpu_decode_kernel(l->dtype, vec), args, sizeof(args) / sizeof(args[0]),
                        plan.groups, plan.local, plan.shared, err);
    }
    if (rc == KVRT_OK && part_bytes) {
        uint64_t rwork = (uint64_t)a->num_seqs * q_heads;
        const struct kvrt_gpu_arg args[] = {
            out_arg, partials, lens, ARG(out_offset), ARG(q_heads), ARG(dv), ARG(part_tokens), ARG(parts), ARG(rwork),
        };
        /* Work-items over the output row: a warp-multiple covering Dv. */
        uint32_t rlocal = 32;
        while (rlocal < dv && rlocal < lim->decode_local)
            rlocal <<= 1;
        rc = be->launch(dev, &call, kvrt_gpu_reduce_kernel(l->dtype), args, sizeof(args) / sizeof(args[0]),
                        rwork < ddev.max_groups ? rwork : ddev.max_groups, rlocal, 0, err);
    }
    return be->finish(dev, &call, rc, err);
}
