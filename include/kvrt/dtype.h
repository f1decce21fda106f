/*
 * kvrt — element types of a KV cache.
 */
#ifndef KVRT_DTYPE_H
#define KVRT_DTYPE_H

#include <kvrt/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Values are part of the ABI. */
enum kvrt_dtype {
    KVRT_DTYPE_FP32 = 0,
    KVRT_DTYPE_FP16 = 1,
    KVRT_DTYPE_BF16 = 2,
    KVRT_DTYPE_FP8_E4M3 = 3,
    KVRT_DTYPE_FP8_E5M2 = 4,
    KVRT_DTYPE_INT8 = 5,
    KVRT_DTYPE_UINT8 = 6,
};
#define KVRT_NUM_DTYPES 7

/** Bytes per element, 0 for an invalid value. */
KVRT_API size_t kvrt_dtype_size(enum kvrt_dtype dtype);

/** Name ("bf16"), or NULL for an invalid value. */
KVRT_API const char *kvrt_dtype_name(enum kvrt_dtype dtype);

/** Parse "fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "uint8"
 *  (also "float32", "float16", "bfloat16").  Error lists the valid names. */
KVRT_API int kvrt_dtype_parse(const char *name, enum kvrt_dtype *out);

/** The comma-separated list of every valid spelling, the names in enum
 *  order and then the aliases, for messages and help. */
KVRT_API const char *kvrt_dtype_valid_names(void);

#ifdef __cplusplus
}
#endif
#endif
