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
    TAP_EQ_U64(kvrt_plan_decode_shared(64, 4, 256, 128, 128), 256 * 8 + 4 * (128 + 256 + 64 + 128 + 3) * 4,
               "decode local memory: offsets, q, scores, reduction, acc, stats");
}

static void decode_plan(void)
{
    unsetenv("KVRT_GPU_DECODE_LANES");
    unsetenv("KVRT_GPU_DECODE_PARTITION");
    const struct kvrt_decode_device h200 = {128, 0, 132, 48 * 1024, 65535};
    struct kvrt_decode_plan p;
    /* Llama-3-8B, 16 x 2048: 16 x 8 work-groups < 264, so 2048 / 3 -> 768 tokens. */
    struct kvrt_decode_shape s = {16, 32, 8, 128, 128, 2, 2048, 1};
    tap_ok(kvrt_plan_decode(&s, &h200, &p) == 0, "16 x 2048 Llama-3-8B plans");
    TAP_EQ_U64(p.q_chunk, 4, "GQA 4: all four query heads in one work-group");
    TAP_EQ_U64(p.lane_shift, 4, "bf16 D128 with 16-byte units: 16 lanes per token");
    TAP_EQ_U64(p.part_tokens, 768, "partitions fill twice the compute units");
    TAP_EQ_U64(p.parts, 3, "three partitions");
    TAP_EQ_U64(p.work, 16 * 8 * 3, "one work item per (seq, KV head, partition)");
    /* Enough sequences: one partition, no reduction. */
    s.seqs = 64;
    s.max_len = 4096;
    kvrt_plan_decode(&s, &h200, &p);
    TAP_EQ_U64(p.parts, 1, "64 x 8 work-groups fill the device: one partition");
    /* One 32K sequence: many partitions, never below 256 tokens. */
    s.seqs = 1;
    s.max_len = 32768;
    kvrt_plan_decode(&s, &h200, &p);
    tap_ok(p.parts >= 16 && p.part_tokens >= 256 && p.part_tokens * p.parts >= 32768,
           "1 x 32768: %llu partitions of %llu tokens", (unsigned long long)p.parts, (unsigned long long)p.part_tokens);
    /* Group 16: two chunks of 8. */
    s.q_heads = 128;
    kvrt_plan_decode(&s, &h200, &p);
    tap_ok(p.q_chunk == 8 && p.chunks == 2, "GQA 16 splits into 2 chunks of 8");
    /* MLA 576/512 with 8 heads per chunk: tiles shrink to fit 48 KiB. */
    const struct kvrt_decode_shape mla = {4, 16, 1, 576, 512, 2, 1000, 1};
    tap_ok(kvrt_plan_decode(&mla, &h200, &p) == 0 && p.shared <= 48 * 1024 && p.tile < 256,
           "MLA 576/512: %llu bytes of local memory with %llu-token tiles", (unsigned long long)p.shared,
           (unsigned long long)p.tile);
    const struct kvrt_decode_device tiny = {128, 0, 4, 4096, 65535};
    tap_ok(kvrt_plan_decode(&mla, &tiny, &p) == -1 && p.shared > 4096,
           "too little local memory is refused, with the size needed");
    /* Knobs. */
    setenv("KVRT_GPU_DECODE_PARTITION", "40", 1);
    setenv("KVRT_GPU_DECODE_LANES", "4", 1);
    s = (struct kvrt_decode_shape){2, 8, 2, 64, 64, 4, 1000, 1};
    kvrt_plan_decode(&s, &h200, &p);
    tap_ok(p.tile == 32 && p.part_tokens == 64 && p.parts == 16 && p.lane_shift == 2,
           "knobs: partition 40 -> 64 tokens (32-token tiles), 4 lanes");
    unsetenv("KVRT_GPU_DECODE_LANES");
    unsetenv("KVRT_GPU_DECODE_PARTITION");
    setenv("KVRT_GPU_MAX_GROUPS", "3", 1);
    TAP_EQ_U64(kvrt_plan_max_groups(65535), 3, "KVRT_GPU_MAX_GROUPS lowers the group cap");
    unsetenv("KVRT_GPU_MAX_GROUPS");
    TAP_EQ_U64(kvrt_plan_max_groups(65535), 65535, "unset: the device's cap");
}

/* Split pairs into waves; returns the number of waves, ends in out. */
static unsigned waves(const int64_t *src, const int64_t *dst, size_t stride, size_t n, size_t *ends)
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
    tap_ok(waves(overwrite, overwrite + 1, 2, 2, ends) == 2, "two writes to one block are ordered (write after write)");
    const int64_t war[] = {3, 4, 5, 3};
    tap_ok(waves(war, war + 1, 2, 2, ends) == 2, "writing an earlier source waits (write after read)");
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
    decode_plan();
    wave_split();
    return tap_done();
}
