/*
 * kvrt — device buffers of a bound backend: host data in and out, and
 * their address for zero-copy export.
 */
#ifndef KVRT_BUFFER_H
#define KVRT_BUFFER_H

#include <stdint.h>
#include <kvrt/common.h>
#include <kvrt/backend.h>
#include <kvrt/device.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kvrt_buffer kvrt_buffer;

KVRT_API int kvrt_buffer_create(kvrt_backend *b, uint64_t bytes, kvrt_buffer **out);
KVRT_API void kvrt_buffer_destroy(kvrt_buffer *buf);
KVRT_API uint64_t kvrt_buffer_size(const kvrt_buffer *buf);
KVRT_API int kvrt_buffer_upload(kvrt_buffer *buf, uint64_t offset, const void *src, uint64_t bytes);
KVRT_API int kvrt_buffer_download(kvrt_buffer *buf, uint64_t offset, void *dst, uint64_t bytes);
KVRT_API int kvrt_buffer_zero(kvrt_buffer *buf, uint64_t offset, uint64_t bytes);
/**
 * The address of the buffer's first byte, for zero-copy export (DLPack) and
 * RDMA registration: a host pointer (kind KVRT_MEMORY_HOST) or a device
 * pointer (KVRT_MEMORY_CUDA / KVRT_MEMORY_ROCM).  It stays valid while the
 * buffer lives.  kind may be NULL.
 * @return KVRT_ERR_UNSUPPORTED, naming the backend, when its buffers have no
 *   address in this process (OpenCL); *addr is then NULL and *kind OPAQUE.
 */
KVRT_API int kvrt_buffer_address(kvrt_buffer *buf, void **addr, enum kvrt_memory_kind *kind);

#ifdef __cplusplus
}
#endif
#endif
