/*
 * Launch ids of the portable kernels, derived from the same X-macros as the
 * kernel source (kernels/kvrt_variants.h).
 */
#ifndef KVRT_GPU_KERNELS_H
#define KVRT_GPU_KERNELS_H

#include <stdint.h>

#include "kvrt_variants.h"

enum kvrt_gpu_kernel {
#define KVRT_ID_TOKENS(suffix, unit, idx32) KVRT_GPU_K_TOKENS_##suffix,
#define KVRT_ID_PAGES(suffix, unit, idx32) KVRT_GPU_K_PAGES_##suffix,
#define KVRT_ID_DECODE(suffix, dt, vec) KVRT_GPU_K_DECODE_##suffix,
#define KVRT_ID_REDUCE(suffix, dt) KVRT_GPU_K_REDUCE_##suffix,
    KVRT_MOVE_VARIANTS(KVRT_ID_TOKENS) KVRT_MOVE_VARIANTS(KVRT_ID_PAGES) KVRT_DECODE_VARIANTS(KVRT_ID_DECODE)
        KVRT_REDUCE_VARIANTS(KVRT_ID_REDUCE)
#undef KVRT_ID_TOKENS
#undef KVRT_ID_REDUCE
#undef KVRT_ID_PAGES
#undef KVRT_ID_DECODE
            KVRT_GPU_K_COUNT
};

/* Kernel function names, indexed by enum kvrt_gpu_kernel. */
extern const char *const kvrt_gpu_kernel_names[KVRT_GPU_K_COUNT];

/* The tokens/pages kernel for a unit size (1, 4, 16) and index width. */
enum kvrt_gpu_kernel kvrt_gpu_tokens_kernel(uint32_t unit, int idx32);
enum kvrt_gpu_kernel kvrt_gpu_pages_kernel(uint32_t unit, int idx32);
/* The decode kernel of an element type, with or without vector loads, and
 * its partition reduction; -1 when there is none. */
int kvrt_gpu_decode_kernel(int dtype, int vec);
int kvrt_gpu_reduce_kernel(int dtype);

#endif
