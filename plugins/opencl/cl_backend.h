/*
 * kvrt-opencl's handles and its kvrt_gpu_backend (the device side of the
 * shared operation code).
 */
#ifndef KVRT_CL_BACKEND_H
#define KVRT_CL_BACKEND_H

#include <kvrt/plugin.h>

#include "../common/host/gpu_backend.h"
#include "../common/host/scratch_pool.h"
#include "cl_api.h"
#include "cl_shared.h"

struct kvrt_plugin_device {
    struct kvrt_cl_shared *shared;
    int32_t layout;
    struct kvrt_plugin_host host; /* a copy; size 0 when the core gave none */
    struct kvrt_scratch_pool scratch;
};

struct kvrt_plugin_buffer {
    cl_mem mem;
    uint64_t bytes;
};

extern const struct kvrt_gpu_backend kvrt_gpu_plugin_backend;

/* Scratch pool callbacks (ctx is the kvrt_cl_shared). */
int kvrt_cl_scratch_alloc(void *ctx, uint64_t bytes, void **mem, kvrt_plugin_error *err);
void kvrt_cl_scratch_free(void *ctx, void *mem);

/* The descriptor's measure_copy (cl_roofline.c). */
int kvrt_cl_measure_copy(kvrt_plugin_device *dev, uint64_t bytes, double *bytes_per_second, kvrt_plugin_error *err);

/* Wait for ev, then release it; a failed command's status becomes an error. */
int kvrt_cl_wait(cl_event ev, const char *what, kvrt_plugin_error *err);

#endif
