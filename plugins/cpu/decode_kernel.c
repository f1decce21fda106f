/*
 * kvrt CPU backend — the decode kernel, compiled once per instruction set
 * (CPU_KERNEL_ISA names the variant; vecf.h picks the lanes).
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
#include <stdbool.h>
#include <string.h>

#include "decode.h"
#include "vec.h"

#ifndef CPU_KERNEL_ISA
#error "CPU_KERNEL_ISA must name the kernel variant"
#endif
#define CPU_CAT_(a, b) a##b
#define CPU_CAT(a, b) CPU_CAT_(a, b)
#define KERNEL CPU_CAT(cpu_decode_items_, CPU_KERNEL_ISA)

#define TILE CPU_DECODE_TILE
/* Tokens of K/V requested ahead of the tile being computed.  Each item hops
 * between blocks the hardware prefetchers cannot predict (and, in [N, H, C]
 * layouts, strides across pages), so the kernel asks for the rows itself:
 * 15-25% faster at 2048 tokens.  Into L2, not L1: the rows ahead would
 * evict the tile being worked on. */
#define PREFETCH_TOKENS 32u

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch((p), 0, 2)
#else
#define PREFETCH(p) ((void)(p))
#endif

/* The tile starting at token t of a sequence: its first cell and length. */
struct tile {
    const unsigned char *cell;
    uint64_t n;
};

static inline struct tile tile_at(const struct cpu_decode_job *job, const int32_t *table, uint64_t head, uint64_t t,
                                  uint64_t len, uint64_t tile_max)
{
    const struct kvrt_plugin_layer *ly = job->layer;
    const uint64_t k = ly->view_block_tokens, bs = job->block_size;
    const uint64_t slot = (uint64_t)table[t / bs] * bs + t % bs;
    const uint64_t j = slot % k;
    uint64_t n = k - j;
    if (n > len - t)
        n = len - t;
    if (n > tile_max)
        n = tile_max;
    struct tile r = {
        job->cache + ly->offset + (slot / k) * ly->stride_block + head * ly->stride_head + j * ly->stride_state, n};
    return r;
}

static inline void prefetch_tile(struct tile tl, uint64_t stride, uint64_t bytes)
{
    for (uint64_t u = 0; u < tl.n; u++) {
        /* From the start of the cache line that holds the row: pointer
         * arithmetic, no integer-to-pointer cast (cache buffers are 64-byte
         * aligned, so the line start stays inside the buffer). */
        const unsigned char *row = tl.cell + u * stride;
        const unsigned char *end = row + bytes;
        for (const unsigned char *a = row - ((uintptr_t)row & 63); a < end; a += 64)
            PREFETCH(a);
    }
}

static uint64_t round_vl(uint64_t n)
{
    return (n + CPU_VL - 1) & ~(uint64_t)(CPU_VL - 1);
}

/*
 * sc[i][u] = q[i] . K[u] for qb (1, 2 or 4) query rows, q rows dp floats
 * apart and zero padded.  Two tokens at a time share each q load, and the
 * chunks are split into 4/qb independent sums, so every variant keeps eight
 * FMA chains in flight.
 */
CPU_INLINE void tile_scores(int32_t dtype, int qb, const float *q, uint64_t dp, const unsigned char *k, uint64_t stride,
                            uint64_t n, uint64_t d, uint64_t e, float *sc)
{
    const int lanes = 4 / qb;
    const uint64_t full = d / CPU_VL, rest = d % CPU_VL;
    uint64_t u = 0;
    for (; u < n; u += 2) {
        const bool pair = u + 1 < n;
        const unsigned char *k0 = k + u * stride, *k1 = pair ? k0 + stride : k0;
        vecf a[4][4], b[4][4];
#pragma GCC unroll 8
        for (int i = 0; i < 4; i++)
#pragma GCC unroll 8
            for (int j = 0; j < 4; j++)
                a[i][j] = b[i][j] = vf_zero();
        uint64_t c = 0;
        for (; c + (uint64_t)lanes <= full; c += (uint64_t)lanes)
#pragma GCC unroll 8
            for (int j = 0; j < lanes; j++) {
                vecf x0 = vf_load_elems(dtype, k0 + (c + (uint64_t)j) * CPU_VL * e);
                vecf x1 = vf_load_elems(dtype, k1 + (c + (uint64_t)j) * CPU_VL * e);
#pragma GCC unroll 8
                for (int i = 0; i < qb; i++) {
                    vecf qv = vf_load(q + (uint64_t)i * dp + (c + (uint64_t)j) * CPU_VL);
                    a[i][j] = vf_fma(qv, x0, a[i][j]);
                    b[i][j] = vf_fma(qv, x1, b[i][j]);
                }
            }
        for (; c < full; c++) {
            vecf x0 = vf_load_elems(dtype, k0 + c * CPU_VL * e);
            vecf x1 = vf_load_elems(dtype, k1 + c * CPU_VL * e);
#pragma GCC unroll 8
            for (int i = 0; i < qb; i++) {
                vecf qv = vf_load(q + (uint64_t)i * dp + c * CPU_VL);
                a[i][0] = vf_fma(qv, x0, a[i][0]);
                b[i][0] = vf_fma(qv, x1, b[i][0]);
            }
        }
        if (rest) {
            vecf x0 = vf_load_partial(dtype, k0 + full * CPU_VL * e, rest);
            vecf x1 = vf_load_partial(dtype, k1 + full * CPU_VL * e, rest);
#pragma GCC unroll 8
            for (int i = 0; i < qb; i++) {
                vecf qv = vf_load(q + (uint64_t)i * dp + full * CPU_VL);
                a[i][0] = vf_fma(qv, x0, a[i][0]);
                b[i][0] = vf_fma(qv, x1, b[i][0]);
            }
        }
        vecf sa[4], sb[4];
#pragma GCC unroll 8
        for (int i = 0; i < qb; i++) {
            sa[i] = a[i][0];
            sb[i] = b[i][0];
#pragma GCC unroll 8
            for (int j = 1; j < lanes; j++) {
                sa[i] = vf_add(sa[i], a[i][j]);
                sb[i] = vf_add(sb[i], b[i][j]);
            }
        }
        float r[4];
        if (qb == 4) {
            vf_hsum4(sa, r);
#pragma GCC unroll 8
            for (int i = 0; i < 4; i++)
                sc[(size_t)i * TILE + u] = r[i];
            if (pair) {
                vf_hsum4(sb, r);
#pragma GCC unroll 8
                for (int i = 0; i < 4; i++)
                    sc[(size_t)i * TILE + u + 1] = r[i];
            }
        } else {
#pragma GCC unroll 8
            for (int i = 0; i < qb; i++) {
                sc[(size_t)i * TILE + u] = vf_hsum(sa[i]);
                if (pair)
                    sc[(size_t)i * TILE + u + 1] = vf_hsum(sb[i]);
            }
        }
    }
}

/* One chunk of eight V columns for qb query rows: the generic path, used
 * for chunks left over by the blocked loop and for a partial last chunk. */
CPU_INLINE void values_chunk(int32_t dtype, int qb, float *acc, uint64_t dvp, const float *p, const unsigned char *vc,
                             uint64_t stride, uint64_t n, uint64_t w)
{
    vecf a[4], b[4];
#pragma GCC unroll 8
    for (int i = 0; i < 4; i++) {
        a[i] = i < qb ? vf_load(acc + (uint64_t)i * dvp) : vf_zero();
        b[i] = vf_zero();
    }
    for (uint64_t u = 0; u < n; u++) {
        vecf x = w == CPU_VL ? vf_load_elems(dtype, vc + u * stride) : vf_load_partial(dtype, vc + u * stride, w);
#pragma GCC unroll 8
        for (int i = 0; i < qb; i++) {
            if (u & 1)
                b[i] = vf_fma(vf_set1(p[(size_t)i * TILE + u]), x, b[i]);
            else
                a[i] = vf_fma(vf_set1(p[(size_t)i * TILE + u]), x, a[i]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < qb; i++)
        vf_store(acc + (uint64_t)i * dvp, vf_add(a[i], b[i]));
}

/*
 * acc[i] += sum over u of p[i][u] V[u] for qb query rows (acc rows dvp
 * apart).  CPU_ACC_REGS/qb chunks of V are accumulated at once, so the
 * accumulators (CPU_ACC_REGS registers) stay in registers for the whole tile and each
 * probability is broadcast once per block of chunks.
 */
CPU_INLINE void tile_values(int32_t dtype, int qb, float *acc, uint64_t dvp, const float *p, const unsigned char *v,
                            uint64_t stride, uint64_t n, uint64_t dv, uint64_t e)
{
    const int width = CPU_ACC_REGS / qb;
    const uint64_t full = dv / CPU_VL;
    uint64_t c = 0;
    for (; c + (uint64_t)width <= full; c += (uint64_t)width) {
        vecf a[4][CPU_ACC_REGS];
#pragma GCC unroll 8
        for (int i = 0; i < qb; i++)
#pragma GCC unroll 8
            for (int j = 0; j < width; j++)
                a[i][j] = vf_load(acc + (uint64_t)i * dvp + (c + (uint64_t)j) * CPU_VL);
        const unsigned char *vc = v + c * CPU_VL * e;
        for (uint64_t u = 0; u < n; u++, vc += stride) {
            vecf pb[4];
#pragma GCC unroll 8
            for (int i = 0; i < qb; i++)
                pb[i] = vf_set1(p[(size_t)i * TILE + u]);
#pragma GCC unroll 8
            for (int j = 0; j < width; j++) {
                vecf x = vf_load_elems(dtype, vc + (uint64_t)j * CPU_VL * e);
#pragma GCC unroll 8
                for (int i = 0; i < qb; i++)
                    a[i][j] = vf_fma(pb[i], x, a[i][j]);
            }
        }
#pragma GCC unroll 8
        for (int i = 0; i < qb; i++)
#pragma GCC unroll 8
            for (int j = 0; j < width; j++)
                vf_store(acc + (uint64_t)i * dvp + (c + (uint64_t)j) * CPU_VL, a[i][j]);
    }
    for (; c * CPU_VL < dv; c++) {
        const uint64_t w = dv - c * CPU_VL < CPU_VL ? dv - c * CPU_VL : CPU_VL;
        values_chunk(dtype, qb, acc + c * CPU_VL, dvp, p, v + c * CPU_VL * e, stride, n, w);
    }
}

static void store_row(int32_t dtype, const float *src, float scale, unsigned char *dst, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        float x = src[i] * scale;
        uint16_t h;
        switch (dtype) {
        case KVRT_DTYPE_FP32: memcpy(dst + 4 * i, &x, 4); break;
        case KVRT_DTYPE_BF16:
            h = cpu_f32_to_bf16(x);
            memcpy(dst + 2 * i, &h, 2);
            break;
        case KVRT_DTYPE_FP16:
            h = cpu_f32_to_f16(x);
            memcpy(dst + 2 * i, &h, 2);
            break;
        case KVRT_DTYPE_FP8_E4M3: dst[i] = cpu_f32_to_e4m3(x); break;
        case KVRT_DTYPE_FP8_E5M2: dst[i] = cpu_f32_to_e5m2(x); break;
        default: break;
        }
    }
}

/* Fold a tile's scores (rows of sc) into the running max/sum/accumulator of
 * `group` query heads; sc becomes the tile's unnormalised probabilities. */
static void tile_softmax(uint64_t group, uint64_t n, float *sc, float *m, float *l, float *acc, uint64_t dvp)
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
            vecf cv = vf_set1(corr);
            float *a = acc + g * dvp;
            for (uint64_t i = 0; i < dvp; i += CPU_VL)
                vf_store(a + i, vf_mul(vf_load(a + i), cv));
            m[g] = tmax;
        }
        vecf mv = vf_set1(tmax), sum = vf_zero();
        uint64_t u = 0;
        for (; u + CPU_VL <= n; u += CPU_VL) {
            vecf x = vf_exp_neg(vf_add(vf_load(s + u), vf_mul(mv, vf_set1(-1.0f))));
            vf_store(s + u, x);
            sum = vf_add(sum, x);
        }
        float total = vf_hsum(sum);
        for (; u < n; u++) {
            s[u] = expf(s[u] - tmax);
            total += s[u];
        }
        l[g] += total;
    }
}

#ifdef CPU_HAVE_DPBF16
/*
 * Scores of a bf16 tile with vdpbf16ps: the q rows stay bf16 (their exact
 * input values, rows dq elements apart, zero padded to 32), each instruction
 * takes 32 elements of K, and the scale multiplies the fp32 sums.  Products
 * of two bf16 are exact in fp32; the sums are fp32 like the FMA path's.
 */
CPU_INLINE void tile_scores_bf16(int qb, const uint16_t *q, uint64_t dq, const unsigned char *k, uint64_t stride,
                                 uint64_t n, uint64_t d, float scale, float *sc)
{
    const uint64_t full = d / 32, rest = d % 32;
    const __mmask32 tail = (__mmask32)((UINT64_C(1) << rest) - 1u);
    for (uint64_t u = 0; u < n; u += 2) {
        const bool pair = u + 1 < n;
        const unsigned char *k0 = k + u * stride, *k1 = pair ? k0 + stride : k0;
        __m512 a[4], b[4];
#pragma GCC unroll 8
        for (int i = 0; i < 4; i++)
            a[i] = b[i] = _mm512_setzero_ps();
        for (uint64_t c = 0; c < full; c++) {
            __m512bh x0 = (__m512bh)_mm512_loadu_si512(k0 + c * 64);
            __m512bh x1 = (__m512bh)_mm512_loadu_si512(k1 + c * 64);
#pragma GCC unroll 8
            for (int i = 0; i < qb; i++) {
                __m512bh qv = (__m512bh)_mm512_loadu_si512(q + (uint64_t)i * dq + c * 32);
                a[i] = _mm512_dpbf16_ps(a[i], qv, x0);
                b[i] = _mm512_dpbf16_ps(b[i], qv, x1);
            }
        }
        if (rest) {
            __m512bh x0 = (__m512bh)_mm512_maskz_loadu_epi16(tail, k0 + full * 64);
            __m512bh x1 = (__m512bh)_mm512_maskz_loadu_epi16(tail, k1 + full * 64);
#pragma GCC unroll 8
            for (int i = 0; i < qb; i++) {
                __m512bh qv = (__m512bh)_mm512_loadu_si512(q + (uint64_t)i * dq + full * 32);
                a[i] = _mm512_dpbf16_ps(a[i], qv, x0);
                b[i] = _mm512_dpbf16_ps(b[i], qv, x1);
            }
        }
        float r[4];
        if (qb == 4) {
            vf_hsum4(a, r);
#pragma GCC unroll 8
            for (int i = 0; i < 4; i++)
                sc[(size_t)i * TILE + u] = r[i] * scale;
            if (pair) {
                vf_hsum4(b, r);
#pragma GCC unroll 8
                for (int i = 0; i < 4; i++)
                    sc[(size_t)i * TILE + u + 1] = r[i] * scale;
            }
        } else {
#pragma GCC unroll 8
            for (int i = 0; i < qb; i++) {
                sc[(size_t)i * TILE + u] = vf_hsum(a[i]) * scale;
                if (pair)
                    sc[(size_t)i * TILE + u + 1] = vf_hsum(b[i]) * scale;
            }
        }
    }
}
#endif

/* The scores of one tile for every query head of the group. */
CPU_INLINE void group_scores(int32_t dtype, int qb, uint64_t group, const float *qf, const uint16_t *q16, uint64_t dp,
                             uint64_t dq, const unsigned char *cell, uint64_t ss, uint64_t n, uint64_t d, uint64_t e,
                             float scale, float *sc)
{
#ifdef CPU_HAVE_DPBF16
    if (dtype == KVRT_DTYPE_BF16) {
        for (uint64_t g = 0; g < group; g += (uint64_t)qb) {
            if (qb == 4)
                tile_scores_bf16(4, q16 + g * dq, dq, cell, ss, n, d, scale, sc + g * TILE);
            else if (qb == 2)
                tile_scores_bf16(2, q16 + g * dq, dq, cell, ss, n, d, scale, sc + g * TILE);
            else
                tile_scores_bf16(1, q16 + g * dq, dq, cell, ss, n, d, scale, sc + g * TILE);
        }
        return;
    }
#endif
    (void)q16, (void)dq, (void)scale;
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
}

/*
 * Work unit w is part (w % parts) of item (w / parts); an item is a
 * (sequence, KV head) pair and its parts are equal slices of the context.
 * With one part the unit writes the output rows; with several it leaves its
 * running maximum, sum and unnormalised accumulator in job->partials for
 * the reduction (the flash-decoding split).
 */
CPU_INLINE void run_units(const struct cpu_decode_job *job, unsigned worker, uint64_t begin, uint64_t end,
                          const int32_t dtype)
{
    const struct kvrt_plugin_layer *ly = job->layer;
    const uint64_t e = ly->elem_size, d = ly->head_size, dv = ly->head_size_v;
    const uint64_t dp = round_vl(d), dvp = round_vl(dv), dq = cpu_decode_q16_elems(d);
    const uint64_t heads = ly->head_slots, group = job->group, parts = job->parts;
    const uint64_t k = ly->view_block_tokens;
    const uint64_t ss = ly->stride_state, row_bytes = (d + dv) * e;
    const uint64_t tile_max = k < TILE ? k : TILE;
    /* Query heads per pass over K and V: as many as fit four registers. */
    const int qb = group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1;

    float *qf = job->scratch + (uint64_t)worker * job->scratch_floats; /* [G, dp] */
    float *acc = qf + group * dp;                                      /* [G, dvp] */
    float *sc = acc + group * dvp;                                     /* [G, TILE] */
    float *m = sc + group * TILE;                                      /* [G] */
    float *l = m + group;                                              /* [G] */
    uint16_t *q16 = (uint16_t *)(void *)(l + group);                   /* [G, dq] */

    for (uint64_t w = begin; w < end; w++) {
        const uint64_t item = w / parts, part = w % parts;
        const uint64_t s = item / heads, h = item % heads;
        const uint64_t len = (uint64_t)job->seq_lens[s];
        const uint64_t t0 = len * part / parts, t1 = len * (part + 1) / parts;
        const int32_t *table = job->block_tables + s * job->max_blocks;
        const uint64_t qh0 = s * job->num_q_heads + h * group;

        /* The scale goes into q once instead of into every score. */
        for (uint64_t g = 0; g < group; g++) {
            const unsigned char *qrow = job->q + (qh0 + g) * d * e;
            for (uint64_t i = 0; i < dp; i++)
                qf[g * dp + i] = i < d ? cpu_elem_to_f32(dtype, qrow, i) * job->scale : 0.0f;
            if (dtype == KVRT_DTYPE_BF16)
                for (uint64_t i = 0; i < dq; i++) {
                    uint16_t x = 0;
                    if (i < d)
                        memcpy(&x, qrow + 2 * i, 2);
                    q16[g * dq + i] = x;
                }
            m[g] = -INFINITY;
            l[g] = 0.0f;
        }
        memset(acc, 0, group * dvp * sizeof(float));

        uint64_t ahead = t0; /* first token not yet prefetched */
        for (uint64_t t = t0; t < t1;) {
            const struct tile tl = tile_at(job, table, h, t, t1, tile_max);
            const uint64_t n = tl.n;
            const unsigned char *cell = tl.cell;
            if (ahead < t + n)
                ahead = t + n;
            while (ahead < t1 && ahead < t + n + PREFETCH_TOKENS) {
                const struct tile pf = tile_at(job, table, h, ahead, t1, tile_max);
                prefetch_tile(pf, ss, row_bytes);
                ahead += pf.n;
            }
            group_scores(dtype, qb, group, qf, q16, dp, dq, cell, ss, n, d, e, job->scale, sc);
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

        if (parts > 1) {
            float *pm = job->partials + w * group * (dv + 2), *pl = pm + group, *pa = pl + group;
            for (uint64_t g = 0; g < group; g++) {
                pm[g] = m[g];
                pl[g] = l[g];
                memcpy(pa + g * dv, acc + g * dvp, dv * sizeof(float));
            }
            continue;
        }
        /* An empty sequence (the core never sends one) gives zeros. */
        for (uint64_t g = 0; g < group; g++)
            store_row(dtype, acc + g * dvp, len ? 1.0f / l[g] : 0.0f, job->out + (qh0 + g) * dv * e, dv);
    }
}

#define REDUCE CPU_CAT(cpu_decode_reduce_, CPU_KERNEL_ISA)

/* Items begin..end of a split job: the parts' partial softmax states merged
 * (each rescaled to the largest maximum) and the output rows written. */
void REDUCE(const struct cpu_decode_job *job, unsigned worker, uint64_t begin, uint64_t end)
{
    const struct kvrt_plugin_layer *ly = job->layer;
    const uint64_t dv = ly->head_size_v, e = ly->elem_size, group = job->group;
    const uint64_t parts = job->parts, heads = ly->head_slots, unit = group * (dv + 2);
    float *acc = job->scratch + (uint64_t)worker * job->scratch_floats;
    for (uint64_t item = begin; item < end; item++) {
        const uint64_t s = item / heads, h = item % heads;
        const uint64_t qh0 = s * job->num_q_heads + h * group;
        const float *first = job->partials + item * parts * unit;
        for (uint64_t g = 0; g < group; g++) {
            float mx = -INFINITY, sum = 0.0f;
            for (uint64_t p = 0; p < parts; p++)
                mx = first[p * unit + g] > mx ? first[p * unit + g] : mx;
            memset(acc, 0, dv * sizeof(float));
            for (uint64_t p = 0; p < parts; p++) {
                const float *pm = first + p * unit, *pl = pm + group, *pa = pl + group + g * dv;
                if (pm[g] == -INFINITY)
                    continue; /* an empty slice */
                const float c = expf(pm[g] - mx);
                sum += pl[g] * c;
                for (uint64_t i = 0; i < dv; i++)
                    acc[i] += pa[i] * c;
            }
            store_row(ly->dtype, acc, sum > 0.0f ? 1.0f / sum : 0.0f, job->out + (qh0 + g) * dv * e, dv);
        }
    }
}

void KERNEL(const struct cpu_decode_job *job, unsigned worker, uint64_t begin, uint64_t end)
{
    /* One instance per element type: the loads compile to straight code. */
    switch (job->layer->dtype) {
    case KVRT_DTYPE_FP32: run_units(job, worker, begin, end, KVRT_DTYPE_FP32); break;
    case KVRT_DTYPE_FP16: run_units(job, worker, begin, end, KVRT_DTYPE_FP16); break;
    case KVRT_DTYPE_BF16: run_units(job, worker, begin, end, KVRT_DTYPE_BF16); break;
    case KVRT_DTYPE_FP8_E4M3: run_units(job, worker, begin, end, KVRT_DTYPE_FP8_E4M3); break;
    case KVRT_DTYPE_FP8_E5M2: run_units(job, worker, begin, end, KVRT_DTYPE_FP8_E5M2); break;
    default: break; /* refused by the driver */
    }
}
