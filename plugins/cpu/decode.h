/*
 * kvrt CPU backend — paged attention decode: the job shared by the driver
 * (decode.c) and the kernels (decode_kernel.c, built once per ISA).
 */
#ifndef KVRT_CPU_DECODE_H
#define KVRT_CPU_DECODE_H

#include <kvrt/plugin.h>

/* Tokens per tile: scores of a tile share one softmax rescale. */
#define CPU_DECODE_TILE 32u

struct cpu_decode_job {
    const struct kvrt_plugin_layer *layer;
    const unsigned char *cache;
    const unsigned char *q; /* [S, Hq, D] */
    unsigned char *out;     /* [S, Hq, Dv] */
    const int32_t *block_tables;
    const int32_t *seq_lens;
    uint64_t block_size; /* tokens per manager block */
    uint32_t max_blocks;
    uint32_t num_q_heads;
    uint32_t group; /* query heads per KV head */
    float scale;
    float *scratch; /* scratch_floats per worker */
    uint64_t scratch_floats;
    uint64_t parts;  /* slices of each item's context (1: no split) */
    float *partials; /* parts > 1: [items x parts][max G, sum G, acc G x Dv] */
};

/* bf16 elements of one query row kept for vdpbf16ps (padded to 32). */
static inline uint64_t cpu_decode_q16_elems(uint64_t d)
{
    return (d + 31) & ~(uint64_t)31;
}

/* Floats of per-worker scratch a job needs. */
uint64_t cpu_decode_scratch_floats(uint64_t group, uint64_t d, uint64_t dv);

/* Units are parts of (sequence, KV head) items: unit = (s x H + h) x parts
 * + part.  One kernel per instruction set; the x86-64 ones are built only
 * where the compiler targets x86-64 (CPU_HAVE_X86_KERNELS). */
typedef void (*cpu_decode_fn)(const struct cpu_decode_job *job, unsigned worker, uint64_t begin, uint64_t end);
void cpu_decode_items_generic(const struct cpu_decode_job *job, unsigned worker, uint64_t begin, uint64_t end);
void cpu_decode_items_avx2(const struct cpu_decode_job *job, unsigned worker, uint64_t begin, uint64_t end);
void cpu_decode_items_avx512(const struct cpu_decode_job *job, unsigned worker, uint64_t begin, uint64_t end);
/* The reduction of a split job, over items (not units). */
void cpu_decode_reduce_generic(const struct cpu_decode_job *job, unsigned worker, uint64_t begin, uint64_t end);
void cpu_decode_reduce_avx2(const struct cpu_decode_job *job, unsigned worker, uint64_t begin, uint64_t end);
void cpu_decode_reduce_avx512(const struct cpu_decode_job *job, unsigned worker, uint64_t begin, uint64_t end);

#endif
