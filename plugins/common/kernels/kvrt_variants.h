/*
 * The kernel variants, as X-macros shared by the kernel source and the host
 * code, so kernel names and launch ids cannot drift apart.
 *
 * Byte-moving kernels come in a unit size (the widest load every address and
 * length of the call is aligned to) and an index width (32-bit index
 * arithmetic when every count of the call fits, because 64-bit division is
 * several times slower on GPUs).  Decode comes per element type; the values
 * are enum kvrt_dtype.
 */
#ifndef KVRT_VARIANTS_H
#define KVRT_VARIANTS_H

/* X(suffix, unit bytes, 32-bit index) */
#define KVRT_MOVE_VARIANTS(X)                                                                                          \
    X(u8_i32, 1, 1) X(u8_i64, 1, 0) X(u32_i32, 4, 1) X(u32_i64, 4, 0) X(u128_i32, 16, 1) X(u128_i64, 16, 0)

#define KVRT_DT_F32 0
#define KVRT_DT_F16 1
#define KVRT_DT_BF16 2
#define KVRT_DT_E4M3 3
#define KVRT_DT_E5M2 4

/* X(suffix, element type, vector loads): vector variants read K/V rows in
 * 16-byte units (8 bytes for fp8) and need every cell offset and row length
 * aligned to them; the others read element by element. */
/* clang-format off */
#define KVRT_DECODE_VARIANTS(X)                                                \
    X(f32, KVRT_DT_F32, 0) X(f16, KVRT_DT_F16, 0) X(bf16, KVRT_DT_BF16, 0)     \
    X(e4m3, KVRT_DT_E4M3, 0) X(e5m2, KVRT_DT_E5M2, 0)                          \
    X(f32_v, KVRT_DT_F32, 1) X(f16_v, KVRT_DT_F16, 1)                          \
    X(bf16_v, KVRT_DT_BF16, 1) X(e4m3_v, KVRT_DT_E4M3, 1)                      \
    X(e5m2_v, KVRT_DT_E5M2, 1)

/* X(suffix, element type): the partition reduction of decode. */
#define KVRT_REDUCE_VARIANTS(X)                                                \
    X(f32, KVRT_DT_F32) X(f16, KVRT_DT_F16) X(bf16, KVRT_DT_BF16)              \
    X(e4m3, KVRT_DT_E4M3) X(e5m2, KVRT_DT_E5M2)
/* clang-format on */

/* Query heads one decode work-group serves at most (its register
 * accumulators are sized by it); larger groups are split into chunks. */
#define KVRT_DECODE_MAX_G 8

/* Modes of the pages kernel. */
#define KVRT_PAGES_COPY 0    /* cache block -> cache block */
#define KVRT_PAGES_GATHER 1  /* cache block -> staging */
#define KVRT_PAGES_SCATTER 2 /* staging -> cache block */

/* Directions of the tokens kernel. */
#define KVRT_TOKENS_WRITE 0 /* K/V rows -> cache cells */
#define KVRT_TOKENS_READ 1  /* cache cells -> K/V rows */

#endif
