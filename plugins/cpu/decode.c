/*
 * kvrt CPU backend — decode: argument checks, kernel choice, and the split of
 * (sequence, KV head) items across the pool; when there are too few items
 * to keep every thread busy, each item's context is cut into parts whose
 * partial softmax states a second pass merges (flash-decoding).
 */
#include <stdlib.h>

#include "decode.h"
#include "ops.h"

uint64_t cpu_decode_scratch_floats(uint64_t group, uint64_t d, uint64_t dv)
{
    /* q [G, D], acc [G, Dv] (rows padded to the widest kernel's 16 lanes),
     * scores [G, TILE], max and sum [G], bf16 q [G, D padded to 32]; rounded
     * up to a cache line per worker. */
    uint64_t dp = (d + 15) & ~(uint64_t)15, dvp = (dv + 15) & ~(uint64_t)15;
    uint64_t n = group * dp + group * dvp + group * CPU_DECODE_TILE + 2 * group + group * cpu_decode_q16_elems(d) / 2;
    return (n + 15) & ~(uint64_t)15;
}

static const char *dtype_name(int32_t dtype)
{
    static const char *const names[] = {"fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "uint8"};
    return dtype >= 0 && dtype < (int32_t)(sizeof(names) / sizeof(names[0])) ? names[dtype] : "unknown";
}

struct decode_task {
    const struct cpu_decode_job *job;
    cpu_decode_fn fn;
};

static void decode_task(void *ctx, unsigned worker, uint64_t begin, uint64_t end)
{
    const struct decode_task *task = ctx;
    task->fn(task->job, worker, begin, end);
}

static void pick_kernel(const kvrt_plugin_device *dev, cpu_decode_fn *items, cpu_decode_fn *reduce)
{
    switch (dev->isa) {
#ifdef CPU_HAVE_X86_KERNELS
    case CPU_ISA_AVX512:
        *items = cpu_decode_items_avx512;
        *reduce = cpu_decode_reduce_avx512;
        return;
    case CPU_ISA_AVX2:
        *items = cpu_decode_items_avx2;
        *reduce = cpu_decode_reduce_avx2;
        return;
#endif
    default:
        *items = cpu_decode_items_generic;
        *reduce = cpu_decode_reduce_generic;
        return;
    }
}

/* Tokens below which a context is not cut further: a part must amortise
 * its q setup, its share of the reduction and the lost prefetch run-up. */
#define CPU_DECODE_MIN_PART 256u

/* Parts per item: enough units that every thread gets about four (so an
 * uneven batch or a preempted thread still balances), none shorter than
 * CPU_DECODE_MIN_PART tokens. */
static uint64_t split_parts(uint64_t items, unsigned threads, uint64_t max_len)
{
    const uint64_t want = 4 * (uint64_t)threads;
    if (threads < 2 || items >= want)
        return 1;
    uint64_t parts = (want + items - 1) / items;
    uint64_t cap = max_len / CPU_DECODE_MIN_PART;
    if (parts > cap)
        parts = cap;
    return parts ? parts : 1;
}

int cpu_decode(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
               uint32_t layer, const struct kvrt_plugin_decode_args *args, kvrt_plugin_error *err)
{
    if (layer >= cache->num_layers)
        return cpu_fail(err, KVRT_ERR_INVALID, "decode: layer %u out of range; the cache has %llu", layer,
                        (unsigned long long)cache->num_layers);
    const struct kvrt_plugin_layer *ly = &cache->layers[layer];
    switch (ly->dtype) {
    case KVRT_DTYPE_FP32:
    case KVRT_DTYPE_FP16:
    case KVRT_DTYPE_BF16:
    case KVRT_DTYPE_FP8_E4M3:
    case KVRT_DTYPE_FP8_E5M2: break;
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
                        layer, (unsigned long long)ly->head_size, (unsigned long long)ly->head_size_v);
    if (ly->states != ly->view_block_tokens)
        return cpu_fail(err, KVRT_ERR_UNSUPPORTED,
                        "decode needs one state per token; layer %u stores %llu states per "
                        "%llu-token block",
                        layer, (unsigned long long)ly->states, (unsigned long long)ly->view_block_tokens);
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
    const uint64_t items = (uint64_t)args->num_seqs * ly->head_slots;
    uint64_t kv_bytes = 0, max_len = 0;
    for (uint32_t s = 0; s < args->num_seqs; s++) {
        kv_bytes += (uint64_t)args->seq_lens[s] * ly->head_slots * ly->content_bytes;
        if ((uint64_t)args->seq_lens[s] > max_len)
            max_len = (uint64_t)args->seq_lens[s];
    }
    const bool share = kv_bytes >= CPU_PARALLEL_MIN_BYTES;
    job.parts = share ? split_parts(items, threads, max_len) : 1;
    if (job.parts > 1) {
        /* items < 4 x threads here, so this is small. */
        const uint64_t floats = items * job.parts * job.group * (ly->head_size_v + 2);
        job.partials = malloc(floats * sizeof(float));
        if (!job.partials) {
            free(job.scratch);
            return cpu_fail(err, KVRT_ERR_NOMEM, "decode: cannot allocate %llu bytes of split partials",
                            (unsigned long long)floats * sizeof(float));
        }
    }

    struct decode_task task = {&job, NULL};
    cpu_decode_fn reduce;
    pick_kernel(dev, &task.fn, &reduce);
    const uint64_t units = items * job.parts;
    cpu_pool_run(dev->pool, units, share ? 1 : units, decode_task, &task);
    if (job.parts > 1) {
        task.fn = reduce;
        cpu_pool_run(dev->pool, items, 1, decode_task, &task);
    }
    free(job.partials);
    free(job.scratch);
    return KVRT_OK;
}
