/*
 * kvrt CPU backend — buffers: host memory standing in for device memory.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ops.h"

#define CPU_BUFFER_ALIGN 64u
/* Buffers this large are aligned to and sized in huge pages, and the kernel
 * is asked to back them with huge pages where it does so only on request
 * (transparent_hugepage=madvise): decode and the block operations hop
 * between blocks all over a cache, and 4 KiB pages make every hop a TLB
 * miss. */
#define CPU_HUGE_PAGE (2u << 20)
/* Large transfers are split across the pool in pieces of this many bytes. */
#define CPU_BULK_CHUNK (4u << 20)

struct bulk {
    unsigned char *dst;
    const unsigned char *src; /* NULL: zero */
    uint64_t bytes;
};

static void bulk_task(void *ctx, unsigned worker, uint64_t begin, uint64_t end)
{
    const struct bulk *b = ctx;
    (void)worker;
    uint64_t lo = begin * CPU_BULK_CHUNK;
    uint64_t hi = end * CPU_BULK_CHUNK < b->bytes ? end * CPU_BULK_CHUNK : b->bytes;
    if (b->src)
        memcpy(b->dst + lo, b->src + lo, hi - lo);
    else
        memset(b->dst + lo, 0, hi - lo);
}

static void bulk(kvrt_plugin_device *dev, void *dst, const void *src, uint64_t bytes)
{
    struct bulk b = {dst, src, bytes};
    uint64_t chunks = (bytes + CPU_BULK_CHUNK - 1) / CPU_BULK_CHUNK;
    cpu_pool_run(dev->pool, chunks, 1, bulk_task, &b);
}

static int check_range(const kvrt_plugin_buffer *buf, uint64_t offset, uint64_t bytes, const char *what,
                       kvrt_plugin_error *err)
{
    /* The core validates ranges; this only guards against a core bug
     * turning into a wild pointer. */
    if (offset > buf->bytes || bytes > buf->bytes - offset)
        return cpu_fail(err, KVRT_ERR_INVALID, "%s of %llu bytes at offset %llu is outside the %llu-byte buffer", what,
                        (unsigned long long)bytes, (unsigned long long)offset, (unsigned long long)buf->bytes);
    return KVRT_OK;
}

int cpu_buffer_alloc(kvrt_plugin_device *dev, uint64_t bytes, kvrt_plugin_buffer **out, kvrt_plugin_error *err)
{
    (void)dev;
    *out = NULL;
    /* aligned_alloc wants a multiple of the alignment; a zero-byte buffer
     * still gets a distinct pointer. */
    uint64_t align = bytes >= CPU_HUGE_PAGE ? CPU_HUGE_PAGE : CPU_BUFFER_ALIGN;
    uint64_t rounded = bytes == 0 ? align : (bytes + align - 1) & ~(align - 1);
    if (rounded < bytes || rounded > PTRDIFF_MAX)
        return cpu_fail(err, KVRT_ERR_NOMEM, "cannot allocate a buffer of %llu bytes: larger than the address space",
                        (unsigned long long)bytes);
    kvrt_plugin_buffer *buf = malloc(sizeof(*buf));
    void *data = buf ? aligned_alloc((size_t)align, (size_t)rounded) : NULL;
    if (!data) {
        free(buf);
        return cpu_fail(err, KVRT_ERR_NOMEM, "cannot allocate a buffer of %llu bytes (%.1f MiB) in host memory",
                        (unsigned long long)bytes, (double)bytes / (1024.0 * 1024.0));
    }
#ifdef MADV_HUGEPAGE
    if (align == CPU_HUGE_PAGE)
        (void)madvise(data, (size_t)rounded, MADV_HUGEPAGE); /* a hint; failure is harmless */
#endif
    buf->data = data;
    buf->bytes = bytes;
    buf->imported = false;
    *out = buf;
    return KVRT_OK;
}

/* The core checked kind, size, alignment and overlap; what it cannot know
 * is whether the range is mapped in this process.  msync answers ENOMEM
 * for an unmapped page without touching memory (MS_ASYNC schedules
 * nothing on anonymous memory). */
int cpu_buffer_import(kvrt_plugin_device *dev, const struct kvrt_plugin_import *memory, kvrt_plugin_buffer **out,
                      kvrt_plugin_error *err)
{
    (void)dev;
    *out = NULL;
    long page = sysconf(_SC_PAGESIZE);
    size_t into = page > 0 ? (size_t)((uintptr_t)memory->address % (uintptr_t)page) : 0;
    unsigned char *first = (unsigned char *)memory->address - into;
    if (memory->bytes > 0 && msync(first, into + (size_t)memory->bytes, MS_ASYNC) != 0 && errno == ENOMEM)
        return cpu_fail(err, KVRT_ERR_INVALID,
                        "the memory [%p, +%llu) is not mapped in this process (msync: %s); give host memory the "
                        "process can read and write",
                        memory->address, (unsigned long long)memory->bytes, strerror(errno));
    kvrt_plugin_buffer *buf = malloc(sizeof(*buf));
    if (!buf)
        return cpu_fail(err, KVRT_ERR_NOMEM, "cannot allocate a buffer handle");
    buf->data = memory->address;
    buf->bytes = memory->bytes;
    buf->imported = true;
    *out = buf;
    return KVRT_OK;
}

void cpu_buffer_free(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf)
{
    (void)dev;
    if (!buf)
        return;
    if (!buf->imported)
        free(buf->data);
    free(buf);
}

int cpu_buffer_zero(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, uint64_t bytes,
                    kvrt_plugin_error *err)
{
    int rc = check_range(buf, offset, bytes, "zero", err);
    if (rc == KVRT_OK)
        bulk(dev, buf->data + offset, NULL, bytes);
    return rc;
}

int cpu_buffer_upload(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, const void *src,
                      uint64_t bytes, kvrt_plugin_error *err)
{
    int rc = check_range(buf, offset, bytes, "upload", err);
    if (rc == KVRT_OK && bytes > 0)
        bulk(dev, buf->data + offset, src, bytes);
    return rc;
}

int cpu_buffer_download(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, void *dst, uint64_t bytes,
                        kvrt_plugin_error *err)
{
    int rc = check_range(buf, offset, bytes, "download", err);
    if (rc == KVRT_OK && bytes > 0)
        bulk(dev, dst, buf->data + offset, bytes);
    return rc;
}

int cpu_buffer_address(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, void **address, kvrt_plugin_error *err)
{
    (void)dev;
    (void)err;
    *address = buf->data;
    return KVRT_OK;
}
