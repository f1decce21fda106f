/*
 * kvrt — the runtime: plugins, binding, buffers, caches and operations.
 *
 *   kvrt_runtime_open()       discover plugins (KVRT_PLUGIN_PATH, install dir)
 *   kvrt_runtime_resolve()    one layout across the backends that touch a cache
 *   kvrt_runtime_bind()       check the layout against the declaration, then bind
 *   kvrt_cache_create()       one device allocation laid out by a placement
 *   kvrt_cache_write() ...    device work
 *   kvrt_runtime_close()      release everything
 *
 * Handles are opaque.  A runtime and its backends may be shared by threads;
 * different caches may be used from different threads at once; one cache is
 * used by one thread at a time.
 */
#ifndef KVRT_RUNTIME_H
#define KVRT_RUNTIME_H

#include <stdbool.h>
#include <kvrt/common.h>
#include <kvrt/device.h>
#include <kvrt/layout.h>
#include <kvrt/dtype.h>
#include <kvrt/placement.h>
#include <kvrt/settings.h>
#include <kvrt/trace.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kvrt_runtime kvrt_runtime;
typedef struct kvrt_backend kvrt_backend;
typedef struct kvrt_buffer kvrt_buffer;
typedef struct kvrt_cache kvrt_cache;

/* Log levels of the runtime's log callback. */
enum kvrt_log_level {
    KVRT_LOG_ERROR = 0,
    KVRT_LOG_WARNING = 1,
    KVRT_LOG_INFO = 2,
    KVRT_LOG_DEBUG = 3,
};

struct kvrt_runtime_options {
    /* Colon-separated directories or plugin files searched first.  NULL:
     * KVRT_PLUGIN_PATH (ignored in setuid/setgid processes). */
    const char *plugin_path;
    /* Also search the build tree (when libkvrt runs uninstalled) and
     * <libdir>/kvrt/plugins.  Default true. */
    bool search_default_paths;
    /* Receives every report (skipped plugins, passed-over backends, layout
     * warnings).  NULL: messages at KVRT_LOG_WARNING and above go to stderr
     * when KVRT_DEBUG is set, else they are only kept for kvrt_runtime_*(). */
    void (*log)(void *user, enum kvrt_log_level level, const char *message);
    void *log_user;
    uint8_t reserved[64];
};

/** Defaults: plugin_path NULL, search_default_paths true, no log callback. */
KVRT_API void kvrt_runtime_options_default(struct kvrt_runtime_options *options);

/** Discover plugins.  A bad plugin is skipped with a reason, never fatal. */
KVRT_API int kvrt_runtime_open(const struct kvrt_runtime_options *options, kvrt_runtime **out);
/** Destroy every cache, buffer and backend of the runtime, then the runtime.
 *  A cache with references alive (DLPack tensors, kvrt_cache_retain) lives
 *  on, with its backend, the buffers made on that backend and the plugin,
 *  until the last reference goes, which finishes the close. */
KVRT_API void kvrt_runtime_close(kvrt_runtime *rt);

struct kvrt_plugin_info {
    const char *name;
    const char *path;
    const char *version;
    const char *description;
    unsigned abi_major, abi_minor;
    bool any_layout;
    size_t num_layouts;
    enum kvrt_layout layouts[KVRT_NUM_LAYOUTS]; /* in the plugin's preference order */
    uint32_t dtypes;                            /* 1u << enum kvrt_dtype */
    uint32_t ops;                               /* enum kvrt_op bits (kvrt/plugin.h) */
    bool available;                             /* probe found a device */
    const char *reason;                         /* why not available, "" otherwise */
    /* Since API 1.0 (plugin ABI 1.1); UNKNOWN / OPAQUE / "" when the plugin
     * does not describe its device or probe failed. */
    enum kvrt_device_type device_type;
    enum kvrt_memory_kind memory;
    const char *device_name;
    uint32_t decode_dtypes; /* 1u << enum kvrt_dtype that decode computes on */
    /* Since API 1.1 (plugin ABI 1.2): the alignment kvrt_cache_wrap needs of
     * the memory's address; 0 when the backend cannot adopt memory. */
    uint32_t import_alignment;
    /* Room for fields of later API minors; libkvrt writes zeroes. */
    uint8_t reserved[28];
};

KVRT_API size_t kvrt_runtime_num_plugins(const kvrt_runtime *rt);
/** Plugin i in search order; strings stay valid with the runtime. */
KVRT_API int kvrt_runtime_plugin_info(const kvrt_runtime *rt, size_t i, struct kvrt_plugin_info *out);
/** Index of the plugin called `name` (index may be NULL to ask only
 *  whether it exists); KVRT_ERR_NODEV listing the names if none. */
KVRT_API int kvrt_runtime_find_plugin(const kvrt_runtime *rt, const char *name, size_t *index);
/** true when plugin i declares `layout` (or any). */
KVRT_API bool kvrt_runtime_plugin_admits(const kvrt_runtime *rt, size_t i, enum kvrt_layout layout);

/** Files passed over during discovery, each with its reason (path and
 *  reason may each be NULL). */
KVRT_API size_t kvrt_runtime_num_skipped(const kvrt_runtime *rt);
KVRT_API int kvrt_runtime_skipped(const kvrt_runtime *rt, size_t i, const char **path, const char **reason);

/**
 * The order automatic selection tries backends in, as one line of text for
 * messages, help and docs (docs/runtime.md): the built-in device backends,
 * then third-party plugins in search order, then cpu, and last any other
 * backend whose device is the host CPU (an OpenCL CPU device such as PoCL
 * emulates what "cpu" runs natively).  Rendered from the table selection
 * ranks by, so it cannot drift from it.
 */
KVRT_API const char *kvrt_runtime_backend_priority(void);

/**
 * The backend that binding would choose without a layout constraint:
 * KVRT_BACKEND when set, else the first plugin in priority order
 * (kvrt_runtime_backend_priority) that has a device and binds.
 * To know that a backend binds, each candidate not bound yet is bound once,
 * at the layout it would most likely get (VLLM_KV_CACHE_LAYOUT when it
 * declares it, else its first choice); the binding is kept and handed out
 * by the next kvrt_runtime_bind of that backend and layout.  A backend whose
 * bind fails is passed over (a "passed over" trace step and a warning in
 * the log) and never asked again by automatic choice in this runtime.
 * @return KVRT_ERR_NODEV listing each backend's reason when none works.
 */
KVRT_API int kvrt_runtime_default_backend(const kvrt_runtime *rt, const char **name);

/**
 * The backend binding would use, with where its name came from: `name`
 * when not NULL (source ARGUMENT), else KVRT_BACKEND when set
 * (ENVIRONMENT; set but empty is an error), else the choice of
 * kvrt_runtime_default_backend (DEFAULT).  A name given either way must be
 * a plugin found.  *out stays valid with the runtime; *source may be NULL,
 * and kvrt_setting_origin words it for output.
 * @return KVRT_OK; KVRT_ERR_INVALID for KVRT_BACKEND set but empty;
 *   KVRT_ERR_NODEV for an unknown name (naming the plugins found) or when
 *   no backend works.
 */
KVRT_API int kvrt_runtime_choose_backend(const kvrt_runtime *rt, const char *name, const char **out,
                                         enum kvrt_setting_source *source);

/**
 * Resolve one layout (docs/design.md §7) across the named backends (their
 * declarations are read, no device code runs).  backends NULL / n 0: the
 * default backend.  preference: a soft preference as spelled, or NULL.
 * The result is recorded in the runtime: a later, different result is
 * KVRT_ERR_STATE.  kvrt_runtime_trace() explains every step.
 */
KVRT_API int kvrt_runtime_resolve(kvrt_runtime *rt, const char *const *backends, size_t num_backends, bool mixed_shapes,
                                  const char *preference, enum kvrt_layout *out);

/**
 * kvrt_runtime_resolve for the layers the cache will hold: their shapes
 * narrow the candidates as kvrt_resolver_set_groups says, so the result is
 * a layout kvrt_placement_create accepts for these groups.
 */
KVRT_API int kvrt_runtime_resolve_groups(kvrt_runtime *rt, const char *const *backends, size_t num_backends,
                                         const struct kvrt_group *groups, size_t num_groups, const char *preference,
                                         enum kvrt_layout *out);
/**
 * The resolution and selection trace so far, one step per line, rendered
 * from the steps below.  Valid until the next call that adds to the trace
 * (kvrt_runtime_resolve, kvrt_runtime_bind, kvrt_runtime_default_backend)
 * or kvrt_runtime_close.
 */
KVRT_API const char *kvrt_runtime_trace(const kvrt_runtime *rt);

/** How many steps the runtime's trace holds. */
KVRT_API size_t kvrt_runtime_num_trace_steps(const kvrt_runtime *rt);

/**
 * Step i (0 = oldest) of the runtime's trace into *out (kvrt/trace.h): the
 * steps of each kvrt_runtime_resolve, then the runtime's own (recorded,
 * refused, preferred, bound, passed over).  The strings stay valid as
 * kvrt_runtime_trace()'s text does.  KVRT_ERR_INVALID for i out of range.
 */
KVRT_API int kvrt_runtime_trace_step(const kvrt_runtime *rt, size_t i, struct kvrt_trace_step *out);

/**
 * Every step of the runtime's trace as one JSON array, oldest first, each
 * step as kvrt_resolver_json writes its "steps" ({"step": the kind's name,
 * "text", and "layout" and "backend" where set}): what `kvrt explain
 * --json` prints as "steps" and Runtime.trace_steps returns.  *out is the
 * caller's: kvrt_free it.
 */
KVRT_API int kvrt_runtime_trace_json(const kvrt_runtime *rt, char **out);

/**
 * Bind a backend for `layout_name` (as the user spelled it).
 * backend NULL: KVRT_BACKEND, else the first backend in priority order
 * (kvrt_runtime_backend_priority) that admits the layout, has a device and binds; each one passed over (an
 * undeclared layout, no device, a bind that failed) is reported in the trace
 * and the log, and only when all fail is it KVRT_ERR_NODEV listing each
 * one's reason.  A backend named (argument or KVRT_BACKEND) fails hard.
 * The layout is checked against the plugin's declaration before any plugin
 * function other than reading the descriptor runs.
 * @return KVRT_OK; KVRT_ERR_INVALID for a bad name; KVRT_ERR_REFUSED when
 *   the backend does not declare the layout (names the layout as spelled,
 *   the backend and its layouts); KVRT_ERR_NODEV when no device.
 */
KVRT_API int kvrt_runtime_bind(kvrt_runtime *rt, const char *backend, const char *layout_name, kvrt_backend **out);

/**
 * kvrt_runtime_bind for a layout already parsed (or resolved): the same
 * choice of backend, checks and refusals, naming the layout canonically.
 * Names are parsed once, where they come in; this is the call for the
 * value they became.
 * @return as kvrt_runtime_bind; KVRT_ERR_INVALID for a value outside
 *   enum kvrt_layout.
 */
KVRT_API int kvrt_runtime_bind_layout(kvrt_runtime *rt, const char *backend, enum kvrt_layout layout,
                                      kvrt_backend **out);

KVRT_API const char *kvrt_backend_name(const kvrt_backend *b);

/* The device a bound backend drives (plugin ABI 1.1 `describe`). */
struct kvrt_device_info {
    enum kvrt_device_type type;
    enum kvrt_memory_kind memory;
    int32_t device_id;
    char name[KVRT_DEVICE_NAME_MAX];
    uint8_t reserved[64];
};
/** Fill `out` (zeroed first).  A plugin that does not describe its device
 *  gives type UNKNOWN, memory OPAQUE and name "". */
KVRT_API int kvrt_backend_device_info(const kvrt_backend *b, struct kvrt_device_info *out);
/**
 * The backend's own copy bandwidth, for benchmarks: `bytes` copied between
 * two of its buffers, timed by the plugin over many copies, in bytes per
 * second (each byte counted once).
 * @return KVRT_ERR_UNSUPPORTED, naming the backend, when its plugin does not
 *   measure (then compare with host memcpy).
 */
KVRT_API int kvrt_backend_copy_bandwidth(kvrt_backend *b, uint64_t bytes, double *bytes_per_second);
KVRT_API enum kvrt_layout kvrt_backend_layout(const kvrt_backend *b);
KVRT_API bool kvrt_backend_supports_dtype(const kvrt_backend *b, enum kvrt_dtype dtype);
KVRT_API uint32_t kvrt_backend_ops(const kvrt_backend *b);

/* Device buffers. */
KVRT_API int kvrt_buffer_create(kvrt_backend *b, uint64_t bytes, kvrt_buffer **out);
KVRT_API void kvrt_buffer_destroy(kvrt_buffer *buf);
KVRT_API uint64_t kvrt_buffer_size(const kvrt_buffer *buf);
KVRT_API int kvrt_buffer_upload(kvrt_buffer *buf, uint64_t offset, const void *src, uint64_t bytes);
KVRT_API int kvrt_buffer_download(kvrt_buffer *buf, uint64_t offset, void *dst, uint64_t bytes);
KVRT_API int kvrt_buffer_zero(kvrt_buffer *buf, uint64_t offset, uint64_t bytes);
/**
 * The address of the buffer's first byte, for zero-copy export (DLPack) and
 * RDMA registration: a host pointer (kind KVRT_MEMORY_HOST) or a device
 * pointer (KVRT_MEMORY_CUDA / KVRT_MEMORY_ROCM).  It stays valid while the
 * buffer lives.  kind may be NULL.
 * @return KVRT_ERR_UNSUPPORTED, naming the backend, when its buffers have no
 *   address in this process (OpenCL); *addr is then NULL and *kind OPAQUE.
 */
KVRT_API int kvrt_buffer_address(kvrt_buffer *buf, void **addr, enum kvrt_memory_kind *kind);

/**
 * Create a cache laid out by `p` (whose layout must be the backend's):
 * one device allocation of kvrt_placement_size(p) bytes, zeroed.  The
 * placement is copied; layers are numbered in placement order (sets in
 * order, layers within each set).
 */
KVRT_API int kvrt_cache_create(kvrt_backend *b, const kvrt_placement *p, kvrt_cache **out);
/** Destroy the cache.  With references alive (exported DLPack tensors,
 *  kvrt_cache_retain) its memory lives on until the last goes. */
KVRT_API void kvrt_cache_destroy(kvrt_cache *c);
/**
 * Take a reference that keeps the cache's memory, backend and plugin alive
 * past kvrt_cache_destroy and kvrt_runtime_close, as an exported tensor
 * does: for a consumer that registers the memory elsewhere (a transfer
 * engine registering it with its network).  Match each with one
 * kvrt_cache_release.  Until then the holder may go on using the cache
 * and the buffers it made on its backend (a closing runtime keeps them);
 * to the one who destroyed or closed, the handles are gone.
 * @return KVRT_ERR_STATE once the cache was destroyed or its runtime closed.
 */
KVRT_API int kvrt_cache_retain(kvrt_cache *c);
/** Drop a reference: the last one of a destroyed cache frees it (and hands
 *  caller memory back, kvrt/wrap.h), of a closed runtime finishes the close. */
KVRT_API void kvrt_cache_release(kvrt_cache *c);
KVRT_API kvrt_buffer *kvrt_cache_buffer(kvrt_cache *c);
KVRT_API const kvrt_placement *kvrt_cache_placement(const kvrt_cache *c);
KVRT_API uint64_t kvrt_cache_num_layers(const kvrt_cache *c);
/** Global layer index of a named layer. */
KVRT_API int kvrt_cache_layer_index(const kvrt_cache *c, const char *name, uint32_t *layer);
/** Bytes of the staging buffer for `num_blocks` blocks (all layers). */
KVRT_API int kvrt_cache_staging_bytes(const kvrt_cache *c, uint64_t num_blocks, uint64_t *bytes);

/** Write K [T, H, D] and V [T, H, Dv] of layer `layer` (v NULL when Dv is 0);
 *  slots[t] < 0 skips token t.  Nothing is written when an argument is bad. */
KVRT_API int kvrt_cache_write(kvrt_cache *c, uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_buffer *k,
                              uint64_t k_offset, kvrt_buffer *v, uint64_t v_offset);
/** Read K and V of the given slots back (rows of negative slots untouched). */
KVRT_API int kvrt_cache_read(kvrt_cache *c, uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_buffer *k,
                             uint64_t k_offset, kvrt_buffer *v, uint64_t v_offset);
/** pairs[2i] -> pairs[2i+1], every layer. */
KVRT_API int kvrt_cache_copy_blocks(kvrt_cache *c, uint64_t num_pairs, const int64_t *pairs);
KVRT_API int kvrt_cache_gather(kvrt_cache *c, uint64_t num_blocks, const int64_t *block_ids, kvrt_buffer *staging,
                               uint64_t staging_offset);
KVRT_API int kvrt_cache_scatter(kvrt_cache *c, uint64_t num_blocks, const int64_t *block_ids, kvrt_buffer *staging,
                                uint64_t staging_offset);

struct kvrt_decode_params {
    uint32_t num_seqs;
    uint32_t num_q_heads; /* a multiple of the layer's KV heads */
    kvrt_buffer *q;       /* [S, Hq, D] in the layer's dtype */
    uint64_t q_offset;
    kvrt_buffer *out; /* [S, Hq, Dv] */
    uint64_t out_offset;
    const int32_t *block_tables; /* host [S, max_blocks_per_seq] */
    uint32_t max_blocks_per_seq;
    const int32_t *seq_lens; /* host [S], 1 .. max_blocks_per_seq * block_size */
    float scale;
    uint8_t reserved[32];
};

/** Defaults: zeroes, scale 1. */
KVRT_API void kvrt_decode_params_default(struct kvrt_decode_params *params);
/** Single-query paged attention decode on one layer (tokens_per_state 1). */
KVRT_API int kvrt_cache_decode(kvrt_cache *c, uint32_t layer, const struct kvrt_decode_params *params);

#ifdef __cplusplus
}
#endif
#endif
