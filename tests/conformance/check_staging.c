/*
 * gather -> scatter across two layouts.  The staging order does not depend
 * on the layout, so gathering under layout A and scattering into a cache of
 * layout B converts the blocks; reading them back through both caches must
 * give identical K/V.
 */
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

#define STAGING_OFFSET 128u
#define TAIL 128u
#define NUM_STAGED 3u

/* The next layout the plugin declares after `layout` (itself if alone). */
static enum kvrt_layout other_layout(const struct conf_plugin *p, enum kvrt_layout layout)
{
    for (size_t i = 0; i < p->num_layouts; i++)
        if (p->layouts[i] == layout)
            return p->layouts[(i + 1) % p->num_layouts];
    return layout;
}

static uint64_t expected_per_block(const struct conf_cache *c)
{
    uint64_t sum = 0;
    for (uint32_t l = 0; l < c->num_layers; l++)
        sum += c->layers[l].heads * c->layers[l].states * c->layers[l].blocks_per_block * c->layers[l].content;
    return sum;
}

/* Every K/V of the given blocks, read through the cache: [layer][token][H][D or Dv]
 * (layers without tokens are compared through the cache bytes only). */
static uint8_t *read_blocks(struct conf_cache *c, kvrt_backend *b, const int64_t *ids, uint64_t *size)
{
    uint64_t tokens = NUM_STAGED * c->block_size, total = 0;
    for (uint32_t l = 0; l < c->num_layers; l++)
        total += conf_k_bytes(c, l, tokens) + conf_v_bytes(c, l, tokens);
    uint8_t *out = malloc(total ? total : 1), *at = out;
    int64_t *slots = malloc(tokens * sizeof(*slots));
    bool ok = out && slots;
    for (uint64_t t = 0; ok && t < tokens; t++)
        slots[t] = ids[t / c->block_size] * (int64_t)c->block_size + (int64_t)(t % c->block_size);
    for (uint32_t l = 0; ok && l < c->num_layers; l++) {
        if (!c->layers[l].has_tokens)
            continue;
        uint64_t kb = conf_k_bytes(c, l, tokens), vb = conf_v_bytes(c, l, tokens);
        kvrt_buffer *k = conf_buffer(b, kb, NULL), *v = vb ? conf_buffer(b, vb, NULL) : NULL;
        int status = k && (v || !vb) ? kvrt_cache_read(c->cache, l, tokens, slots, k, 0, v, 0) : KVRT_ERR_NOMEM;
        if (status != KVRT_OK)
            conf_diag_status("kvrt_cache_read", status);
        ok = status == KVRT_OK && kvrt_buffer_download(k, 0, at, kb) == KVRT_OK &&
             (!v || kvrt_buffer_download(v, 0, at + kb, vb) == KVRT_OK);
        at += kb + vb;
        kvrt_buffer_destroy(k);
        kvrt_buffer_destroy(v);
    }
    free(slots);
    if (!ok) {
        free(out);
        return NULL;
    }
    *size = total;
    return out;
}

static void scatter_other(struct conf_case *cs, const uint8_t *staged, uint64_t staged_size, const int64_t *ids)
{
    struct conf_plugin *p = cs->plugin;
    enum kvrt_layout target = other_layout(p, cs->layout);
    const char *tname = kvrt_layout_name(target);
    kvrt_backend *b = conf_bind(p, target);
    kvrt_placement *pl = NULL;
    struct conf_cache dst;
    memset(&dst, 0, sizeof(dst));
    int status = b ? conf_placement(cs->shape, target, cs->dtype, false, &pl) : KVRT_ERR_NODEV;
    if (status == KVRT_OK)
        status = conf_cache_open(b, pl, &dst);
    kvrt_placement_destroy(pl);
    if (status != KVRT_OK) {
        conf_diag_status("cache under the second layout", status);
        tap_ok(false, "%s: scatter under %s: cache created", cs->label, tname);
        return;
    }
    int64_t *perm = conf_rng_permutation(&p->rng, dst.num_blocks);
    /* The staging buffer belongs to the source binding: bindings of one
     * plugin share a device, so its buffers serve every binding (the core
     * checks a buffer's plugin, not its binding). */
    kvrt_buffer *staging = conf_buffer(cs->backend, staged_size, staged);
    bool ok = perm && staging;
    if (ok) {
        status = kvrt_cache_scatter(dst.cache, NUM_STAGED, perm, staging, STAGING_OFFSET);
        if (status != KVRT_OK)
            conf_diag_status("kvrt_cache_scatter", status);
        ok = status == KVRT_OK;
    }
    if (ok)
        conf_model_scatter(&dst, NUM_STAGED, perm, staged + STAGING_OFFSET);
    tap_ok(ok && conf_cache_matches(&dst),
           "%s: scatter under %s (staging buffer of the %s binding) puts the blocks at %s's cells, nothing else",
           cs->label, tname, kvrt_layout_name(cs->layout), tname);

    if (!conf_has_op(cs, KVRT_OP_READ)) {
        tap_skip("%s: %s -> %s K/V comparison: the backend does not declare read", cs->label,
                 kvrt_layout_name(cs->layout), tname);
    } else if (ok) {
        uint64_t na = 0, nb = 0;
        uint8_t *a = read_blocks(&cs->cache, cs->backend, ids, &na);
        uint8_t *c = read_blocks(&dst, b, perm, &nb);
        tap_ok(a && c && na == nb && memcmp(a, c, na) == 0,
               "%s: gather under %s -> scatter under %s: identical K/V read back", cs->label,
               kvrt_layout_name(cs->layout), tname);
        free(a);
        free(c);
    } else {
        tap_ok(false, "%s: gather under %s -> scatter under %s: identical K/V read back", cs->label,
               kvrt_layout_name(cs->layout), tname);
    }
    kvrt_buffer_destroy(staging);
    free(perm);
    conf_cache_close(&dst);
}

/* Scatter into the source cache itself, onto the blocks in reverse order:
 * scatter under the case's own shape (kernel-block split included). */
static void scatter_back(struct conf_case *cs, const uint8_t *staged, uint64_t staged_size, const int64_t *ids)
{
    struct conf_cache *c = &cs->cache;
    int64_t back[NUM_STAGED];
    for (unsigned i = 0; i < NUM_STAGED; i++)
        back[i] = ids[NUM_STAGED - 1 - i];
    kvrt_buffer *staging = conf_buffer(cs->backend, staged_size, staged);
    int status = staging ? kvrt_cache_scatter(c->cache, NUM_STAGED, back, staging, STAGING_OFFSET) : KVRT_ERR_NOMEM;
    if (status != KVRT_OK)
        conf_diag_status("kvrt_cache_scatter", status);
    else
        conf_model_scatter(c, NUM_STAGED, back, staged + STAGING_OFFSET);
    tap_ok(status == KVRT_OK && conf_cache_matches(c),
           "%s: scatter of the gathered blocks onto %lld, %lld, %lld of the same cache", cs->label, (long long)back[0],
           (long long)back[1], (long long)back[2]);
    kvrt_buffer_destroy(staging);
}

void conf_check_staging(struct conf_case *cs)
{
    struct conf_cache *c = &cs->cache;
    if (!conf_has_op(cs, KVRT_OP_GATHER)) {
        tap_skip("%s: gather: the backend does not declare it", cs->label);
        return;
    }
    uint64_t per = expected_per_block(c);
    if (!TAP_EQ_U64(c->staging_per_block, per, "%s: staging bytes per block = sum of unpadded pages", cs->label))
        return;
    int64_t *ids = conf_rng_permutation(&cs->plugin->rng, c->num_blocks);
    uint64_t size = STAGING_OFFSET + NUM_STAGED * per + TAIL;
    kvrt_buffer *staging = conf_sentinel_buffer(cs->backend, size);
    uint8_t *want = malloc(size), *got = NULL;
    bool ok = ids && staging && want;
    if (ok) {
        int status = kvrt_cache_gather(c->cache, NUM_STAGED, ids, staging, STAGING_OFFSET);
        if (status != KVRT_OK)
            conf_diag_status("kvrt_cache_gather", status);
        ok = status == KVRT_OK && (got = conf_download(staging)) != NULL;
    }
    if (ok) {
        conf_sentinel(want, size);
        conf_model_gather(c, NUM_STAGED, ids, want + STAGING_OFFSET);
        int64_t at = conf_first_diff(got + STAGING_OFFSET, want + STAGING_OFFSET, NUM_STAGED * per);
        if (at >= 0 && per > 0)
            tap_diag("  staging byte %lld (block #%lld of the request, byte %lld of it) differs", (long long)at,
                     (long long)((uint64_t)at / per), (long long)((uint64_t)at % per));
        tap_ok(at < 0, "%s: gather of blocks %lld, %lld, %lld: request order, then layers, each [H, N, C]", cs->label,
               (long long)ids[0], (long long)ids[1], (long long)ids[2]);
        bool around =
            memcmp(got, want, STAGING_OFFSET) == 0 && memcmp(got + size - TAIL, want + size - TAIL, TAIL) == 0;
        if (!around)
            tap_diag("  gather wrote outside its staging region");
        tap_ok(around && conf_cache_matches(c), "%s: gather leaves the cache and the staging bytes around it untouched",
               cs->label);
    } else {
        tap_ok(false, "%s: gather", cs->label);
    }
    if (ok && conf_has_op(cs, KVRT_OP_SCATTER)) {
        scatter_other(cs, want, size, ids); /* reads the source blocks: before they change */
        scatter_back(cs, want, size, ids);
    } else if (!conf_has_op(cs, KVRT_OP_SCATTER))
        tap_skip("%s: scatter: the backend does not declare it", cs->label);
    kvrt_buffer_destroy(staging);
    free(ids);
    free(want);
    free(got);
}
