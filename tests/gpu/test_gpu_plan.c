/*
 * The launch planner of the GPU backends (plugins/common/host/gpu_plan.c):
 * unit widths, index widths, group counts and dependency waves.  Pure
 * arithmetic: runs everywhere.
 */
#include <stdlib.h>
#include <string.h>

#include "gpu_plan.h"
#include "tap.h"

static void units(void)
{
    const uint64_t a[] = {32, 64, 4096, 0};
    TAP_EQ_U64(kvrt_plan_unit(a, 4), 16, "all multiples of 16 -> 16-byte units");
    const uint64_t b[] = {32, 12, 4096};
    TAP_EQ_U64(kvrt_plan_unit(b, 3), 4, "a 12-byte run -> 4-byte units");
    const uint64_t c[] = {32, 64, 3};
    TAP_EQ_U64(kvrt_plan_unit(c, 3), 1, "an odd offset -> bytes");
    const uint64_t d[] = {2, 64};
    TAP_EQ_U64(kvrt_plan_unit(d, 2), 1, "2-byte alignment -> bytes");
}

static void index_width(void)
{
    const uint64_t small[] = {1, UINT32_MAX};
    const uint64_t big[] = {1, (uint64_t)UINT32_MAX + 1};
    unsetenv("KVRT_GPU_INDEX64");
    tap_ok(kvrt_plan_idx32(small, 2) == 1, "counts up to 2^32-1 index in 32 bits");
    tap_ok(kvrt_plan_idx32(big, 2) == 0, "a count of 2^32 needs 64-bit indexing");
    setenv("KVRT_GPU_INDEX64", "1", 1);
    tap_ok(kvrt_plan_idx32(small, 2) == 0, "KVRT_GPU_INDEX64=1 forces 64-bit indexing");
    unsetenv("KVRT_GPU_INDEX64");
}

static void groups(void)
{
    TAP_EQ_U64(kvrt_plan_groups(0, 64, 100), 1, "empty launch still has one group");
    TAP_EQ_U64(kvrt_plan_groups(65, 64, 100), 2, "groups round up");
    TAP_EQ_U64(kvrt_plan_groups(1u << 30, 256, 65535), 65535, "groups capped (grid-stride)");
    TAP_EQ_U64(kvrt_plan_lane_shift(1, 256), 0, "a one-unit row: one lane");
    TAP_EQ_U64(kvrt_plan_lane_shift(32, 256), 5, "32 units: 32 lanes");
    TAP_EQ_U64(kvrt_plan_lane_shift(33, 256), 6, "33 units: 64 lanes");
    TAP_EQ_U64(kvrt_plan_lane_shift(5000, 256), 8, "long rows: the whole group");
    TAP_EQ_U64(kvrt_plan_decode_shared(64, 128, 128), 64 * 8 + (128 + 128 + 128) * 4,
               "decode local memory: offsets, q, scores, weights, acc");
}

/* Split pairs into waves; returns the number of waves, ends in out. */
static unsigned waves(const int64_t *src, const int64_t *dst, size_t stride, size_t n,
                      size_t *ends)
{
    uint8_t marks[16] = {0};
    unsigned w = 0;
    for (size_t start = 0; start < n; w++) {
        start = kvrt_plan_wave(src, dst, stride, start, n, marks);
        ends[w] = start;
    }
    int clean = 1;
    for (int i = 0; i < 16; i++)
        clean &= marks[i] == 0;
    tap_ok(clean, "marks are left clean");
    return w;
}

static void wave_split(void)
{
    size_t ends[16];
    const int64_t independent[] = {0, 1, 2, 3, 4, 5, 0, 6};
    tap_ok(waves(independent, independent + 1, 2, 4, ends) == 1 && ends[0] == 4,
           "independent pairs (shared source) run in one wave");
    const int64_t chain[] = {0, 1, 1, 2};
    tap_ok(waves(chain, chain + 1, 2, 2, ends) == 2 && ends[0] == 1,
           "a pair reading an earlier destination waits (read after write)");
    const int64_t overwrite[] = {0, 1, 2, 1};
    tap_ok(waves(overwrite, overwrite + 1, 2, 2, ends) == 2,
           "two writes to one block are ordered (write after write)");
    const int64_t war[] = {3, 4, 5, 3};
    tap_ok(waves(war, war + 1, 2, 2, ends) == 2,
           "writing an earlier source waits (write after read)");
    const int64_t self[] = {2, 2, 3, 4};
    tap_ok(waves(self, self + 1, 2, 2, ends) == 1, "a self copy conflicts with nothing else");
    const int64_t scatter[] = {1, 2, 1, 3};
    tap_ok(waves(NULL, scatter, 1, 4, ends) == 2 && ends[0] == 2 && ends[1] == 4,
           "scatter to a repeated block splits at the repeat");
}

int main(void)
{
    tap_plan_dynamic();
    units();
    index_width();
    groups();
    wave_split();
    return tap_done();
}
