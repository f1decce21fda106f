/*
 * Single-query paged attention decode, one work-group per (sequence, query
 * head).  Tokens are processed in chunks of one token per work-item:
 *   1. each work-item scores its token: scale * dot(q, K[token]) in fp32;
 *   2. every work-item scans the chunk's scores (same order, so all agree on
 *      the running max m and sum l: online softmax, no extra reduction pass);
 *   3. each work-item owns output elements x = lid, lid + L, ... and folds the
 *      chunk's V rows into its fp32 accumulators.
 * Local memory (dynamic): cell offsets [L] u64 | q [D] | scores [L] |
 * weights [L] | acc [Dv], fp32.  The host sizes it (kvrt_decode_shared_bytes).
 */

#define KVRT_DECODE_PARAMS                                                     \
    KVRT_GLOBAL const kvrt_u8 *cache, KVRT_GLOBAL const kvrt_u8 *q,            \
        KVRT_GLOBAL kvrt_u8 *out, KVRT_GLOBAL const kvrt_i32 *block_tables,    \
        KVRT_GLOBAL const kvrt_i32 *seq_lens, kvrt_u64 q_offset,               \
        kvrt_u64 out_offset, kvrt_u64 q_heads, kvrt_u64 group, kvrt_u64 d,     \
        kvrt_u64 dv, kvrt_u64 max_blocks, kvrt_u64 block_size,                 \
        kvrt_u64 view_tokens, kvrt_u64 offset, kvrt_u64 stride_block,          \
        kvrt_u64 stride_head, kvrt_u64 stride_state, float scale

#define KVRT_DECODE_ARGS                                                       \
    cache, q, out, block_tables, seq_lens, q_offset, out_offset, q_heads,      \
        group, d, dv, max_blocks, block_size, view_tokens, offset,             \
        stride_block, stride_head, stride_state, scale

KVRT_FN void kvrt_decode_body(const int dt, KVRT_DECODE_PARAMS, KVRT_LOCAL kvrt_u64 *shared)
{
    const kvrt_u32 lid = KVRT_LOCAL_ID;
    const kvrt_u32 nl = KVRT_LOCAL_SIZE;
    const kvrt_u64 es = kvrt_elem_size(dt);
    const kvrt_u64 g = KVRT_GROUP_ID;
    const kvrt_u64 s = g / q_heads;
    const kvrt_u64 qh = g - s * q_heads;
    const kvrt_u64 kvh = qh / group;

    KVRT_LOCAL kvrt_u64 *cell = shared;
    KVRT_LOCAL float *qv = (KVRT_LOCAL float *)(shared + nl);
    KVRT_LOCAL float *sc = qv + d;
    KVRT_LOCAL float *w = sc + nl;
    KVRT_LOCAL float *acc = w + nl;

    const kvrt_u64 q_row = q_offset + (s * q_heads + qh) * d * es;
    for (kvrt_u64 x = lid; x < d; x += nl)
        qv[x] = kvrt_load(dt, q, q_row + x * es);
    for (kvrt_u64 x = lid; x < dv; x += nl)
        acc[x] = 0.0f;
    KVRT_BARRIER();

    const kvrt_u64 len = (kvrt_u64)seq_lens[s];
    float m = 0.0f;
    float l = 0.0f;
    for (kvrt_u64 base = 0; base < len; base += nl) {
        const kvrt_u64 n = len - base < nl ? len - base : nl;
        if (lid < n) {
            const kvrt_u64 t = base + lid;
            const kvrt_u64 tb = t / block_size;
            const kvrt_u64 slot = (kvrt_u64)block_tables[s * max_blocks + tb] * block_size + (t - tb * block_size);
            const kvrt_u64 vb = slot / view_tokens;
            const kvrt_u64 c = offset + vb * stride_block + kvh * stride_head + (slot - vb * view_tokens) * stride_state;
            float dot = 0.0f;
            for (kvrt_u64 x = 0; x < d; x++)
                dot += qv[x] * kvrt_load(dt, cache, c + x * es);
            cell[lid] = c;
            sc[lid] = dot * scale;
        }
        KVRT_BARRIER();
        float cm = sc[0];
        for (kvrt_u64 i = 1; i < n; i++)
            cm = KVRT_FMAXF(cm, sc[i]);
        const float mn = base == 0 ? cm : KVRT_FMAXF(m, cm);
        const float corr = base == 0 ? 0.0f : KVRT_EXPF(m - mn);
        if (lid < n)
            w[lid] = KVRT_EXPF(sc[lid] - mn);
        KVRT_BARRIER();
        float sum = 0.0f;
        for (kvrt_u64 i = 0; i < n; i++)
            sum += w[i];
        l = l * corr + sum;
        for (kvrt_u64 x = lid; x < dv; x += nl) {
            float a = acc[x] * corr;
            for (kvrt_u64 i = 0; i < n; i++)
                a += w[i] * kvrt_load(dt, cache, cell[i] + (d + x) * es);
            acc[x] = a;
        }
        m = mn;
        KVRT_BARRIER(); /* the next chunk overwrites cell, sc and w */
    }

    const kvrt_u64 out_row = out_offset + (s * q_heads + qh) * dv * es;
    for (kvrt_u64 x = lid; x < dv; x += nl)
        kvrt_store(dt, out, out_row + x * es, acc[x] / l);
}

#define KVRT_DECODE_KERNEL(suffix, dt)                                         \
    KVRT_KERNEL kvrt_decode_##suffix(KVRT_DECODE_PARAMS KVRT_SHARED_PARAM)     \
    {                                                                          \
        KVRT_SHARED_DECL                                                       \
        kvrt_decode_body(dt, KVRT_DECODE_ARGS, kvrt_shared);                   \
    }
KVRT_DECODE_VARIANTS(KVRT_DECODE_KERNEL)
