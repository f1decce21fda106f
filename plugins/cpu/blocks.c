/*
 * kvrt CPU backend — copy_blocks: whole manager blocks, every layer.
 *
 * Pairs are applied in order; cpu_plan_run_ordered keeps that meaning while
 * running independent pairs together.  The physical-order plan moves each
 * page in the longest runs the layout has.
 */
#include "ops.h"
#include "plan.h"

int cpu_copy_blocks(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                    uint64_t num_pairs, const int64_t *pairs, kvrt_plugin_error *err)
{
    if (num_pairs == 0)
        return KVRT_OK;
    struct cpu_plan plan;
    int rc = cpu_plan_build(cache, CPU_PLAN_COPY, &plan, err);
    if (rc != KVRT_OK)
        return rc;
    cpu_plan_run_ordered(dev, &plan, CPU_MOVE_COPY, cache_buf->data, NULL, pairs, num_pairs, cache->num_blocks);
    cpu_plan_free(&plan);
    return KVRT_OK;
}
