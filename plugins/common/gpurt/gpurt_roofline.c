/*
 * The device-to-device copy roofline of kvrt-cuda / kvrt-rocm: what
 * `kvrt bench` divides every operation's GB/s by.  A runtime memcpy between
 * two device buffers, warmed up, then COPIES copies between two events on
 * the per-thread stream (the stream kvrt's kernels use), so neither launch
 * gaps of single calls nor host synchronisation enter the figure.
 */
#include "../host/gpu_error.h"
#include "gpurt_backend.h"

#define COPIES 20

static int fail(kvrt_plugin_error *err, gpurt_error rc, const char *what)
{
    return kvrt_gpurt_fail(err, KVRT_ERR_DEVICE, rc, what);
}

static int measure(uint64_t bytes, double *bps, kvrt_plugin_error *err)
{
    void *a = NULL, *b = NULL;
    gpurt_event start = NULL, stop = NULL;
    int status = KVRT_OK;
    gpurt_error rc = gpurtMalloc(&a, (size_t)bytes);
    if (rc == gpurtSuccess)
        rc = gpurtMalloc(&b, (size_t)bytes);
    if (rc != gpurtSuccess)
        status = fail(err, rc, GPURT_FN("Malloc") " of the roofline buffers");
    if (status == KVRT_OK &&
        ((rc = gpurtEventCreate(&start)) != gpurtSuccess || (rc = gpurtEventCreate(&stop)) != gpurtSuccess))
        status = fail(err, rc, GPURT_FN("EventCreate"));
    if (status == KVRT_OK)
        rc = gpurtMemsetAsync(a, 0x5a, (size_t)bytes, gpurtStreamPerThread);
    for (int i = 0; status == KVRT_OK && rc == gpurtSuccess && i < 2; i++) /* warm-up */
        rc = gpurtMemcpyAsync(b, a, (size_t)bytes, gpurtMemcpyDeviceToDevice, gpurtStreamPerThread);
    if (status == KVRT_OK && rc == gpurtSuccess)
        rc = gpurtEventRecord(start, gpurtStreamPerThread);
    for (int i = 0; status == KVRT_OK && rc == gpurtSuccess && i < COPIES; i++)
        rc = i % 2 ? gpurtMemcpyAsync(a, b, (size_t)bytes, gpurtMemcpyDeviceToDevice, gpurtStreamPerThread)
                   : gpurtMemcpyAsync(b, a, (size_t)bytes, gpurtMemcpyDeviceToDevice, gpurtStreamPerThread);
    if (status == KVRT_OK && rc == gpurtSuccess)
        rc = gpurtEventRecord(stop, gpurtStreamPerThread);
    if (status == KVRT_OK && rc == gpurtSuccess)
        rc = gpurtEventSynchronize(stop);
    float ms = 0;
    if (status == KVRT_OK && rc == gpurtSuccess)
        rc = gpurtEventElapsedTime(&ms, start, stop);
    if (status == KVRT_OK && rc != gpurtSuccess)
        status = fail(err, rc, "the device-to-device copy roofline");
    if (status == KVRT_OK && !(ms > 0))
        status = kvrt_gpu_fail(err, KVRT_ERR_DEVICE, "the device-to-device copy roofline measured %g ms", (double)ms);
    if (status == KVRT_OK)
        *bps = (double)bytes * COPIES / ((double)ms / 1e3);
    /* Whatever failed, nothing may stay queued on the buffers. */
    (void)gpurtStreamSynchronize(gpurtStreamPerThread);
    if (start)
        (void)gpurtEventDestroy(start);
    if (stop)
        (void)gpurtEventDestroy(stop);
    (void)gpurtFree(a);
    (void)gpurtFree(b);
    return status;
}

int kvrt_gpurt_measure_copy(kvrt_plugin_device *dev, uint64_t bytes, double *bytes_per_second, kvrt_plugin_error *err)
{
    struct kvrt_gpu_scope scope = {0};
    int status = kvrt_gpurt_enter(dev->ordinal, &scope, err);
    if (status != KVRT_OK)
        return status;
    status = measure(bytes, bytes_per_second, err);
    kvrt_gpurt_leave(&scope);
    return status;
}
