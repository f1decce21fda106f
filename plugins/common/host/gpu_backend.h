/*
 * What the shared operation code (gpu_ops.c) needs from a device API.  The
 * OpenCL and the CUDA/HIP hosts each provide one of these; everything above
 * it (argument layout, unit and index choice, waves, staging offsets) is
 * written once.
 *
 * A call (one plugin function) enqueues uploads and launches, then finish()
 * waits for them: every plugin function is complete when it returns, so host
 * index arrays and scratch are never used after the call.
 */
#ifndef KVRT_GPU_BACKEND_H
#define KVRT_GPU_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include <kvrt/plugin.h>

#include "scratch_pool.h"

/* One kernel argument: the address and size of its value (a cl_mem or a
 * device pointer for buffers, the scalar itself otherwise). */
struct kvrt_gpu_arg {
    const void *value;
    size_t size;
};

struct kvrt_gpu_limits {
    uint32_t move_local;    /* work-items per group of byte movers: a power of two */
    uint32_t decode_local;  /* work-items per group of decode: a power of two */
    uint32_t decode_lanes;  /* lanes per token in decode; 0: from the row */
    uint64_t max_groups;    /* for grid-stride kernels */
    uint64_t compute_units; /* work-groups the device runs at once, roughly */
    uint64_t shared_bytes;  /* dynamic local memory one group may use */
};

#define KVRT_GPU_CALL_MAX_SCRATCH 4

/* Per-call state, on the caller's stack. */
struct kvrt_gpu_call {
    struct kvrt_scratch *scratch[KVRT_GPU_CALL_MAX_SCRATCH];
    unsigned num_scratch;
    void *pending; /* backend's own: e.g. the call's last OpenCL event */
};

/* What an enter hook saves for its leave hook (the caller's device or
 * context), on the entry point's stack. */
struct kvrt_gpu_scope {
    int previous;
    int changed;
    void *context;
};

/* Take scratch of `bytes` from `pool` for the call (it goes back when the
 * call finishes) and point *arg at it; the backend's upload then fills it.
 * Fails when the call already holds KVRT_GPU_CALL_MAX_SCRATCH entries. */
int kvrt_gpu_call_scratch(const char *api, struct kvrt_gpu_call *call, struct kvrt_scratch_pool *pool, uint64_t bytes,
                          struct kvrt_scratch **out, struct kvrt_gpu_arg *arg, kvrt_plugin_error *err);

struct kvrt_gpu_backend {
    const char *api; /* "OpenCL", "CUDA", "HIP": for messages */
    const struct kvrt_gpu_limits *(*limits)(kvrt_plugin_device *dev);
    struct kvrt_gpu_arg (*buffer_arg)(kvrt_plugin_buffer *buf);
    /* Copy host bytes into fresh scratch (possibly asynchronously: finish
     * waits); the scratch is recorded in call and *arg refers to it.  With
     * host NULL the scratch is only reserved (kernels write it). */
    int (*upload)(kvrt_plugin_device *dev, struct kvrt_gpu_call *call, const void *host, uint64_t bytes,
                  struct kvrt_gpu_arg *arg, kvrt_plugin_error *err);
    /* Launch kernel (enum kvrt_gpu_kernel) on groups x local work-items. */
    int (*launch)(kvrt_plugin_device *dev, struct kvrt_gpu_call *call, int kernel, const struct kvrt_gpu_arg *args,
                  unsigned num_args, uint64_t groups, uint32_t local, uint64_t shared_bytes, kvrt_plugin_error *err);
    /* Wait for the call's work, release its scratch; report the first
     * failure unless `status` already is one. */
    int (*finish)(kvrt_plugin_device *dev, struct kvrt_gpu_call *call, int status, kvrt_plugin_error *err);
    /* Optional (NULL: nothing to do), around every operation entry point
     * (gpu_entry.c): make dev usable on the calling thread, then give the
     * thread's previous state back.  leave runs only after enter succeeded. */
    int (*enter)(kvrt_plugin_device *dev, struct kvrt_gpu_scope *scope, kvrt_plugin_error *err);
    void (*leave)(const struct kvrt_gpu_scope *scope);
};

#endif
