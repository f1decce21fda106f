/*
 * Paged decode against a double-precision reference computed from the bytes
 * the model says the cache holds.  Grouped-query: Hq = 4 x H.  Sequences end
 * on a block boundary, after one token, and inside a block; block-table
 * entries past a sequence's end are -1 and must never be read.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

#define NUM_SEQS 3u
#define BLOCKS_PER_SEQ 2u
#define GROUP 4u
#define Q_OFFSET 64u
#define OUT_OFFSET 192u
#define TAIL 64u

struct decode_setup {
    int32_t tables[NUM_SEQS * BLOCKS_PER_SEQ];
    int32_t lens[NUM_SEQS];
    uint64_t hq;
    float scale;
    uint8_t *q; /* host [S, Hq, D] */
};

static double reference(const struct conf_case *cs, uint32_t layer, const struct decode_setup *d, uint64_t s,
                        uint64_t qh, uint64_t i, double *vmax)
{
    const struct conf_cache *c = &cs->cache;
    const struct conf_layer *L = &c->layers[layer];
    const uint64_t kvh = qh / GROUP, len = (uint64_t)d->lens[s];
    double *score = malloc(len * sizeof(*score));
    if (!score)
        return NAN;
    double max = -INFINITY;
    for (uint64_t t = 0; t < len; t++) {
        int64_t slot = (int64_t)d->tables[s * BLOCKS_PER_SEQ + t / c->block_size] * (int64_t)c->block_size +
                       (int64_t)(t % c->block_size);
        const uint8_t *k = c->image + conf_slot_cell(c, layer, slot, kvh);
        double dot = 0;
        for (uint64_t e = 0; e < L->head_size; e++)
            dot += conf_load(L->dtype, d->q, (s * d->hq + qh) * L->head_size + e) * conf_load(L->dtype, k, e);
        score[t] = dot * (double)d->scale;
        max = score[t] > max ? score[t] : max;
    }
    double sum = 0, acc = 0;
    for (uint64_t t = 0; t < len; t++) {
        int64_t slot = (int64_t)d->tables[s * BLOCKS_PER_SEQ + t / c->block_size] * (int64_t)c->block_size +
                       (int64_t)(t % c->block_size);
        const uint8_t *v = c->image + conf_slot_cell(c, layer, slot, kvh) + L->head_size * L->elem;
        double p = exp(score[t] - max), x = conf_load(L->dtype, v, i);
        sum += p;
        acc += p * x;
        *vmax = fabs(x) > *vmax ? fabs(x) : *vmax;
    }
    free(score);
    return acc / sum;
}

static void setup(struct conf_case *cs, uint32_t layer, struct decode_setup *d)
{
    const struct conf_cache *c = &cs->cache;
    const struct conf_layer *L = &c->layers[layer];
    struct conf_rng *r = &cs->plugin->rng;
    int64_t *perm = conf_rng_permutation(r, c->num_blocks);
    const uint64_t max_len = BLOCKS_PER_SEQ * c->block_size;
    d->lens[0] = (int32_t)max_len;
    d->lens[1] = 1;
    d->lens[2] = (int32_t)(2 + conf_rng_below(r, max_len - 2));
    for (uint64_t s = 0; s < NUM_SEQS; s++) {
        uint64_t used = ((uint64_t)d->lens[s] + c->block_size - 1) / c->block_size;
        for (uint64_t i = 0; i < BLOCKS_PER_SEQ; i++)
            d->tables[s * BLOCKS_PER_SEQ + i] = i < used && perm ? (int32_t)perm[s * BLOCKS_PER_SEQ + i] : -1;
    }
    free(perm);
    d->hq = GROUP * L->heads;
    d->scale = (float)(1.0 / sqrt((double)L->head_size));
    d->q = malloc(NUM_SEQS * d->hq * L->head_size * L->elem);
    if (d->q)
        conf_fill(r, L->dtype, d->q, NUM_SEQS * d->hq * L->head_size);
}

/* Decode must compute these; fp8 is optional: the descriptor cannot say
 * "decode for some of my types", so a backend that stores fp8 but cannot
 * decode it refuses with KVRT_ERR_UNSUPPORTED. */
static bool required(enum kvrt_dtype t)
{
    return t == KVRT_DTYPE_FP32 || t == KVRT_DTYPE_FP16 || t == KVRT_DTYPE_BF16;
}

/* A declined optional type: a skip, as long as the refusal wrote nothing. */
static void declined(struct conf_case *cs, uint32_t layer, kvrt_buffer *out, const char *why)
{
    char reason[512];
    snprintf(reason, sizeof(reason), "%s", why);
    uint8_t *got = conf_download(out), *want = malloc(kvrt_buffer_size(out));
    bool untouched = got && want;
    if (untouched) {
        conf_sentinel(want, kvrt_buffer_size(out));
        untouched = memcmp(got, want, kvrt_buffer_size(out)) == 0 && conf_cache_matches(&cs->cache);
    }
    if (untouched)
        tap_skip("%s: decode layer %u: the backend declines %s: %s", cs->label, layer, kvrt_dtype_name(cs->dtype),
                 reason);
    else
        tap_ok(false, "%s: decode layer %u: declined with KVRT_ERR_UNSUPPORTED, but wrote its output or the cache",
               cs->label, layer);
    free(got);
    free(want);
}

static void decode_layer(struct conf_case *cs, uint32_t layer)
{
    struct conf_cache *c = &cs->cache;
    const struct conf_layer *L = &c->layers[layer];
    struct decode_setup d;
    setup(cs, layer, &d);
    const uint64_t q_bytes = NUM_SEQS * d.hq * L->head_size * L->elem;
    const uint64_t out_count = NUM_SEQS * d.hq * L->head_size_v, out_bytes = out_count * L->elem;
    const uint64_t out_size = OUT_OFFSET + out_bytes + TAIL;
    kvrt_buffer *q = d.q ? conf_sentinel_buffer(cs->backend, Q_OFFSET + q_bytes) : NULL;
    kvrt_buffer *out = conf_sentinel_buffer(cs->backend, out_size);
    uint8_t *got = NULL, *want = malloc(out_size);
    bool ok = q && out && want && kvrt_buffer_upload(q, Q_OFFSET, d.q, q_bytes) == KVRT_OK;
    if (ok) {
        struct kvrt_decode_params p;
        kvrt_decode_params_default(&p);
        p.num_seqs = NUM_SEQS;
        p.num_q_heads = (uint32_t)d.hq;
        p.q = q;
        p.q_offset = Q_OFFSET;
        p.out = out;
        p.out_offset = OUT_OFFSET;
        p.block_tables = d.tables;
        p.max_blocks_per_seq = BLOCKS_PER_SEQ;
        p.seq_lens = d.lens;
        p.scale = d.scale;
        int status = kvrt_cache_decode(c->cache, layer, &p);
        if (status == KVRT_ERR_UNSUPPORTED && !required(L->dtype)) {
            declined(cs, layer, out, kvrt_error_message());
            goto done;
        }
        if (status != KVRT_OK)
            conf_diag_status("kvrt_cache_decode", status);
        ok = status == KVRT_OK && (got = conf_download(out)) != NULL;
    }
    double worst = 0, vmax = 0;
    if (ok) {
        uint64_t worst_at = 0;
        double worst_got = 0, worst_want = 0;
        for (uint64_t s = 0; s < NUM_SEQS; s++)
            for (uint64_t h = 0; h < d.hq; h++)
                for (uint64_t i = 0; i < L->head_size_v; i++) {
                    uint64_t at = (s * d.hq + h) * L->head_size_v + i;
                    double ref = reference(cs, layer, &d, s, h, i, &vmax);
                    double x = conf_load(L->dtype, got + OUT_OFFSET, at);
                    double err = isnan(x) || isnan(ref) ? INFINITY : fabs(x - ref);
                    if (err > worst) {
                        worst = err;
                        worst_at = at;
                        worst_got = x;
                        worst_want = ref;
                    }
                }
        worst = vmax > 0 ? worst / vmax : worst;
        if (!(worst <= conf_tolerance(L->dtype)) && L->head_size_v > 0 && d.hq > 0)
            tap_diag("  worst at seq %llu, q head %llu, element %llu: got %.6g, reference %.6g",
                     (unsigned long long)(worst_at / L->head_size_v / d.hq),
                     (unsigned long long)(worst_at / L->head_size_v % d.hq),
                     (unsigned long long)(worst_at % L->head_size_v), worst_got, worst_want);
        conf_sentinel(want, out_size);
        bool around = memcmp(got, want, OUT_OFFSET) == 0 &&
                      memcmp(got + OUT_OFFSET + out_bytes, want + OUT_OFFSET + out_bytes, TAIL) == 0;
        if (!around)
            tap_diag("  decode wrote outside [out_offset, out_offset + S x Hq x Dv)");
        bool cache_same = conf_cache_matches(c);
        ok = worst <= conf_tolerance(L->dtype) && around && cache_same;
    }
    tap_ok(ok,
           "%s: decode layer %u (S %u, Hq %llu = %u x H, lens %d/%d/%d) matches the fp64 reference "
           "(max err %.2g x max|v|, tolerance %.0e), writes only its output",
           cs->label, layer, NUM_SEQS, (unsigned long long)d.hq, GROUP, d.lens[0], d.lens[1], d.lens[2], worst,
           conf_tolerance(L->dtype));
done:
    free(d.q);
    free(got);
    free(want);
    kvrt_buffer_destroy(q);
    kvrt_buffer_destroy(out);
}

void conf_check_decode(struct conf_case *cs)
{
    if (!conf_has_op(cs, KVRT_OP_DECODE)) {
        tap_skip("%s: decode: the backend does not declare it", cs->label);
        return;
    }
    if (!conf_dtype_has_values(cs->dtype)) {
        tap_skip("%s: decode: integer caches have no values without scales (none in the ABI)", cs->label);
        return;
    }
    for (uint32_t l = 0; l < cs->cache.num_layers; l++) {
        if (!cs->cache.layers[l].has_tokens)
            tap_skip("%s: decode layer %u: a layer without one state per token cannot be decoded", cs->label, l);
        else if (cs->cache.layers[l].head_size_v == 0)
            tap_skip("%s: decode layer %u: an MLA layer has no V to attend over", cs->label, l);
        else
            decode_layer(cs, l);
    }
}
