/*
 * The device checks run against a bound plugin: each compares the device's
 * bytes with the host emulation (gpu_cache.c) or reference (gpu_ref.c) and
 * reports TAP points.
 */
#ifndef KVRT_TESTS_GPU_CHECKS_H
#define KVRT_TESTS_GPU_CHECKS_H

#include <kvrt/plugin.h>

#include "gpu_cache.h"

struct gpu_rig {
    const struct kvrt_plugin_descriptor *p;
    kvrt_plugin_device *dev;
    const char *tag; /* "LBHNC bf16 D6/4" for test names */
};

/* xorshift; every check draws from one seeded stream. */
uint64_t gpu_rand(void);
void gpu_fill_random(uint8_t *p, uint64_t n);

int gpu_bind(const struct kvrt_plugin_descriptor *p, int layout, kvrt_plugin_device **dev);

void gpu_check_write_read(const struct gpu_rig *rig, const struct gpu_cache *c);
void gpu_check_copy(const struct gpu_rig *rig, const struct gpu_cache *c);
/* Gather from a under rig_a, move the staging through the host, scatter
 * into b (same geometry, another layout) under rig_b. */
void gpu_check_stage(const struct gpu_rig *rig_a, const struct gpu_cache *a, const struct gpu_rig *rig_b,
                     const struct gpu_cache *b);
void gpu_check_decode(const struct gpu_rig *rig, const struct gpu_cache *c, uint64_t q_heads, const int32_t *seq_lens,
                      uint64_t seqs);
/* Decode on a byte type must be refused with KVRT_ERR_UNSUPPORTED. */
void gpu_check_decode_refused(const struct gpu_rig *rig, const struct gpu_cache *c);
/* Two threads doing write/read round trips on their own caches at once. */
void gpu_check_threads(const struct gpu_rig *rig, const struct gpu_cache *c);

#endif
