/*
 * A host-memory plugin that fails on command, for the fault tests: an
 * allocation that fails, a write that fails halfway through, a device that
 * is lost.  The test reaches the controls with dlopen(RTLD_NOLOAD) on the
 * already loaded module.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/plugin.h>

enum fault { FAULT_NONE, FAULT_ALLOC, FAULT_MIDWAY, FAULT_LOST, FAULT_NULLBUF, FAULT_CTLMSG };

struct kvrt_plugin_device {
    int index;
    enum fault fault;
};

#define MAX_DEVICES 16
static struct kvrt_plugin_device *devices[MAX_DEVICES];
static atomic_int num_devices;
static atomic_long live_buffers;

KVRT_PLUGIN_EXPORT int kvrt_fault_control(int device, const char *mode);
KVRT_PLUGIN_EXPORT int kvrt_fault_control(int device, const char *mode)
{
    if (device < 0 || device >= atomic_load(&num_devices) || !devices[device])
        return -1;
    enum fault f = FAULT_NONE;
    if (strcmp(mode, "alloc") == 0)
        f = FAULT_ALLOC;
    else if (strcmp(mode, "midway") == 0)
        f = FAULT_MIDWAY;
    else if (strcmp(mode, "lost") == 0)
        f = FAULT_LOST;
    else if (strcmp(mode, "nullbuf") == 0)
        f = FAULT_NULLBUF;
    else if (strcmp(mode, "ctlmsg") == 0)
        f = FAULT_CTLMSG;
    devices[device]->fault = f;
    return 0;
}

KVRT_PLUGIN_EXPORT long kvrt_fault_live_buffers(void);
KVRT_PLUGIN_EXPORT long kvrt_fault_live_buffers(void)
{
    return atomic_load(&live_buffers);
}

static int lost(const kvrt_plugin_device *dev, kvrt_plugin_error *err, const char *op)
{
    if (dev->fault != FAULT_LOST)
        return 0;
    snprintf(err->message, sizeof(err->message), "FAULT_DEVICE_LOST: device %d was lost during %s", dev->index, op);
    return 1;
}

static int probe(kvrt_plugin_error *why)
{
    (void)why;
    return KVRT_OK;
}

static int bind(const struct kvrt_plugin_bind_info *info, kvrt_plugin_device **out, kvrt_plugin_error *err)
{
    (void)info;
    int i = atomic_fetch_add(&num_devices, 1);
    if (i >= MAX_DEVICES) {
        snprintf(err->message, sizeof(err->message), "at most %d fault devices", MAX_DEVICES);
        return KVRT_ERR_DEVICE;
    }
    struct kvrt_plugin_device *d = calloc(1, sizeof(*d));
    if (!d)
        return KVRT_ERR_NOMEM;
    d->index = i;
    devices[i] = d;
    *out = d;
    return KVRT_OK;
}

static void unbind(kvrt_plugin_device *dev)
{
    devices[dev->index] = NULL;
    free(dev);
}

static int buffer_alloc(kvrt_plugin_device *dev, uint64_t bytes, kvrt_plugin_buffer **out, kvrt_plugin_error *err)
{
    if (lost(dev, err, "buffer_alloc"))
        return KVRT_ERR_DEVICE;
    if (dev->fault == FAULT_ALLOC) {
        snprintf(err->message, sizeof(err->message), "FAULT_ALLOC: simulated out of device memory for %llu bytes",
                 (unsigned long long)bytes);
        return KVRT_ERR_NOMEM;
    }
    if (dev->fault == FAULT_NULLBUF) {
        /* A lie: success without a buffer. */
        *out = NULL;
        return KVRT_OK;
    }
    if (dev->fault == FAULT_CTLMSG) {
        snprintf(err->message, sizeof(err->message), "FAULT_CTLMSG\nsecond line\x1b[31m\r\t\x7f end");
        return KVRT_ERR_DEVICE;
    }
    *out = calloc(1, bytes);
    if (!*out)
        return KVRT_ERR_NOMEM;
    atomic_fetch_add(&live_buffers, 1);
    return KVRT_OK;
}

static void buffer_free(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf)
{
    (void)dev;
    free(buf);
    atomic_fetch_sub(&live_buffers, 1);
}

static int buffer_zero(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t off, uint64_t n,
                       kvrt_plugin_error *err)
{
    if (lost(dev, err, "buffer_zero"))
        return KVRT_ERR_DEVICE;
    memset((char *)buf + off, 0, n);
    return KVRT_OK;
}

static int buffer_upload(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t off, const void *src, uint64_t n,
                         kvrt_plugin_error *err)
{
    if (lost(dev, err, "buffer_upload"))
        return KVRT_ERR_DEVICE;
    memcpy((char *)buf + off, src, n);
    return KVRT_OK;
}

static int buffer_download(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t off, void *dst, uint64_t n,
                           kvrt_plugin_error *err)
{
    if (lost(dev, err, "buffer_download"))
        return KVRT_ERR_DEVICE;
    memcpy(dst, (char *)buf + off, n);
    return KVRT_OK;
}

static char *cell(const struct kvrt_plugin_layer *L, kvrt_plugin_buffer *cache, int64_t slot, uint64_t h)
{
    uint64_t vb = (uint64_t)slot / L->view_block_tokens, j = (uint64_t)slot % L->view_block_tokens;
    return (char *)cache + L->offset + vb * L->stride_block + h * L->stride_head + j * L->stride_state;
}

static int token_io(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *c, kvrt_plugin_buffer *cache,
                    uint32_t layer, uint64_t n, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t ko,
                    kvrt_plugin_buffer *v, uint64_t vo, kvrt_plugin_error *err, int is_write)
{
    if (lost(dev, err, is_write ? "write" : "read"))
        return KVRT_ERR_DEVICE;
    const struct kvrt_plugin_layer *L = &c->layers[layer];
    uint64_t kb = L->head_size * L->elem_size, vbytes = L->head_size_v * L->elem_size;
    for (uint64_t t = 0; t < n; t++) {
        if (is_write && dev->fault == FAULT_MIDWAY && t == n / 2) {
            snprintf(err->message, sizeof(err->message), "FAULT_MIDWAY: simulated failure after %llu of %llu tokens",
                     (unsigned long long)t, (unsigned long long)n);
            return KVRT_ERR_DEVICE;
        }
        if (slots[t] < 0)
            continue;
        for (uint64_t h = 0; h < L->head_slots; h++) {
            char *c0 = cell(L, cache, slots[t], h);
            char *kp = (char *)k + ko + (t * L->head_slots + h) * kb;
            char *vp = v ? (char *)v + vo + (t * L->head_slots + h) * vbytes : NULL;
            if (is_write) {
                memcpy(c0, kp, kb);
                if (vp)
                    memcpy(c0 + kb, vp, vbytes);
            } else {
                memcpy(kp, c0, kb);
                if (vp)
                    memcpy(vp, c0 + kb, vbytes);
            }
        }
    }
    return KVRT_OK;
}

static int write_kv(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *c, kvrt_plugin_buffer *cache,
                    uint32_t layer, uint64_t n, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t ko,
                    kvrt_plugin_buffer *v, uint64_t vo, kvrt_plugin_error *err)
{
    return token_io(dev, c, cache, layer, n, slots, k, ko, v, vo, err, 1);
}

static int read_kv(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *c, kvrt_plugin_buffer *cache,
                   uint32_t layer, uint64_t n, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t ko,
                   kvrt_plugin_buffer *v, uint64_t vo, kvrt_plugin_error *err)
{
    return token_io(dev, c, cache, layer, n, slots, k, ko, v, vo, err, 0);
}

static const int32_t layouts[] = {KVRT_LAYOUT_LBHNC};

static const struct kvrt_plugin_descriptor descriptor = {
    .size = sizeof(struct kvrt_plugin_descriptor),
    .abi_major = KVRT_PLUGIN_ABI_MAJOR,
    .abi_minor = KVRT_PLUGIN_ABI_MINOR,
    .name = "fault",
    .version = "0.0-test",
    .description = "fault-injection test plugin",
    .flags = KVRT_PLUGIN_ANY_LAYOUT,
    .num_layouts = 1,
    .layouts = layouts,
    .dtypes = (1u << KVRT_DTYPE_FP32) | (1u << KVRT_DTYPE_FP16) | (1u << KVRT_DTYPE_BF16),
    .ops = KVRT_OP_WRITE | KVRT_OP_READ,
    .probe = probe,
    .bind = bind,
    .unbind = unbind,
    .buffer_alloc = buffer_alloc,
    .buffer_free = buffer_free,
    .buffer_zero = buffer_zero,
    .buffer_upload = buffer_upload,
    .buffer_download = buffer_download,
    .write = write_kv,
    .read = read_kv,
};

KVRT_PLUGIN_DEFINE_ENTRY(descriptor)
