/*
 * kvrt-conformance: one suite run against every backend through the public
 * runtime API only.  A host-side model of each cache (its expected bytes)
 * is kept next to the device cache, so every operation is checked against
 * the whole buffer: what it must write, and that it wrote nothing else.
 */
#ifndef KVRT_CONFORMANCE_H
#define KVRT_CONFORMANCE_H

#include <stdbool.h>
#include <stdint.h>

#include <kvrt/kvrt.h>
#include <kvrt/plugin.h>

#include "tap.h"

/* rng.c: deterministic, seedable (the seed is printed so a failure can be
 * replayed with --seed). */
struct conf_rng {
    uint64_t state;
};
void conf_rng_seed(struct conf_rng *r, uint64_t seed);
uint64_t conf_rng_next(struct conf_rng *r);
uint64_t conf_rng_below(struct conf_rng *r, uint64_t n);
void conf_rng_shuffle(struct conf_rng *r, int64_t *a, uint64_t n);
/* 0, 1, ..., n-1 in random order (caller frees). */
int64_t *conf_rng_permutation(struct conf_rng *r, uint64_t n);

/* values.c: element values. */
bool conf_dtype_has_values(enum kvrt_dtype t); /* fp32, fp16, bf16, fp8 */
/* Random elements: uniform in [-1, 1] for float types, random bytes else. */
void conf_fill(struct conf_rng *r, enum kvrt_dtype t, void *dst, uint64_t count);
double conf_load(enum kvrt_dtype t, const void *src, uint64_t index);
/* Decode tolerance relative to max |v|. */
double conf_tolerance(enum kvrt_dtype t);

/* shapes.c: the placements under test. */
enum conf_shape {
    CONF_SHAPE_BASIC,    /* 2 layers, H 2, D 16 */
    CONF_SHAPE_TWO_SETS, /* two sets: H 2 D 16 and H 4 D 8 (equal pages) */
    CONF_SHAPE_SPLIT,    /* kernel block = block / 2 (LBHNC, LBNHC only) */
    CONF_SHAPE_MLA,      /* 2 MLA layers: one latent vector per token, no V */
    CONF_SHAPE_HYBRID,   /* attention, a state (Mamba-like) layer and one
                          * storing a state per 2 tokens, equal pages */
};
#define CONF_NUM_SHAPES 5
#define CONF_NUM_BLOCKS 6
const char *conf_shape_name(enum conf_shape shape);
bool conf_shape_applies(enum conf_shape shape, enum kvrt_layout layout);
/* split false: the same layers without kernel-block splitting. */
int conf_placement(enum conf_shape shape, enum kvrt_layout layout, enum kvrt_dtype dtype, bool split,
                   kvrt_placement **out);

/* model.c: a cache under test and its expected bytes. */
struct conf_layer {
    const char *name;
    bool has_tokens; /* write/read/decode apply: not a state layer, one state per token */
    struct kvrt_view view;
    enum kvrt_dtype dtype;
    uint64_t elem, heads, head_size, head_size_v, content;
    uint64_t states;           /* per view block */
    uint64_t blocks_per_block; /* view blocks per manager block */
};

/* Memory a second runtime of the same plugin owns (so that it overlaps no
 * buffer of the runtime under test), for kvrt_cache_wrap (check_import.c). */
struct conf_memory {
    kvrt_buffer *buf; /* in the owner runtime; destroyed by the release */
    void *address;
    enum kvrt_memory_kind kind;
    int32_t device_id;
    uint64_t bytes;
    int released;      /* how often the release callback ran */
    bool address_seen; /* the callback was given `address` */
};

struct conf_cache {
    kvrt_backend *backend;
    kvrt_cache *cache;
    struct conf_memory *memory; /* the wrapped memory, or NULL */
    uint64_t bytes, num_blocks, block_size, staging_per_block;
    uint32_t num_layers;
    struct conf_layer *layers;
    uint8_t *image; /* what the device buffer must hold */
};

/* Create a cache from p on b; fills *out.  A kvrt status, with its message. */
int conf_cache_open(kvrt_backend *b, const kvrt_placement *p, struct conf_cache *out);
/* The same over zeroed memory from the owner runtime (kvrt_cache_wrap);
 * out->memory is the caller's to free after conf_cache_close. */
struct conf_plugin;
int conf_cache_open_wrapped(struct conf_plugin *plg, kvrt_backend *b, const kvrt_placement *p, struct conf_cache *out);
void conf_cache_close(struct conf_cache *c);
uint64_t conf_cell(const struct conf_cache *c, uint32_t layer, uint64_t block, uint64_t state, uint64_t head);
uint64_t conf_slot_cell(const struct conf_cache *c, uint32_t layer, int64_t slot, uint64_t head);
uint64_t conf_num_slots(const struct conf_cache *c);
uint64_t conf_k_bytes(const struct conf_cache *c, uint32_t layer, uint64_t tokens);
uint64_t conf_v_bytes(const struct conf_cache *c, uint32_t layer, uint64_t tokens);
void conf_model_write(struct conf_cache *c, uint32_t layer, uint64_t n, const int64_t *slots, const uint8_t *k,
                      const uint8_t *v);
void conf_model_read(const struct conf_cache *c, uint32_t layer, uint64_t n, const int64_t *slots, uint8_t *k,
                     uint8_t *v);
void conf_model_copy(struct conf_cache *c, uint64_t num_pairs, const int64_t *pairs);
void conf_model_gather(const struct conf_cache *c, uint64_t n, const int64_t *ids, uint8_t *staging);
void conf_model_scatter(struct conf_cache *c, uint64_t n, const int64_t *ids, const uint8_t *staging);
/* Download the device buffer (caller frees); NULL with a diagnostic. */
uint8_t *conf_cache_download(struct conf_cache *c);
/* true when the device buffer equals the model; else diagnoses the first
 * differing byte by layer, block, head, state and content. */
bool conf_cache_matches(struct conf_cache *c);
/* Take the device bytes as the model's: after a failed point, so that the
 * next check tests its own operation instead of repeating the failure. */
bool conf_cache_resync(struct conf_cache *c);
/* Where byte `offset` of the cache lies, for diagnostics. */
void conf_describe_offset(const struct conf_cache *c, uint64_t offset, char *out, size_t size);

/* buffers.c: device buffers from host data. */
kvrt_buffer *conf_buffer(kvrt_backend *b, uint64_t bytes, const void *init);
/* Buffer of `bytes` filled with the sentinel pattern. */
kvrt_buffer *conf_sentinel_buffer(kvrt_backend *b, uint64_t bytes);
void conf_sentinel(uint8_t *dst, uint64_t bytes);
/* Download a whole buffer (caller frees); NULL with a diagnostic. */
uint8_t *conf_download(kvrt_buffer *buf);
/* First differing byte, or -1. */
int64_t conf_first_diff(const uint8_t *a, const uint8_t *b, uint64_t n);
/* The kvrt error message of a failed call, with a diagnostic. */
void conf_diag_status(const char *what, int status);

/* The plugin under test. */
struct conf_plugin {
    kvrt_runtime *rt;
    struct kvrt_plugin_info info;
    enum kvrt_layout layouts[KVRT_NUM_LAYOUTS];
    size_t num_layouts;
    kvrt_backend *bound[KVRT_NUM_LAYOUTS];
    bool bind_tried[KVRT_NUM_LAYOUTS];
    kvrt_backend *foreign; /* a binding of another plugin, or NULL */
    char foreign_why[256]; /* why there is none */
    struct conf_rng rng;
    /* A second runtime, opened like the first, whose buffers are the
     * memory that caches are wrapped over (check_import.c). */
    const struct kvrt_runtime_options *options;
    kvrt_runtime *owner;
    kvrt_backend *owner_bound[KVRT_NUM_LAYOUTS];
};

/* One (layout, element type, shape) of a plugin, with its filled cache. */
struct conf_case {
    struct conf_plugin *plugin;
    kvrt_backend *backend;
    enum kvrt_layout layout;
    enum kvrt_dtype dtype;
    enum conf_shape shape;
    char label[96];
    struct conf_cache cache;
};

/* plugin.c: binding, lazily, once per layout. */
kvrt_backend *conf_bind(struct conf_plugin *p, enum kvrt_layout layout);
void conf_find_foreign(struct conf_plugin *p);
void conf_run_plugin(kvrt_runtime *rt, const struct kvrt_runtime_options *options, size_t index, uint64_t seed);
bool conf_has_op(const struct conf_case *cs, uint32_t op);

/* The checks, one file each; each emits its own points. */
void conf_check_tokens(struct conf_case *cs); /* write/read round trip */
void conf_fill_cache(struct conf_case *cs);   /* every slot of every layer */
void conf_check_copy(struct conf_case *cs);
void conf_check_staging(struct conf_case *cs); /* gather A -> scatter B */
void conf_check_decode(struct conf_case *cs);
void conf_check_errors(struct conf_case *cs);

/* check_import.c: memory from the owner runtime, of the plugin's kind,
 * holding `init` (NULL: zeroes); false with a diagnostic. */
bool conf_memory_get(struct conf_plugin *p, enum kvrt_layout layout, uint64_t bytes, const void *init,
                     struct conf_memory *m);
/* A kvrt_memory for m whose release callback counts and frees it. */
void conf_memory_describe(struct conf_memory *m, struct kvrt_memory *out);
/* Give back memory no cache adopted. */
void conf_memory_drop(struct conf_memory *m);
/* Caches over caller memory: refusal by name without buffer_import; else
 * the memory kept, views into it, each reference holding it, the release
 * run once, and every misuse refused. */
void conf_check_import(struct conf_plugin *p);
void conf_plugin_finish(struct conf_plugin *p);

#endif
