#include <stdlib.h>
#include <string.h>

#include "../common/host/gpu_error.h"
#include "cl_names.h"
#include "cl_shared.h"

/* Generated from plugins/common/kernels at build time (kvrt-embed). */
extern const char kvrt_opencl_source[];
extern const unsigned long kvrt_opencl_source_len;

#define BUILD_OPTIONS "-cl-std=CL1.2"

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kvrt_cl_shared *state;

static void destroy(struct kvrt_cl_shared *s)
{
    for (unsigned i = 0; i < KVRT_GPU_K_COUNT; i++)
        if (s->kernels[i])
            clReleaseKernel(s->kernels[i]);
    if (s->program)
        clReleaseProgram(s->program);
    if (s->queue)
        clReleaseCommandQueue(s->queue);
    if (s->context)
        clReleaseContext(s->context);
    pthread_mutex_destroy(&s->launch_lock);
    free(s);
}

/* A build failure's message carries the start of the log (the first error
 * is what matters); the whole log goes to the core's log. */
static int build_failed(struct kvrt_cl_shared *s, const struct kvrt_plugin_host *host, cl_int rc,
                        kvrt_plugin_error *err)
{
    size_t size = 0;
    char *log = NULL;
    if (clGetProgramBuildInfo(s->program, s->choice.device, CL_PROGRAM_BUILD_LOG, 0, NULL, &size) == CL_SUCCESS &&
        size > 0 && (log = malloc(size + 1)) != NULL) {
        if (clGetProgramBuildInfo(s->program, s->choice.device, CL_PROGRAM_BUILD_LOG, size, log, NULL) != CL_SUCCESS)
            size = 0;
        log[size] = '\0';
    }
    kvrt_gpu_log(host, 0, "kvrt-opencl: build log for '%s':\n%s", s->choice.name, log ? log : "(none)");
    int status =
        kvrt_gpu_fail(err, KVRT_ERR_DEVICE,
                      "clBuildProgram failed on '%s': %s (%d), options '%s'; build "
                      "log: %s",
                      s->choice.name, kvrt_cl_error_name(rc), (int)rc, BUILD_OPTIONS, log && log[0] ? log : "(empty)");
    free(log);
    return status;
}

static int build(struct kvrt_cl_shared *s, const struct kvrt_plugin_host *host, kvrt_plugin_error *err)
{
    cl_int rc;
    const char *src = kvrt_opencl_source;
    const size_t len = kvrt_opencl_source_len;
    s->program = clCreateProgramWithSource(s->context, 1, &src, &len, &rc);
    if (rc != CL_SUCCESS)
        return kvrt_gpu_fail(err, KVRT_ERR_DEVICE, "clCreateProgramWithSource failed: %s (%d)", kvrt_cl_error_name(rc),
                             (int)rc);
    rc = clBuildProgram(s->program, 1, &s->choice.device, BUILD_OPTIONS, NULL, NULL);
    if (rc != CL_SUCCESS)
        return build_failed(s, host, rc, err);

    size_t kernel_wg = 1024;
    for (unsigned i = 0; i < KVRT_GPU_K_COUNT; i++) {
        s->kernels[i] = clCreateKernel(s->program, kvrt_gpu_kernel_names[i], &rc);
        if (rc != CL_SUCCESS)
            return kvrt_gpu_fail(err, KVRT_ERR_DEVICE, "clCreateKernel('%s') failed: %s (%d)", kvrt_gpu_kernel_names[i],
                                 kvrt_cl_error_name(rc), (int)rc);
        size_t wg = 0;
        if (clGetKernelWorkGroupInfo(s->kernels[i], s->choice.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof(wg), &wg,
                                     NULL) == CL_SUCCESS &&
            wg > 0 && wg < kernel_wg)
            kernel_wg = wg;
    }

    cl_device_type type = 0;
    cl_ulong local_mem = 0;
    cl_uint units = 0;
    clGetDeviceInfo(s->choice.device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(units), &units, NULL);
    clGetDeviceInfo(s->choice.device, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
    clGetDeviceInfo(s->choice.device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(local_mem), &local_mem, NULL);
    clGetDeviceInfo(s->choice.device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(s->max_alloc), &s->max_alloc, NULL);
    /* A CPU runs a work-group as a loop: small groups keep every core busy
     * on small launches.  GPUs want wider groups. */
    const int cpu = (type & CL_DEVICE_TYPE_CPU) != 0;
    const size_t move = cpu ? 64 : 256;
    const size_t decode = cpu ? 64 : 128;
    /* Rows are shared by power-of-two lane groups: keep the group a power
     * of two too. */
    size_t move_local = move < kernel_wg ? move : kernel_wg;
    while (move_local & (move_local - 1))
        move_local &= move_local - 1;
    s->limits.move_local = (uint32_t)move_local;
    size_t decode_local = decode < kernel_wg ? decode : kernel_wg;
    while (decode_local & (decode_local - 1))
        decode_local &= decode_local - 1;
    s->limits.decode_local = (uint32_t)decode_local;
    /* A CPU work-item is a loop iteration that vectorises across its
     * neighbours: one token per work-item, no cross-lane sums. */
    s->limits.decode_lanes = cpu ? 1 : 0;
    s->limits.max_groups = 65536;
    s->limits.compute_units = units ? units : 1;
    s->limits.shared_bytes = local_mem;
    return KVRT_OK;
}

static int create(const struct kvrt_plugin_host *host, struct kvrt_cl_shared **out, kvrt_plugin_error *err)
{
    struct kvrt_cl_shared *s = calloc(1, sizeof(*s));
    if (!s)
        return kvrt_gpu_fail(err, KVRT_ERR_NOMEM, "out of host memory for the OpenCL state");
    pthread_mutex_init(&s->launch_lock, NULL);
    int status = kvrt_cl_select(&s->choice, err);
    if (status != KVRT_OK) {
        destroy(s);
        return status;
    }
    cl_int rc;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)s->choice.platform, 0};
    s->context = clCreateContext(props, 1, &s->choice.device, NULL, NULL, &rc);
    if (rc != CL_SUCCESS) {
        status = kvrt_gpu_fail(err, KVRT_ERR_DEVICE, "clCreateContext on '%s' failed: %s (%d)", s->choice.name,
                               kvrt_cl_error_name(rc), (int)rc);
        destroy(s);
        return status;
    }
    s->queue = clCreateCommandQueue(s->context, s->choice.device, 0, &rc);
    if (rc != CL_SUCCESS) {
        status = kvrt_gpu_fail(err, KVRT_ERR_DEVICE, "clCreateCommandQueue on '%s' failed: %s (%d)", s->choice.name,
                               kvrt_cl_error_name(rc), (int)rc);
        destroy(s);
        return status;
    }
    status = build(s, host, err);
    if (status != KVRT_OK) {
        destroy(s);
        return status;
    }
    kvrt_gpu_log(host, 2, "kvrt-opencl: using device %u:%u '%s'", s->choice.platform_index, s->choice.device_index,
                 s->choice.name);
    *out = s;
    return KVRT_OK;
}

int kvrt_cl_shared_get(const struct kvrt_plugin_host *host, struct kvrt_cl_shared **out, kvrt_plugin_error *err)
{
    pthread_mutex_lock(&state_lock);
    int status = KVRT_OK;
    if (!state)
        status = create(host, &state, err);
    if (status == KVRT_OK) {
        state->refs++;
        *out = state;
    }
    pthread_mutex_unlock(&state_lock);
    return status;
}

void kvrt_cl_shared_put(struct kvrt_cl_shared *shared)
{
    pthread_mutex_lock(&state_lock);
    if (shared == state && --state->refs == 0) {
        clFinish(state->queue);
        destroy(state);
        state = NULL;
    }
    pthread_mutex_unlock(&state_lock);
}
