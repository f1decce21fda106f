/*
 * kvrt-cuda / kvrt-rocm handles, device selection and their
 * kvrt_gpu_backend.  Work goes to the per-thread default stream, so calls
 * from different threads never serialise on one stream and each call waits
 * only for its own work.
 */
#ifndef KVRT_GPURT_BACKEND_H
#define KVRT_GPURT_BACKEND_H

#include <kvrt/plugin.h>

#include "../host/gpu_backend.h"
#include "../host/scratch_pool.h"
#include "gpurt_api.h"

struct kvrt_plugin_device {
    int ordinal;
    int32_t layout;
    char name[128];
    struct kvrt_plugin_host host; /* a copy; size 0 when the core gave none */
    struct kvrt_gpu_limits limits;
    struct kvrt_scratch_pool scratch;
};

struct kvrt_plugin_buffer {
    void *ptr;
    uint64_t bytes;
    int ordinal;  /* its device: buffer_free must not need the binding */
    int imported; /* the caller's memory (buffer_import): never freed here */
};

/* What imported memory must be aligned to: the 16-byte units of the
 * byte-moving kernels and of decode's vector loads, chosen from offsets
 * within the buffer on the assumption that its first byte is aligned. */
#define GPURT_IMPORT_ALIGN 16u

extern const struct kvrt_gpu_backend kvrt_gpu_plugin_backend;

/* "cudaErrorX (n): description" into buf. */
const char *kvrt_gpurt_describe(gpurt_error rc, char *buf, size_t size);

/* Fail with "<what> failed: <describe(rc)>". */
int kvrt_gpurt_fail(kvrt_plugin_error *err, int status, gpurt_error rc, const char *what);

/* The device ordinal to use (env GPURT_DEVICE_ENV, default 0), checked
 * against the devices present and the code this module carries. */
int kvrt_gpurt_select(int *ordinal, char *name, size_t name_size, kvrt_plugin_error *why);

/* The calling thread's current device is the caller's state: every entry
 * point makes the bound device current and gives the previous one back. */
int kvrt_gpurt_enter(int ordinal, struct kvrt_gpu_scope *scope, kvrt_plugin_error *err);
void kvrt_gpurt_leave(const struct kvrt_gpu_scope *scope);

/* The descriptor's measure_copy (gpurt_roofline.c). */
int kvrt_gpurt_measure_copy(kvrt_plugin_device *dev, uint64_t bytes, double *bytes_per_second, kvrt_plugin_error *err);

int kvrt_gpurt_scratch_alloc(void *ctx, uint64_t bytes, void **mem, kvrt_plugin_error *err);
void kvrt_gpurt_scratch_free(void *ctx, void *mem);

#endif
