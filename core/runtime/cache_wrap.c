/* Caches over memory the caller owns (kvrt/wrap.h): every check the core
 * can make before the plugin adopts the memory, then the same cache as
 * kvrt_cache_create builds, over an imported buffer.
 *
 * Layer 8 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/wrap.h>

#include "checked.h"
#include "error.h"
#include "reserved.h"
#include "runtime_internal.h"

void kvrt_memory_default(struct kvrt_memory *memory)
{
    if (!memory)
        return;
    memset(memory, 0, sizeof(*memory));
    memory->kind = KVRT_MEMORY_HOST;
}

bool kvrt_cache_is_wrapped(const kvrt_cache *c)
{
    return c && c->wrapped;
}

static int check_backend(const kvrt_backend *b, const char *fn)
{
    const struct kvrt_loaded_plugin *p = b->plugin;
    if (kvrt_plugin_imports(p->desc))
        return KVRT_OK;
    if (p->device.memory == KVRT_MEMORY_OPAQUE)
        return kvrt_fail(KVRT_ERR_UNSUPPORTED,
                         "%s: backend \"%s\" keeps its buffers in memory with no address in this process, so it "
                         "cannot adopt a pointer; create the cache with kvrt_cache_create, or wrap with a "
                         "backend over host, CUDA or ROCm memory",
                         fn, p->desc->name);
    return kvrt_fail(KVRT_ERR_UNSUPPORTED,
                     "%s: backend \"%s\" cannot adopt caller memory (its plugin has no buffer_import, plugin "
                     "ABI 1.2); create the cache with kvrt_cache_create",
                     fn, p->desc->name);
}

/* What the caller said about the memory against what the backend is. */
static int check_memory(const kvrt_backend *b, const struct kvrt_memory *m, uint64_t need, const char *fn)
{
    int status = kvrt_check_reserved(m->reserved, sizeof(m->reserved), "struct kvrt_memory");
    if (status != KVRT_OK)
        return status;
    const struct kvrt_loaded_plugin *p = b->plugin;
    const char *name = p->desc->name;
    int kind = (int)m->kind;
    if (kind != KVRT_MEMORY_HOST && kind != KVRT_MEMORY_CUDA && kind != KVRT_MEMORY_ROCM)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: memory kind %d is not one of KVRT_MEMORY_HOST (%d), KVRT_MEMORY_CUDA (%d), "
                         "KVRT_MEMORY_ROCM (%d)",
                         fn, kind, KVRT_MEMORY_HOST, KVRT_MEMORY_CUDA, KVRT_MEMORY_ROCM);
    if (kind != p->device.memory)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: the memory is %s memory but backend \"%s\" works on %s memory; give it %s memory, "
                         "or bind a backend for %s memory",
                         fn, kvrt_memory_kind_text(kind), name, kvrt_memory_kind_text(p->device.memory),
                         kvrt_memory_kind_text(p->device.memory), kvrt_memory_kind_text(kind));
    int32_t want_device = kind == KVRT_MEMORY_HOST ? 0 : p->device.device_id;
    if (kind == KVRT_MEMORY_HOST && m->device_id != 0)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: device_id %d given for host memory; it must be 0", fn,
                         (int)m->device_id);
    if (m->device_id != want_device)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: the memory is on device %d but backend \"%s\" drives device %d; bind the backend for "
                         "that device, or give memory of device %d",
                         fn, (int)m->device_id, name, (int)want_device, (int)want_device);
    if (!m->address)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: the memory's address is NULL", fn);
    if (m->bytes < need)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: the memory holds %llu bytes but the placement needs %llu; give at least %llu bytes "
                         "or place fewer blocks",
                         fn, ULL(m->bytes), ULL(need), ULL(need));
    uint64_t align = p->desc->import_alignment;
    uintptr_t at = (uintptr_t)m->address;
    if (at % align != 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: the address %p is not a multiple of %llu bytes, the alignment backend \"%s\" "
                         "needs (it is %llu bytes past one)",
                         fn, m->address, ULL(align), name, ULL(at % align));
    if (need > UINTPTR_MAX - at)
        return kvrt_fail(KVRT_ERR_OVERFLOW, "%s: %llu bytes from address %p run past the address space", fn, ULL(need),
                         m->address);
    return KVRT_OK;
}

/* Buffers never share bytes (the operations' overlap checks rely on it):
 * the memory must not overlap any live buffer or cache of the runtime in
 * the same address space.  Called with the runtime lock held. */
static int check_overlap(const kvrt_runtime *rt, const struct kvrt_memory *m, uint64_t need, const char *fn)
{
    uintptr_t lo = (uintptr_t)m->address, hi = lo + (uintptr_t)need;
    for (size_t i = 0; i < rt->num_backends; i++) {
        const kvrt_backend *b = rt->backends[i];
        const struct kvrt_plugin_descriptor *d = b->plugin->desc;
        if (b->plugin->device.memory != (int)m->kind || !KVRT_PLUGIN_HAS(d, buffer_address) || !d->buffer_address)
            continue;
        for (const kvrt_buffer *buf = b->buffers; buf; buf = buf->next) {
            kvrt_plugin_error err;
            err.message[0] = '\0';
            void *base = NULL;
            if (d->buffer_address(b->dev, buf->handle, &base, &err) != KVRT_OK || !base)
                continue;
            uintptr_t blo = (uintptr_t)base, bhi = blo + (uintptr_t)buf->size;
            if (lo < bhi && blo < hi)
                return kvrt_fail(KVRT_ERR_INVALID,
                                 "%s: the memory [%p, +%llu) overlaps a live %s of backend \"%s\" at [%p, +%llu); "
                                 "a cache's memory must be its own",
                                 fn, m->address, ULL(need), buf->owned_by_cache ? "cache" : "buffer", d->name, base,
                                 ULL(buf->size));
        }
    }
    return KVRT_OK;
}

int kvrt_cache_wrap_internal(kvrt_backend *b, const kvrt_placement *p, const struct kvrt_memory *memory, const char *fn,
                             kvrt_cache **out)
{
    if (!b || !p || !memory || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: NULL argument", fn);
    *out = NULL;
    int status = check_backend(b, fn);
    if (status == KVRT_OK)
        status = check_memory(b, memory, kvrt_placement_size(p), fn);
    if (status != KVRT_OK)
        return status;
    kvrt_runtime *rt = b->rt;
    pthread_mutex_lock(&rt->lock);
    status = check_overlap(rt, memory, kvrt_placement_size(p), fn);
    pthread_mutex_unlock(&rt->lock);
    if (status != KVRT_OK)
        return status;

    kvrt_cache *c;
    status = kvrt_cache_prepare(b, p, fn, &c);
    if (status != KVRT_OK)
        return status;
    struct kvrt_release *release = NULL;
    if (memory->release) {
        release = calloc(1, sizeof(*release));
        if (!release) {
            struct kvrt_release *none = NULL;
            kvrt_cache_free(c, &none);
            return kvrt_fail(KVRT_ERR_NOMEM, "%s: out of memory", fn);
        }
        *release = (struct kvrt_release){memory->release, memory->release_user, memory->address, NULL};
    }
    struct kvrt_plugin_import import = {
        .size = sizeof(import),
        .memory = (int32_t)memory->kind,
        .device_id = memory->device_id,
        .address = memory->address,
        .bytes = c->desc.bytes,
    };
    status = kvrt_buffer_import_internal(b, &import, fn, &c->buffer);
    if (status != KVRT_OK) {
        /* Never adopted: the caller keeps the memory and no callback runs. */
        free(release);
        struct kvrt_release *none = NULL;
        kvrt_cache_free(c, &none);
        return status;
    }
    c->release = release;
    c->wrapped = true;
    kvrt_cache_link(c);
    *out = c;
    kvrt_clear_error();
    return KVRT_OK;
}

int kvrt_cache_wrap(kvrt_backend *b, const kvrt_placement *p, const struct kvrt_memory *memory, kvrt_cache **out)
{
    return kvrt_cache_wrap_internal(b, p, memory, "kvrt_cache_wrap", out);
}
