/*
 * write -> read round trip through random slot mappings with skipped
 * (negative) slots.  The whole cache is compared after the writes, so a
 * token that lands in the wrong cell, a skipped slot that is written, or a
 * stray byte anywhere all fail.
 */
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

/* Offsets inside the K/V buffers: a backend must honour them. */
#define ROW_OFFSET 256u
#define TAIL 64u

struct token_batch {
    uint64_t n;
    int64_t *slots;
    uint8_t **k, **v; /* per layer, host */
};

static void batch_free(struct token_batch *t, uint32_t layers)
{
    for (uint32_t l = 0; t->k && l < layers; l++)
        free(t->k[l]);
    for (uint32_t l = 0; t->v && l < layers; l++)
        free(t->v[l]);
    free(t->k);
    free(t->v);
    free(t->slots);
    memset(t, 0, sizeof(*t));
}

/* n tokens on distinct random slots, `skipped` of them negative. */
static bool batch_make(struct conf_case *cs, uint64_t n, uint64_t skipped, struct token_batch *t)
{
    struct conf_cache *c = &cs->cache;
    struct conf_rng *r = &cs->plugin->rng;
    memset(t, 0, sizeof(*t));
    t->n = n;
    t->slots = conf_rng_permutation(r, conf_num_slots(c));
    t->k = calloc(c->num_layers, sizeof(*t->k));
    t->v = calloc(c->num_layers, sizeof(*t->v));
    if (!t->slots || !t->k || !t->v)
        return false;
    for (uint64_t i = 0; i < skipped; i++)
        t->slots[conf_rng_below(r, n)] = -1 - (int64_t)conf_rng_below(r, 1000);
    for (uint32_t l = 0; l < c->num_layers; l++) {
        const struct conf_layer *L = &c->layers[l];
        t->k[l] = malloc(conf_k_bytes(c, l, n) + 1);
        t->v[l] = malloc(conf_v_bytes(c, l, n) + 1);
        if (!t->k[l] || !t->v[l])
            return false;
        if (!L->has_tokens)
            continue;
        conf_fill(r, L->dtype, t->k[l], n * L->heads * L->head_size);
        conf_fill(r, L->dtype, t->v[l], n * L->heads * L->head_size_v);
    }
    return true;
}

/* Write the batch into every layer, through buffers with an offset. */
static bool batch_write(struct conf_case *cs, const struct token_batch *t)
{
    struct conf_cache *c = &cs->cache;
    bool ok = true;
    for (uint32_t l = 0; l < c->num_layers && ok; l++) {
        if (!c->layers[l].has_tokens)
            continue;
        uint64_t kb = conf_k_bytes(c, l, t->n), vb = conf_v_bytes(c, l, t->n);
        kvrt_buffer *k = conf_sentinel_buffer(cs->backend, ROW_OFFSET + kb + TAIL);
        kvrt_buffer *v = vb ? conf_sentinel_buffer(cs->backend, ROW_OFFSET + vb + TAIL) : NULL;
        ok = k && (v || !vb);
        if (ok)
            ok = kvrt_buffer_upload(k, ROW_OFFSET, t->k[l], kb) == KVRT_OK &&
                 (!v || kvrt_buffer_upload(v, ROW_OFFSET, t->v[l], vb) == KVRT_OK);
        if (ok) {
            int status = kvrt_cache_write(c->cache, l, t->n, t->slots, k, ROW_OFFSET, v, ROW_OFFSET);
            if (status != KVRT_OK) {
                conf_diag_status("kvrt_cache_write", status);
                ok = false;
            }
        }
        if (ok)
            conf_model_write(c, l, t->n, t->slots, t->k[l], t->v[l]);
        kvrt_buffer_destroy(k);
        kvrt_buffer_destroy(v);
    }
    return ok;
}

/* Read the batch's slots back into sentinel-filled buffers; check written
 * rows and everything else separately. */
static void batch_read(struct conf_case *cs, const struct token_batch *t, bool *rows_ok, bool *rest_ok)
{
    struct conf_cache *c = &cs->cache;
    *rows_ok = *rest_ok = true;
    for (uint32_t l = 0; l < c->num_layers; l++) {
        const struct conf_layer *L = &c->layers[l];
        if (!L->has_tokens)
            continue;
        uint64_t kb = conf_k_bytes(c, l, t->n), vb = conf_v_bytes(c, l, t->n);
        uint64_t ksize = ROW_OFFSET + kb + TAIL, vsize = ROW_OFFSET + vb + TAIL;
        kvrt_buffer *k = conf_sentinel_buffer(cs->backend, ksize);
        kvrt_buffer *v = vb ? conf_sentinel_buffer(cs->backend, vsize) : NULL;
        uint8_t *want_k = malloc(ksize), *want_v = malloc(vsize), *got_k = NULL, *got_v = NULL;
        bool ok = k && (v || !vb) && want_k && want_v;
        if (ok) {
            int status = kvrt_cache_read(c->cache, l, t->n, t->slots, k, ROW_OFFSET, v, ROW_OFFSET);
            if (status != KVRT_OK) {
                conf_diag_status("kvrt_cache_read", status);
                ok = false;
            }
        }
        if (ok) {
            got_k = conf_download(k);
            got_v = v ? conf_download(v) : NULL;
            ok = got_k && (got_v || !v);
        }
        if (!ok) {
            *rows_ok = *rest_ok = false;
        } else {
            conf_sentinel(want_k, ksize);
            conf_sentinel(want_v, vsize);
            conf_model_read(c, l, t->n, t->slots, want_k + ROW_OFFSET, want_v + ROW_OFFSET);
            const uint64_t kr = L->heads * L->head_size * L->elem, vr = L->heads * L->head_size_v * L->elem;
            for (uint64_t i = 0; i < t->n; i++) {
                bool written = t->slots[i] >= 0;
                uint64_t ko = ROW_OFFSET + i * kr, vo = ROW_OFFSET + i * vr;
                bool same =
                    memcmp(got_k + ko, want_k + ko, kr) == 0 && (!got_v || memcmp(got_v + vo, want_v + vo, vr) == 0);
                if (!same && (written ? *rows_ok : *rest_ok))
                    tap_diag("  layer %u token %llu (slot %lld): %s", l, (unsigned long long)i, (long long)t->slots[i],
                             written ? "K/V read back differ from what was written"
                                     : "row of a skipped slot was modified");
                if (!same)
                    *(written ? rows_ok : rest_ok) = false;
            }
            bool around = memcmp(got_k, want_k, ROW_OFFSET) == 0 &&
                          memcmp(got_k + ROW_OFFSET + kb, want_k + ROW_OFFSET + kb, TAIL) == 0 &&
                          (!got_v || (memcmp(got_v, want_v, ROW_OFFSET) == 0 &&
                                      memcmp(got_v + ROW_OFFSET + vb, want_v + ROW_OFFSET + vb, TAIL) == 0));
            if (!around) {
                tap_diag("  layer %u: read wrote outside [offset, offset + rows) of its K/V buffers", l);
                *rest_ok = false;
            }
        }
        free(want_k);
        free(want_v);
        free(got_k);
        free(got_v);
        kvrt_buffer_destroy(k);
        kvrt_buffer_destroy(v);
    }
}

void conf_check_tokens(struct conf_case *cs)
{
    struct conf_cache *c = &cs->cache;
    if (!conf_has_op(cs, KVRT_OP_WRITE)) {
        tap_skip("%s: write/read round trip: the backend does not declare write", cs->label);
        return;
    }
    uint64_t n = conf_num_slots(c) * 2 / 3, skipped = n / 4;
    struct token_batch t;
    bool ok = batch_make(cs, n, skipped, &t);
    if (!ok)
        tap_diag("  out of host memory");
    ok = ok && batch_write(cs, &t);
    ok = ok && conf_cache_matches(c);
    tap_ok(ok, "%s: write of %llu tokens (some skipped) lands only at the layout's cells", cs->label,
           (unsigned long long)n);
    if (!conf_has_op(cs, KVRT_OP_READ)) {
        tap_skip("%s: read: the backend does not declare read", cs->label);
    } else {
        bool rows_ok, rest_ok;
        batch_read(cs, &t, &rows_ok, &rest_ok);
        tap_ok(rows_ok, "%s: read returns the written K/V", cs->label);
        tap_ok(rest_ok, "%s: read leaves rows of negative slots and bytes outside its rows untouched", cs->label);
    }
    batch_free(&t, c->num_layers);

    /* Duplicate slots in one write: the last token naming a slot wins. */
    n = conf_num_slots(c) / 2;
    ok = batch_make(cs, n, 0, &t);
    for (uint64_t i = 0; ok && i + 1 < n; i += 3)
        t.slots[i] = t.slots[i + 1 + conf_rng_below(&cs->plugin->rng, n - i - 1)];
    ok = ok && batch_write(cs, &t) && conf_cache_matches(c);
    tap_ok(ok, "%s: a write naming slots twice keeps the last token's K/V, whole", cs->label);
    batch_free(&t, c->num_layers);
}

/* Layers without tokens (state layers, several tokens per state) have no
 * write: their cells get random bytes through the cache buffer itself, so
 * that the block operations have something to move. */
static void fill_pages(struct conf_case *cs)
{
    struct conf_cache *c = &cs->cache;
    kvrt_buffer *buf = kvrt_cache_buffer(c->cache);
    for (uint32_t l = 0; l < c->num_layers; l++) {
        const struct conf_layer *L = &c->layers[l];
        if (L->has_tokens)
            continue;
        bool ok = true;
        for (uint64_t b = 0; b < c->num_blocks; b++)
            for (uint64_t h = 0; h < L->heads; h++)
                for (uint64_t s = 0; s < L->states * L->blocks_per_block; s++) {
                    uint64_t at = conf_cell(c, l, b, s, h);
                    for (uint64_t i = 0; i < L->content; i++)
                        c->image[at + i] = (uint8_t)conf_rng_next(&cs->plugin->rng);
                    ok &= kvrt_buffer_upload(buf, at, c->image + at, L->content) == KVRT_OK;
                }
        tap_ok(ok && conf_cache_matches(c), "%s: layer \"%s\" (no tokens) filled through the cache buffer", cs->label,
               L->name);
    }
}

void conf_fill_cache(struct conf_case *cs)
{
    struct conf_cache *c = &cs->cache;
    if (!conf_has_op(cs, KVRT_OP_WRITE)) {
        tap_skip("%s: write of every slot: the backend does not declare write", cs->label);
        return;
    }
    struct token_batch t;
    bool ok = batch_make(cs, conf_num_slots(c), 0, &t) && batch_write(cs, &t) && conf_cache_matches(c);
    batch_free(&t, c->num_layers);
    tap_ok(ok, "%s: write of every slot of every layer", cs->label);
    fill_pages(cs);
}
