#include <dlfcn.h>
#include <pthread.h>
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
    /* The runtime's last-error flag is per thread and, for HIP, shared with
     * the host application: reported here, so cleared (a sticky device
     * fault stays, as it must). */
    (void)gpurtGetLastError();
    char text[256];
    return kvrt_gpu_fail(err, status, "%s failed: %s", what, kvrt_gpurt_describe(rc, text, sizeof(text)));
}

#if defined(KVRT_GPURT_HIP)
/*
 * The device's architecture must be one this module was built for.
 * KVRT_HIP_ARCHS is the comma-separated hip_offload_arch option; an entry is
 * a base name with optional target features ("gfx90a", "gfx90a:xnack+").
 * The device reports its base and features ("gfx90a:sramecc+:xnack-"): an
 * entry matches when the bases are equal and each feature the entry names
 * is among the device's.
 */
static int entry_matches(const char *entry, size_t n, const char *device)
{
    const size_t base = strcspn(device, ":");
    const size_t ebase = strcspn(entry, ":");
    if ((ebase < n ? ebase : n) != base || strncmp(entry, device, base) != 0)
        return 0;
    for (size_t i = ebase; i < n;) {
        const size_t f = i + 1, len = strcspn(entry + f, ":,");
        const size_t flen = f + len <= n ? len : n - f;
        int found = 0;
        for (const char *d = device + base; *d == ':' && !found;) {
            const size_t dl = strcspn(d + 1, ":");
            found = dl == flen && strncmp(d + 1, entry + f, flen) == 0;
            d += 1 + dl;
        }
        if (!found)
            return 0;
        i = f + flen;
    }
    return 1;
}

static int arch_missing(const gpurtDeviceProp *prop, int ordinal, kvrt_plugin_error *why)
{
    char arch[sizeof(prop->gcnArchName)];
    snprintf(arch, sizeof(arch), "%s", prop->gcnArchName);
    const char *list = KVRT_HIP_ARCHS;
    for (const char *p = list; *p;) {
        const size_t n = strcspn(p, ",");
        if (entry_matches(p, n, arch))
            return 0;
        p += n + (p[n] == ',');
    }
    const size_t base = strcspn(arch, ":");
    return kvrt_gpu_fail(why, KVRT_ERR_NODEV,
                         "HIP device %d '%s' is %s, but kvrt-rocm was built for %s; rebuild "
                         "with -Dhip_offload_arch=%.*s",
                         ordinal, prop->name, arch, list, (int)base, arch);
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
                             "no " GPURT_API_NAME " device: " GPURT_FN("GetDeviceCount") " reports 0");
    int chosen = 0;
    const char *env = getenv(GPURT_DEVICE_ENV);
    if (env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (end == env || *end != '\0' || v < 0 || v >= count)
            return kvrt_gpu_fail(why, KVRT_ERR_NODEV, GPURT_DEVICE_ENV "='%s' is not a device index; valid: 0..%d", env,
                                 count - 1);
        chosen = (int)v;
    }
    gpurtDeviceProp prop;
    memset(&prop, 0, sizeof(prop));
    rc = gpurtGetDeviceProperties(&prop, chosen);
    if (rc != gpurtSuccess) {
        char text[256];
        return kvrt_gpu_fail(why, KVRT_ERR_NODEV, GPURT_FN("GetDeviceProperties") "(%d) failed: %s", chosen,
                             kvrt_gpurt_describe(rc, text, sizeof(text)));
    }
    int status = arch_missing(&prop, chosen, why);
    if (status)
        return status;
    *ordinal = chosen;
    snprintf(name, name_size, "%s", prop.name);
    return KVRT_OK;
}

/*
 * The thread's current context, to give back exactly what the caller had:
 * a thread that never used the GPU has none, and "restoring" it with
 * SetDevice(0) would create a context on GPU 0.  HIP has the calls; CUDA
 * has them only in the driver API, which the runtime has already loaded
 * (the module never links libcuda itself).
 */
#if defined(KVRT_GPURT_HIP)
/* Deprecated in HIP, yet the only way to see that a thread has no context. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static int ctx_get(void **ctx)
{
    hipCtx_t c = NULL;
    if (hipCtxGetCurrent(&c) != hipSuccess)
        return -1;
    *ctx = (void *)c;
    return 0;
}

static void ctx_set(void *ctx)
{
    (void)hipCtxSetCurrent((hipCtx_t)ctx);
}
#pragma GCC diagnostic pop
#else
typedef int (*cu_ctx_get_fn)(void **ctx);
typedef int (*cu_ctx_set_fn)(void *ctx);
static cu_ctx_get_fn cu_ctx_get;
static cu_ctx_set_fn cu_ctx_set;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
/* Held for the process's lifetime: the functions above point into it. */
static void *cu_lib;

static void cu_resolve(void)
{
    cu_lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!cu_lib)
        return;
    /* dlsym returns data pointers; POSIX guarantees the conversion. */
    void *g = dlsym(cu_lib, "cuCtxGetCurrent"), *s = dlsym(cu_lib, "cuCtxSetCurrent");
    if (g && s) {
        memcpy(&cu_ctx_get, &g, sizeof(g));
        memcpy(&cu_ctx_set, &s, sizeof(s));
    }
}

static int ctx_get(void **ctx)
{
    pthread_once(&cu_once, cu_resolve);
    return cu_ctx_get && cu_ctx_get(ctx) == 0 ? 0 : -1;
}

static void ctx_set(void *ctx)
{
    if (cu_ctx_set)
        (void)cu_ctx_set(ctx);
}
#endif

enum { SCOPE_KEPT = 0, SCOPE_DEVICE = 1, SCOPE_NO_CONTEXT = 2 };

int kvrt_gpurt_enter(int ordinal, struct kvrt_gpu_scope *scope, kvrt_plugin_error *err)
{
    scope->changed = SCOPE_KEPT;
    scope->context = NULL;
    const int had_none = ctx_get(&scope->context) == 0 && scope->context == NULL;
    if (!had_none && gpurtGetDevice(&scope->previous) == gpurtSuccess && scope->previous == ordinal)
        return KVRT_OK;
    gpurt_error rc = gpurtSetDevice(ordinal);
    if (rc != gpurtSuccess)
        return kvrt_gpurt_fail(err, KVRT_ERR_DEVICE, rc, GPURT_FN("SetDevice"));
    scope->changed = had_none ? SCOPE_NO_CONTEXT : SCOPE_DEVICE;
    return KVRT_OK;
}

void kvrt_gpurt_leave(const struct kvrt_gpu_scope *scope)
{
    if (scope->changed == SCOPE_DEVICE)
        (void)gpurtSetDevice(scope->previous);
    else if (scope->changed == SCOPE_NO_CONTEXT)
        ctx_set(NULL);
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

static int rt_upload(kvrt_plugin_device *dev, struct kvrt_gpu_call *call, const void *host, uint64_t bytes,
                     struct kvrt_gpu_arg *arg, kvrt_plugin_error *err)
{
    struct kvrt_scratch *s;
    int status = kvrt_gpu_call_scratch(GPURT_API_NAME, call, &dev->scratch, bytes, &s, arg, err);
    if (status != KVRT_OK || bytes == 0 || !host)
        return status;
    gpurt_error rc = gpurtMemcpyAsync(s->mem, host, (size_t)bytes, gpurtMemcpyHostToDevice, gpurtStreamPerThread);
    if (rc != gpurtSuccess)
        return kvrt_gpurt_fail(err, KVRT_ERR_DEVICE, rc, GPURT_FN("MemcpyAsync") " of indices");
    return KVRT_OK;
}

#define MAX_ARGS 32

static int rt_launch(kvrt_plugin_device *dev, struct kvrt_gpu_call *call, int kernel, const struct kvrt_gpu_arg *args,
                     unsigned num_args, uint64_t groups, uint32_t local, uint64_t shared_bytes, kvrt_plugin_error *err)
{
    (void)dev;
    (void)call;
    void *argv[MAX_ARGS];
    if (num_args > MAX_ARGS)
        return kvrt_gpu_fail(err, KVRT_ERR_INTERNAL, "%s takes %u arguments; at most %d", kvrt_gpu_kernel_names[kernel],
                             num_args, MAX_ARGS);
    for (unsigned i = 0; i < num_args; i++)
        argv[i] = (void *)args[i].value;
    const dim3 grid = {(unsigned)groups, 1, 1};
    const dim3 block = {local, 1, 1};
    gpurt_error rc =
        gpurtLaunchKernel(kvrt_gpu_kernel_table[kernel], grid, block, argv, (size_t)shared_bytes, gpurtStreamPerThread);
    if (rc != gpurtSuccess) {
        char text[256];
        return kvrt_gpu_fail(err, KVRT_ERR_DEVICE,
                             GPURT_FN("LaunchKernel") "(%s, %llu x %u threads, %llu shared "
                                                      "bytes) failed: %s",
                             kvrt_gpu_kernel_names[kernel], (unsigned long long)groups, local,
                             (unsigned long long)shared_bytes, kvrt_gpurt_describe(rc, text, sizeof(text)));
    }
    return KVRT_OK;
}

static int rt_finish(kvrt_plugin_device *dev, struct kvrt_gpu_call *call, int status, kvrt_plugin_error *err)
{
    /* Always wait, even after a failure: queued copies may still read the
     * caller's host arrays. */
    gpurt_error rc = gpurtStreamSynchronize(gpurtStreamPerThread);
    if (status == KVRT_OK && rc != gpurtSuccess)
        status = kvrt_gpurt_fail(err, KVRT_ERR_DEVICE, rc, "a kvrt kernel (" GPURT_FN("StreamSynchronize") ")");
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
