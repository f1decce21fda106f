/*
 * Launch planning shared by the GPU backends: pure arithmetic, no device API,
 * unit-tested on its own (tests/gpu/plan.c).
 */
#ifndef KVRT_GPU_PLAN_H
#define KVRT_GPU_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* The widest unit (16, 4 or 1 bytes) that divides every value: every byte
 * offset, stride and run length a byte-moving launch touches. */
uint32_t kvrt_plan_unit(const uint64_t *values, size_t n);

/* 1 when every value fits in 32 bits, so the kernel may index in 32-bit
 * arithmetic.  KVRT_GPU_INDEX64=1 in the environment forces 0 (a test knob
 * that exercises the 64-bit variants on small data). */
int kvrt_plan_idx32(const uint64_t *values, size_t n);

/* Work-groups for `total` work-items of `local` each, capped at max_groups
 * (the kernels loop grid-stride past that); at least 1. */
uint64_t kvrt_plan_groups(uint64_t total, uint32_t local, uint64_t max_groups);

/*
 * Split an ordered list of block moves into waves that may run in parallel
 * with the same result as running them in order.  Entry i moves src[i*stride]
 * (src may be NULL: the data comes from elsewhere) to dst[i*stride].  An
 * entry starts a new wave when it writes a block the current wave reads or
 * writes, or reads a block the current wave writes.
 *
 * Returns the end (exclusive) of the wave that starts at `start` (< n).
 * marks has one byte per block id, all zero; it is all zero again on return.
 */
size_t kvrt_plan_wave(const int64_t *src, const int64_t *dst, size_t stride, size_t start, size_t n, uint8_t *marks);

/* log2 of the work-items that share one row of `units`: the smallest power
 * of two covering the row, at most `local` (itself a power of two). */
uint32_t kvrt_plan_lane_shift(uint64_t units, uint32_t local);

/* The device's group cap, lowered by KVRT_GPU_MAX_GROUPS=<n> in the
 * environment (a test knob that sends small launches down the grid-stride
 * path). */
uint64_t kvrt_plan_max_groups(uint64_t device_max);
/* The device's local memory per work-group, lowered by
 * KVRT_GPU_SHARED_BYTES=<n> (a test knob: a GPU's 48 KiB on PoCL's 512). */
uint64_t kvrt_plan_shared_bytes(uint64_t device_bytes);

/* Dynamic local memory of the decode kernel. */
uint64_t kvrt_plan_decode_shared(uint32_t local, uint64_t q_chunk, uint64_t tile, uint64_t d, uint64_t dv);

/* One decode call, as the planner sees it. */
struct kvrt_decode_shape {
    uint64_t seqs, q_heads, kv_heads, d, dv, elem;
    uint64_t max_len; /* longest sequence */
    int vec;          /* every K/V unit is aligned for vector loads */
};

/* What the device offers decode. */
struct kvrt_decode_device {
    uint32_t local;         /* preferred work-group size (a power of two) */
    uint32_t lanes;         /* lanes per token; 0: from the row length */
    uint64_t compute_units; /* work-groups that run at once, roughly */
    uint64_t shared_bytes;  /* local memory one work-group may use */
    uint64_t max_groups;
};

struct kvrt_decode_plan {
    uint32_t local, lane_shift;
    uint64_t q_chunk, chunks;    /* query heads per work-group, chunks per KV head */
    uint64_t tile;               /* tokens per tile (local memory) */
    uint64_t part_tokens, parts; /* context partitions */
    uint64_t work, groups;       /* work items (grid-stride) and work-groups */
    uint64_t shared;
};

/*
 * Choose the decode launch (docs/kernels.md gives the reasons): chunks of at
 * most KVRT_DECODE_MAX_G query heads, lanes covering a K row in vector units
 * (at most 32), one partition per sequence when (seqs x KV heads x chunks)
 * already fills twice the compute units, else partitions of >= 256 tokens
 * until it does; tiles of 256 tokens, halved (then the work-group) until the
 * local memory fits.  Test knobs: KVRT_GPU_DECODE_LANES=<pow2>,
 * KVRT_GPU_DECODE_PARTITION=<tokens>.  Returns 0, or -1 when even 32
 * work-items and 8-token tiles do not fit (p->shared says how much).
 */
int kvrt_plan_decode(const struct kvrt_decode_shape *sh, const struct kvrt_decode_device *dev,
                     struct kvrt_decode_plan *p);

#endif
