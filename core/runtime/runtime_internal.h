/*
 * Internal, the runtime layer, the top: the runtime object (runtime.c),
 * binding (bind.c), caches over caller memory (cache_wrap.c), DLPack
 * (dlpack.c, dlpack_import.c) and the deferred teardown of caches and
 * runtimes (teardown.c).  The layers below, each calling only those under
 * it: buffers and caches (cache_internal.h), plugins (plugin_internal.h),
 * the loader (loader.h).
 *
 * Layer 8 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_RUNTIME_INTERNAL_H
#define KVRT_CORE_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include <kvrt/plugin.h>
#include <kvrt/resolve.h>
#include <kvrt/runtime.h>

#include "cache_internal.h"
#include "plugin_internal.h"
#include "trace.h"

struct kvrt_runtime {
    struct kvrt_runtime_options options;
    struct kvrt_log log; /* options.log, or stderr under KVRT_DEBUG */
    struct kvrt_plugins plugins;

    pthread_mutex_t lock; /* guards backends, probing, the record and the trace */
    kvrt_backend **backends;
    size_t num_backends;
    bool has_record; /* write-once result of kvrt_runtime_resolve */
    enum kvrt_layout record;
    struct kvrt_trace trace;
    uint64_t refs; /* references of all its caches (struct kvrt_cache) */
    bool closing;  /* kvrt_runtime_close ran; the last reference finishes it */
};

/* kvrt_cache_wrap, with fn naming the public function in messages
 * (cache_wrap.c). */
struct kvrt_memory;
int kvrt_cache_wrap_internal(kvrt_backend *b, const kvrt_placement *p, const struct kvrt_memory *memory, const char *fn,
                             kvrt_cache **out);

/* Teardown (teardown.c).  With the runtime lock held: unlink and free a
 * cache, its release moved onto *pending for kvrt_release_run to call
 * once the lock is dropped. */
void kvrt_cache_destroy_locked(kvrt_cache *c, struct kvrt_release **pending);
void kvrt_release_run(struct kvrt_release *pending);
/* Release everything; no reference may be alive. */
void kvrt_runtime_close_now(kvrt_runtime *rt);

#endif
