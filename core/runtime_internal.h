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

/* Caller-owned memory to hand back (kvrt_cache_wrap): run after the cache
 * is gone, outside the runtime lock (teardown.c). */
struct kvrt_release {
    void (*fn)(void *user, void *address);
    void *user;
    void *address;
    struct kvrt_release *next;
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
    /* Over caller memory: its release, or NULL (none, or an allocated cache). */
    struct kvrt_release *release;
    bool wrapped;
    /* References besides the cache itself: live DLPack tensors and
     * kvrt_cache_retain; guarded by the runtime lock.  A cache destroyed
     * while some live is only marked, and freed by the last (teardown.c). */
    uint64_t refs;
    bool destroyed;
    struct kvrt_cache *prev, *next;
};

/* Buffers and caches (buffer.c, cache.c). */
int kvrt_buffer_create_internal(kvrt_backend *b, uint64_t bytes, bool owned_by_cache, kvrt_buffer **out);
/* A cache's buffer over caller memory, through the plugin's buffer_import. */
int kvrt_buffer_import_internal(kvrt_backend *b, const struct kvrt_plugin_import *memory, const char *fn,
                                kvrt_buffer **out);
void kvrt_buffer_destroy_internal(kvrt_buffer *buf);
/* A cache without its buffer, everything checked and described; fn names
 * the public function in messages. */
int kvrt_cache_prepare(kvrt_backend *b, const kvrt_placement *p, const char *fn, kvrt_cache **out);
/* kvrt_cache_wrap, with fn naming the public function in messages. */
struct kvrt_memory;
int kvrt_cache_wrap_internal(kvrt_backend *b, const kvrt_placement *p, const struct kvrt_memory *memory, const char *fn,
                             kvrt_cache **out);
/* Make a cache with its buffer live in its backend's list. */
void kvrt_cache_link(kvrt_cache *c);
/* Free the struct; its release (if any) is moved onto *pending. */
void kvrt_cache_free(kvrt_cache *c, struct kvrt_release **pending);

/* Teardown (teardown.c).  With the runtime lock held: unlink and free a
 * cache, its release moved onto *pending for kvrt_release_run to call
 * once the lock is dropped. */
void kvrt_cache_destroy_locked(kvrt_cache *c, struct kvrt_release **pending);
void kvrt_release_run(struct kvrt_release *pending);
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
    uint64_t refs; /* references of all its caches (struct kvrt_cache) */
    bool closing;  /* kvrt_runtime_close ran; the last reference finishes it */
};

/* Release everything (teardown.c); no reference may be alive. */
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
/* Whether the plugin adopts caller memory (ABI 1.2 buffer_import). */
bool kvrt_plugin_imports(const struct kvrt_plugin_descriptor *d);
/* Element types decode computes on (ABI 1.1 decode_dtypes, else dtypes). */
uint32_t kvrt_plugin_decode_dtypes(const struct kvrt_plugin_descriptor *d);
/* Device type and memory kind names for messages ("CPU", "GPU", "host", ...). */
const char *kvrt_device_type_text(int type);
const char *kvrt_memory_kind_text(int memory);

#endif
