/*
 * kvrt-template: a complete backend in plain C over host memory.
 *
 * Copy this folder to start a backend.  The descriptor below is everything
 * the core reads before it decides anything; nothing in it runs device code.
 */
/* msync and sysconf are POSIX; the rest is C11. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "template.h"

int tpl_fail(kvrt_plugin_error *err, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return status;
}

/* A GPU backend asks its driver here (e.g. for a device count) and returns
 * KVRT_ERR_NODEV with the driver's words when there is none.  It must not
 * allocate device memory: the core probes every plugin it lists. */
static int tpl_probe(kvrt_plugin_error *why)
{
    (void)why;
    return KVRT_OK;
}

static int tpl_bind(const struct kvrt_plugin_bind_info *info, kvrt_plugin_device **out, kvrt_plugin_error *err)
{
    kvrt_plugin_device *dev = calloc(1, sizeof(*dev));
    if (!dev)
        return tpl_fail(err, KVRT_ERR_NOMEM, "out of memory binding layout %d", (int)info->layout);
    dev->layout = info->layout;
    dev->host = info->host;
    *out = dev;
    return KVRT_OK;
}

static void tpl_unbind(kvrt_plugin_device *dev)
{
    free(dev);
}

static int tpl_buffer_alloc(kvrt_plugin_device *dev, uint64_t bytes, kvrt_plugin_buffer **out, kvrt_plugin_error *err)
{
    (void)dev;
    kvrt_plugin_buffer *buf = malloc(sizeof(*buf));
    /* 64-byte alignment so that every element type is aligned at offset 0. */
    uint64_t rounded = (bytes + 63) / 64 * 64;
    void *data = NULL;
    if (buf && rounded >= bytes && (size_t)rounded == rounded)
        data = aligned_alloc(64, (size_t)rounded);
    if (!buf || !data) {
        free(buf);
        free(data);
        return tpl_fail(err, KVRT_ERR_NOMEM, "cannot allocate %llu bytes of host memory", (unsigned long long)bytes);
    }
    buf->bytes = bytes;
    buf->data = data;
    buf->imported = 0;
    *out = buf;
    return KVRT_OK;
}

static void tpl_buffer_free(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf)
{
    (void)dev;
    if (buf && !buf->imported)
        free(buf->data);
    free(buf);
}

/* Memory an engine allocated, adopted for a cache (kvrt_cache_wrap).  The
 * core has checked the kind, device, size, alignment and overlaps; the
 * backend checks what only its device API can tell and refuses with what
 * it found.  A GPU backend asks its driver whether the pointer is memory
 * of its device (cudaPointerGetAttributes, say); for host memory, msync
 * says whether the range is mapped (ENOMEM if not) without touching it. */
static int tpl_buffer_import(kvrt_plugin_device *dev, const struct kvrt_plugin_import *memory, kvrt_plugin_buffer **out,
                             kvrt_plugin_error *err)
{
    (void)dev;
    long page = sysconf(_SC_PAGESIZE);
    size_t into = page > 0 ? (size_t)((uintptr_t)memory->address % (uintptr_t)page) : 0;
    unsigned char *first = (unsigned char *)memory->address - into;
    if (memory->bytes > 0 && msync(first, into + (size_t)memory->bytes, MS_ASYNC) != 0 && errno == ENOMEM)
        return tpl_fail(err, KVRT_ERR_INVALID, "the memory at %p (%llu bytes) is not mapped in this process",
                        memory->address, (unsigned long long)memory->bytes);
    kvrt_plugin_buffer *buf = malloc(sizeof(*buf));
    if (!buf)
        return tpl_fail(err, KVRT_ERR_NOMEM, "out of memory for a buffer handle");
    buf->bytes = memory->bytes;
    buf->data = memory->address;
    buf->imported = 1;
    *out = buf;
    return KVRT_OK;
}

/* What the core needs to check imported memory and to export views. */
static int tpl_describe(struct kvrt_plugin_device_info *info, kvrt_plugin_error *err)
{
    (void)err;
    info->type = KVRT_DEVICE_TYPE_CPU;
    info->memory = KVRT_MEMORY_HOST;
    info->device_id = 0;
    snprintf(info->name, sizeof(info->name), "template host memory");
    return KVRT_OK;
}

static int tpl_buffer_address(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, void **address, kvrt_plugin_error *err)
{
    (void)dev;
    (void)err;
    *address = buf->data;
    return KVRT_OK;
}

/* The core has checked offset + bytes against the buffer size already. */
static int tpl_buffer_zero(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, uint64_t bytes,
                           kvrt_plugin_error *err)
{
    (void)dev;
    (void)err;
    memset(buf->data + offset, 0, (size_t)bytes);
    return KVRT_OK;
}

static int tpl_buffer_upload(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, const void *src,
                             uint64_t bytes, kvrt_plugin_error *err)
{
    (void)dev;
    (void)err;
    memcpy(buf->data + offset, src, (size_t)bytes);
    return KVRT_OK;
}

static int tpl_buffer_download(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, void *dst,
                               uint64_t bytes, kvrt_plugin_error *err)
{
    (void)dev;
    (void)err;
    memcpy(dst, buf->data + offset, (size_t)bytes);
    return KVRT_OK;
}

/* Most preferred first: the order the core's resolution uses when this
 * backend is the only one touching a cache. */
static const int32_t tpl_layouts[] = {
    KVRT_LAYOUT_LBNHC, KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_BLNHC, KVRT_LAYOUT_BLHNC, KVRT_LAYOUT_BHLNC, KVRT_LAYOUT_LHBNC,
};

static const struct kvrt_plugin_descriptor tpl_descriptor = {
    .size = sizeof(struct kvrt_plugin_descriptor),
    .abi_major = KVRT_PLUGIN_ABI_MAJOR,
    .abi_minor = KVRT_PLUGIN_ABI_MINOR,
    .name = "template",
    .version = "0.1.0",
    .description = "reference backend over host memory (examples/template-plugin)",
    .flags = 0,
    .num_layouts = sizeof(tpl_layouts) / sizeof(tpl_layouts[0]),
    .layouts = tpl_layouts,
    .dtypes = (1u << KVRT_DTYPE_FP32) | (1u << KVRT_DTYPE_FP16) | (1u << KVRT_DTYPE_BF16),
    .ops = KVRT_OP_ALL,
    .probe = tpl_probe,
    .bind = tpl_bind,
    .unbind = tpl_unbind,
    .buffer_alloc = tpl_buffer_alloc,
    .buffer_free = tpl_buffer_free,
    .buffer_zero = tpl_buffer_zero,
    .buffer_upload = tpl_buffer_upload,
    .buffer_download = tpl_buffer_download,
    .write = tpl_write,
    .read = tpl_read,
    .copy_blocks = tpl_copy_blocks,
    .gather = tpl_gather,
    .scatter = tpl_scatter,
    .decode = tpl_decode,
    /* Plugin ABI 1.1 and 1.2: optional; each is read only when the
     * descriptor is large enough to hold it (KVRT_PLUGIN_HAS). */
    .describe = tpl_describe,
    .buffer_address = tpl_buffer_address,
    /* Elements are read with memcpy here, so any address would do; a
     * backend whose kernels load elements directly needs their size. */
    .import_alignment = 4,
    .buffer_import = tpl_buffer_import,
};

KVRT_PLUGIN_DEFINE_ENTRY(tpl_descriptor)
