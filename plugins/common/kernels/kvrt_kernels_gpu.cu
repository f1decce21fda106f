/*
 * The CUDA and HIP translation unit: the portable kernel bodies compiled by
 * nvcc (kvrt-cuda) or by hipcc -x hip (kvrt-rocm), plus the table the C host
 * code launches from (cudaLaunchKernel / hipLaunchKernel take the kernel's
 * host-side address).  Table order = enum kvrt_gpu_kernel (gpu_kernels.h).
 */
#include "kvrt_api_gpu.h"
#include "kvrt_variants.h"
#include "kvrt_elem.h"
#include "kvrt_tokens.h"
#include "kvrt_pages.h"
#include "kvrt_decode.h"

#define KVRT_TABLE_TOKENS(suffix, unit, idx32) (const void *)kvrt_tokens_##suffix,
#define KVRT_TABLE_PAGES(suffix, unit, idx32) (const void *)kvrt_pages_##suffix,
#define KVRT_TABLE_DECODE(suffix, dt, vec) (const void *)kvrt_decode_##suffix,
#define KVRT_TABLE_REDUCE(suffix, dt) (const void *)kvrt_decode_reduce_##suffix,

extern "C" {
extern const void *const kvrt_gpu_kernel_table[];
const void *const kvrt_gpu_kernel_table[] = {
    KVRT_MOVE_VARIANTS(KVRT_TABLE_TOKENS)
    KVRT_MOVE_VARIANTS(KVRT_TABLE_PAGES)
    KVRT_DECODE_VARIANTS(KVRT_TABLE_DECODE)
    KVRT_REDUCE_VARIANTS(KVRT_TABLE_REDUCE)
};
}
