/*
 * Single-query paged attention decode (the design and its reasons are in
 * docs/kernels.md).
 *
 * One work-group per (sequence, KV head, context partition, query chunk):
 * the q_chunk (<= KVRT_DECODE_MAX_G) query heads of a KV head's group share
 * every K and V row the work-group loads.  A partition of `part_tokens`
 * tokens is walked in tiles of `tile` tokens:
 *   A. scores: lane groups of 2^lane_shift work-items each take one token;
 *      the lanes read the K row in vector units contiguous across lanes and
 *      the partial dot products are summed with sub-group shuffles
 *      (KVRT_HAS_SHUFFLE) or through local memory;
 *   B. softmax: tile max and sum by a tree in local memory, folded into the
 *      running max m and sum l of each query head (online softmax);
 *   C. values: work-items own V units (contiguous across lanes), token
 *      groups split the tile's tokens, and their fp32 sums are folded into
 *      the accumulators in local memory, rescaled by exp(m_old - m_new).
 * One partition writes the output itself; several write (m, l, acc) per
 * partition and kvrt_decode_reduce_* combines them.
 *
 * Local memory (dynamic; kvrt_plan_decode sizes it): cell offsets [tile]
 * u64 | q [G][D] | scores [G][tile] | reduction [G][local] | acc [G][Dv] |
 * m, l, correction [G], fp32.
 */

#define KVRT_DECODE_PARAMS                                                                                             \
    KVRT_GLOBAL const kvrt_u8 *cache, KVRT_GLOBAL const kvrt_u8 *q, KVRT_GLOBAL kvrt_u8 *out, KVRT_GLOBAL float *part, \
        KVRT_GLOBAL const kvrt_i32 *block_tables, KVRT_GLOBAL const kvrt_i32 *seq_lens, kvrt_u64 q_offset,             \
        kvrt_u64 out_offset, kvrt_u64 q_heads, kvrt_u64 group, kvrt_u64 kv_heads, kvrt_u64 q_chunk, kvrt_u64 chunks,   \
        kvrt_u64 d, kvrt_u64 dv, kvrt_u64 max_blocks, kvrt_u64 block_size, kvrt_u64 view_tokens, kvrt_u64 offset,      \
        kvrt_u64 stride_block, kvrt_u64 stride_head, kvrt_u64 stride_state, kvrt_u64 part_tokens, kvrt_u64 parts,      \
        kvrt_u64 tile, kvrt_u64 lane_shift, kvrt_u64 work, float scale

#define KVRT_DECODE_ARGS                                                                                               \
    cache, q, out, part, block_tables, seq_lens, q_offset, out_offset, q_heads, group, kv_heads, q_chunk, chunks, d,   \
        dv, max_blocks, block_size, view_tokens, offset, stride_block, stride_head, stride_state, part_tokens, parts,  \
        tile, lane_shift, work, scale

/* Elements per vector unit: 16 bytes of fp32/fp16/bf16, 8 bytes of fp8
 * (8 accumulators per lane and query head, whatever the type). */
#define KVRT_DECODE_VE(dt, vec) ((vec) ? ((dt) == KVRT_DT_F32 ? 4 : 8) : 1)

/* Load one unit of `ve` elements at base + off as fp32 into e[]. */
KVRT_FN void kvrt_load_unit(const int dt, const int ve, KVRT_GLOBAL const kvrt_u8 *base, kvrt_u64 off, float *e)
{
    if (ve == 1) {
        e[0] = kvrt_load(dt, base, off);
    } else if (dt == KVRT_DT_E4M3 || dt == KVRT_DT_E5M2) {
        const kvrt_u64 w = *(KVRT_GLOBAL const kvrt_u64 *)(base + off);
        for (int j = 0; j < 8; j++) {
            const kvrt_u8 b = (kvrt_u8)(w >> (8 * j));
            e[j] = dt == KVRT_DT_E4M3 ? kvrt_e4m3_to_f32(b) : kvrt_e5m2_to_f32(b);
        }
    } else {
        const kvrt_u128 v = *(KVRT_GLOBAL const kvrt_u128 *)(base + off);
        const kvrt_u32 w[4] = {v.x, v.y, v.z, v.w};
        for (int j = 0; j < 4; j++) {
            if (dt == KVRT_DT_F32) {
                e[j] = KVRT_AS_FLOAT(w[j]);
            } else if (dt == KVRT_DT_BF16) {
                e[2 * j] = KVRT_AS_FLOAT(w[j] << 16);
                e[2 * j + 1] = KVRT_AS_FLOAT(w[j] & 0xffff0000u);
            } else {
                e[2 * j] = kvrt_f16_bits_to_f32(w[j] & 0xffffu);
                e[2 * j + 1] = kvrt_f16_bits_to_f32(w[j] >> 16);
            }
        }
    }
}

/* Tree reduction of red[h * nl + 0 .. nl) for h < gq into red[h * nl];
 * nl is a power of two; every work-item calls it. */
KVRT_FN void kvrt_tree(KVRT_LOCAL float *red, const kvrt_u32 lid, const kvrt_u32 nl, const kvrt_u64 gq,
                       const int is_max)
{
    for (kvrt_u32 s = nl >> 1; s > 0; s >>= 1) {
        KVRT_BARRIER();
        if (lid < s)
            for (kvrt_u64 h = 0; h < gq; h++) {
                const float a = red[h * nl + lid], b = red[h * nl + lid + s];
                red[h * nl + lid] = is_max ? KVRT_FMAXF(a, b) : a + b;
            }
    }
    KVRT_BARRIER();
}

KVRT_FN void kvrt_decode_body(const int dt, const int vec, KVRT_DECODE_PARAMS, KVRT_LOCAL kvrt_u64 *shared)
{
    const int ve = KVRT_DECODE_VE(dt, vec);
    const kvrt_u32 lid = KVRT_LOCAL_ID;
    const kvrt_u32 nl = KVRT_LOCAL_SIZE;
    const kvrt_u64 es = kvrt_elem_size(dt);
    const kvrt_u32 lanes = 1u << lane_shift;
    const kvrt_u32 lane = lid & (lanes - 1u);
    const kvrt_u32 nlg = nl >> lane_shift; /* lane groups (tokens per round) */
    const kvrt_u64 ku = d / (kvrt_u64)ve, vu = dv / (kvrt_u64)ve;
    /* V: lanes_v work-items cover a row's units, ntg token groups. */
    kvrt_u32 lanes_v = 1;
    while ((kvrt_u64)lanes_v < vu && lanes_v < nl)
        lanes_v <<= 1;
    const kvrt_u32 ntg = nl / lanes_v, tg = lid / lanes_v, vlane = lid % lanes_v;

    KVRT_LOCAL kvrt_u64 *cell = shared;
    KVRT_LOCAL float *qv = (KVRT_LOCAL float *)(shared + tile);
    KVRT_LOCAL float *sc = qv + q_chunk * d;
    KVRT_LOCAL float *red = sc + q_chunk * tile;
    KVRT_LOCAL float *acc = red + q_chunk * nl;
    KVRT_LOCAL float *st_m = acc + q_chunk * dv;
    KVRT_LOCAL float *st_l = st_m + q_chunk;
    KVRT_LOCAL float *st_c = st_l + q_chunk;

    /* Grid-stride over (sequence, KV head, partition, chunk): uniform per
     * work-group, so the barriers below are reached by every work-item. */
    for (kvrt_u64 w = KVRT_GROUP_ID; w < work; w += KVRT_NUM_GROUPS) {
        const kvrt_u64 c = w % chunks;
        const kvrt_u64 p = (w / chunks) % parts;
        const kvrt_u64 kvh = (w / (chunks * parts)) % kv_heads;
        const kvrt_u64 s = w / (chunks * parts * kv_heads);
        const kvrt_u64 len = (kvrt_u64)seq_lens[s];
        const kvrt_u64 start = p * part_tokens;
        if (start >= len)
            continue; /* past this sequence's end: the reduce skips it */
        const kvrt_u64 end = len - start < part_tokens ? len : start + part_tokens;
        const kvrt_u64 qh0 = kvh * group + c * q_chunk;
        const kvrt_u64 gq = group - c * q_chunk < q_chunk ? group - c * q_chunk : q_chunk;

        for (kvrt_u64 i = lid; i < gq * d; i += nl)
            qv[i] = kvrt_load(dt, q, q_offset + ((s * q_heads + qh0) * d + i) * es);
        for (kvrt_u64 i = lid; i < gq * dv; i += nl)
            acc[i] = 0.0f;
        if (lid == 0)
            for (kvrt_u64 h = 0; h < gq; h++) {
                st_m[h] = 0.0f;
                st_l[h] = 0.0f;
            }
        KVRT_BARRIER();

        for (kvrt_u64 t0 = start; t0 < end; t0 += tile) {
            const kvrt_u64 n = end - t0 < tile ? end - t0 : tile;

            /* A. scores */
            for (kvrt_u64 r = 0; r < n; r += nlg) {
                const kvrt_u64 i = r + (lid >> lane_shift);
                float pacc[KVRT_DECODE_MAX_G];
                for (int h = 0; h < KVRT_DECODE_MAX_G; h++)
                    pacc[h] = 0.0f;
                if (i < n) {
                    const kvrt_u64 t = t0 + i;
                    const kvrt_u64 tb = t / block_size;
                    const kvrt_u64 slot =
                        (kvrt_u64)block_tables[s * max_blocks + tb] * block_size + (t - tb * block_size);
                    const kvrt_u64 vb = slot / view_tokens;
                    const kvrt_u64 cl =
                        offset + vb * stride_block + kvh * stride_head + (slot - vb * view_tokens) * stride_state;
                    if (lane == 0)
                        cell[i] = cl;
                    for (kvrt_u64 u = lane; u < ku; u += lanes) {
                        float e[8];
                        kvrt_load_unit(dt, ve, cache, cl + u * (kvrt_u64)ve * es, e);
                        for (int h = 0; h < KVRT_DECODE_MAX_G; h++)
                            if ((kvrt_u64)h < gq) {
                                KVRT_LOCAL const float *qx = qv + (kvrt_u64)h * d + u * (kvrt_u64)ve;
                                float sum = pacc[h];
                                for (int j = 0; j < ve; j++)
                                    sum += qx[j] * e[j];
                                pacc[h] = sum;
                            }
                    }
                }
                if (lanes == 1u) {
                    if (i < n)
                        for (int h = 0; h < KVRT_DECODE_MAX_G; h++)
                            if ((kvrt_u64)h < gq)
                                sc[(kvrt_u64)h * tile + i] = pacc[h] * scale;
                } else {
#if KVRT_HAS_SHUFFLE
                    for (int h = 0; h < KVRT_DECODE_MAX_G; h++)
                        if ((kvrt_u64)h < gq) {
                            float v = pacc[h];
                            for (kvrt_u32 o = lanes >> 1; o > 0; o >>= 1)
                                v += KVRT_SHFL_XOR(v, o);
                            if (lane == 0 && i < n)
                                sc[(kvrt_u64)h * tile + i] = v * scale;
                        }
#else
                    for (int h = 0; h < KVRT_DECODE_MAX_G; h++)
                        if ((kvrt_u64)h < gq)
                            red[(kvrt_u64)h * nl + lid] = pacc[h];
                    KVRT_BARRIER();
                    for (kvrt_u64 j = lid; j < gq * nlg; j += nl) {
                        const kvrt_u64 h = j / nlg, g = j - h * nlg;
                        if (r + g < n) {
                            KVRT_LOCAL const float *x = red + h * nl + g * lanes;
                            float v = 0.0f;
                            for (kvrt_u32 k = 0; k < lanes; k++)
                                v += x[k];
                            sc[h * tile + r + g] = v * scale;
                        }
                    }
                    KVRT_BARRIER();
#endif
                }
            }
            KVRT_BARRIER();

            /* B. softmax: tile max, running max, weights, tile sum. */
            for (kvrt_u64 h = 0; h < gq; h++) {
                float mx = sc[h * tile];
                for (kvrt_u64 i = lid; i < n; i += nl)
                    mx = KVRT_FMAXF(mx, sc[h * tile + i]);
                red[h * nl + lid] = mx;
            }
            kvrt_tree(red, lid, nl, gq, 1);
            if (lid == 0)
                for (kvrt_u64 h = 0; h < gq; h++) {
                    const float tm = red[h * nl];
                    const float mn = t0 == start ? tm : KVRT_FMAXF(st_m[h], tm);
                    st_c[h] = t0 == start ? 0.0f : KVRT_EXPF(st_m[h] - mn);
                    st_m[h] = mn;
                }
            KVRT_BARRIER();
            for (kvrt_u64 h = 0; h < gq; h++) {
                const float mh = st_m[h];
                float sum = 0.0f;
                for (kvrt_u64 i = lid; i < n; i += nl) {
                    const float x = KVRT_EXPF(sc[h * tile + i] - mh);
                    sc[h * tile + i] = x;
                    sum += x;
                }
                red[h * nl + lid] = sum;
            }
            kvrt_tree(red, lid, nl, gq, 0);
            if (lid == 0)
                for (kvrt_u64 h = 0; h < gq; h++)
                    st_l[h] = st_l[h] * st_c[h] + red[h * nl];

            /* C. values, one pass per lanes_v units of the row. */
            for (kvrt_u64 c0 = 0; c0 < vu; c0 += lanes_v) {
                const kvrt_u64 u = c0 + vlane;
                float va[KVRT_DECODE_MAX_G * 8];
                for (int k = 0; k < KVRT_DECODE_MAX_G * 8; k++)
                    va[k] = 0.0f;
                if (u < vu)
                    for (kvrt_u64 i = tg; i < n; i += ntg) {
                        float e[8];
                        kvrt_load_unit(dt, ve, cache, cell[i] + (d + u * (kvrt_u64)ve) * es, e);
                        for (int h = 0; h < KVRT_DECODE_MAX_G; h++)
                            if ((kvrt_u64)h < gq) {
                                const float wt = sc[(kvrt_u64)h * tile + i];
                                for (int j = 0; j < ve; j++)
                                    va[h * 8 + j] += wt * e[j];
                            }
                    }
                /* Token groups take turns; the first also applies the
                 * rescaling of the running max. */
                for (kvrt_u32 g = 0; g < ntg; g++) {
                    if (tg == g && u < vu)
                        for (int h = 0; h < KVRT_DECODE_MAX_G; h++)
                            if ((kvrt_u64)h < gq) {
                                KVRT_LOCAL float *a = acc + (kvrt_u64)h * dv + u * (kvrt_u64)ve;
                                const float corr = st_c[h];
                                for (int j = 0; j < ve; j++)
                                    a[j] = (g == 0 ? a[j] * corr : a[j]) + va[h * 8 + j];
                            }
                    KVRT_BARRIER();
                }
            }
        }

        if (parts == 1) {
            for (kvrt_u64 i = lid; i < gq * dv; i += nl) {
                const kvrt_u64 h = i / dv;
                kvrt_store(dt, out, out_offset + ((s * q_heads + qh0) * dv + i) * es, acc[i] / st_l[h]);
            }
        } else {
            /* Partials: [(s * q_heads + qh) * parts + p] x (m, l, acc[Dv]). */
            for (kvrt_u64 i = lid; i < gq * (dv + 2); i += nl) {
                const kvrt_u64 h = i / (dv + 2), x = i - h * (dv + 2);
                KVRT_GLOBAL float *row = part + ((s * q_heads + qh0 + h) * parts + p) * (dv + 2);
                row[x] = x == 0 ? st_m[h] : x == 1 ? st_l[h] : acc[h * dv + x - 2];
            }
        }
        KVRT_BARRIER(); /* the next item overwrites q, acc and the stats */
    }
}

/* Combine the partitions of each (sequence, query head): one work-group
 * each (grid-stride), work-items over the output elements. */
#define KVRT_REDUCE_PARAMS                                                                                             \
    KVRT_GLOBAL kvrt_u8 *out, KVRT_GLOBAL const float *part, KVRT_GLOBAL const kvrt_i32 *seq_lens,                     \
        kvrt_u64 out_offset, kvrt_u64 q_heads, kvrt_u64 dv, kvrt_u64 part_tokens, kvrt_u64 parts, kvrt_u64 work

KVRT_FN void kvrt_reduce_body(const int dt, KVRT_REDUCE_PARAMS)
{
    const kvrt_u64 es = kvrt_elem_size(dt);
    for (kvrt_u64 w = KVRT_GROUP_ID; w < work; w += KVRT_NUM_GROUPS) {
        const kvrt_u64 s = w / q_heads;
        const kvrt_u64 len = (kvrt_u64)seq_lens[s];
        const kvrt_u64 np = (len + part_tokens - 1) / part_tokens;
        KVRT_GLOBAL const float *rows = part + w * parts * (dv + 2);
        float m = rows[0];
        for (kvrt_u64 p = 1; p < np; p++)
            m = KVRT_FMAXF(m, rows[p * (dv + 2)]);
        float l = 0.0f;
        for (kvrt_u64 p = 0; p < np; p++)
            l += KVRT_EXPF(rows[p * (dv + 2)] - m) * rows[p * (dv + 2) + 1];
        for (kvrt_u64 x = KVRT_LOCAL_ID; x < dv; x += KVRT_LOCAL_SIZE) {
            float a = 0.0f;
            for (kvrt_u64 p = 0; p < np; p++)
                a += KVRT_EXPF(rows[p * (dv + 2)] - m) * rows[p * (dv + 2) + 2 + x];
            kvrt_store(dt, out, out_offset + (w * dv + x) * es, a / l);
        }
    }
}

#define KVRT_DECODE_KERNEL(suffix, dt, vec)                                                                            \
    KVRT_KERNEL kvrt_decode_##suffix(KVRT_DECODE_PARAMS KVRT_SHARED_PARAM)                                             \
    {                                                                                                                  \
        KVRT_SHARED_DECL                                                                                               \
        kvrt_decode_body(dt, vec, KVRT_DECODE_ARGS, kvrt_shared);                                                      \
    }
KVRT_DECODE_VARIANTS(KVRT_DECODE_KERNEL)

#define KVRT_REDUCE_KERNEL(suffix, dt)                                                                                 \
    KVRT_KERNEL kvrt_decode_reduce_##suffix(KVRT_REDUCE_PARAMS)                                                        \
    {                                                                                                                  \
        kvrt_reduce_body(dt, out, part, seq_lens, out_offset, q_heads, dv, part_tokens, parts, work);                  \
    }
KVRT_REDUCE_VARIANTS(KVRT_REDUCE_KERNEL)
