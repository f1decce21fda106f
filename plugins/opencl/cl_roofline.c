/*
 * kvrt-opencl's copy roofline for `kvrt bench`: clEnqueueCopyBuffer between
 * two device buffers, warmed up, then COPIES copies timed together (the
 * queue is in order: waiting for the last one waits for all).  The queue
 * has no profiling, so the clock is the host's, around the whole batch.
 */
#include <time.h>

#include "../common/host/gpu_error.h"
#include "cl_backend.h"
#include "cl_names.h"

#define COPIES 10

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int copies(struct kvrt_cl_shared *s, cl_mem a, cl_mem b, size_t bytes, int n, kvrt_plugin_error *err)
{
    cl_event ev = NULL;
    cl_int rc = CL_SUCCESS;
    for (int i = 0; i < n && rc == CL_SUCCESS; i++) {
        if (ev)
            clReleaseEvent(ev);
        ev = NULL;
        rc = clEnqueueCopyBuffer(s->queue, i % 2 ? b : a, i % 2 ? a : b, 0, 0, bytes, 0, NULL, &ev);
    }
    if (rc != CL_SUCCESS) {
        if (ev) {
            clWaitForEvents(1, &ev);
            clReleaseEvent(ev);
        }
        clFinish(s->queue);
        return kvrt_gpu_fail(err, KVRT_ERR_DEVICE, "clEnqueueCopyBuffer of %llu bytes failed: %s (%d)",
                             (unsigned long long)bytes, kvrt_cl_error_name(rc), (int)rc);
    }
    return kvrt_cl_wait(ev, "clEnqueueCopyBuffer", err);
}

int kvrt_cl_measure_copy(kvrt_plugin_device *dev, uint64_t bytes, double *bytes_per_second, kvrt_plugin_error *err)
{
    struct kvrt_cl_shared *s = dev->shared;
    if (bytes > s->max_alloc)
        bytes = s->max_alloc;
    cl_int rc;
    cl_mem a = clCreateBuffer(s->context, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &rc);
    cl_mem b = rc == CL_SUCCESS ? clCreateBuffer(s->context, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &rc) : NULL;
    int status = KVRT_OK;
    if (rc != CL_SUCCESS)
        status = kvrt_gpu_fail(err, KVRT_ERR_NOMEM, "clCreateBuffer of %llu roofline bytes on '%s' failed: %s (%d)",
                               (unsigned long long)bytes, s->choice.name, kvrt_cl_error_name(rc), (int)rc);
    if (status == KVRT_OK)
        status = copies(s, a, b, (size_t)bytes, 2, err); /* first touch, warm-up */
    const double t0 = now();
    if (status == KVRT_OK)
        status = copies(s, a, b, (size_t)bytes, COPIES, err);
    const double t = now() - t0;
    if (status == KVRT_OK)
        *bytes_per_second = t > 0 ? (double)bytes * COPIES / t : 0;
    if (a)
        clReleaseMemObject(a);
    if (b)
        clReleaseMemObject(b);
    return status;
}
