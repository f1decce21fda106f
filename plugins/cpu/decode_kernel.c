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
#include <stdbool.h>
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

static inline struct tile tile_at(const struct cpu_decode_job *job, const int32_t *table,
                                  uint64_t head, uint64_t t, uint64_t len, uint64_t tile_max)
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
    struct tile r = {job->cache + ly->offset + (slot / k) * ly->stride_block +
                         head * ly->stride_head + j * ly->stride_state,
                     n};
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

static uint64_t round8(uint64_t n)
{
    return (n + 7) & ~(uint64_t)7;
}

/*
 * sc[i][u] = q[i] . K[u] for qb (1, 2 or 4) query rows, q rows dp floats
 * apart and zero padded.  Two tokens at a time share each q load, and the
 * chunks are split into 4/qb independent sums, so every variant keeps eight
 * FMA chains in flight.
 */
CPU_INLINE void tile_scores(int32_t dtype, int qb, const float *q, uint64_t dp,
                            const unsigned char *k, uint64_t stride, uint64_t n, uint64_t d,
                            uint64_t e, float *sc)
{
    const int lanes = 4 / qb;
    const uint64_t full = d / 8, rest = d % 8;
    uint64_t u = 0;
    for (; u < n; u += 2) {
        const bool pair = u + 1 < n;
        const unsigned char *k0 = k + u * stride, *k1 = pair ? k0 + stride : k0;
        vec8 a[4][4], b[4][4];
        #pragma GCC unroll 8
        for (int i = 0; i < 4; i++)
            #pragma GCC unroll 8
            for (int j = 0; j < 4; j++)
                a[i][j] = b[i][j] = v8_zero();
        uint64_t c = 0;
        for (; c + (uint64_t)lanes <= full; c += (uint64_t)lanes)
            #pragma GCC unroll 8
            for (int j = 0; j < lanes; j++) {
                vec8 x0 = v8_load_elems(dtype, k0 + (c + (uint64_t)j) * 8 * e);
                vec8 x1 = v8_load_elems(dtype, k1 + (c + (uint64_t)j) * 8 * e);
                #pragma GCC unroll 8
                for (int i = 0; i < qb; i++) {
                    vec8 qv = v8_load(q + (uint64_t)i * dp + (c + (uint64_t)j) * 8);
                    a[i][j] = v8_fma(qv, x0, a[i][j]);
                    b[i][j] = v8_fma(qv, x1, b[i][j]);
                }
            }
        for (; c < full; c++) {
            vec8 x0 = v8_load_elems(dtype, k0 + c * 8 * e);
            vec8 x1 = v8_load_elems(dtype, k1 + c * 8 * e);
            #pragma GCC unroll 8
            for (int i = 0; i < qb; i++) {
                vec8 qv = v8_load(q + (uint64_t)i * dp + c * 8);
                a[i][0] = v8_fma(qv, x0, a[i][0]);
                b[i][0] = v8_fma(qv, x1, b[i][0]);
            }
        }
        if (rest) {
            vec8 x0 = v8_load_partial(dtype, k0 + full * 8 * e, rest);
            vec8 x1 = v8_load_partial(dtype, k1 + full * 8 * e, rest);
            #pragma GCC unroll 8
            for (int i = 0; i < qb; i++) {
                vec8 qv = v8_load(q + (uint64_t)i * dp + full * 8);
                a[i][0] = v8_fma(qv, x0, a[i][0]);
                b[i][0] = v8_fma(qv, x1, b[i][0]);
            }
        }
        vec8 sa[4], sb[4];
        #pragma GCC unroll 8
        for (int i = 0; i < qb; i++) {
            sa[i] = a[i][0];
            sb[i] = b[i][0];
            #pragma GCC unroll 8
            for (int j = 1; j < lanes; j++) {
                sa[i] = v8_add(sa[i], a[i][j]);
                sb[i] = v8_add(sb[i], b[i][j]);
            }
        }
        float r[4];
        if (qb == 4) {
            v8_hsum4(sa, r);
            #pragma GCC unroll 8
            for (int i = 0; i < 4; i++)
                sc[(size_t)i * TILE + u] = r[i];
            if (pair) {
                v8_hsum4(sb, r);
                #pragma GCC unroll 8
                for (int i = 0; i < 4; i++)
                    sc[(size_t)i * TILE + u + 1] = r[i];
            }
        } else {
            #pragma GCC unroll 8
            for (int i = 0; i < qb; i++) {
                sc[(size_t)i * TILE + u] = v8_hsum(sa[i]);
                if (pair)
                    sc[(size_t)i * TILE + u + 1] = v8_hsum(sb[i]);
            }
        }
    }
}

/* One chunk of eight V columns for qb query rows: the generic path, used
 * for chunks left over by the blocked loop and for a partial last chunk. */
CPU_INLINE void values_chunk(int32_t dtype, int qb, float *acc, uint64_t dvp, const float *p,
                             const unsigned char *vc, uint64_t stride, uint64_t n, uint64_t w)
{
    vec8 a[4], b[4];
    #pragma GCC unroll 8
    for (int i = 0; i < 4; i++) {
        a[i] = i < qb ? v8_load(acc + (uint64_t)i * dvp) : v8_zero();
        b[i] = v8_zero();
    }
    for (uint64_t u = 0; u < n; u++) {
        vec8 x = w == 8 ? v8_load_elems(dtype, vc + u * stride)
                        : v8_load_partial(dtype, vc + u * stride, w);
        #pragma GCC unroll 8
        for (int i = 0; i < qb; i++) {
            if (u & 1)
                b[i] = v8_fma(v8_set1(p[(size_t)i * TILE + u]), x, b[i]);
            else
                a[i] = v8_fma(v8_set1(p[(size_t)i * TILE + u]), x, a[i]);
        }
    }
    #pragma GCC unroll 8
    for (int i = 0; i < qb; i++)
        v8_store(acc + (uint64_t)i * dvp, v8_add(a[i], b[i]));
}

/*
 * acc[i] += sum over u of p[i][u] V[u] for qb query rows (acc rows dvp
 * apart).  8/qb chunks of V are accumulated at once, so the accumulators
 * (eight registers) stay in registers for the whole tile and each
 * probability is broadcast once per block of chunks.
 */
CPU_INLINE void tile_values(int32_t dtype, int qb, float *acc, uint64_t dvp, const float *p,
                            const unsigned char *v, uint64_t stride, uint64_t n, uint64_t dv,
                            uint64_t e)
{
    const int width = 8 / qb;
    const uint64_t full = dv / 8;
    uint64_t c = 0;
    for (; c + (uint64_t)width <= full; c += (uint64_t)width) {
        vec8 a[4][8];
        #pragma GCC unroll 8
        for (int i = 0; i < qb; i++)
            #pragma GCC unroll 8
            for (int j = 0; j < width; j++)
                a[i][j] = v8_load(acc + (uint64_t)i * dvp + (c + (uint64_t)j) * 8);
        const unsigned char *vc = v + c * 8 * e;
        for (uint64_t u = 0; u < n; u++, vc += stride) {
            vec8 pb[4];
            #pragma GCC unroll 8
            for (int i = 0; i < qb; i++)
                pb[i] = v8_set1(p[(size_t)i * TILE + u]);
            #pragma GCC unroll 8
            for (int j = 0; j < width; j++) {
                vec8 x = v8_load_elems(dtype, vc + (uint64_t)j * 8 * e);
                #pragma GCC unroll 8
                for (int i = 0; i < qb; i++)
                    a[i][j] = v8_fma(pb[i], x, a[i][j]);
            }
        }
        #pragma GCC unroll 8
        for (int i = 0; i < qb; i++)
            #pragma GCC unroll 8
            for (int j = 0; j < width; j++)
                v8_store(acc + (uint64_t)i * dvp + (c + (uint64_t)j) * 8, a[i][j]);
    }
    for (; c * 8 < dv; c++) {
        const uint64_t w = dv - c * 8 < 8 ? dv - c * 8 : 8;
        values_chunk(dtype, qb, acc + c * 8, dvp, p, v + c * 8 * e, stride, n, w);
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
            vec8 cv = v8_set1(corr);
            float *a = acc + g * dvp;
            for (uint64_t i = 0; i < dvp; i += 8)
                v8_store(a + i, v8_mul(v8_load(a + i), cv));
            m[g] = tmax;
        }
        vec8 mv = v8_set1(tmax), sum = v8_zero();
        uint64_t u = 0;
        for (; u + 8 <= n; u += 8) {
            vec8 x = v8_exp_neg(v8_add(v8_load(s + u), v8_mul(mv, v8_set1(-1.0f))));
            v8_store(s + u, x);
            sum = v8_add(sum, x);
        }
        float total = v8_hsum(sum);
        for (; u < n; u++) {
            s[u] = expf(s[u] - tmax);
            total += s[u];
        }
        l[g] += total;
    }
}

CPU_INLINE void run_items(const struct cpu_decode_job *job, unsigned worker, uint64_t begin,
                          uint64_t end, const int32_t dtype)
{
    const struct kvrt_plugin_layer *ly = job->layer;
    const uint64_t e = ly->elem_size, d = ly->head_size, dv = ly->head_size_v;
    const uint64_t dp = round8(d), dvp = round8(dv);
    const uint64_t heads = ly->head_slots, group = job->group;
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

        uint64_t ahead = 0; /* first token not yet prefetched */
        for (uint64_t t = 0; t < len;) {
            const struct tile tl = tile_at(job, table, h, t, len, tile_max);
            const uint64_t n = tl.n;
            const unsigned char *cell = tl.cell;
            if (ahead < t + n)
                ahead = t + n;
            while (ahead < len && ahead < t + n + PREFETCH_TOKENS) {
                const struct tile pf = tile_at(job, table, h, ahead, len, tile_max);
                prefetch_tile(pf, ss, row_bytes);
                ahead += pf.n;
            }

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

        /* An empty sequence (the core never sends one) gives zeros. */
        for (uint64_t g = 0; g < group; g++)
            store_row(dtype, acc + g * dvp, len ? 1.0f / l[g] : 0.0f,
                      job->out + (qh0 + g) * dv * e, dv);
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
