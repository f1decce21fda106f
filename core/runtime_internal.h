/* Internal: the runtime's objects, shared by loader, binding, buffers and caches. */
#ifndef KVRT_CORE_RUNTIME_INTERNAL_H
#define KVRT_CORE_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include <kvrt/plugin.h>
#include <kvrt/resolve.h>
#include <kvrt/runtime.h>

#include "strbuf.h"
#include "trace.h"

struct kvrt_loaded_plugin {
    char *path;
    void *handle;
    const struct kvrt_plugin_descriptor *desc;
    bool probed;
    bool available;
    char *reason; /* why not available ("" when available) */
    /* From the plugin's describe after a successful probe; type UNKNOWN,
     * memory OPAQUE, name "" when it has none (ABI 1.0) or it failed. */
    struct kvrt_plugin_device_info device;
    /* "failed to bind layout X: <plugin's message>" after its bind failed,
     * until one succeeds; NULL otherwise. */
    char *bind_failure;
};

struct kvrt_skipped_plugin {
    char *path;
    char *reason;
};

struct kvrt_backend {
    kvrt_runtime *rt;
    struct kvrt_buffer *buffers; /* every live buffer, for kvrt_runtime_close */
    struct kvrt_cache *caches;   /* every live cache */
    struct kvrt_loaded_plugin *plugin;
    kvrt_plugin_device *dev;
    enum kvrt_layout layout;
    struct kvrt_plugin_host host;
    /* Bound only to learn that the plugin binds (kvrt_runtime_default_backend);
     * handed out by the next bind of the plugin with this layout. */
    bool spare;
};

struct kvrt_buffer {
    kvrt_backend *backend;
    kvrt_plugin_buffer *handle;
    uint64_t size;
    bool owned_by_cache;
    struct kvrt_buffer *prev, *next;
};

struct kvrt_cache {
    kvrt_backend *backend;
    kvrt_buffer *buffer;
    kvrt_placement *placement;
    struct kvrt_plugin_cache desc;
    struct kvrt_plugin_layer *layers;
    const char **layer_names;
    struct kvrt_spec_info *layer_info; /* per layer */
    const struct kvrt_spec **layer_spec;
    uint64_t staging_bytes_per_block;
    /* Live DLPack tensors (dlpack.c); guarded by the runtime lock.  A cache
     * destroyed while some live is only marked, and freed by the last. */
    uint64_t exports;
    bool destroyed;
    struct kvrt_cache *prev, *next;
};

/* Buffers and caches (buffer.c, cache.c). */
int kvrt_buffer_create_internal(kvrt_backend *b, uint64_t bytes, bool owned_by_cache, kvrt_buffer **out);
void kvrt_buffer_destroy_internal(kvrt_buffer *buf);
void kvrt_cache_destroy_locked(kvrt_cache *c);
/* A reference for an exported tensor: KVRT_ERR_STATE once destroyed. */
int kvrt_cache_retain(kvrt_cache *c);
/* Drop it; frees a destroyed cache and finishes a deferred close at the last. */
void kvrt_cache_release(kvrt_cache *c);
int kvrt_plugin_status(const kvrt_backend *b, int status, const kvrt_plugin_error *err, const char *op);

struct kvrt_runtime {
    struct kvrt_runtime_options options;
    struct kvrt_loaded_plugin *plugins;
    size_t num_plugins;
    struct kvrt_skipped_plugin *skipped;
    size_t num_skipped;

    pthread_mutex_t lock; /* guards backends, probing, the record and the trace */
    kvrt_backend **backends;
    size_t num_backends;
    bool has_record; /* write-once result of kvrt_runtime_resolve */
    enum kvrt_layout record;
    struct kvrt_trace trace;
    uint64_t exports; /* live DLPack tensors of all its caches */
    bool closing;     /* kvrt_runtime_close ran; the last tensor finishes it */
};

/* Release everything (runtime.c); no tensor may be alive. */
void kvrt_runtime_close_now(kvrt_runtime *rt);

/* Loader (loader.c). */
int kvrt_loader_discover(kvrt_runtime *rt);
void kvrt_loader_release(kvrt_runtime *rt);

/* Descriptor validation (plugin_validate.c); why gets the reason. */
int kvrt_plugin_validate(const struct kvrt_plugin_descriptor *d, char *why, size_t why_size);

/* Probe a plugin once, lazily, and ask it to describe its device (runtime.c). */
void kvrt_plugin_probe(kvrt_runtime *rt, struct kvrt_loaded_plugin *p);

/* Report through the runtime's log (runtime.c). */
void kvrt_runtime_log(const kvrt_runtime *rt, enum kvrt_log_level level, const char *fmt, ...) KVRT_PRINTF(3, 4);

/* Environment read safely for setuid/setgid programs (secure_env.c). */
const char *kvrt_secure_getenv(const char *name);

/* Layouts a plugin declares, as text ("LBNHC, LBHNC" or "any"). */
void kvrt_plugin_layouts_text(const struct kvrt_plugin_descriptor *d, char *out, size_t size);
bool kvrt_plugin_declares(const struct kvrt_plugin_descriptor *d, enum kvrt_layout layout);
/* Element types decode computes on (ABI 1.1 decode_dtypes, else dtypes). */
uint32_t kvrt_plugin_decode_dtypes(const struct kvrt_plugin_descriptor *d);
/* Device type and memory kind names for messages ("CPU", "GPU", "host", ...). */
const char *kvrt_device_type_text(int type);
const char *kvrt_memory_kind_text(int memory);

#endif
