/* Device buffers on a bound backend: created, imported and destroyed, each
 * linked to its backend.
 *
 * Layer 7 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "error.h"
#include "cache_internal.h"

static void link_buffer(kvrt_backend *b, kvrt_buffer *buf)
{
    buf->backend = b;
    pthread_mutex_lock(b->lock);
    buf->next = b->buffers;
    if (b->buffers)
        b->buffers->prev = buf;
    b->buffers = buf;
    pthread_mutex_unlock(b->lock);
}

int kvrt_buffer_create_internal(kvrt_backend *b, uint64_t bytes, bool owned_by_cache, kvrt_buffer **out)
{
    if (!b || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_buffer_create: NULL argument");
    *out = NULL;
    if (bytes == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_buffer_create: size 0; a buffer needs at least 1 byte");
    kvrt_buffer *buf = calloc(1, sizeof(*buf));
    if (!buf)
        return kvrt_fail(KVRT_ERR_NOMEM, "kvrt_buffer_create: out of memory");
    kvrt_plugin_error err;
    err.message[0] = '\0';
    int status = b->plugin->desc->buffer_alloc(b->dev, bytes, &buf->handle, &err);
    if (status == KVRT_OK && !buf->handle) {
        /* The handle is all the core ever passes back; a NULL one would be
         * handed to the plugin's own functions as if it were a buffer. */
        free(buf);
        return kvrt_fail(KVRT_ERR_PLUGIN,
                         "backend \"%s\": allocating %llu bytes returned success "
                         "but no buffer (a NULL handle); the plugin is at fault",
                         b->plugin->desc->name, (unsigned long long)bytes);
    }
    if (status != KVRT_OK) {
        free(buf);
        char op[64];
        snprintf(op, sizeof(op), "allocating %llu bytes", (unsigned long long)bytes);
        return kvrt_plugin_status(b->plugin, status, &err, op);
    }
    buf->size = bytes;
    buf->owned_by_cache = owned_by_cache;
    link_buffer(b, buf);
    *out = buf;
    return KVRT_OK;
}

int kvrt_buffer_import_internal(kvrt_backend *b, const struct kvrt_plugin_import *memory, const char *fn,
                                kvrt_buffer **out)
{
    *out = NULL;
    kvrt_buffer *buf = calloc(1, sizeof(*buf));
    if (!buf)
        return kvrt_fail(KVRT_ERR_NOMEM, "%s: out of memory", fn);
    kvrt_plugin_error err;
    err.message[0] = '\0';
    int status = b->plugin->desc->buffer_import(b->dev, memory, &buf->handle, &err);
    if (status == KVRT_OK && !buf->handle)
        status = kvrt_fail(KVRT_ERR_PLUGIN,
                           "backend \"%s\": importing %llu bytes returned success but no buffer (a NULL "
                           "handle); the plugin is at fault",
                           b->plugin->desc->name, (unsigned long long)memory->bytes);
    else if (status != KVRT_OK)
        status = kvrt_plugin_status(b->plugin, status, &err, "buffer_import");
    if (status != KVRT_OK) {
        free(buf);
        return status;
    }
    buf->size = memory->bytes;
    buf->owned_by_cache = true;
    link_buffer(b, buf);
    *out = buf;
    return KVRT_OK;
}

int kvrt_buffer_create(kvrt_backend *b, uint64_t bytes, kvrt_buffer **out)
{
    return kvrt_buffer_create_internal(b, bytes, false, out);
}

/* Caller holds the runtime lock. */
static void unlink_buffer(kvrt_buffer *buf)
{
    kvrt_backend *b = buf->backend;
    if (buf->prev)
        buf->prev->next = buf->next;
    else
        b->buffers = buf->next;
    if (buf->next)
        buf->next->prev = buf->prev;
}

void kvrt_buffer_destroy_internal(kvrt_buffer *buf)
{
    unlink_buffer(buf);
    buf->backend->plugin->desc->buffer_free(buf->backend->dev, buf->handle);
    free(buf);
}

void kvrt_buffer_destroy(kvrt_buffer *buf)
{
    if (!buf)
        return;
    if (buf->owned_by_cache) {
        kvrt_log(buf->backend->log, KVRT_LOG_WARNING,
                 "kvrt_buffer_destroy: this buffer belongs to a cache; destroy the cache instead");
        return;
    }
    pthread_mutex_t *lock = buf->backend->lock;
    pthread_mutex_lock(lock);
    kvrt_buffer_destroy_internal(buf);
    pthread_mutex_unlock(lock);
}

uint64_t kvrt_buffer_size(const kvrt_buffer *buf)
{
    return buf ? buf->size : 0;
}

static int check_range(const kvrt_buffer *buf, uint64_t offset, uint64_t bytes, const char *fn)
{
    uint64_t end;
    if (!buf)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: buffer is NULL", fn);
    if (kvrt_add_overflow(offset, bytes, &end) || end > buf->size)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: range [%llu, %llu + %llu) is outside the buffer of %llu bytes", fn,
                         (unsigned long long)offset, (unsigned long long)offset, (unsigned long long)bytes,
                         (unsigned long long)buf->size);
    return KVRT_OK;
}

/* A backend that exposes host addresses lets a caller pass a pointer into
 * a buffer as the host side of that same buffer's upload or download: an
 * overlapping memcpy.  Refused like the cache overlaps in cache_ops.c. */
static int check_host_overlap(kvrt_buffer *buf, uint64_t offset, const void *host, uint64_t bytes, const char *fn)
{
    kvrt_backend *b = buf->backend;
    const struct kvrt_plugin_descriptor *d = b->plugin->desc;
    if (b->plugin->device.memory != KVRT_MEMORY_HOST || !KVRT_PLUGIN_HAS(d, buffer_address) || !d->buffer_address)
        return KVRT_OK;
    kvrt_plugin_error err;
    err.message[0] = '\0';
    void *base = NULL;
    if (d->buffer_address(b->dev, buf->handle, &base, &err) != KVRT_OK || !base)
        return KVRT_OK;
    uintptr_t lo = (uintptr_t)base + (uintptr_t)offset, h = (uintptr_t)host;
    if (h < lo + bytes && lo < h + bytes)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: the host range overlaps the buffer's own bytes [%llu, %llu) it "
                         "copies (the host pointer is at buffer offset %lld); copy through a separate host array",
                         fn, (unsigned long long)offset, (unsigned long long)(offset + bytes),
                         (long long)(h - (uintptr_t)base));
    return KVRT_OK;
}

int kvrt_buffer_upload(kvrt_buffer *buf, uint64_t offset, const void *src, uint64_t bytes)
{
    int status = check_range(buf, offset, bytes, "kvrt_buffer_upload");
    if (status != KVRT_OK)
        return status;
    if (!src && bytes)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_buffer_upload: source is NULL");
    if (bytes == 0)
        return KVRT_OK;
    status = check_host_overlap(buf, offset, src, bytes, "kvrt_buffer_upload");
    if (status != KVRT_OK)
        return status;
    kvrt_plugin_error err;
    err.message[0] = '\0';
    kvrt_backend *b = buf->backend;
    return kvrt_plugin_status(b->plugin, b->plugin->desc->buffer_upload(b->dev, buf->handle, offset, src, bytes, &err),
                              &err, "upload");
}

int kvrt_buffer_download(kvrt_buffer *buf, uint64_t offset, void *dst, uint64_t bytes)
{
    int status = check_range(buf, offset, bytes, "kvrt_buffer_download");
    if (status != KVRT_OK)
        return status;
    if (!dst && bytes)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_buffer_download: destination is NULL");
    if (bytes == 0)
        return KVRT_OK;
    status = check_host_overlap(buf, offset, dst, bytes, "kvrt_buffer_download");
    if (status != KVRT_OK)
        return status;
    kvrt_plugin_error err;
    err.message[0] = '\0';
    kvrt_backend *b = buf->backend;
    return kvrt_plugin_status(
        b->plugin, b->plugin->desc->buffer_download(b->dev, buf->handle, offset, dst, bytes, &err), &err, "download");
}

int kvrt_buffer_zero(kvrt_buffer *buf, uint64_t offset, uint64_t bytes)
{
    int status = check_range(buf, offset, bytes, "kvrt_buffer_zero");
    if (status != KVRT_OK || bytes == 0)
        return status;
    kvrt_plugin_error err;
    err.message[0] = '\0';
    kvrt_backend *b = buf->backend;
    return kvrt_plugin_status(b->plugin, b->plugin->desc->buffer_zero(b->dev, buf->handle, offset, bytes, &err), &err,
                              "zero");
}

int kvrt_buffer_address(kvrt_buffer *buf, void **addr, enum kvrt_memory_kind *kind)
{
    if (!buf || !addr)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_buffer_address: NULL argument");
    *addr = NULL;
    if (kind)
        *kind = KVRT_MEMORY_OPAQUE;
    kvrt_backend *b = buf->backend;
    const struct kvrt_plugin_descriptor *d = b->plugin->desc;
    int memory = b->plugin->device.memory;
    if (!KVRT_PLUGIN_HAS(d, buffer_address) || !d->buffer_address || memory == KVRT_MEMORY_OPAQUE)
        return kvrt_fail(KVRT_ERR_UNSUPPORTED,
                         "kvrt_buffer_address: backend \"%s\" keeps its buffers in %s "
                         "memory with no address in this process; copy through kvrt_buffer_download or "
                         "kvrt_cache_gather instead",
                         d->name, kvrt_memory_kind_text(memory));
    kvrt_plugin_error err;
    err.message[0] = '\0';
    void *p = NULL;
    int status =
        kvrt_plugin_status(b->plugin, d->buffer_address(b->dev, buf->handle, &p, &err), &err, "buffer_address");
    if (status != KVRT_OK)
        return status;
    if (!p)
        return kvrt_fail(KVRT_ERR_PLUGIN, "backend \"%s\": buffer_address returned success with a NULL address",
                         d->name);
    *addr = p;
    if (kind)
        *kind = (enum kvrt_memory_kind)memory;
    return KVRT_OK;
}
