/*
 * Internal, the buffer and cache layer (buffer.c, cache.c, cache_ops.c):
 * device buffers and caches on a bound backend, every operation checked
 * before its plugin runs.  It calls the plugin layer below it; binding,
 * the runtime and the teardown of caches (runtime_internal.h) build on it.
 *
 * Layer 7 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_CACHE_INTERNAL_H
#define KVRT_CORE_CACHE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <kvrt/plugin.h>
#include <kvrt/runtime.h>

#include "plugin_internal.h"

/* A plugin bound for one layout (made by bind.c). */
struct kvrt_backend {
    kvrt_runtime *rt;
    pthread_mutex_t *lock;       /* the runtime's: guards the lists below */
    const struct kvrt_log *log;  /* the runtime's */
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

int kvrt_buffer_create_internal(kvrt_backend *b, uint64_t bytes, bool owned_by_cache, kvrt_buffer **out);
/* A cache's buffer over caller memory, through the plugin's buffer_import;
 * fn names the public function in messages. */
int kvrt_buffer_import_internal(kvrt_backend *b, const struct kvrt_plugin_import *memory, const char *fn,
                                kvrt_buffer **out);
/* With the backend's lock held. */
void kvrt_buffer_destroy_internal(kvrt_buffer *buf);

/* A cache without its buffer, everything checked and described; fn names
 * the public function in messages. */
int kvrt_cache_prepare(kvrt_backend *b, const kvrt_placement *p, const char *fn, kvrt_cache **out);
/* Make a cache with its buffer live in its backend's list. */
void kvrt_cache_link(kvrt_cache *c);
/* Free the struct; its release (if any) is moved onto *pending. */
void kvrt_cache_free(kvrt_cache *c, struct kvrt_release **pending);

#endif
