/*
 * What the store's tests share: caches of a small model in any layout,
 * block size and head slice, filled with a pattern of logical coordinates
 * (layer, global head, token position, byte) through kvrt_cache_write and
 * checked through kvrt_cache_read -- libkvrt's own paths, not the store's
 * -- and the model's groups for kvrt_store_open.
 */
#ifndef KVRT_TESTS_STORE_TEST_H
#define KVRT_TESTS_STORE_TEST_H

#include <stdbool.h>
#include <stdint.h>

#include <kvrt/kvrt.h>
#include <kvrt/store.h>

#define ST_MAX_LAYERS 16

/* A model: `layers` layers named layer.0.., of one kind and type, with
 * `heads` KV heads of head_size (V head_size_v; 0 for MLA). */
struct st_model {
    uint64_t layers, heads, head_size, head_size_v;
    enum kvrt_spec_kind kind;
    enum kvrt_dtype dtype;
    char names[ST_MAX_LAYERS][16];
    struct kvrt_layer_entry entries[ST_MAX_LAYERS];
    struct kvrt_group group;
};

void st_model_init(struct st_model *m, enum kvrt_spec_kind kind, enum kvrt_dtype dtype, uint64_t layers, uint64_t heads,
                   uint64_t head_size, uint64_t head_size_v);

/* A cache of the model holding heads [head_offset, head_offset + heads). */
struct st_cache {
    kvrt_backend *backend;
    kvrt_cache *cache;
    const struct st_model *model;
    enum kvrt_layout layout;
    uint64_t block_size, kernel, blocks, heads, head_offset;
    uint64_t layer_offset, layers; /* the model's layers it holds (a pipeline stage's) */
};

/* NULL-free on success; a TAP diagnostic and false on failure. */
bool st_cache_make(struct st_cache *c, kvrt_runtime *rt, const char *backend, const struct st_model *m,
                   enum kvrt_layout layout, uint64_t block_size, uint64_t kernel, uint64_t blocks, uint64_t head_offset,
                   uint64_t heads);
/* The same holding only the model's layers [layer_offset, layer_offset +
 * layers), named as the model's: a pipeline stage's cache. */
bool st_cache_make_layers(struct st_cache *c, kvrt_runtime *rt, const char *backend, const struct st_model *m,
                          enum kvrt_layout layout, uint64_t block_size, uint64_t kernel, uint64_t blocks,
                          uint64_t head_offset, uint64_t heads, uint64_t layer_offset, uint64_t layers);
void st_cache_free(struct st_cache *c);

/* A block table of n distinct blocks of the cache, shuffled by seed. */
void st_table(const struct st_cache *c, int64_t *table, uint64_t n, uint64_t seed);

/* Write the pattern of seed into tokens [first, first + n) of the
 * sequence in table; false (diagnostic) on failure. */
bool st_fill(const struct st_cache *c, const int64_t *table, uint64_t first, uint64_t n, uint64_t seed);
/* Cells of tokens [first, first + n) that differ from the pattern of
 * seed; UINT64_MAX when the cache cannot be read.  where gets the first. */
uint64_t st_check(const struct st_cache *c, const int64_t *table, uint64_t first, uint64_t n, uint64_t seed,
                  char *where, size_t size);

/* Token ids of a sequence: deterministic in seed. */
void st_tokens(int32_t *tokens, uint64_t n, uint64_t seed);

/* Open a store of the model: path NULL for memory only. */
kvrt_store *st_open(const struct st_model *m, const char *model_id, uint64_t chunk, uint64_t memory, const char *path,
                    uint64_t disk, const char *shared);

/* A span over c: table, tokens, range, the cache's heads and layers. */
struct kvrt_store_span st_span(const struct st_cache *c, const int64_t *table, uint64_t num_blocks,
                               const int32_t *tokens, uint64_t num_tokens, uint64_t first, uint64_t count);

/* A fresh temporary folder (free the string); NULL with a diagnostic. */
char *st_tempdir(const char *what);
/* Remove a folder and what it holds (one level, as a store has). */
void st_rmdir(const char *path);

/* Warnings a store printed, kept for checks (use as its log). */
struct st_log {
    char lines[64][512];
    int n;
};
void st_log_fn(void *user, enum kvrt_log_level level, const char *message);

#endif
