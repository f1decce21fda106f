/*
 * kvrt — what kind of device a backend drives and what kind of memory its
 * buffers are.  Shared by the runtime API and the plugin ABI; the values are
 * ABI (locked by tests/abi).
 */
#ifndef KVRT_DEVICE_H
#define KVRT_DEVICE_H

#include <kvrt/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The device a backend computes on.  Automatic backend selection uses it:
 * a backend whose device is the host CPU (an OpenCL CPU device such as PoCL)
 * ranks after the native "cpu" backend. */
enum kvrt_device_type {
    KVRT_DEVICE_TYPE_UNKNOWN = 0, /* the plugin does not say (ABI 1.0) */
    KVRT_DEVICE_TYPE_CPU = 1,
    KVRT_DEVICE_TYPE_GPU = 2,
    KVRT_DEVICE_TYPE_ACCELERATOR = 3,
};

/* Where a backend's buffers live, as seen from the calling process. */
enum kvrt_memory_kind {
    KVRT_MEMORY_OPAQUE = 0, /* no address in this process (OpenCL buffers) */
    KVRT_MEMORY_HOST = 1,   /* ordinary host memory: a plain pointer */
    KVRT_MEMORY_CUDA = 2,   /* a CUDA device pointer on device_id */
    KVRT_MEMORY_ROCM = 3,   /* a HIP device pointer on device_id */
};

#define KVRT_DEVICE_NAME_MAX 256

/** "unknown", "cpu", "gpu" or "accelerator"; NULL for another value. */
KVRT_API const char *kvrt_device_type_name(enum kvrt_device_type type);

/** "opaque", "host", "cuda" or "rocm"; NULL for another value. */
KVRT_API const char *kvrt_memory_kind_name(enum kvrt_memory_kind kind);

#ifdef __cplusplus
}
#endif
#endif
