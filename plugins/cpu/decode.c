/*
 * kvrt CPU backend — decode: argument checks, kernel choice, and the split of
 * (sequence, KV head) items across the pool.
 */
#include <stdlib.h>

#include "decode.h"
#include "ops.h"

uint64_t cpu_decode_scratch_floats(uint64_t group, uint64_t d, uint64_t dv)
{
    /* q [G, D], acc [G, Dv] (rows padded to 8 lanes), scores [G, TILE],
     * max and sum [G]; rounded up to a cache line per worker. */
    uint64_t dp = (d + 7) & ~(uint64_t)7, dvp = (dv + 7) & ~(uint64_t)7;
    uint64_t n = group * dp + group * dvp + group * CPU_DECODE_TILE + 2 * group;
    return (n + 15) & ~(uint64_t)15;
}

static const char *dtype_name(int32_t dtype)
{
    static const char *const names[] = {"fp32", "fp16", "bf16", "fp8_e4m3",
                                        "fp8_e5m2", "int8", "uint8"};
    return dtype >= 0 && dtype < (int32_t)(sizeof(names) / sizeof(names[0])) ? names[dtype]
                                                                            : "unknown";
}

typedef void (*kernel_fn)(const struct cpu_decode_job *, unsigned, uint64_t, uint64_t);

struct decode_task {
    const struct cpu_decode_job *job;
    kernel_fn kernel;
};

static void decode_task(void *ctx, unsigned worker, uint64_t begin, uint64_t end)
{
    const struct decode_task *task = ctx;
    task->kernel(task->job, worker, begin, end);
}

static kernel_fn pick_kernel(const kvrt_plugin_device *dev)
{
#ifdef CPU_HAVE_AVX2_KERNEL
    if (dev->use_avx2)
        return cpu_decode_items_avx2;
#else
    (void)dev;
#endif
    return cpu_decode_items_generic;
}

int cpu_decode(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
               kvrt_plugin_buffer *cache_buf, uint32_t layer,
               const struct kvrt_plugin_decode_args *args, kvrt_plugin_error *err)
{
    if (layer >= cache->num_layers)
        return cpu_fail(err, KVRT_ERR_INVALID, "decode: layer %u out of range; the cache has %llu",
                        layer, (unsigned long long)cache->num_layers);
    const struct kvrt_plugin_layer *ly = &cache->layers[layer];
    switch (ly->dtype) {
    case KVRT_DTYPE_FP32:
    case KVRT_DTYPE_FP16:
    case KVRT_DTYPE_BF16:
    case KVRT_DTYPE_FP8_E4M3:
    case KVRT_DTYPE_FP8_E5M2:
        break;
    default:
        return cpu_fail(err, KVRT_ERR_UNSUPPORTED,
                        "decode is not supported on %s caches (layer %u); the cpu backend "
                        "decodes fp32, fp16, bf16, fp8_e4m3 and fp8_e5m2 (integer caches "
                        "need scales the plugin ABI does not carry)",
                        dtype_name(ly->dtype), layer);
    }
    if (ly->head_size == 0 || ly->head_size_v == 0)
        return cpu_fail(err, KVRT_ERR_UNSUPPORTED,
                        "decode needs K and V in every cell; layer %u has head_size %llu and "
                        "head_size_v %llu (MLA and state layers cannot be decoded)",
                        layer, (unsigned long long)ly->head_size,
                        (unsigned long long)ly->head_size_v);
    if (ly->states != ly->view_block_tokens)
        return cpu_fail(err, KVRT_ERR_UNSUPPORTED,
                        "decode needs one state per token; layer %u stores %llu states per "
                        "%llu-token block",
                        layer, (unsigned long long)ly->states,
                        (unsigned long long)ly->view_block_tokens);
    if (args->num_q_heads == 0 || args->num_q_heads % ly->head_slots != 0)
        return cpu_fail(err, KVRT_ERR_INVALID,
                        "decode: %u query heads is not a multiple of the %llu KV heads of "
                        "layer %u",
                        args->num_q_heads, (unsigned long long)ly->head_slots, layer);
    if (args->num_seqs == 0)
        return KVRT_OK;

    struct cpu_decode_job job = {
        .layer = ly,
        .cache = cache_buf->data,
        .q = args->q->data + args->q_offset,
        .out = args->out->data + args->out_offset,
        .block_tables = args->block_tables,
        .seq_lens = args->seq_lens,
        .block_size = cache->block_size,
        .max_blocks = args->max_blocks_per_seq,
        .num_q_heads = args->num_q_heads,
        .group = (uint32_t)(args->num_q_heads / ly->head_slots),
        .scale = args->scale,
    };
    unsigned threads = cpu_threads(dev);
    job.scratch_floats = cpu_decode_scratch_floats(job.group, ly->head_size, ly->head_size_v);
    job.scratch = aligned_alloc(64, threads * job.scratch_floats * sizeof(float));
    if (!job.scratch)
        return cpu_fail(err, KVRT_ERR_NOMEM, "decode: cannot allocate %llu bytes of scratch",
                        (unsigned long long)threads * job.scratch_floats * sizeof(float));

    /* Items are small and uneven (sequence lengths differ): hand them out
     * one at a time, unless the whole job is too small to share. */
    uint64_t items = (uint64_t)args->num_seqs * ly->head_slots;
    uint64_t kv_bytes = 0;
    for (uint32_t s = 0; s < args->num_seqs; s++)
        kv_bytes += (uint64_t)args->seq_lens[s] * ly->head_slots * ly->content_bytes;
    uint64_t grain = kv_bytes < CPU_PARALLEL_MIN_BYTES ? items : 1;

    struct decode_task task = {&job, pick_kernel(dev)};
    cpu_pool_run(dev->pool, items, grain, decode_task, &task);
    free(job.scratch);
    return KVRT_OK;
}
