/*
 * kvrt CPU backend — block plans: the byte runs that make up one manager
 * block across all layers, derived from the strides alone.
 *
 * A plan lists, for one block, every cell of every layer's page as a short
 * list of repeated runs, merged wherever the layout makes neighbouring cells
 * adjacent on both sides (cache and staging).  Each cell keeps its place in
 * the staging order ([layer][H, N, C]), whatever order the plan walks them
 * in.  Dense pages become one run per layer, and block-outermost layouts
 * whose layers sit side by side become one run per block.
 *
 * Executing a plan splits the bytes of all requested blocks evenly across
 * the pool, so threads copy long runs and finish together.
 */
#ifndef KVRT_CPU_PLAN_H
#define KVRT_CPU_PLAN_H

#include "device.h"

/* `count` runs of `len` bytes; the i-th starts at cache offset
 * block x block_stride + cache_off + i x cache_step and at staging offset
 * stage_off + i x stage_step within the block's staging area. */
struct cpu_run {
    uint64_t cache_off;
    uint64_t cache_step;
    uint64_t block_stride; /* bytes between manager blocks of this run's layer */
    uint64_t stage_off;
    uint64_t stage_step;
    uint64_t len;
    uint64_t count;
    uint64_t first; /* bytes of the block's runs before this one */
};

struct cpu_plan {
    struct cpu_run *runs;
    size_t count;
    size_t capacity;
    uint64_t block_bytes; /* every layer's unpadded page: H x N x C x r each */
};

enum cpu_plan_order {
    /* Cells in staging order, so the staging side streams (gather and
     * scatter; walking the cache side in memory order instead measured the
     * same for [N, H, C] pages). */
    CPU_PLAN_STAGING,
    CPU_PLAN_COPY, /* cells in memory order, staging offsets ignored */
    /* Cells in memory order with their staging offsets: gather and scatter
     * with streaming stores.  An [N, H, C] page then reads (or writes) the
     * cache side in one pass and keeps H aligned streams on the staging
     * side, which beat staging order once stores stream. */
    CPU_PLAN_MEMORY
};

int cpu_plan_build(const struct kvrt_plugin_cache *cache, enum cpu_plan_order order, struct cpu_plan *out,
                   kvrt_plugin_error *err);
void cpu_plan_free(struct cpu_plan *plan);

enum cpu_move {
    CPU_MOVE_GATHER,  /* cache block ids[i] -> staging item i */
    CPU_MOVE_SCATTER, /* staging item i -> cache block ids[i] */
    CPU_MOVE_COPY     /* cache block ids[2i] -> cache block ids[2i+1] */
};

/* Move `items` blocks, all at once: the items must be independent. */
void cpu_plan_run(kvrt_plugin_device *dev, const struct cpu_plan *plan, enum cpu_move mode, unsigned char *cache,
                  unsigned char *staging, const int64_t *ids, uint64_t items);

/*
 * Move `items` blocks with the result of doing them one by one in order
 * (copy pairs that chain, a scatter naming a block twice).  The items are
 * cut into segments in which no block is written twice or both read and
 * written; a segment's items run together, segments one after another.  The
 * usual batch is a single segment.  num_blocks bounds the block ids.
 */
void cpu_plan_run_ordered(kvrt_plugin_device *dev, const struct cpu_plan *plan, enum cpu_move mode,
                          unsigned char *cache, unsigned char *staging, const int64_t *ids, uint64_t items,
                          uint64_t num_blocks);

#endif
