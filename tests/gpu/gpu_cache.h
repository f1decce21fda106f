/*
 * Test caches built by hand: the [L, B, H, N, C] strides of a layout,
 * computed here independently of the core, a struct kvrt_plugin_cache over
 * them, and host-side emulation of every byte-moving operation.
 */
#ifndef KVRT_TESTS_GPU_CACHE_H
#define KVRT_TESTS_GPU_CACHE_H

#include <stdint.h>

#include <kvrt/plugin.h>

#define GPU_MAX_LAYERS 4

struct gpu_geom {
    int layout;
    int dtype;
    uint64_t elem; /* bytes per element */
    uint64_t layers;
    uint64_t blocks;     /* manager blocks */
    uint64_t block_size; /* tokens per manager block */
    uint64_t heads;
    uint64_t d, dv;
    uint64_t r;    /* kernel blocks per manager block (1: no split) */
    uint64_t pad;  /* bytes added to each page (0: none) */
    uint64_t base; /* offset of the cache in its buffer */
};

struct gpu_cache {
    struct gpu_geom g;
    struct kvrt_plugin_cache cache;
    struct kvrt_plugin_layer layers[GPU_MAX_LAYERS];
    uint64_t bytes;   /* buffer size */
    uint64_t content; /* C */
    uint64_t stage;   /* staging bytes of one block, all layers */
};

/* Physical order of a layout (stride_order). */
const int *gpu_stride_order(int layout);
/* L outermost and the page dense: where kernel-block splitting is legal. */
int gpu_split_legal(int layout);
/* The {L, B} axes are the two outermost: where page padding is legal. */
int gpu_block_compact(int layout);

void gpu_cache_build(struct gpu_cache *c, const struct gpu_geom *g);

/* Byte offset of cell (view block vb, head h, state j) of layer l. */
uint64_t gpu_cell(const struct gpu_cache *c, uint64_t l, uint64_t vb, uint64_t h, uint64_t j);

/* Host emulation on a full image of the cache buffer. */
void gpu_emulate_write(const struct gpu_cache *c, uint8_t *image, uint64_t layer, uint64_t tokens, const int64_t *slots,
                       const uint8_t *k, const uint8_t *v);
void gpu_emulate_read(const struct gpu_cache *c, const uint8_t *image, uint64_t layer, uint64_t tokens,
                      const int64_t *slots, uint8_t *k, uint8_t *v);
void gpu_emulate_copy(const struct gpu_cache *c, uint8_t *image, uint64_t pairs, const int64_t *ids);
void gpu_emulate_gather(const struct gpu_cache *c, const uint8_t *image, uint64_t n, const int64_t *ids,
                        uint8_t *staging);
void gpu_emulate_scatter(const struct gpu_cache *c, uint8_t *image, uint64_t n, const int64_t *ids,
                         const uint8_t *staging);

#endif
