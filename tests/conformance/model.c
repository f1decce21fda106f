/*
 * The host model of a cache: its expected bytes, addressed through the
 * public per-layer views of the placement.  A backend receives the same
 * views, so a backend that honours them produces exactly this image.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

static int describe(struct conf_cache *c, const kvrt_placement *p)
{
    size_t nsets = kvrt_placement_num_sets(p);
    uint64_t total = kvrt_cache_num_layers(c->cache);
    c->layers = calloc(total ? total : 1, sizeof(*c->layers));
    if (!c->layers)
        return KVRT_ERR_NOMEM;
    uint32_t n = 0;
    for (size_t s = 0; s < nsets; s++) {
        struct kvrt_placement_set set;
        int status = kvrt_placement_get_set(p, s, &set);
        if (status != KVRT_OK)
            return status;
        const struct kvrt_spec_info *info = &set.geometry.info;
        for (uint64_t l = 0; l < set.num_layers && n < total; l++, n++) {
            struct conf_layer *L = &c->layers[n];
            status = kvrt_placement_layer_view(p, s, l, &L->view);
            if (status != KVRT_OK)
                return status;
            L->name = set.layer_names[l];
            L->has_tokens =
                set.spec->kind != KVRT_SPEC_STATE && set.spec->tokens_per_state_num == set.spec->tokens_per_state_den;
            L->dtype = set.spec->dtype;
            L->elem = info->elem_size;
            L->heads = info->head_slots;
            L->head_size = info->head_size;
            L->head_size_v = info->head_size_v;
            L->content = info->content_bytes;
            L->states = info->states_per_kernel_block;
            L->blocks_per_block = info->kernel_blocks_per_block;
            /* The runtime numbers layers by set, then within the set. */
            uint32_t index;
            if (kvrt_cache_layer_index(c->cache, L->name, &index) != KVRT_OK || index != n) {
                tap_diag("layer \"%s\" has cache index %u, expected %u (sets in order, layers within a set)", L->name,
                         index, n);
                return KVRT_ERR_INTERNAL;
            }
        }
    }
    c->num_layers = n;
    return n == total ? KVRT_OK : KVRT_ERR_INTERNAL;
}

static int finish_open(struct conf_cache *out);

int conf_cache_open(kvrt_backend *b, const kvrt_placement *p, struct conf_cache *out)
{
    memset(out, 0, sizeof(*out));
    out->backend = b;
    int status = kvrt_cache_create(b, p, &out->cache);
    if (status != KVRT_OK)
        return status;
    return finish_open(out);
}

int conf_cache_open_wrapped(struct conf_plugin *plg, kvrt_backend *b, const kvrt_placement *p, struct conf_cache *out)
{
    memset(out, 0, sizeof(*out));
    out->backend = b;
    struct conf_memory *m = calloc(1, sizeof(*m));
    if (!m)
        return KVRT_ERR_NOMEM;
    if (!conf_memory_get(plg, kvrt_backend_layout(b), kvrt_placement_size(p), NULL, m)) {
        free(m);
        return KVRT_ERR_INTERNAL;
    }
    struct kvrt_memory km;
    conf_memory_describe(m, &km);
    int status = kvrt_cache_wrap(b, p, &km, &out->cache);
    if (status != KVRT_OK) {
        conf_memory_drop(m);
        free(m);
        return status;
    }
    out->memory = m;
    return finish_open(out);
}

static int finish_open(struct conf_cache *out)
{
    int status;
    /* The cache owns a copy of the placement: address through that one. */
    const kvrt_placement *own = kvrt_cache_placement(out->cache);
    out->bytes = kvrt_placement_size(own);
    out->num_blocks = kvrt_placement_num_blocks(own);
    struct kvrt_placement_set first;
    status = kvrt_placement_get_set(own, 0, &first);
    if (status == KVRT_OK) {
        out->block_size = first.spec->block_size;
        status = describe(out, own);
    }
    if (status == KVRT_OK)
        status = kvrt_cache_staging_bytes(out->cache, 1, &out->staging_per_block);
    if (status == KVRT_OK) {
        out->image = calloc(out->bytes ? out->bytes : 1, 1);
        if (!out->image)
            status = KVRT_ERR_NOMEM;
    }
    if (status != KVRT_OK)
        conf_cache_close(out);
    return status;
}

void conf_cache_close(struct conf_cache *c)
{
    struct conf_memory *m = c->memory;
    kvrt_cache_destroy(c->cache);
    free(c->layers);
    free(c->image);
    memset(c, 0, sizeof(*c));
    c->memory = m;
}

uint64_t conf_cell(const struct conf_cache *c, uint32_t layer, uint64_t block, uint64_t state, uint64_t head)
{
    const struct conf_layer *L = &c->layers[layer];
    uint64_t view_block = block * L->blocks_per_block + state / L->states;
    return L->view.offset_bytes + view_block * L->view.strides_bytes[0] + head * L->view.strides_bytes[1] +
           (state % L->states) * L->view.strides_bytes[2];
}

uint64_t conf_slot_cell(const struct conf_cache *c, uint32_t layer, int64_t slot, uint64_t head)
{
    uint64_t s = (uint64_t)slot;
    return conf_cell(c, layer, s / c->block_size, s % c->block_size, head);
}

uint64_t conf_num_slots(const struct conf_cache *c)
{
    return c->num_blocks * c->block_size;
}

uint64_t conf_k_bytes(const struct conf_cache *c, uint32_t layer, uint64_t tokens)
{
    const struct conf_layer *L = &c->layers[layer];
    if (!L->has_tokens)
        return 0;
    return tokens * L->heads * L->head_size * L->elem;
}

uint64_t conf_v_bytes(const struct conf_cache *c, uint32_t layer, uint64_t tokens)
{
    const struct conf_layer *L = &c->layers[layer];
    if (!L->has_tokens)
        return 0;
    return tokens * L->heads * L->head_size_v * L->elem;
}

void conf_model_write(struct conf_cache *c, uint32_t layer, uint64_t n, const int64_t *slots, const uint8_t *k,
                      const uint8_t *v)
{
    const struct conf_layer *L = &c->layers[layer];
    uint64_t kr = L->head_size * L->elem, vr = L->head_size_v * L->elem;
    for (uint64_t t = 0; t < n; t++) {
        if (slots[t] < 0)
            continue;
        for (uint64_t h = 0; h < L->heads; h++) {
            uint8_t *cell = c->image + conf_slot_cell(c, layer, slots[t], h);
            memcpy(cell, k + (t * L->heads + h) * kr, kr);
            if (vr)
                memcpy(cell + kr, v + (t * L->heads + h) * vr, vr);
        }
    }
}

void conf_model_read(const struct conf_cache *c, uint32_t layer, uint64_t n, const int64_t *slots, uint8_t *k,
                     uint8_t *v)
{
    const struct conf_layer *L = &c->layers[layer];
    uint64_t kr = L->head_size * L->elem, vr = L->head_size_v * L->elem;
    for (uint64_t t = 0; t < n; t++) {
        if (slots[t] < 0)
            continue;
        for (uint64_t h = 0; h < L->heads; h++) {
            const uint8_t *cell = c->image + conf_slot_cell(c, layer, slots[t], h);
            memcpy(k + (t * L->heads + h) * kr, cell, kr);
            if (vr)
                memcpy(v + (t * L->heads + h) * vr, cell + kr, vr);
        }
    }
}

static uint64_t block_states(const struct conf_layer *L)
{
    return L->states * L->blocks_per_block;
}

void conf_model_copy(struct conf_cache *c, uint64_t num_pairs, const int64_t *pairs)
{
    for (uint64_t i = 0; i < num_pairs; i++)
        for (uint32_t l = 0; l < c->num_layers; l++)
            for (uint64_t h = 0; h < c->layers[l].heads; h++)
                for (uint64_t n = 0; n < block_states(&c->layers[l]); n++)
                    memmove(c->image + conf_cell(c, l, (uint64_t)pairs[2 * i + 1], n, h),
                            c->image + conf_cell(c, l, (uint64_t)pairs[2 * i], n, h), c->layers[l].content);
}

/* Staging order: block (request order), layer (placement order), [H, N, C]. */
static void staging_walk(struct conf_cache *c, uint64_t n, const int64_t *ids, uint8_t *staging, bool to_staging)
{
    uint8_t *at = staging;
    for (uint64_t i = 0; i < n; i++)
        for (uint32_t l = 0; l < c->num_layers; l++)
            for (uint64_t h = 0; h < c->layers[l].heads; h++)
                for (uint64_t s = 0; s < block_states(&c->layers[l]); s++) {
                    uint8_t *cell = c->image + conf_cell(c, l, (uint64_t)ids[i], s, h);
                    if (to_staging)
                        memcpy(at, cell, c->layers[l].content);
                    else
                        memcpy(cell, at, c->layers[l].content);
                    at += c->layers[l].content;
                }
}

void conf_model_gather(const struct conf_cache *c, uint64_t n, const int64_t *ids, uint8_t *staging)
{
    staging_walk((struct conf_cache *)c, n, ids, staging, true);
}

void conf_model_scatter(struct conf_cache *c, uint64_t n, const int64_t *ids, const uint8_t *staging)
{
    staging_walk(c, n, ids, (uint8_t *)staging, false);
}

uint8_t *conf_cache_download(struct conf_cache *c)
{
    return conf_download(kvrt_cache_buffer(c->cache));
}

void conf_describe_offset(const struct conf_cache *c, uint64_t offset, char *out, size_t size)
{
    for (uint32_t l = 0; l < c->num_layers; l++) {
        const struct conf_layer *L = &c->layers[l];
        for (uint64_t b = 0; b < c->num_blocks; b++)
            for (uint64_t h = 0; h < L->heads; h++)
                for (uint64_t s = 0; s < block_states(L); s++) {
                    uint64_t cell = conf_cell(c, l, b, s, h);
                    if (offset < cell || offset >= cell + L->content)
                        continue;
                    uint64_t byte = offset - cell, kb = L->head_size * L->elem;
                    if (!L->has_tokens)
                        snprintf(out, size, "layer %u \"%s\", block %llu, head %llu, state %llu, byte %llu", l, L->name,
                                 (unsigned long long)b, (unsigned long long)h, (unsigned long long)s,
                                 (unsigned long long)byte);
                    else
                        snprintf(out, size, "layer %u \"%s\", block %llu, head %llu, token %llu, %s element %llu", l,
                                 L->name, (unsigned long long)b, (unsigned long long)h, (unsigned long long)s,
                                 byte < kb ? "K" : "V", (unsigned long long)((byte < kb ? byte : byte - kb) / L->elem));
                    return;
                }
    }
    snprintf(out, size, "no cell (padding or outside every layer)");
}

bool conf_cache_matches(struct conf_cache *c)
{
    uint8_t *got = conf_cache_download(c);
    if (!got)
        return false;
    int64_t at = conf_first_diff(got, c->image, c->bytes);
    if (at >= 0) {
        char where[256];
        uint64_t wrong = 0;
        for (uint64_t i = 0; i < c->bytes; i++)
            wrong += got[i] != c->image[i];
        conf_describe_offset(c, (uint64_t)at, where, sizeof(where));
        tap_diag("  cache byte %lld (%s) is 0x%02x, expected 0x%02x; %llu of %llu bytes differ", (long long)at, where,
                 got[at], c->image[at], (unsigned long long)wrong, (unsigned long long)c->bytes);
    }
    free(got);
    return at < 0;
}

bool conf_cache_resync(struct conf_cache *c)
{
    uint8_t *got = conf_cache_download(c);
    if (!got)
        return false;
    memcpy(c->image, got, c->bytes);
    free(got);
    return true;
}
