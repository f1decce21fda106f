/* Caches on a bound backend: a placement checked and copied, its buffer,
 * and the cache's lifetime.
 *
 * Layer 7 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "error.h"
#include "cache_internal.h"

/* Builds the plugin's view of every layer from the placement: the plugin
 * then addresses the cache only through these offsets and strides. */
static int describe_layers(kvrt_cache *c, const char *fn)
{
    const kvrt_placement *p = c->placement;
    size_t nsets = kvrt_placement_num_sets(p);
    uint64_t total = 0;
    for (size_t s = 0; s < nsets; s++) {
        struct kvrt_placement_set set;
        int status = kvrt_placement_get_set(p, s, &set);
        if (status != KVRT_OK)
            return status;
        total += set.num_layers;
    }
    if (total == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: the placement has no layers", fn);
    if (total > UINT32_MAX)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: %llu layers; at most %u are supported", fn, (unsigned long long)total,
                         UINT32_MAX);
    c->layers = calloc(total, sizeof(*c->layers));
    c->layer_names = calloc(total, sizeof(*c->layer_names));
    c->layer_info = calloc(total, sizeof(*c->layer_info));
    /* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers, as in bind.c */
    c->layer_spec = calloc(total, sizeof(*c->layer_spec));
    if (!c->layers || !c->layer_names || !c->layer_info || !c->layer_spec)
        return kvrt_fail(KVRT_ERR_NOMEM, "%s: out of memory for %llu layers", fn, (unsigned long long)total);
    uint64_t n = 0;
    for (size_t s = 0; s < nsets; s++) {
        struct kvrt_placement_set set;
        kvrt_placement_get_set(p, s, &set);
        const struct kvrt_spec_info *info = &set.geometry.info;
        for (uint64_t l = 0; l < set.num_layers; l++, n++) {
            struct kvrt_view v;
            int status = kvrt_placement_layer_view(p, s, l, &v);
            if (status != KVRT_OK)
                return status;
            struct kvrt_plugin_layer *L = &c->layers[n];
            L->size = sizeof(*L);
            L->kind = (int32_t)set.spec->kind;
            L->dtype = (int32_t)set.spec->dtype;
            L->elem_size = (uint32_t)info->elem_size;
            L->offset = v.offset_bytes;
            L->num_view_blocks = v.shape_bytes[0];
            L->blocks_per_block = info->kernel_blocks_per_block;
            L->view_block_tokens = info->kernel_block_size;
            L->head_slots = v.shape_bytes[1];
            L->states = v.shape_bytes[2];
            L->content_bytes = info->content_bytes;
            L->head_size = info->head_size;
            L->head_size_v = info->head_size_v;
            L->stride_block = v.strides_bytes[0];
            L->stride_head = v.strides_bytes[1];
            L->stride_state = v.strides_bytes[2];
            c->layer_names[n] = set.layer_names[l];
            c->layer_info[n] = *info;
            c->layer_spec[n] = set.spec;
        }
    }
    /* Both walks read the same immutable placement; a mismatch would leave
     * layers undescribed (and their spec pointers NULL). */
    if (n != total)
        return kvrt_fail(KVRT_ERR_INTERNAL, "%s: described %llu of %llu layers", fn, (unsigned long long)n,
                         (unsigned long long)total);
    c->desc.num_layers = total;
    return kvrt_placement_staging_bytes(p, &c->staging_bytes_per_block);
}

static int copy_placement(const kvrt_placement *src, kvrt_placement **out, const char *fn)
{
    /* A placement is immutable, but the caller may destroy theirs; rebuild
     * an owned copy from its sets. */
    size_t nsets = kvrt_placement_num_sets(src), ngroups = kvrt_placement_num_groups(src);
    uint64_t nlayers = 0;
    for (size_t s = 0; s < nsets; s++) {
        struct kvrt_placement_set set;
        kvrt_placement_get_set(src, s, &set);
        nlayers += set.num_layers;
    }
    struct kvrt_layer_entry *entries = calloc(nlayers ? nlayers : 1, sizeof(*entries));
    struct kvrt_group *groups = calloc(ngroups ? ngroups : 1, sizeof(*groups));
    if (!entries || !groups) {
        free(entries);
        free(groups);
        return kvrt_fail(KVRT_ERR_NOMEM, "%s: out of memory", fn);
    }
    uint64_t k = 0;
    for (size_t g = 0; g < ngroups; g++) {
        groups[g].layers = &entries[k];
        for (size_t s = 0; s < nsets; s++) {
            struct kvrt_placement_set set;
            kvrt_placement_get_set(src, s, &set);
            if (set.group != g)
                continue;
            for (uint64_t l = 0; l < set.num_layers; l++) {
                entries[k].name = set.layer_names[l];
                entries[k].spec = *set.spec;
                k++;
                groups[g].num_layers++;
            }
        }
    }
    struct kvrt_placement_set first;
    kvrt_placement_get_set(src, 0, &first);
    uint64_t kernel = first.geometry.info.kernel_blocks_per_block > 1 ? first.geometry.info.kernel_block_size : 0;
    int status =
        kvrt_placement_create(kvrt_placement_layout(src), groups, ngroups, kvrt_placement_num_blocks(src), kernel, out);
    free(entries);
    free(groups);
    return status;
}

void kvrt_cache_free(kvrt_cache *c, struct kvrt_release **pending)
{
    if (c->release) {
        c->release->next = *pending;
        *pending = c->release;
    }
    free(c->layers);
    free(c->layer_names);
    free(c->layer_info);
    free(c->layer_spec);
    kvrt_placement_destroy(c->placement);
    free(c);
}

int kvrt_cache_prepare(kvrt_backend *b, const kvrt_placement *p, const char *fn, kvrt_cache **out)
{
    if (!b || !p || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: NULL argument", fn);
    *out = NULL;
    if (kvrt_placement_layout(p) != b->layout)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: the placement uses layout %s but backend \"%s\" was bound "
                         "with %s; place the layers with the bound layout",
                         fn, kvrt_layout_name(kvrt_placement_layout(p)), b->plugin->desc->name,
                         kvrt_layout_name(b->layout));
    if (kvrt_placement_num_sets(p) == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: the placement has no layers", fn);
    kvrt_cache *c = calloc(1, sizeof(*c));
    if (!c)
        return kvrt_fail(KVRT_ERR_NOMEM, "%s: out of memory", fn);
    c->backend = b;
    int status = copy_placement(p, &c->placement, fn);
    if (status == KVRT_OK)
        status = describe_layers(c, fn);
    /* State layers are opaque bytes that only block operations move (no
     * backend interprets them), so their element type is not the backend's
     * concern: a hybrid model runs on a backend that never declared uint8. */
    for (uint64_t i = 0; status == KVRT_OK && i < c->desc.num_layers; i++) {
        enum kvrt_dtype t = (enum kvrt_dtype)c->layers[i].dtype;
        if (c->layer_spec[i]->kind != KVRT_SPEC_STATE && !kvrt_plugin_supports_dtype(b->plugin->desc, t))
            status = kvrt_fail(KVRT_ERR_UNSUPPORTED,
                               "%s: backend \"%s\" does not support element type %s "
                               "(layer \"%s\")",
                               fn, b->plugin->desc->name, kvrt_dtype_name(t), c->layer_names[i]);
    }
    /* Slots and block tables count in one block size for the whole cache
     * (struct kvrt_plugin_cache has one): every layer with tokens must use
     * it.  State layers have no tokens and may differ (a hybrid model gives
     * its Mamba layers their own block size). */
    uint64_t token_layer = c->desc.num_layers;
    for (uint64_t i = 0; status == KVRT_OK && i < c->desc.num_layers; i++) {
        if (c->layer_spec[i]->kind == KVRT_SPEC_STATE)
            continue;
        if (token_layer == c->desc.num_layers)
            token_layer = i;
        else if (c->layer_spec[i]->block_size != c->layer_spec[token_layer]->block_size)
            status = kvrt_fail(KVRT_ERR_INVALID,
                               "%s: layer \"%s\" has block_size %llu but layer \"%s\" has %llu; "
                               "slots and block tables count in one block size per cache, so place layers "
                               "of different block sizes in separate caches",
                               fn, c->layer_names[i], (unsigned long long)c->layer_spec[i]->block_size,
                               c->layer_names[token_layer], (unsigned long long)c->layer_spec[token_layer]->block_size);
    }
    if (status != KVRT_OK) {
        struct kvrt_release *none = NULL;
        kvrt_cache_free(c, &none);
        return status;
    }
    c->desc.size = sizeof(c->desc);
    c->desc.layout = (int32_t)b->layout;
    c->desc.bytes = kvrt_placement_size(c->placement);
    c->desc.num_blocks = kvrt_placement_num_blocks(c->placement);
    c->desc.block_size = c->layer_spec[token_layer < c->desc.num_layers ? token_layer : 0]->block_size;
    c->desc.layers = c->layers;
    *out = c;
    return KVRT_OK;
}

void kvrt_cache_link(kvrt_cache *c)
{
    kvrt_backend *b = c->backend;
    pthread_mutex_lock(b->lock);
    c->next = b->caches;
    if (b->caches)
        b->caches->prev = c;
    b->caches = c;
    pthread_mutex_unlock(b->lock);
}

int kvrt_cache_create(kvrt_backend *b, const kvrt_placement *p, kvrt_cache **out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_cache_create: NULL argument");
    *out = NULL;
    kvrt_cache *c;
    int status = kvrt_cache_prepare(b, p, "kvrt_cache_create", &c);
    if (status != KVRT_OK)
        return status;
    status = kvrt_buffer_create_internal(b, c->desc.bytes, true, &c->buffer);
    if (status == KVRT_OK) {
        status = kvrt_buffer_zero(c->buffer, 0, c->desc.bytes);
        if (status != KVRT_OK) {
            pthread_mutex_lock(b->lock);
            kvrt_buffer_destroy_internal(c->buffer);
            pthread_mutex_unlock(b->lock);
        }
    }
    if (status != KVRT_OK) {
        struct kvrt_release *none = NULL;
        kvrt_cache_free(c, &none);
        return status;
    }
    kvrt_cache_link(c);
    *out = c;
    return KVRT_OK;
}

kvrt_buffer *kvrt_cache_buffer(kvrt_cache *c)
{
    return c ? c->buffer : NULL;
}

const kvrt_placement *kvrt_cache_placement(const kvrt_cache *c)
{
    return c ? c->placement : NULL;
}

uint64_t kvrt_cache_num_layers(const kvrt_cache *c)
{
    return c ? c->desc.num_layers : 0;
}

int kvrt_cache_layer_index(const kvrt_cache *c, const char *name, uint32_t *layer)
{
    if (!c || !name || !layer)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_cache_layer_index: NULL argument");
    for (uint64_t i = 0; i < c->desc.num_layers; i++) {
        if (strcmp(c->layer_names[i], name) == 0) {
            *layer = (uint32_t)i;
            return KVRT_OK;
        }
    }
    return kvrt_fail(KVRT_ERR_INVALID,
                     "kvrt_cache_layer_index: no layer named \"%s\" in this cache (%llu layers, "
                     "the first is \"%s\")",
                     name, (unsigned long long)c->desc.num_layers, c->layer_names[0]);
}

int kvrt_cache_staging_bytes(const kvrt_cache *c, uint64_t num_blocks, uint64_t *bytes)
{
    if (!c || !bytes)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_cache_staging_bytes: NULL argument");
    if (kvrt_mul_overflow(num_blocks, c->staging_bytes_per_block, bytes))
        return kvrt_fail(KVRT_ERR_OVERFLOW, "kvrt_cache_staging_bytes: %llu blocks x %llu bytes overflows",
                         (unsigned long long)num_blocks, (unsigned long long)c->staging_bytes_per_block);
    return KVRT_OK;
}
