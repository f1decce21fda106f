/*
 * Launch planning shared by the GPU backends: pure arithmetic, no device API,
 * unit-tested on its own (tests/gpu/test_gpu_plan.c).
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
size_t kvrt_plan_wave(const int64_t *src, const int64_t *dst, size_t stride, size_t start,
                      size_t n, uint8_t *marks);

/* log2 of the work-items that share one row of `units`: the smallest power
 * of two covering the row, at most `local` (itself a power of two). */
uint32_t kvrt_plan_lane_shift(uint64_t units, uint32_t local);

/* Dynamic local memory of the decode kernel for `local` work-items. */
uint64_t kvrt_plan_decode_shared(uint32_t local, uint64_t d, uint64_t dv);

#endif
