/*
 * kvrt-cuda / kvrt-rocm: descriptor, probe, bind and buffers.  Compiled once
 * per runtime (gpurt_api.h); the operation entry points are the shared
 * ones (../host/gpu_entry.c) over kvrt_gpu_plugin_backend (gpurt_backend.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../host/gpu_error.h"
#include "../host/gpu_layouts.h"
#include "../host/gpu_entry.h"
#include "gpurt_backend.h"

static int rt_probe(kvrt_plugin_error *why)
{
    int ordinal;
    char name[128];
    return kvrt_gpurt_select(&ordinal, name, sizeof(name), why);
}

static int rt_describe(struct kvrt_plugin_device_info *info, kvrt_plugin_error *err)
{
    int ordinal;
    char name[128];
    int status = kvrt_gpurt_select(&ordinal, name, sizeof(name), err);
    if (status != KVRT_OK)
        return status;
    info->type = KVRT_DEVICE_TYPE_GPU;
#if defined(KVRT_GPURT_HIP)
    info->memory = KVRT_MEMORY_ROCM;
#else
    info->memory = KVRT_MEMORY_CUDA;
#endif
    info->device_id = ordinal;
    snprintf(info->name, sizeof(info->name), "%s (" GPURT_API_NAME " device %d)", name, ordinal);
    return KVRT_OK;
}

/* Device pointers are plain addresses in the unified address space: the
 * caller may hand them to DLPack consumers or to a transport that knows
 * the device (UCX with its cuda/rocm transports). */
static int rt_buffer_address(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, void **address, kvrt_plugin_error *err)
{
    (void)dev;
    (void)err;
    *address = buf->ptr;
    return KVRT_OK;
}

static int query_limits(kvrt_plugin_device *dev, kvrt_plugin_error *err)
{
    int shared = 0, units = 0;
    gpurt_error rc = gpurtDeviceGetAttribute(&shared, gpurtAttrMaxSharedPerBlock, dev->ordinal);
    if (rc == gpurtSuccess)
        rc = gpurtDeviceGetAttribute(&units, gpurtAttrMultiProcessors, dev->ordinal);
    if (rc != gpurtSuccess)
        return kvrt_gpurt_fail(err, KVRT_ERR_DEVICE, rc, GPURT_FN("DeviceGetAttribute"));
    dev->limits.move_local = 256;
    dev->limits.decode_local = 128;
    dev->limits.decode_lanes = 0;
    /* Every kernel loops grid-stride, so this cap only bounds the launch:
     * within CUDA's grid y/z-free limit and, with 256 work-items, far
     * below HIP's 2^32 - 1 work-items per launch. */
    dev->limits.max_groups = 65535;
    dev->limits.compute_units = (uint64_t)(units > 0 ? units : 1);
    dev->limits.shared_bytes = (uint64_t)(shared > 0 ? shared : 0);
    return KVRT_OK;
}

static int rt_bind(const struct kvrt_plugin_bind_info *info, kvrt_plugin_device **out, kvrt_plugin_error *err)
{
    kvrt_plugin_device *dev = calloc(1, sizeof(*dev));
    if (!dev)
        return kvrt_gpu_fail(err, KVRT_ERR_NOMEM, "out of host memory for a " GPURT_API_NAME " device");
    dev->layout = info->layout;
    kvrt_gpu_host_from_bind(info, &dev->host);
    struct kvrt_gpu_scope scope = {0};
    int status = kvrt_gpurt_select(&dev->ordinal, dev->name, sizeof(dev->name), err);
    if (status == KVRT_OK)
        status = kvrt_gpurt_enter(dev->ordinal, &scope, err);
    if (status == KVRT_OK)
        status = query_limits(dev, err);
    kvrt_gpurt_leave(&scope);
    if (status != KVRT_OK) {
        free(dev);
        return status;
    }
    kvrt_scratch_pool_init(&dev->scratch, dev, kvrt_gpurt_scratch_alloc, kvrt_gpurt_scratch_free);
    kvrt_gpu_log(dev->host.size ? &dev->host : NULL, 2, "kvrt-" GPURT_PLUGIN_NAME ": using device %d '%s'",
                 dev->ordinal, dev->name);
    *out = dev;
    return KVRT_OK;
}

static void rt_unbind(kvrt_plugin_device *dev)
{
    if (!dev)
        return;
    struct kvrt_gpu_scope scope = {0};
    const int entered = kvrt_gpurt_enter(dev->ordinal, &scope, NULL) == KVRT_OK;
    kvrt_scratch_pool_destroy(&dev->scratch);
    if (entered)
        kvrt_gpurt_leave(&scope);
    free(dev);
}

static int buffer_alloc(kvrt_plugin_device *dev, uint64_t bytes, kvrt_plugin_buffer **out, kvrt_plugin_error *err)
{
    kvrt_plugin_buffer *buf = calloc(1, sizeof(*buf));
    if (!buf)
        return kvrt_gpu_fail(err, KVRT_ERR_NOMEM, "out of host memory for a buffer handle");
    gpurt_error rc = gpurtMalloc(&buf->ptr, (size_t)(bytes ? bytes : 1));
    if (rc != gpurtSuccess) {
        free(buf);
        char text[256];
        return kvrt_gpu_fail(err, KVRT_ERR_DEVICE, GPURT_FN("Malloc") " of %llu bytes on device %d '%s' failed: %s",
                             (unsigned long long)bytes, dev->ordinal, dev->name,
                             kvrt_gpurt_describe(rc, text, sizeof(text)));
    }
    buf->bytes = bytes;
    buf->ordinal = dev->ordinal;
    *out = buf;
    return KVRT_OK;
}

/* One byte of imported memory as the driver sees it: KVRT_OK when it is
 * memory of the device, else KVRT_ERR_INVALID saying what it is. */
static int check_pointer(const kvrt_plugin_device *dev, const void *p, const char *which, kvrt_plugin_error *err)
{
    gpurtPointerAttributes a;
    memset(&a, 0, sizeof(a));
    gpurt_error rc = gpurtPointerGetAttributes(&a, p);
    if (rc != gpurtSuccess) {
        char text[256];
        (void)gpurtGetLastError();
        return kvrt_gpu_fail(err, KVRT_ERR_INVALID,
                             "the memory's %s byte %p is not " GPURT_API_NAME
                             " memory (" GPURT_FN("PointerGetAttributes") ": %s); give a device pointer of device %d",
                             which, p, kvrt_gpurt_describe(rc, text, sizeof(text)), dev->ordinal);
    }
    if (!GPURT_POINTER_ON_DEVICE(a))
        return kvrt_gpu_fail(
            err, KVRT_ERR_INVALID,
            "the memory's %s byte %p is %s, not device memory; give a device pointer of device %d", which, p,
            GPURT_POINTER_IS_HOST(a) ? "pinned host memory" : "host memory unknown to " GPURT_API_NAME, dev->ordinal);
    if (a.device != dev->ordinal)
        return kvrt_gpu_fail(err, KVRT_ERR_INVALID,
                             "the memory's %s byte %p is on " GPURT_API_NAME " device %d, but this backend drives "
                             "device %d '%s'",
                             which, p, a.device, dev->ordinal, dev->name);
    return KVRT_OK;
}

/* The core checked kind, device id, size, alignment and overlaps; the
 * driver's pointer attributes of the first and the last byte say whether
 * the range is memory of this device. */
static int buffer_import(kvrt_plugin_device *dev, const struct kvrt_plugin_import *memory, kvrt_plugin_buffer **out,
                         kvrt_plugin_error *err)
{
    *out = NULL;
    const char *first = memory->address;
    int status = check_pointer(dev, first, "first", err);
    if (status == KVRT_OK && memory->bytes > 1)
        status = check_pointer(dev, first + memory->bytes - 1, "last", err);
    if (status != KVRT_OK)
        return status;
    kvrt_plugin_buffer *buf = calloc(1, sizeof(*buf));
    if (!buf)
        return kvrt_gpu_fail(err, KVRT_ERR_NOMEM, "out of host memory for a buffer handle");
    buf->ptr = memory->address;
    buf->bytes = memory->bytes;
    buf->ordinal = dev->ordinal;
    buf->imported = 1;
    *out = buf;
    return KVRT_OK;
}

static void rt_buffer_free(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf)
{
    (void)dev;
    if (!buf)
        return;
    if (!buf->imported) {
        struct kvrt_gpu_scope scope = {0};
        const int entered = kvrt_gpurt_enter(buf->ordinal, &scope, NULL) == KVRT_OK;
        gpurtFree(buf->ptr);
        if (entered)
            kvrt_gpurt_leave(&scope);
    }
    free(buf);
}

static int sync_stream(const char *what, kvrt_plugin_error *err)
{
    gpurt_error rc = gpurtStreamSynchronize(gpurtStreamPerThread);
    if (rc != gpurtSuccess)
        return kvrt_gpurt_fail(err, KVRT_ERR_DEVICE, rc, what);
    return KVRT_OK;
}

static int buffer_zero(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, uint64_t bytes,
                       kvrt_plugin_error *err)
{
    if (bytes == 0)
        return KVRT_OK;
    gpurt_error rc = gpurtMemsetAsync((char *)buf->ptr + offset, 0, (size_t)bytes, gpurtStreamPerThread);
    if (rc != gpurtSuccess)
        return kvrt_gpurt_fail(err, KVRT_ERR_DEVICE, rc, GPURT_FN("MemsetAsync"));
    return sync_stream(GPURT_FN("MemsetAsync"), err);
}

static int buffer_upload(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, const void *src,
                         uint64_t bytes, kvrt_plugin_error *err)
{
    if (bytes == 0)
        return KVRT_OK;
    gpurt_error rc =
        gpurtMemcpyAsync((char *)buf->ptr + offset, src, (size_t)bytes, gpurtMemcpyHostToDevice, gpurtStreamPerThread);
    if (rc != gpurtSuccess)
        return kvrt_gpurt_fail(err, KVRT_ERR_DEVICE, rc, GPURT_FN("MemcpyAsync") " to device");
    return sync_stream(GPURT_FN("MemcpyAsync") " to device", err);
}

static int buffer_download(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, void *dst, uint64_t bytes,
                           kvrt_plugin_error *err)
{
    if (bytes == 0)
        return KVRT_OK;
    gpurt_error rc = gpurtMemcpyAsync(dst, (const char *)buf->ptr + offset, (size_t)bytes, gpurtMemcpyDeviceToHost,
                                      gpurtStreamPerThread);
    if (rc != gpurtSuccess)
        return kvrt_gpurt_fail(err, KVRT_ERR_DEVICE, rc, GPURT_FN("MemcpyAsync") " to host");
    return sync_stream(GPURT_FN("MemcpyAsync") " to host", err);
}

/*
 * Buffer entry points: the buffer's device current for the call, the
 * caller's device back afterwards.  WITH_DEVICE(ordinal, err, call) returns
 * call's status.
 */
#define WITH_DEVICE(ordinal, err, call)                                                                                \
    do {                                                                                                               \
        struct kvrt_gpu_scope scope_ = {0};                                                                            \
        int status_ = kvrt_gpurt_enter((ordinal), &scope_, (err));                                                     \
        if (status_ == KVRT_OK) {                                                                                      \
            status_ = (call);                                                                                          \
            kvrt_gpurt_leave(&scope_);                                                                                 \
        }                                                                                                              \
        return status_;                                                                                                \
    } while (0)

static int rt_buffer_alloc(kvrt_plugin_device *dev, uint64_t bytes, kvrt_plugin_buffer **out, kvrt_plugin_error *err)
{
    WITH_DEVICE(dev->ordinal, err, buffer_alloc(dev, bytes, out, err));
}

static int rt_buffer_import(kvrt_plugin_device *dev, const struct kvrt_plugin_import *memory, kvrt_plugin_buffer **out,
                            kvrt_plugin_error *err)
{
    WITH_DEVICE(dev->ordinal, err, buffer_import(dev, memory, out, err));
}

static int rt_buffer_zero(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, uint64_t bytes,
                          kvrt_plugin_error *err)
{
    WITH_DEVICE(buf->ordinal, err, buffer_zero(dev, buf, offset, bytes, err));
}

static int rt_buffer_upload(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, const void *src,
                            uint64_t bytes, kvrt_plugin_error *err)
{
    WITH_DEVICE(buf->ordinal, err, buffer_upload(dev, buf, offset, src, bytes, err));
}

static int rt_buffer_download(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, void *dst,
                              uint64_t bytes, kvrt_plugin_error *err)
{
    WITH_DEVICE(buf->ordinal, err, buffer_download(dev, buf, offset, dst, bytes, err));
}

#if defined(KVRT_GPURT_HIP)
#define DESCRIPTION "ROCm/HIP backend (" KVRT_HIP_BUILD_NOTE "); device from " GPURT_DEVICE_ENV
#else
#define DESCRIPTION "CUDA backend (sm_90 code, compute_75 PTX); device from " GPURT_DEVICE_ENV
#endif

static const struct kvrt_plugin_descriptor descriptor = {
    .size = sizeof(struct kvrt_plugin_descriptor),
    .abi_major = KVRT_PLUGIN_ABI_MAJOR,
    .abi_minor = KVRT_PLUGIN_ABI_MINOR,
    .name = GPURT_PLUGIN_NAME,
    .version = KVRT_GPU_PLUGIN_VERSION,
    .description = DESCRIPTION,
    .flags = 0,
    .num_layouts = KVRT_GPU_NUM_LAYOUTS,
    .layouts = kvrt_gpu_layouts,
    .dtypes = KVRT_GPU_DTYPES,
    .ops = KVRT_OP_ALL,
    .probe = rt_probe,
    .bind = rt_bind,
    .unbind = rt_unbind,
    .buffer_alloc = rt_buffer_alloc,
    .buffer_free = rt_buffer_free,
    .buffer_zero = rt_buffer_zero,
    .buffer_upload = rt_buffer_upload,
    .buffer_download = rt_buffer_download,
    KVRT_GPU_ENTRY_OPS,
    .decode_dtypes = KVRT_GPU_DECODE_DTYPES,
    .describe = rt_describe,
    .buffer_address = rt_buffer_address,
    .measure_copy = kvrt_gpurt_measure_copy,
    .import_alignment = GPURT_IMPORT_ALIGN,
    .buffer_import = rt_buffer_import,
};

KVRT_PLUGIN_DEFINE_ENTRY(descriptor)
