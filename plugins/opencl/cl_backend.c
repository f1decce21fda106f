#include "../common/host/gpu_error.h"
#include "cl_backend.h"
#include "cl_names.h"

int kvrt_cl_scratch_alloc(void *ctx, uint64_t bytes, void **mem, kvrt_plugin_error *err)
{
    struct kvrt_cl_shared *s = ctx;
    cl_int rc;
    cl_mem m = clCreateBuffer(s->context, CL_MEM_READ_WRITE, (size_t)bytes, NULL, &rc);
    if (rc != CL_SUCCESS)
        return kvrt_gpu_fail(err, KVRT_ERR_DEVICE, "clCreateBuffer of %llu scratch bytes on '%s' failed: %s (%d)",
                             (unsigned long long)bytes, s->choice.name, kvrt_cl_error_name(rc), (int)rc);
    *mem = m;
    return KVRT_OK;
}

void kvrt_cl_scratch_free(void *ctx, void *mem)
{
    (void)ctx;
    clReleaseMemObject((cl_mem)mem);
}

int kvrt_cl_wait(cl_event ev, const char *what, kvrt_plugin_error *err)
{
    cl_int rc = clWaitForEvents(1, &ev);
    cl_int status = CL_COMPLETE;
    if (rc == CL_SUCCESS || rc == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, NULL);
    clReleaseEvent(ev);
    if (rc != CL_SUCCESS && rc != CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
        return kvrt_gpu_fail(err, KVRT_ERR_DEVICE, "clWaitForEvents after %s failed: %s (%d)", what,
                             kvrt_cl_error_name(rc), (int)rc);
    if (status < 0)
        return kvrt_gpu_fail(err, KVRT_ERR_DEVICE, "%s failed on the device: %s (%d)", what, kvrt_cl_error_name(status),
                             (int)status);
    return KVRT_OK;
}

static const struct kvrt_gpu_limits *cl_limits(kvrt_plugin_device *dev)
{
    return &dev->shared->limits;
}

static struct kvrt_gpu_arg cl_buffer_arg(kvrt_plugin_buffer *buf)
{
    return (struct kvrt_gpu_arg){&buf->mem, sizeof(cl_mem)};
}

/* The queue is in order, so the call's last event completing means all of
 * its commands completed: keep only that one. */
static void set_pending(struct kvrt_gpu_call *call, cl_event ev)
{
    if (call->pending)
        clReleaseEvent((cl_event)call->pending);
    call->pending = ev;
}

/* Scratch entries keep a cl_mem in their void *mem: a kernel argument as is. */
_Static_assert(sizeof(cl_mem) == sizeof(void *), "cl_mem is a pointer-sized handle");

static int cl_upload(kvrt_plugin_device *dev, struct kvrt_gpu_call *call, const void *host, uint64_t bytes,
                     struct kvrt_gpu_arg *arg, kvrt_plugin_error *err)
{
    struct kvrt_scratch *s;
    int status = kvrt_gpu_call_scratch("OpenCL", call, &dev->scratch, bytes, &s, arg, err);
    if (status != KVRT_OK || bytes == 0 || !host)
        return status;
    cl_event ev;
    cl_int rc =
        clEnqueueWriteBuffer(dev->shared->queue, (cl_mem)s->mem, CL_FALSE, 0, (size_t)bytes, host, 0, NULL, &ev);
    if (rc != CL_SUCCESS)
        return kvrt_gpu_fail(err, KVRT_ERR_DEVICE, "clEnqueueWriteBuffer of %llu index bytes failed: %s (%d)",
                             (unsigned long long)bytes, kvrt_cl_error_name(rc), (int)rc);
    set_pending(call, ev);
    return KVRT_OK;
}

static int cl_launch(kvrt_plugin_device *dev, struct kvrt_gpu_call *call, int kernel, const struct kvrt_gpu_arg *args,
                     unsigned num_args, uint64_t groups, uint32_t local, uint64_t shared_bytes, kvrt_plugin_error *err)
{
    struct kvrt_cl_shared *s = dev->shared;
    cl_kernel k = s->kernels[kernel];
    const size_t global_size = (size_t)(groups * local);
    const size_t local_size = local;
    cl_int rc = CL_SUCCESS;
    unsigned bad = 0;
    cl_event ev = NULL;

    pthread_mutex_lock(&s->launch_lock);
    for (unsigned i = 0; i < num_args && rc == CL_SUCCESS; i++) {
        rc = clSetKernelArg(k, i, args[i].size, args[i].value);
        bad = i;
    }
    if (rc == CL_SUCCESS && shared_bytes > 0) {
        rc = clSetKernelArg(k, num_args, (size_t)shared_bytes, NULL);
        bad = num_args;
    }
    if (rc != CL_SUCCESS) {
        pthread_mutex_unlock(&s->launch_lock);
        return kvrt_gpu_fail(err, KVRT_ERR_INTERNAL, "clSetKernelArg(%s, %u) failed: %s (%d)",
                             kvrt_gpu_kernel_names[kernel], bad, kvrt_cl_error_name(rc), (int)rc);
    }
    rc = clEnqueueNDRangeKernel(s->queue, k, 1, NULL, &global_size, &local_size, 0, NULL, &ev);
    pthread_mutex_unlock(&s->launch_lock);
    if (rc != CL_SUCCESS)
        return kvrt_gpu_fail(err, KVRT_ERR_DEVICE,
                             "clEnqueueNDRangeKernel(%s, %llu x %u work-items, %llu local "
                             "bytes) failed: %s (%d)",
                             kvrt_gpu_kernel_names[kernel], (unsigned long long)groups, local,
                             (unsigned long long)shared_bytes, kvrt_cl_error_name(rc), (int)rc);
    set_pending(call, ev);
    return KVRT_OK;
}

static int cl_finish(kvrt_plugin_device *dev, struct kvrt_gpu_call *call, int status, kvrt_plugin_error *err)
{
    if (call->pending) {
        /* Always wait, even after a failure: the device may still read the
         * host index arrays and the scratch. */
        int rc = kvrt_cl_wait((cl_event)call->pending, "a kvrt kernel", status ? NULL : err);
        call->pending = NULL;
        if (status == KVRT_OK)
            status = rc;
    }
    for (unsigned i = 0; i < call->num_scratch; i++)
        kvrt_scratch_release(&dev->scratch, call->scratch[i]);
    call->num_scratch = 0;
    return status;
}

const struct kvrt_gpu_backend kvrt_gpu_plugin_backend = {
    .api = "OpenCL",
    .limits = cl_limits,
    .buffer_arg = cl_buffer_arg,
    .upload = cl_upload,
    .launch = cl_launch,
    .finish = cl_finish,
};
