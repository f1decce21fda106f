/*
 * kvrt CPU backend — the decode kernel, compiled once per instruction set
 * (CPU_KERNEL_ISA names the variant; vec8.h picks the lanes).
 *
 * One item is one sequence and one KV head.  Its group of query heads shares
 * every K and V row, so rows are widened to fp32 in registers once per block
 * of up to four query heads, never stored.  Tokens go in tiles inside one
 * view block (consecutive states, one stride apart); per tile each query
 * head's scores are computed, its running maximum is updated once, and the
 * V rows are accumulated in fp32 with the accumulators held in registers
 * across the whole tile.  Two independent accumulator sets per loop hide the
 * FMA latency.
 */
#include <math.h>
#include <string.h>

#include "decode.h"
#include "vec8.h"

#ifndef CPU_KERNEL_ISA
#error "CPU_KERNEL_ISA must name the kernel variant"
#endif
#define CPU_CAT_(a, b) a##b
#define CPU_CAT(a, b) CPU_CAT_(a, b)
#define KERNEL CPU_CAT(cpu_decode_items_, CPU_KERNEL_ISA)

#define TILE CPU_DECODE_TILE

static uint64_t round8(uint64_t n)
{
    return (n + 7) & ~(uint64_t)7;
}

/* sc[i][u] = q[i] . K[u] for qb query rows (q rows dp apart, zero padded). */
CPU_INLINE void tile_scores(int32_t dtype, int qb, const float *q, uint64_t dp,
                            const unsigned char *k, uint64_t stride, uint64_t n, uint64_t d,
                            uint64_t e, float *sc)
{
    const uint64_t full = d / 8, rest = d % 8;
    for (uint64_t u = 0; u < n; u++, k += stride) {
        vec8 a[4], b[4];
        for (int i = 0; i < 4; i++)
            a[i] = b[i] = v8_zero();
        uint64_t c = 0;
        for (; c + 2 <= full; c += 2) {
            vec8 k0 = v8_load_elems(dtype, k + c * 8 * e);
            vec8 k1 = v8_load_elems(dtype, k + (c + 1) * 8 * e);
            for (int i = 0; i < qb; i++) {
                a[i] = v8_fma(v8_load(q + i * dp + c * 8), k0, a[i]);
                b[i] = v8_fma(v8_load(q + i * dp + c * 8 + 8), k1, b[i]);
            }
        }
        if (c < full) {
            vec8 k0 = v8_load_elems(dtype, k + c * 8 * e);
            for (int i = 0; i < qb; i++)
                a[i] = v8_fma(v8_load(q + i * dp + c * 8), k0, a[i]);
        }
        if (rest) {
            vec8 k0 = v8_load_partial(dtype, k + full * 8 * e, rest);
            for (int i = 0; i < qb; i++)
                b[i] = v8_fma(v8_load(q + i * dp + full * 8), k0, b[i]);
        }
        for (int i = 0; i < 4; i++)
            a[i] = v8_add(a[i], b[i]);
        if (qb == 4) {
            float s[4];
            v8_hsum4(a, s);
            for (int i = 0; i < 4; i++)
                sc[i * TILE + u] = s[i];
        } else {
            for (int i = 0; i < qb; i++)
                sc[i * TILE + u] = v8_hsum(a[i]);
        }
    }
}

/* acc[i] += sum over u of p[i][u] V[u] for qb query rows (acc rows dvp apart). */
CPU_INLINE void tile_values(int32_t dtype, int qb, float *acc, uint64_t dvp, const float *p,
                            const unsigned char *v, uint64_t stride, uint64_t n, uint64_t dv,
                            uint64_t e)
{
    for (uint64_t c = 0; c * 8 < dv; c++) {
        const uint64_t w = dv - c * 8 < 8 ? dv - c * 8 : 8;
        const unsigned char *vc = v + c * 8 * e;
        vec8 a[4], b[4];
        for (int i = 0; i < 4; i++) {
            a[i] = i < qb ? v8_load(acc + i * dvp + c * 8) : v8_zero();
            b[i] = v8_zero();
        }
        uint64_t u = 0;
        if (w == 8) {
            for (; u + 2 <= n; u += 2) {
                vec8 v0 = v8_load_elems(dtype, vc + u * stride);
                vec8 v1 = v8_load_elems(dtype, vc + (u + 1) * stride);
                for (int i = 0; i < qb; i++) {
                    a[i] = v8_fma(v8_set1(p[i * TILE + u]), v0, a[i]);
                    b[i] = v8_fma(v8_set1(p[i * TILE + u + 1]), v1, b[i]);
                }
            }
        }
        for (; u < n; u++) {
            vec8 v0 = w == 8 ? v8_load_elems(dtype, vc + u * stride)
                             : v8_load_partial(dtype, vc + u * stride, w);
            for (int i = 0; i < qb; i++)
                a[i] = v8_fma(v8_set1(p[i * TILE + u]), v0, a[i]);
        }
        for (int i = 0; i < qb; i++)
            v8_store(acc + i * dvp + c * 8, v8_add(a[i], b[i]));
    }
}

static void store_row(int32_t dtype, const float *src, float scale, unsigned char *dst,
                      uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        float x = src[i] * scale;
        uint16_t h;
        switch (dtype) {
        case KVRT_DTYPE_FP32:
            memcpy(dst + 4 * i, &x, 4);
            break;
        case KVRT_DTYPE_BF16:
            h = cpu_f32_to_bf16(x);
            memcpy(dst + 2 * i, &h, 2);
            break;
        case KVRT_DTYPE_FP16:
            h = cpu_f32_to_f16(x);
            memcpy(dst + 2 * i, &h, 2);
            break;
        case KVRT_DTYPE_FP8_E4M3:
            dst[i] = cpu_f32_to_e4m3(x);
            break;
        case KVRT_DTYPE_FP8_E5M2:
            dst[i] = cpu_f32_to_e5m2(x);
            break;
        default:
            break;
        }
    }
}

/* Fold a tile's scores (rows of sc) into the running max/sum/accumulator of
 * `group` query heads; sc becomes the tile's unnormalised probabilities. */
static void tile_softmax(uint64_t group, uint64_t n, float *sc, float *m, float *l, float *acc,
                         uint64_t dvp)
{
    for (uint64_t g = 0; g < group; g++) {
        float *s = sc + g * TILE;
        float tmax = m[g];
        for (uint64_t u = 0; u < n; u++)
            tmax = s[u] > tmax ? s[u] : tmax;
        if (tmax > m[g]) {
            /* exp(-inf) = 0 also clears the empty starting state. */
            float corr = expf(m[g] - tmax);
            l[g] *= corr;
            float *a = acc + g * dvp;
            for (uint64_t i = 0; i < dvp; i++)
                a[i] *= corr;
            m[g] = tmax;
        }
        float sum = 0.0f;
        for (uint64_t u = 0; u < n; u++) {
            s[u] = expf(s[u] - tmax);
            sum += s[u];
        }
        l[g] += sum;
    }
}

CPU_INLINE void run_items(const struct cpu_decode_job *job, unsigned worker, uint64_t begin,
                          uint64_t end, const int32_t dtype)
{
    const struct kvrt_plugin_layer *ly = job->layer;
    const uint64_t e = ly->elem_size, d = ly->head_size, dv = ly->head_size_v;
    const uint64_t dp = round8(d), dvp = round8(dv);
    const uint64_t heads = ly->head_slots, group = job->group;
    const uint64_t k = ly->view_block_tokens, bs = job->block_size;
    const uint64_t ss = ly->stride_state;
    const uint64_t tile_max = k < TILE ? k : TILE;
    /* Query heads per pass over K and V: as many as fit four registers. */
    const int qb = group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1;

    float *qf = job->scratch + (uint64_t)worker * job->scratch_floats; /* [G, dp] */
    float *acc = qf + group * dp;                                      /* [G, dvp] */
    float *sc = acc + group * dvp;                                     /* [G, TILE] */
    float *m = sc + group * TILE;                                      /* [G] */
    float *l = m + group;                                              /* [G] */

    for (uint64_t item = begin; item < end; item++) {
        const uint64_t s = item / heads, h = item % heads;
        const uint64_t len = (uint64_t)job->seq_lens[s];
        const int32_t *table = job->block_tables + s * job->max_blocks;
        const uint64_t qh0 = s * job->num_q_heads + h * group;

        /* The scale goes into q once instead of into every score. */
        for (uint64_t g = 0; g < group; g++) {
            const unsigned char *qrow = job->q + (qh0 + g) * d * e;
            for (uint64_t i = 0; i < dp; i++)
                qf[g * dp + i] = i < d ? cpu_elem_to_f32(dtype, qrow, i) * job->scale : 0.0f;
            m[g] = -INFINITY;
            l[g] = 0.0f;
        }
        memset(acc, 0, group * dvp * sizeof(float));

        for (uint64_t t = 0; t < len;) {
            const uint64_t slot = (uint64_t)table[t / bs] * bs + t % bs;
            const uint64_t j = slot % k;
            uint64_t n = k - j;
            if (n > len - t)
                n = len - t;
            if (n > tile_max)
                n = tile_max;
            const unsigned char *cell = job->cache + ly->offset + (slot / k) * ly->stride_block +
                                        h * ly->stride_head + j * ss;

            for (uint64_t g = 0; g < group; g += (uint64_t)qb) {
                const float *q = qf + g * dp;
                float *out = sc + g * TILE;
                if (qb == 4)
                    tile_scores(dtype, 4, q, dp, cell, ss, n, d, e, out);
                else if (qb == 2)
                    tile_scores(dtype, 2, q, dp, cell, ss, n, d, e, out);
                else
                    tile_scores(dtype, 1, q, dp, cell, ss, n, d, e, out);
            }
            tile_softmax(group, n, sc, m, l, acc, dvp);
            for (uint64_t g = 0; g < group; g += (uint64_t)qb) {
                float *a = acc + g * dvp;
                const float *p = sc + g * TILE;
                if (qb == 4)
                    tile_values(dtype, 4, a, dvp, p, cell + d * e, ss, n, dv, e);
                else if (qb == 2)
                    tile_values(dtype, 2, a, dvp, p, cell + d * e, ss, n, dv, e);
                else
                    tile_values(dtype, 1, a, dvp, p, cell + d * e, ss, n, dv, e);
            }
            t += n;
        }

        for (uint64_t g = 0; g < group; g++)
            store_row(dtype, acc + g * dvp, 1.0f / l[g], job->out + (qh0 + g) * dv * e, dv);
    }
}

void KERNEL(const struct cpu_decode_job *job, unsigned worker, uint64_t begin, uint64_t end)
{
    /* One instance per element type: the loads compile to straight code. */
    switch (job->layer->dtype) {
    case KVRT_DTYPE_FP32:
        run_items(job, worker, begin, end, KVRT_DTYPE_FP32);
        break;
    case KVRT_DTYPE_FP16:
        run_items(job, worker, begin, end, KVRT_DTYPE_FP16);
        break;
    case KVRT_DTYPE_BF16:
        run_items(job, worker, begin, end, KVRT_DTYPE_BF16);
        break;
    case KVRT_DTYPE_FP8_E4M3:
        run_items(job, worker, begin, end, KVRT_DTYPE_FP8_E4M3);
        break;
    case KVRT_DTYPE_FP8_E5M2:
        run_items(job, worker, begin, end, KVRT_DTYPE_FP8_E5M2);
        break;
    default:
        break; /* refused by the driver */
    }
}
