#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../host/gpu_error.h"
#include "../host/gpu_kernels.h"
#include "gpurt_backend.h"

/* Defined by the kernel translation unit (kvrt_kernels_gpu.cu), in
 * enum kvrt_gpu_kernel order. */
extern const void *const kvrt_gpu_kernel_table[];

const char *kvrt_gpurt_describe(gpurt_error rc, char *buf, size_t size)
{
    const char *name = gpurtGetErrorName(rc);
    const char *text = gpurtGetErrorString(rc);
    /* HIP's "string" is often the name again. */
    if (text && strcmp(text, name) != 0)
        snprintf(buf, size, "%s (%d): %s", name, (int)rc, text);
    else
        snprintf(buf, size, "%s (%d)", name, (int)rc);
    return buf;
}

int kvrt_gpurt_fail(kvrt_plugin_error *err, int status, gpurt_error rc, const char *what)
{
    char text[256];
    return kvrt_gpu_fail(err, status, "%s failed: %s", what,
                         kvrt_gpurt_describe(rc, text, sizeof(text)));
}

#if defined(KVRT_GPURT_HIP)
/* The device's architecture must be one this module was built for:
 * KVRT_HIP_ARCHS is the comma-separated hip_offload_arch option. */
static int arch_missing(const gpurtDeviceProp *prop, int ordinal, kvrt_plugin_error *why)
{
    char arch[sizeof(prop->gcnArchName)];
    snprintf(arch, sizeof(arch), "%s", prop->gcnArchName);
    arch[strcspn(arch, ":")] = '\0'; /* "gfx90a:sramecc+:xnack-" -> "gfx90a" */
    const char *list = KVRT_HIP_ARCHS;
    const size_t len = strlen(arch);
    for (const char *p = list; *p;) {
        const size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, arch, n) == 0)
            return 0;
        p += n + (p[n] == ',');
    }
    return kvrt_gpu_fail(why, KVRT_ERR_NODEV,
                         "HIP device %d '%s' is %s, but kvrt-rocm was built for %s; rebuild "
                         "with -Dhip_offload_arch=%s",
                         ordinal, prop->name, arch, list, arch);
}
#else
/* sm_90 code plus compute_75 PTX: anything from Turing on runs it. */
static int arch_missing(const gpurtDeviceProp *prop, int ordinal, kvrt_plugin_error *why)
{
    if (prop->major * 10 + prop->minor >= 75)
        return 0;
    return kvrt_gpu_fail(why, KVRT_ERR_NODEV,
                         "CUDA device %d '%s' has compute capability %d.%d; kvrt-cuda carries "
                         "sm_90 code and compute_75 PTX, so it needs 7.5 or newer",
                         ordinal, prop->name, prop->major, prop->minor);
}
#endif

int kvrt_gpurt_select(int *ordinal, char *name, size_t name_size, kvrt_plugin_error *why)
{
    int count = 0; /* left unwritten when the call fails */
    gpurt_error rc = gpurtGetDeviceCount(&count);
    if (rc != gpurtSuccess) {
        char text[256];
        return kvrt_gpu_fail(why, KVRT_ERR_NODEV, GPURT_FN("GetDeviceCount") " failed: %s",
                             kvrt_gpurt_describe(rc, text, sizeof(text)));
    }
    if (count <= 0)
        return kvrt_gpu_fail(why, KVRT_ERR_NODEV,
                             "no " GPURT_API_NAME " device: " GPURT_FN("GetDeviceCount")
                             " reports 0");
    int chosen = 0;
    const char *env = getenv(GPURT_DEVICE_ENV);
    if (env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (end == env || *end != '\0' || v < 0 || v >= count)
            return kvrt_gpu_fail(why, KVRT_ERR_NODEV,
                                 GPURT_DEVICE_ENV "='%s' is not a device index; valid: 0..%d",
                                 env, count - 1);
        chosen = (int)v;
    }
    gpurtDeviceProp prop;
    memset(&prop, 0, sizeof(prop));
    rc = gpurtGetDeviceProperties(&prop, chosen);
    if (rc != gpurtSuccess) {
        char text[256];
        return kvrt_gpu_fail(why, KVRT_ERR_NODEV,
                             GPURT_FN("GetDeviceProperties") "(%d) failed: %s", chosen,
                             kvrt_gpurt_describe(rc, text, sizeof(text)));
    }
    int status = arch_missing(&prop, chosen, why);
    if (status)
        return status;
    *ordinal = chosen;
    snprintf(name, name_size, "%s", prop.name);
    return KVRT_OK;
}

int kvrt_gpurt_enter(int ordinal, struct kvrt_gpu_scope *scope, kvrt_plugin_error *err)
{
    scope->changed = 0;
    if (gpurtGetDevice(&scope->previous) == gpurtSuccess && scope->previous == ordinal)
        return KVRT_OK;
    gpurt_error rc = gpurtSetDevice(ordinal);
    if (rc != gpurtSuccess)
        return kvrt_gpurt_fail(err, KVRT_ERR_DEVICE, rc, GPURT_FN("SetDevice"));
    scope->changed = 1;
    return KVRT_OK;
}

void kvrt_gpurt_leave(const struct kvrt_gpu_scope *scope)
{
    if (scope->changed)
        gpurtSetDevice(scope->previous);
}

int kvrt_gpurt_scratch_alloc(void *ctx, uint64_t bytes, void **mem, kvrt_plugin_error *err)
{
    (void)ctx;
    gpurt_error rc = gpurtMalloc(mem, (size_t)bytes);
    if (rc != gpurtSuccess)
        return kvrt_gpurt_fail(err, KVRT_ERR_DEVICE, rc, GPURT_FN("Malloc") " of index scratch");
    return KVRT_OK;
}

void kvrt_gpurt_scratch_free(void *ctx, void *mem)
{
    (void)ctx;
    gpurtFree(mem);
}

static const struct kvrt_gpu_limits *rt_limits(kvrt_plugin_device *dev)
{
    return &dev->limits;
}

static struct kvrt_gpu_arg rt_buffer_arg(kvrt_plugin_buffer *buf)
{
    return (struct kvrt_gpu_arg){&buf->ptr, sizeof(buf->ptr)};
}

static int rt_upload(kvrt_plugin_device *dev, struct kvrt_gpu_call *call, const void *host,
                     uint64_t bytes, struct kvrt_gpu_arg *arg, kvrt_plugin_error *err)
{
    if (call->num_scratch == KVRT_GPU_CALL_MAX_SCRATCH)
        return kvrt_gpu_fail(err, KVRT_ERR_INTERNAL, GPURT_API_NAME ": too many uploads in one call");
    struct kvrt_scratch *s;
    int status = kvrt_scratch_acquire(&dev->scratch, bytes, &s, err);
    if (status != KVRT_OK)
        return status;
    call->scratch[call->num_scratch++] = s;
    *arg = (struct kvrt_gpu_arg){&s->mem, sizeof(s->mem)};
    if (bytes == 0)
        return KVRT_OK;
    gpurt_error rc = gpurtMemcpyAsync(s->mem, host, (size_t)bytes, gpurtMemcpyHostToDevice,
                                      gpurtStreamPerThread);
    if (rc != gpurtSuccess)
        return kvrt_gpurt_fail(err, KVRT_ERR_DEVICE, rc, GPURT_FN("MemcpyAsync") " of indices");
    return KVRT_OK;
}

#define MAX_ARGS 32

static int rt_launch(kvrt_plugin_device *dev, struct kvrt_gpu_call *call, int kernel,
                     const struct kvrt_gpu_arg *args, unsigned num_args, uint64_t groups,
                     uint32_t local, uint64_t shared_bytes, kvrt_plugin_error *err)
{
    (void)dev;
    (void)call;
    void *argv[MAX_ARGS];
    if (num_args > MAX_ARGS)
        return kvrt_gpu_fail(err, KVRT_ERR_INTERNAL, "%s takes %u arguments; at most %d",
                             kvrt_gpu_kernel_names[kernel], num_args, MAX_ARGS);
    for (unsigned i = 0; i < num_args; i++)
        argv[i] = (void *)args[i].value;
    const dim3 grid = {(unsigned)groups, 1, 1};
    const dim3 block = {local, 1, 1};
    gpurt_error rc = gpurtLaunchKernel(kvrt_gpu_kernel_table[kernel], grid, block, argv,
                                       (size_t)shared_bytes, gpurtStreamPerThread);
    if (rc != gpurtSuccess) {
        char text[256];
        return kvrt_gpu_fail(err, KVRT_ERR_DEVICE,
                             GPURT_FN("LaunchKernel") "(%s, %llu x %u threads, %llu shared "
                             "bytes) failed: %s",
                             kvrt_gpu_kernel_names[kernel], (unsigned long long)groups, local,
                             (unsigned long long)shared_bytes,
                             kvrt_gpurt_describe(rc, text, sizeof(text)));
    }
    return KVRT_OK;
}

static int rt_finish(kvrt_plugin_device *dev, struct kvrt_gpu_call *call, int status,
                     kvrt_plugin_error *err)
{
    /* Always wait, even after a failure: queued copies may still read the
     * caller's host arrays. */
    gpurt_error rc = gpurtStreamSynchronize(gpurtStreamPerThread);
    if (status == KVRT_OK && rc != gpurtSuccess)
        status = kvrt_gpurt_fail(err, KVRT_ERR_DEVICE, rc,
                                 "a kvrt kernel (" GPURT_FN("StreamSynchronize") ")");
    for (unsigned i = 0; i < call->num_scratch; i++)
        kvrt_scratch_release(&dev->scratch, call->scratch[i]);
    call->num_scratch = 0;
    return status;
}

static int rt_enter(kvrt_plugin_device *dev, struct kvrt_gpu_scope *scope, kvrt_plugin_error *err)
{
    return kvrt_gpurt_enter(dev->ordinal, scope, err);
}

const struct kvrt_gpu_backend kvrt_gpu_plugin_backend = {
    .api = GPURT_API_NAME,
    .limits = rt_limits,
    .buffer_arg = rt_buffer_arg,
    .upload = rt_upload,
    .launch = rt_launch,
    .finish = rt_finish,
    .enter = rt_enter,
    .leave = kvrt_gpurt_leave,
};
