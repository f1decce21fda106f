/*
 * Error messages of the GPU plugins: one formatting helper, so every failure
 * fills kvrt_plugin_error the same way and returns its status in one line.
 */
#ifndef KVRT_GPU_ERROR_H
#define KVRT_GPU_ERROR_H

#include <kvrt/plugin.h>

/* Write the message into err (which may be NULL) and return status. */
int kvrt_gpu_fail(kvrt_plugin_error *err, int status, const char *fmt, ...) KVRT_PRINTF(3, 4);

/* "bf16", ... or "dtype <n>" for an unknown value (buffer of 16 bytes). */
const char *kvrt_gpu_dtype_name(int dtype, char buf[16]);

/* Copy the core's host services out of a bind's info (they may not outlive
 * the call); out->size is 0 when the core offered none. */
void kvrt_gpu_host_from_bind(const struct kvrt_plugin_bind_info *info, struct kvrt_plugin_host *out);

/* Log through the core's host services when it offered them. */
void kvrt_gpu_log(const struct kvrt_plugin_host *host, int level, const char *fmt, ...) KVRT_PRINTF(3, 4);

#endif
