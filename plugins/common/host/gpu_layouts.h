/*
 * What every GPU backend declares: the same kernels, so the same layouts,
 * element types and version.
 *
 * Layout preference (most preferred first), from what the kernels do:
 *  - H outside N inside a page (LBHNC, BLHNC) first: decode reads one KV
 *    head's tokens, which are then adjacent C-sized rows; NHD orders put
 *    H*C bytes between them.
 *  - Layer-compact before block-outermost for the same page order: the
 *    kernels work one layer at a time, and LBHNC is vLLM's HND, the order
 *    KV connectors ask for.
 *  - BHLNC and LHBNC last: a layer's page is then H separate runs, so
 *    gather/copy move short runs; BHLNC keeps a block's bytes together
 *    across layers (one transfer region), so it goes before LHBNC.
 */
#ifndef KVRT_GPU_LAYOUTS_H
#define KVRT_GPU_LAYOUTS_H

#include <kvrt/plugin.h>

/* meson passes the project version */
#ifndef KVRT_GPU_PLUGIN_VERSION
#define KVRT_GPU_PLUGIN_VERSION "unknown"
#endif

#define KVRT_GPU_NUM_LAYOUTS 6
static const int32_t kvrt_gpu_layouts[KVRT_GPU_NUM_LAYOUTS] = {
    KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_BLHNC, KVRT_LAYOUT_LBNHC, KVRT_LAYOUT_BLNHC, KVRT_LAYOUT_BHLNC, KVRT_LAYOUT_LHBNC,
};

/* Decode computes on fp32, fp16, bf16 and both fp8 formats; int8/uint8
 * (quantised data whose scales live elsewhere) are moved by write, read,
 * copy_blocks, gather and scatter, and refused by decode with
 * KVRT_ERR_UNSUPPORTED before anything is written. */
#define KVRT_GPU_DTYPES                                                                                                \
    ((1u << KVRT_DTYPE_FP32) | (1u << KVRT_DTYPE_FP16) | (1u << KVRT_DTYPE_BF16) | (1u << KVRT_DTYPE_FP8_E4M3) |       \
     (1u << KVRT_DTYPE_FP8_E5M2) | (1u << KVRT_DTYPE_INT8) | (1u << KVRT_DTYPE_UINT8))

/* int8/uint8 carry no scale to compute with: stored and moved only. */
#define KVRT_GPU_DECODE_DTYPES                                                                                         \
    ((1u << KVRT_DTYPE_FP32) | (1u << KVRT_DTYPE_FP16) | (1u << KVRT_DTYPE_BF16) | (1u << KVRT_DTYPE_FP8_E4M3) |       \
     (1u << KVRT_DTYPE_FP8_E5M2))

#endif
