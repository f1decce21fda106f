/*
 * Host reference arithmetic: element encodings (fp32, fp16, bf16 rounded to
 * nearest even; fp8 OCP E4M3fn and E5M2 decoded only) and paged decode in
 * double precision.
 */
#ifndef KVRT_TESTS_GPU_REF_H
#define KVRT_TESTS_GPU_REF_H

#include <stdint.h>

double gpu_elem_get(int dtype, const uint8_t *p);
void gpu_elem_put(int dtype, uint8_t *p, double v);
/* Half an ulp at 1.0 of the type's storage: its relative rounding error. */
double gpu_elem_eps(int dtype);
/* Half the smallest subnormal: the absolute rounding error near zero. */
double gpu_elem_tiny(int dtype);
/* Bytes per element of the value types. */
uint64_t gpu_elem_size(int dtype);

/* out[s][qh][x] for q [S, Hq, D]; K/V of token t of sequence s are the
 * arrays returned by kv(ctx, s, t, kv_head, is_v) (D or Dv elements). */
typedef const uint8_t *(*gpu_kv_fn)(void *ctx, uint64_t s, uint64_t t, uint64_t head, int is_v);
void gpu_ref_decode(int dtype, uint64_t seqs, uint64_t q_heads, uint64_t kv_heads, uint64_t d, uint64_t dv,
                    const uint8_t *q, const int32_t *seq_lens, double scale, gpu_kv_fn kv, void *ctx, double *out);

#endif
