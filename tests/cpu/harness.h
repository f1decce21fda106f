/*
 * Helpers for the CPU backend's tests: load the built module with dlopen,
 * bind it, and describe caches with strides computed here, independently of
 * the core's geometry code (a small [L, B, H, N, C] stride walk).
 */
#ifndef KVRT_TESTS_CPU_HARNESS_H
#define KVRT_TESTS_CPU_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include <kvrt/plugin.h>

#define TEST_MAX_LAYERS 8

extern const struct kvrt_plugin_descriptor *cpu;
extern kvrt_plugin_error cpu_err;

/* dlopen $KVRT_CPU_MODULE and read the descriptor; bails out of the TAP
 * stream (plan "1..0 # SKIP") only if the variable is unset. */
void harness_load(void);
kvrt_plugin_device *harness_bind(int layout);
kvrt_plugin_buffer *harness_alloc(kvrt_plugin_device *dev, uint64_t bytes);
void harness_upload(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, const void *src, uint64_t bytes);
void harness_download(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, void *dst, uint64_t bytes);

extern const char *const layout_name[6];

/* A cache shape.  N = states per view block, C = content bytes per cell. */
struct geom {
    int layout;
    int dtype;
    uint64_t elem;
    uint64_t L, B, r, k; /* layers, manager blocks, view blocks per block, tokens per view block */
    uint64_t H, N;
    uint64_t D, Dv;
    uint64_t C;   /* >= (D + Dv) x elem */
    uint64_t pad; /* extra bytes per page (block-compact layouts, r == 1 only) */
};

struct test_cache {
    struct kvrt_plugin_cache cache;
    struct kvrt_plugin_layer layers[TEST_MAX_LAYERS];
};

/* Fill defaults (N = k, C = (D + Dv) x elem) where those fields are 0. */
void geom_build(struct geom *g, struct test_cache *out);

/* Byte offset of a cell: layer l, view block vb, head h, state n. */
uint64_t cell_offset(const struct test_cache *c, uint64_t l, uint64_t vb, uint64_t h, uint64_t n);

/* A layout is block-compact when its two outermost axes are L and B. */
bool layout_block_compact(int layout);

/* xorshift64*, deterministic per test. */
uint64_t rnd(void);
void rnd_bytes(void *dst, uint64_t n);
void rnd_shuffle(int64_t *v, uint64_t n);

#endif
