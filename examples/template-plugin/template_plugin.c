/*
 * kvrt-template: a complete backend in plain C over host memory.
 *
 * Copy this folder to start a backend.  The descriptor below is everything
 * the core reads before it decides anything; nothing in it runs device code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    *out = buf;
    return KVRT_OK;
}

static void tpl_buffer_free(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf)
{
    (void)dev;
    if (buf)
        free(buf->data);
    free(buf);
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
};

KVRT_PLUGIN_DEFINE_ENTRY(tpl_descriptor)
