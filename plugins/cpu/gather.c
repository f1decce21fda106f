/*
 * kvrt CPU backend — gather and scatter: blocks to and from the packed,
 * layout-independent staging order ([block][layer][H, N, C]).
 *
 * Pages already in [H, N, C] order move as one run per layer (or per block);
 * [N, H, C] pages are transposed one cell at a time: in staging order for
 * moves that fit the LLC, in cache order with streaming stores beyond it.  Gather may name a
 * block twice; scatter then keeps the last copy, as if done in order.
 */
#include "ops.h"
#include "plan.h"

static int move_blocks(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                       uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging,
                       uint64_t staging_offset, enum cpu_move mode, kvrt_plugin_error *err)
{
    if (num_blocks == 0)
        return KVRT_OK;
    struct cpu_plan plan;
    int rc = cpu_plan_build(cache, CPU_PLAN_STAGING, &plan, err);
    if (rc != KVRT_OK)
        return rc;
    /* A move that streams (beyond the LLC, see plan.c) walks the cache in
     * memory order instead. */
    if (num_blocks * plan.block_bytes > dev->llc_bytes) {
        cpu_plan_free(&plan);
        rc = cpu_plan_build(cache, CPU_PLAN_MEMORY, &plan, err);
        if (rc != KVRT_OK)
            return rc;
    }
    unsigned char *stage = staging->data + staging_offset;
    if (mode == CPU_MOVE_GATHER)
        cpu_plan_run(dev, &plan, mode, cache_buf->data, stage, block_ids, num_blocks);
    else
        cpu_plan_run_ordered(dev, &plan, mode, cache_buf->data, stage, block_ids, num_blocks, cache->num_blocks);
    cpu_plan_free(&plan);
    return KVRT_OK;
}

int cpu_gather(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
               uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging, uint64_t staging_offset,
               kvrt_plugin_error *err)
{
    return move_blocks(dev, cache, cache_buf, num_blocks, block_ids, staging, staging_offset, CPU_MOVE_GATHER, err);
}

int cpu_scatter(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging, uint64_t staging_offset,
                kvrt_plugin_error *err)
{
    return move_blocks(dev, cache, cache_buf, num_blocks, block_ids, staging, staging_offset, CPU_MOVE_SCATTER, err);
}
