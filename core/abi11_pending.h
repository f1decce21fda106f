/* TEMPORARY: the ABI 1.1 declarations of kvrt/runtime.h, until that change
 * is merged; removed then. */
#ifndef KVRT_CORE_ABI11_PENDING_H
#define KVRT_CORE_ABI11_PENDING_H
#include <kvrt/runtime.h>
enum kvrt_device_type { KVRT_DEVICE_TYPE_UNKNOWN = 0, KVRT_DEVICE_TYPE_CPU = 1,
                        KVRT_DEVICE_TYPE_GPU = 2, KVRT_DEVICE_TYPE_ACCELERATOR = 3 };
enum kvrt_memory_kind { KVRT_MEMORY_OPAQUE = 0, KVRT_MEMORY_HOST = 1,
                        KVRT_MEMORY_CUDA = 2, KVRT_MEMORY_ROCM = 3 };
struct kvrt_device_info { enum kvrt_device_type type; enum kvrt_memory_kind memory;
                          int32_t device_id; char name[256]; uint8_t reserved[64]; };
KVRT_API int kvrt_backend_device_info(const kvrt_backend *b, struct kvrt_device_info *out);
KVRT_API int kvrt_buffer_address(kvrt_buffer *buf, void **addr, enum kvrt_memory_kind *kind);
#endif
