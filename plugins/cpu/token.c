/*
 * kvrt CPU backend — write and read: K/V rows of tokens to and from their
 * slots.
 *
 * A cell holds K then V, so a token's K row [H, D] and V row [H, Dv] land
 * interleaved per head: the runs are D and Dv elements long unless the
 * layout puts the heads of a token next to each other and there is no V
 * (MLA), where the whole row is one run.  Tokens are split across the pool
 * in contiguous ranges so each thread streams through its part of K and V.
 */
#include <stdbool.h>
#include <string.h>

#include "ops.h"

struct token_job {
    const struct kvrt_plugin_layer *layer;
    unsigned char *cache;
    const int64_t *slots;
    unsigned char *k; /* [T, H, D] */
    unsigned char *v; /* [T, H, Dv], NULL when Dv == 0 */
    uint64_t k_bytes; /* D x elem: one head's K */
    uint64_t v_bytes; /* Dv x elem */
    bool whole_row;   /* a token's K row is one run in the cache too */
    bool to_cache;
};

static inline void move(unsigned char *cell, unsigned char *row, uint64_t n, bool to_cache)
{
    if (to_cache)
        memcpy(cell, row, n);
    else
        memcpy(row, cell, n);
}

static void token_task(void *ctx, unsigned worker, uint64_t begin, uint64_t end)
{
    const struct token_job *job = ctx;
    const struct kvrt_plugin_layer *ly = job->layer;
    const uint64_t heads = ly->head_slots;
    const uint64_t k_row = heads * job->k_bytes, v_row = heads * job->v_bytes;
    (void)worker;

    for (uint64_t t = begin; t < end; t++) {
        int64_t slot = job->slots[t];
        if (slot < 0)
            continue;
        uint64_t s = (uint64_t)slot;
        unsigned char *cell = job->cache + ly->offset + (s / ly->view_block_tokens) * ly->stride_block +
                              (s % ly->view_block_tokens) * ly->stride_state;
        unsigned char *k = job->k + t * k_row;
        if (job->whole_row) {
            move(cell, k, k_row, job->to_cache);
            continue;
        }
        unsigned char *v = job->v ? job->v + t * v_row : NULL;
        for (uint64_t h = 0; h < heads; h++, cell += ly->stride_head) {
            move(cell, k + h * job->k_bytes, job->k_bytes, job->to_cache);
            if (v)
                move(cell + job->k_bytes, v + h * job->v_bytes, job->v_bytes, job->to_cache);
        }
    }
}

static int token_op(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                    uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
                    kvrt_plugin_buffer *v, uint64_t v_offset, bool to_cache, kvrt_plugin_error *err)
{
    const char *op = to_cache ? "write" : "read";
    if (layer >= cache->num_layers)
        return cpu_fail(err, KVRT_ERR_INVALID, "%s: layer %u out of range; the cache has %llu", op, layer,
                        (unsigned long long)cache->num_layers);
    const struct kvrt_plugin_layer *ly = &cache->layers[layer];
    if (ly->head_size_v > 0 && !v)
        return cpu_fail(err, KVRT_ERR_INVALID, "%s: layer %u has head_size_v %llu but no V buffer was given", op, layer,
                        (unsigned long long)ly->head_size_v);
    if (num_tokens == 0)
        return KVRT_OK;

    struct token_job job = {
        .layer = ly,
        .cache = cache_buf->data,
        .slots = slots,
        .k = k->data + k_offset,
        .v = ly->head_size_v > 0 ? v->data + v_offset : NULL,
        .k_bytes = ly->head_size * ly->elem_size,
        .v_bytes = ly->head_size_v * ly->elem_size,
        .to_cache = to_cache,
    };
    job.whole_row = job.v_bytes == 0 && (ly->head_slots == 1 || ly->stride_head == job.k_bytes);

    uint64_t token_bytes = ly->head_slots * (job.k_bytes + job.v_bytes);
    uint64_t min_tokens = CPU_PARALLEL_MIN_BYTES / (token_bytes ? token_bytes : 1) + 1;
    /* Several chunks per thread: skipped slots and a thread the scheduler
     * holds back balance out. */
    uint64_t grain = num_tokens / ((uint64_t)8 * cpu_threads(dev)) + 1;
    if (grain < min_tokens)
        grain = min_tokens;
    cpu_pool_run(dev->pool, num_tokens, grain, token_task, &job);
    return KVRT_OK;
}

int cpu_write(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
              uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
              kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err)
{
    return token_op(dev, cache, cache_buf, layer, num_tokens, slots, k, k_offset, v, v_offset, true, err);
}

int cpu_read(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
             uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
             kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err)
{
    return token_op(dev, cache, cache_buf, layer, num_tokens, slots, k, k_offset, v, v_offset, false, err);
}
