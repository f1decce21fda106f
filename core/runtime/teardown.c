/*
 * The end of caches and runtimes, in one place because it is deferred.
 *
 * A cache's memory is held by the cache itself, by every DLPack tensor
 * exported from it and by every kvrt_cache_retain (a transfer
 * registration).  kvrt_cache_destroy and kvrt_runtime_close with such
 * references alive only mark the cache (and a closing runtime keeps the
 * buffers of its backend); the last reference frees it, and the last one
 * of a closing runtime finishes the close.  Caller-owned
 * memory (kvrt_cache_wrap) is handed back through its release callback
 * after the cache is gone and outside the runtime lock, since the callback
 * may call kvrt (a DLPack deleter of a tensor kvrt exported, say).
 *
 * Layer 8 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <stdlib.h>

#include "error.h"
#include "runtime_internal.h"

void kvrt_release_run(struct kvrt_release *pending)
{
    while (pending) {
        struct kvrt_release *r = pending;
        pending = r->next;
        if (r->fn)
            r->fn(r->user, r->address);
        free(r);
    }
}

void kvrt_cache_destroy_locked(kvrt_cache *c, struct kvrt_release **pending)
{
    kvrt_backend *b = c->backend;
    if (c->prev)
        c->prev->next = c->next;
    else
        b->caches = c->next;
    if (c->next)
        c->next->prev = c->prev;
    /* The plugin lets go of the memory before its owner gets it back. */
    kvrt_buffer_destroy_internal(c->buffer);
    kvrt_cache_free(c, pending);
}

void kvrt_cache_destroy(kvrt_cache *c)
{
    if (!c)
        return;
    kvrt_runtime *rt = c->backend->rt;
    struct kvrt_release *pending = NULL;
    pthread_mutex_lock(&rt->lock);
    if (c->refs > 0)
        c->destroyed = true;
    else
        kvrt_cache_destroy_locked(c, &pending);
    pthread_mutex_unlock(&rt->lock);
    kvrt_release_run(pending);
}

int kvrt_cache_retain(kvrt_cache *c)
{
    if (!c)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_cache_retain: the cache is NULL");
    kvrt_runtime *rt = c->backend->rt;
    int status = KVRT_OK;
    pthread_mutex_lock(&rt->lock);
    if (c->destroyed || rt->closing)
        status = kvrt_fail(KVRT_ERR_STATE, "the cache was destroyed (its memory lives on only for the references "
                                           "already taken on it)");
    else if (c->refs == UINT64_MAX)
        status = kvrt_fail(KVRT_ERR_OVERFLOW, "the cache has %llu live references, the most it can count",
                           (unsigned long long)c->refs);
    else {
        c->refs++;
        rt->refs++;
    }
    pthread_mutex_unlock(&rt->lock);
    return status;
}

void kvrt_cache_release(kvrt_cache *c)
{
    if (!c)
        return;
    kvrt_runtime *rt = c->backend->rt;
    struct kvrt_release *pending = NULL;
    pthread_mutex_lock(&rt->lock);
    if (c->refs == 0) {
        pthread_mutex_unlock(&rt->lock);
        kvrt_log(&rt->log, KVRT_LOG_WARNING, "kvrt_cache_release: the cache holds no reference to release");
        return;
    }
    c->refs--;
    rt->refs--;
    if (c->refs == 0 && c->destroyed)
        kvrt_cache_destroy_locked(c, &pending);
    bool finish_close = rt->closing && rt->refs == 0;
    pthread_mutex_unlock(&rt->lock);
    kvrt_release_run(pending);
    if (finish_close)
        kvrt_runtime_close_now(rt);
}

void kvrt_runtime_close(kvrt_runtime *rt)
{
    if (!rt)
        return;
    /* Caches with live references keep their memory, and so their backend,
     * device and plugin, until the last one goes; the rest goes now.  A
     * backend kept so keeps its buffers too: the holder may work through
     * buffers it made there (a transfer agent's staging, registered with
     * its network and read by its peers). */
    struct kvrt_release *pending = NULL;
    pthread_mutex_lock(&rt->lock);
    for (size_t i = 0; i < rt->num_backends; i++) {
        kvrt_backend *b = rt->backends[i];
        bool held = false;
        for (kvrt_cache *c = b->caches, *next; c; c = next) {
            next = c->next;
            if (c->refs > 0)
                c->destroyed = held = true;
            else
                kvrt_cache_destroy_locked(c, &pending);
        }
        for (kvrt_buffer *buf = b->buffers, *next; buf && !held; buf = next) {
            next = buf->next;
            if (!buf->owned_by_cache)
                kvrt_buffer_destroy_internal(buf);
        }
    }
    bool defer = rt->refs > 0;
    rt->closing = defer;
    pthread_mutex_unlock(&rt->lock);
    kvrt_release_run(pending);
    if (!defer)
        kvrt_runtime_close_now(rt);
}

void kvrt_runtime_close_now(kvrt_runtime *rt)
{
    struct kvrt_release *pending = NULL;
    for (size_t i = 0; i < rt->num_backends; i++) {
        kvrt_backend *b = rt->backends[i];
        /* Caches and buffers the caller left behind go with their runtime. */
        while (b->caches)
            kvrt_cache_destroy_locked(b->caches, &pending);
        while (b->buffers)
            kvrt_buffer_destroy_internal(b->buffers);
        b->plugin->desc->unbind(b->dev);
        free(b);
    }
    free(rt->backends);
    kvrt_trace_free(&rt->trace);
    kvrt_plugins_release(&rt->plugins);
    pthread_mutex_destroy(&rt->lock);
    free(rt);
    kvrt_release_run(pending);
}
