/*
 * kvrt — a bound backend: the plugin and layout kvrt_runtime_bind chose,
 * the device it drives and what it can do.
 */
#ifndef KVRT_BACKEND_H
#define KVRT_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include <kvrt/common.h>
#include <kvrt/device.h>
#include <kvrt/dtype.h>
#include <kvrt/layout.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kvrt_backend kvrt_backend;

KVRT_API const char *kvrt_backend_name(const kvrt_backend *b);

/* The device a bound backend drives (plugin ABI 1.1 `describe`). */
struct kvrt_device_info {
    enum kvrt_device_type type;
    enum kvrt_memory_kind memory;
    int32_t device_id;
    char name[KVRT_DEVICE_NAME_MAX];
    uint8_t reserved[64];
};
/** Fill `out` (zeroed first).  A plugin that does not describe its device
 *  gives type UNKNOWN, memory OPAQUE and name "". */
KVRT_API int kvrt_backend_device_info(const kvrt_backend *b, struct kvrt_device_info *out);
/**
 * The backend's own copy bandwidth, for benchmarks: `bytes` copied between
 * two of its buffers, timed by the plugin over many copies, in bytes per
 * second (each byte counted once).
 * @return KVRT_ERR_UNSUPPORTED, naming the backend, when its plugin does not
 *   measure (then compare with host memcpy).
 */
KVRT_API int kvrt_backend_copy_bandwidth(kvrt_backend *b, uint64_t bytes, double *bytes_per_second);
KVRT_API enum kvrt_layout kvrt_backend_layout(const kvrt_backend *b);
KVRT_API bool kvrt_backend_supports_dtype(const kvrt_backend *b, enum kvrt_dtype dtype);
KVRT_API uint32_t kvrt_backend_ops(const kvrt_backend *b);

#ifdef __cplusplus
}
#endif
#endif
