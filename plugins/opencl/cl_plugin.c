/*
 * kvrt-opencl: the descriptor, probe, bind and buffer functions.  The
 * operation entry points are the shared ones (../common/host/gpu_entry.c)
 * over this plugin's kvrt_gpu_plugin_backend (cl_backend.c).
 */
#include <stdlib.h>
#include <string.h>

#include "../common/host/gpu_error.h"
#include "../common/host/gpu_layouts.h"
#include "../common/host/gpu_entry.h"
#include "cl_backend.h"
#include "cl_names.h"
#include "cl_select.h"

static int cl_probe(kvrt_plugin_error *why)
{
    struct kvrt_cl_choice choice;
    return kvrt_cl_select(&choice, why);
}

static int cl_bind(const struct kvrt_plugin_bind_info *info, kvrt_plugin_device **out, kvrt_plugin_error *err)
{
    kvrt_plugin_device *dev = calloc(1, sizeof(*dev));
    if (!dev)
        return kvrt_gpu_fail(err, KVRT_ERR_NOMEM, "out of host memory for an OpenCL device");
    dev->layout = info->layout;
    kvrt_gpu_host_from_bind(info, &dev->host);
    int status = kvrt_cl_shared_get(dev->host.size ? &dev->host : NULL, &dev->shared, err);
    if (status != KVRT_OK) {
        free(dev);
        return status;
    }
    kvrt_scratch_pool_init(&dev->scratch, dev->shared, kvrt_cl_scratch_alloc, kvrt_cl_scratch_free);
    *out = dev;
    return KVRT_OK;
}

static void cl_unbind(kvrt_plugin_device *dev)
{
    if (!dev)
        return;
    kvrt_scratch_pool_destroy(&dev->scratch);
    kvrt_cl_shared_put(dev->shared);
    free(dev);
}

static int cl_buffer_alloc(kvrt_plugin_device *dev, uint64_t bytes, kvrt_plugin_buffer **out, kvrt_plugin_error *err)
{
    struct kvrt_cl_shared *s = dev->shared;
    if (bytes > s->max_alloc)
        return kvrt_gpu_fail(err, KVRT_ERR_NOMEM,
                             "OpenCL buffer of %llu bytes exceeds the %llu-byte allocation "
                             "limit (CL_DEVICE_MAX_MEM_ALLOC_SIZE) of '%s'",
                             (unsigned long long)bytes, (unsigned long long)s->max_alloc, s->choice.name);
    kvrt_plugin_buffer *buf = calloc(1, sizeof(*buf));
    if (!buf)
        return kvrt_gpu_fail(err, KVRT_ERR_NOMEM, "out of host memory for a buffer handle");
    cl_int rc;
    /* OpenCL refuses empty buffers; a 0-byte buffer is still a valid handle. */
    buf->mem = clCreateBuffer(s->context, CL_MEM_READ_WRITE, bytes ? (size_t)bytes : 1, NULL, &rc);
    if (rc != CL_SUCCESS) {
        free(buf);
        return kvrt_gpu_fail(err, rc == CL_INVALID_BUFFER_SIZE ? KVRT_ERR_NOMEM : KVRT_ERR_DEVICE,
                             "clCreateBuffer of %llu bytes on '%s' failed: %s (%d)", (unsigned long long)bytes,
                             s->choice.name, kvrt_cl_error_name(rc), (int)rc);
    }
    buf->bytes = bytes;
    *out = buf;
    return KVRT_OK;
}

static void cl_buffer_free(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf)
{
    (void)dev;
    if (!buf)
        return;
    clReleaseMemObject(buf->mem);
    free(buf);
}

static int cl_buffer_zero(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, uint64_t bytes,
                          kvrt_plugin_error *err)
{
    if (bytes == 0)
        return KVRT_OK;
    const cl_uchar zero = 0;
    cl_event ev;
    cl_int rc =
        clEnqueueFillBuffer(dev->shared->queue, buf->mem, &zero, 1, (size_t)offset, (size_t)bytes, 0, NULL, &ev);
    if (rc != CL_SUCCESS)
        return kvrt_gpu_fail(err, KVRT_ERR_DEVICE, "clEnqueueFillBuffer of %llu bytes at %llu failed: %s (%d)",
                             (unsigned long long)bytes, (unsigned long long)offset, kvrt_cl_error_name(rc), (int)rc);
    return kvrt_cl_wait(ev, "clEnqueueFillBuffer", err);
}

static int cl_buffer_upload(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, const void *src,
                            uint64_t bytes, kvrt_plugin_error *err)
{
    if (bytes == 0)
        return KVRT_OK;
    cl_int rc =
        clEnqueueWriteBuffer(dev->shared->queue, buf->mem, CL_TRUE, (size_t)offset, (size_t)bytes, src, 0, NULL, NULL);
    if (rc != CL_SUCCESS)
        return kvrt_gpu_fail(err, KVRT_ERR_DEVICE, "clEnqueueWriteBuffer of %llu bytes at %llu failed: %s (%d)",
                             (unsigned long long)bytes, (unsigned long long)offset, kvrt_cl_error_name(rc), (int)rc);
    return KVRT_OK;
}

static int cl_buffer_download(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, void *dst,
                              uint64_t bytes, kvrt_plugin_error *err)
{
    if (bytes == 0)
        return KVRT_OK;
    cl_int rc =
        clEnqueueReadBuffer(dev->shared->queue, buf->mem, CL_TRUE, (size_t)offset, (size_t)bytes, dst, 0, NULL, NULL);
    if (rc != CL_SUCCESS)
        return kvrt_gpu_fail(err, KVRT_ERR_DEVICE, "clEnqueueReadBuffer of %llu bytes at %llu failed: %s (%d)",
                             (unsigned long long)bytes, (unsigned long long)offset, kvrt_cl_error_name(rc), (int)rc);
    return KVRT_OK;
}

static const struct kvrt_plugin_descriptor descriptor = {
    .size = sizeof(struct kvrt_plugin_descriptor),
    .abi_major = KVRT_PLUGIN_ABI_MAJOR,
    .abi_minor = KVRT_PLUGIN_ABI_MINOR,
    .name = "opencl",
    .version = KVRT_GPU_PLUGIN_VERSION,
    .description = "OpenCL 1.2 backend (any device type; PoCL runs it on the CPU); device "
                   "from " KVRT_CL_DEVICE_ENV "=platform:device",
    .flags = 0,
    .num_layouts = KVRT_GPU_NUM_LAYOUTS,
    .layouts = kvrt_gpu_layouts,
    .dtypes = KVRT_GPU_DTYPES,
    .ops = KVRT_OP_ALL,
    .probe = cl_probe,
    .bind = cl_bind,
    .unbind = cl_unbind,
    .buffer_alloc = cl_buffer_alloc,
    .buffer_free = cl_buffer_free,
    .buffer_zero = cl_buffer_zero,
    .buffer_upload = cl_buffer_upload,
    .buffer_download = cl_buffer_download,
    KVRT_GPU_ENTRY_OPS,
    .decode_dtypes = KVRT_GPU_DECODE_DTYPES,
    .describe = kvrt_cl_describe,
    .buffer_address = NULL,
    .measure_copy = kvrt_cl_measure_copy,
};

KVRT_PLUGIN_DEFINE_ENTRY(descriptor)
