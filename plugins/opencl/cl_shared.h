/*
 * The process-wide OpenCL state of kvrt-opencl: one device, context, in-order
 * queue and built program, shared by every bind (so the program is built once,
 * and buffers of one bind are usable by another).  Reference counted: created
 * by the first bind, released by the last unbind.
 */
#ifndef KVRT_CL_SHARED_H
#define KVRT_CL_SHARED_H

#include <pthread.h>

#include <kvrt/plugin.h>

#include "../common/host/gpu_backend.h"
#include "../common/host/gpu_kernels.h"
#include "cl_api.h"
#include "cl_select.h"

struct kvrt_cl_shared {
    unsigned refs;
    struct kvrt_cl_choice choice;
    cl_context context;
    cl_command_queue queue;
    cl_program program;
    cl_kernel kernels[KVRT_GPU_K_COUNT];
    /* clSetKernelArg + clEnqueueNDRangeKernel on a shared cl_kernel must not
     * interleave between threads; enqueueing itself is thread-safe. */
    pthread_mutex_t launch_lock;
    struct kvrt_gpu_limits limits;
    cl_ulong max_alloc;
};

int kvrt_cl_shared_get(const struct kvrt_plugin_host *host, struct kvrt_cl_shared **out, kvrt_plugin_error *err);
void kvrt_cl_shared_put(struct kvrt_cl_shared *shared);

#endif
