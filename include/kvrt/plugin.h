/*
 * kvrt — the plugin ABI.  The only header a backend needs.
 *
 * A backend is a shared module named kvrt-<name>.so that exports one symbol,
 * KVRT_PLUGIN_ENTRY_SYMBOL, returning a pointer to a constant descriptor.
 * Calling the entry and reading the descriptor must run no device code: the
 * core reads every declaration (layouts, element types, operations) before it
 * decides anything, and refuses an unsupported layout before bind is called.
 *
 * Compatibility rule (libkvrt <-> plugin):
 *  - abi_major must equal KVRT_PLUGIN_ABI_MAJOR of the core, else the plugin
 *    is skipped with a reason.
 *  - A plugin built against an older minor works with a newer core as long as
 *    its descriptor covers what the core uses: `size` is the descriptor size
 *    the plugin was compiled with, and the core never reads a field at or
 *    past that size.  A descriptor smaller than KVRT_PLUGIN_DESCRIPTOR_MIN_SIZE
 *    (ABI 1.0) is skipped.
 *  - A plugin built against a newer minor than the core's loads too: the
 *    core reads only the fields it knows, and the plugin must work when the
 *    newer ones are never read (kvrt plugins shows both versions).
 *  - New fields only ever go at the end of a struct; structs that cross the
 *    boundary start with their size for the same reason.
 *
 * Threading: the core serialises nothing.  A plugin's functions may be called
 * from several threads at once for different caches and buffers of the same
 * device; calls on one buffer never overlap.
 *
 * Memory: every `kvrt_plugin_buffer` is device memory owned by the plugin,
 * except one made by buffer_import (ABI 1.2), whose memory the caller owns.
 * A buffer allocated through one binding must be usable with every other
 * binding of the same plugin in the process: bindings of one plugin share
 * its device, so that gathering under one layout and scattering under
 * another can use one staging buffer.
 * Index arrays (slots, block ids, block tables, sequence lengths) are host
 * memory, valid for the duration of the call.  The core validates every
 * argument (ranges, sizes, types) before calling a plugin function, so a
 * plugin only ever sees in-range values.
 */
#ifndef KVRT_PLUGIN_H
#define KVRT_PLUGIN_H

#include <stdint.h>
#include <stddef.h>

#include <kvrt/common.h>
#include <kvrt/device.h>
#include <kvrt/dtype.h>
#include <kvrt/layout.h>
#include <kvrt/spec.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVRT_PLUGIN_ABI_MAJOR 1
#define KVRT_PLUGIN_ABI_MINOR 2

/* The exported entry point's name and type. */
#define KVRT_PLUGIN_ENTRY_SYMBOL "kvrt_plugin_entry"
struct kvrt_plugin_descriptor;
typedef const struct kvrt_plugin_descriptor *(*kvrt_plugin_entry_fn)(void);

#if defined(__GNUC__) || defined(__clang__)
#define KVRT_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define KVRT_PLUGIN_EXPORT
#endif

/* Operations (bit flags in kvrt_plugin_descriptor.ops); values are ABI. */
enum kvrt_op {
    KVRT_OP_WRITE = 1u << 0,       /* K/V of T tokens through a slot mapping */
    KVRT_OP_READ = 1u << 1,        /* K/V back for a list of slots */
    KVRT_OP_COPY_BLOCKS = 1u << 2, /* (src, dst) block pairs, every layer */
    KVRT_OP_GATHER = 1u << 3,      /* blocks -> packed staging buffer */
    KVRT_OP_SCATTER = 1u << 4,     /* packed staging buffer -> blocks */
    KVRT_OP_DECODE = 1u << 5,      /* single-query paged attention */
};
#define KVRT_OP_ALL 0x3fu

/* Descriptor flags. */
#define KVRT_PLUGIN_ANY_LAYOUT (1u << 0) /* takes every layout; `layouts` may be empty */

/* Error text written by a failing plugin function.  Fixed size within an
 * ABI major. */
typedef struct kvrt_plugin_error {
    char message[512];
} kvrt_plugin_error;

/* Plugin-defined handles; the core never looks inside. */
typedef struct kvrt_plugin_device kvrt_plugin_device;
typedef struct kvrt_plugin_buffer kvrt_plugin_buffer;

/* Services the core offers a plugin. */
struct kvrt_plugin_host {
    uint32_t size;
    uint32_t reserved;
    void *user;
    /* level: 0 error, 1 warning, 2 info, 3 debug. */
    void (*log)(void *user, int level, const char *message);
};

/* Passed to bind: the layout the core resolved and checked against the
 * plugin's declaration. */
struct kvrt_plugin_bind_info {
    uint32_t size;
    int32_t layout; /* enum kvrt_layout, one the plugin declared */
    const struct kvrt_plugin_host *host;
};

/*
 * One layer of a cache, as a 4-D [B, H, N, C] view of the cache buffer.
 * B counts kernel blocks (view blocks); one manager block spans
 * `blocks_per_block` consecutive view blocks.  C is always contiguous.
 */
struct kvrt_plugin_layer {
    uint32_t size;
    int32_t kind;  /* enum kvrt_spec_kind */
    int32_t dtype; /* enum kvrt_dtype; a state layer may carry one the
                      plugin never declared (opaque bytes) */
    uint32_t elem_size;
    uint64_t offset;            /* bytes from the start of the cache buffer */
    uint64_t num_view_blocks;   /* B x r */
    uint64_t blocks_per_block;  /* r */
    uint64_t view_block_tokens; /* k: tokens per view block */
    uint64_t head_slots;        /* H */
    uint64_t states;            /* N per view block */
    uint64_t content_bytes;     /* C */
    uint64_t head_size;         /* D, elements (0 for state specs) */
    uint64_t head_size_v;       /* Dv, elements (0 for MLA and state specs) */
    uint64_t stride_block;      /* bytes between view blocks */
    uint64_t stride_head;       /* bytes between head slots */
    uint64_t stride_state;      /* bytes between states */
};

/* What `describe` reports (ABI 1.1).  The core zeroes it and sets `size`
 * before the call; the plugin fills what it knows. */
struct kvrt_plugin_device_info {
    uint32_t size;
    int32_t type;                    /* enum kvrt_device_type */
    int32_t memory;                  /* enum kvrt_memory_kind of the plugin's buffers */
    int32_t device_id;               /* device ordinal (CUDA/ROCm); 0 otherwise */
    char name[KVRT_DEVICE_NAME_MAX]; /* e.g. "NVIDIA H200", "PoCL: cpu-x86-64 (CPU)" */
};

/* Memory the caller owns, handed to buffer_import (ABI 1.2).  The core has
 * checked everything it can before the call: the address is not NULL and a
 * multiple of the descriptor's import_alignment, `bytes` covers the cache,
 * `memory` and `device_id` are what describe reported for this plugin, and
 * the range overlaps no live buffer of the runtime. */
struct kvrt_plugin_import {
    uint32_t size;
    int32_t memory;    /* enum kvrt_memory_kind: host, CUDA or ROCm */
    int32_t device_id; /* the CUDA/ROCm device ordinal; 0 for host memory */
    uint32_t reserved; /* zero */
    void *address;     /* the first byte */
    uint64_t bytes;    /* how many bytes from address the buffer covers */
};

/* A cache: one buffer, several layers in placement order. */
struct kvrt_plugin_cache {
    uint32_t size;
    int32_t layout;      /* enum kvrt_layout */
    uint64_t bytes;      /* size of the cache buffer */
    uint64_t num_blocks; /* manager blocks */
    uint64_t block_size; /* tokens per manager block */
    uint64_t num_layers;
    const struct kvrt_plugin_layer *layers;
};

/*
 * Single-query paged attention decode on one layer.
 * q: [S, Hq, D], out: [S, Hq, Dv], both dense in the layer's dtype.
 * Query head h reads KV head h / (Hq / H).  Sequence s attends to its tokens
 * 0 .. seq_lens[s]-1; token t lives in slot
 * block_tables[s * max_blocks_per_seq + t / block_size] * block_size + t % block_size.
 * Scores are scaled by `scale`; softmax and accumulation in fp32.
 */
struct kvrt_plugin_decode_args {
    uint32_t size;
    uint32_t num_seqs;
    uint32_t num_q_heads;
    uint32_t max_blocks_per_seq;
    kvrt_plugin_buffer *q;
    uint64_t q_offset;
    kvrt_plugin_buffer *out;
    uint64_t out_offset;
    const int32_t *block_tables; /* host, [num_seqs, max_blocks_per_seq] */
    const int32_t *seq_lens;     /* host, [num_seqs], each >= 1 */
    float scale;
    uint32_t reserved;
};

struct kvrt_plugin_descriptor {
    uint32_t size;       /* sizeof(struct kvrt_plugin_descriptor) at build time */
    uint16_t abi_major;  /* KVRT_PLUGIN_ABI_MAJOR */
    uint16_t abi_minor;  /* KVRT_PLUGIN_ABI_MINOR */
    const char *name;    /* [a-z0-9_-]+, e.g. "cpu" */
    const char *version; /* the plugin's own version string */
    const char *description;
    uint32_t flags; /* KVRT_PLUGIN_ANY_LAYOUT */
    uint32_t num_layouts;
    const int32_t *layouts; /* enum kvrt_layout, most preferred first */
    uint32_t dtypes;        /* bit (1u << enum kvrt_dtype) per supported type */
    uint32_t ops;           /* enum kvrt_op bits */

    /* --- required --- */

    /* Is a device usable?  Must not allocate device memory.  KVRT_OK, or
     * KVRT_ERR_NODEV with the reason (e.g. the driver's error name). */
    int (*probe)(kvrt_plugin_error *why);
    /* Open the device for one layout.  Called only with a declared layout. */
    int (*bind)(const struct kvrt_plugin_bind_info *info, kvrt_plugin_device **out, kvrt_plugin_error *err);
    void (*unbind)(kvrt_plugin_device *dev);

    int (*buffer_alloc)(kvrt_plugin_device *dev, uint64_t bytes, kvrt_plugin_buffer **out, kvrt_plugin_error *err);
    void (*buffer_free)(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf);
    int (*buffer_zero)(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, uint64_t bytes,
                       kvrt_plugin_error *err);
    int (*buffer_upload)(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, const void *src,
                         uint64_t bytes, kvrt_plugin_error *err);
    int (*buffer_download)(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, void *dst, uint64_t bytes,
                           kvrt_plugin_error *err);

    /* --- one per declared operation (NULL when the op bit is clear) --- */

    /* K [T, H, D] at k/k_offset, V [T, H, Dv] at v/v_offset (v NULL when
     * Dv == 0); slots[t] < 0 skips token t.  The core never passes a slot
     * twice: when the caller names one slot for several tokens, the last
     * of them wins and the core turns the earlier ones into -1. */
    int (*write)(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                 uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
                 kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err);
    /* The reverse of write; rows of negative slots are left untouched. */
    int (*read)(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
                kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err);
    /* pairs[2i] = source manager block, pairs[2i+1] = destination, every
     * layer; pairs are applied in order. */
    int (*copy_blocks)(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                       uint64_t num_pairs, const int64_t *pairs, kvrt_plugin_error *err);
    /* Staging order (layout-independent): for each block in request order,
     * for each layer in placement order, that layer's page in [H, N, C]
     * order with N counting the states of the whole manager block, unpadded. */
    int (*gather)(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                  uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging, uint64_t staging_offset,
                  kvrt_plugin_error *err);
    int (*scatter)(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                   uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging, uint64_t staging_offset,
                   kvrt_plugin_error *err);
    int (*decode)(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                  uint32_t layer, const struct kvrt_plugin_decode_args *args, kvrt_plugin_error *err);

    /* --- ABI 1.1: read by the core only when KVRT_PLUGIN_HAS(desc, field) --- */

    /* Element types decode computes on: a subset of `dtypes`; 0 means all
     * of `dtypes`.  The core refuses decode of any other type by name
     * before the plugin runs. */
    uint32_t decode_dtypes;
    uint32_t reserved0; /* zero */
    /* Describe the device probe found.  Optional (NULL: unknown type,
     * opaque memory).  Called only after a successful probe, at most once. */
    int (*describe)(struct kvrt_plugin_device_info *info, kvrt_plugin_error *err);
    /* The address of a buffer's first byte (a host pointer, or a device
     * pointer on info.device_id), for zero-copy export and RDMA
     * registration.  Optional: NULL when buffers have no address in this
     * process (memory OPAQUE).  The address stays valid while the buffer
     * lives. */
    int (*buffer_address)(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, void **address, kvrt_plugin_error *err);
    /* The device's copy roofline for benchmarks: copy `bytes` from one
     * device buffer to another many times after a warm-up, timed on the
     * device (events) where the API has them, and report bytes copied per
     * second, each byte counted once (as benchmarks count an operation's
     * bytes).  Optional (NULL: benchmarks compare with host memcpy).  The
     * plugin allocates and frees its own buffers. */
    int (*measure_copy)(kvrt_plugin_device *dev, uint64_t bytes, double *bytes_per_second, kvrt_plugin_error *err);

    /* --- ABI 1.2: read by the core only when KVRT_PLUGIN_HAS(desc, field) --- */

    /* The alignment in bytes (a power of two, 1 to 2^30) that buffer_import
     * needs of an address: what the plugin's widest access to a cache
     * assumes of the buffer's first byte (its own allocations give at
     * least this).  Ignored without buffer_import. */
    uint64_t import_alignment;
    /* Adopt memory the caller owns as a buffer, for a cache over an
     * engine's own allocation (kvrt_cache_wrap).  The plugin checks what
     * only its device API can tell (that the range is memory of its device:
     * mapped host memory, or a device pointer of device_id) and refuses
     * otherwise with KVRT_ERR_INVALID naming what it found.  Every function
     * takes the buffer as one of its own; buffer_free frees the handle and
     * never the memory; buffer_address gives `address`.  Optional (NULL:
     * the backend cannot adopt memory, and the core refuses by name); a
     * plugin that sets it also describes its device (describe). */
    int (*buffer_import)(kvrt_plugin_device *dev, const struct kvrt_plugin_import *memory, kvrt_plugin_buffer **out,
                         kvrt_plugin_error *err);
};

/*
 * Growth rule: fields are only ever appended, each minor version adds them
 * after the last, and `size` says which ones a plugin was built with.  The
 * core reads a field only when the descriptor is large enough to hold it.
 */
#define KVRT_PLUGIN_HAS(desc, field)                                                                                   \
    ((desc)->size >= offsetof(struct kvrt_plugin_descriptor, field) + sizeof((desc)->field))

/* Size of an ABI 1.0 descriptor: the smallest the core accepts. */
#define KVRT_PLUGIN_DESCRIPTOR_MIN_SIZE (offsetof(struct kvrt_plugin_descriptor, decode) + sizeof(void (*)(void)))

/* Convenience for plugin authors: define the entry point. */
#define KVRT_PLUGIN_DEFINE_ENTRY(descriptor)                                                                           \
    KVRT_PLUGIN_EXPORT const struct kvrt_plugin_descriptor *kvrt_plugin_entry(void);                                   \
    KVRT_PLUGIN_EXPORT const struct kvrt_plugin_descriptor *kvrt_plugin_entry(void)                                    \
    {                                                                                                                  \
        return &(descriptor);                                                                                          \
    }

#ifdef __cplusplus
}
#endif
#endif
