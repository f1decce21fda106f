/* The model a store is for: its attention and MLA layers in canonical
 * order, their cell sizes, the entry size and the fingerprint.
 *
 * Layer 1 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/spec.h>

#include "key.h"

/* Bounds that keep a typo from asking for absurd entries. */
#define MAX_CHUNK_TOKENS (1u << 20)
#define MAX_MODEL_ID 1024u
#define MAX_ENTRY_BYTES (1ull << 32)

void store_model_free(struct store_model *m)
{
    for (size_t l = 0; m->layers && l < m->num_layers; l++)
        free(m->layers[l].name);
    free(m->layers);
    free(m->model_id);
    memset(m, 0, sizeof(*m));
}

static int check_layer(const struct kvrt_layer_entry *e, const struct kvrt_spec_info *in, struct store_layer *L)
{
    const struct kvrt_spec *sp = &e->spec;
    if (sp->kind == KVRT_SPEC_STATE)
        return BASE_FAIL(KVRT_ERR_UNSUPPORTED,
                         "kvrt_store_open: layer \"%s\" is a state layer (kind state); the store keeps attention "
                         "and MLA layers, whose cells are one per token",
                         e->name);
    if (sp->tokens_per_state_num != sp->tokens_per_state_den)
        return BASE_FAIL(KVRT_ERR_UNSUPPORTED,
                         "kvrt_store_open: layer \"%s\" stores one state per %llu/%llu tokens; the store keeps "
                         "layers of one state per token",
                         e->name, ULL(sp->tokens_per_state_num), ULL(sp->tokens_per_state_den));
    if (in->head_slots != sp->num_kv_heads)
        return BASE_FAIL(KVRT_ERR_UNSUPPORTED,
                         "kvrt_store_open: layer \"%s\" has %llu head slots for %llu KV heads; the store needs one "
                         "head slot per KV head",
                         e->name, ULL(in->head_slots), ULL(sp->num_kv_heads));
    L->name = strdup(e->name);
    if (!L->name)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_open: out of memory");
    L->kind = sp->kind;
    L->dtype = sp->dtype;
    L->head_size = in->head_size;
    L->head_size_v = in->head_size_v;
    L->content = in->content_bytes;
    return KVRT_OK;
}

int store_model_build(const struct kvrt_group *groups, size_t num_groups, const char *model_id, uint64_t chunk_tokens,
                      uint64_t layers_per_entry, struct store_model *out)
{
    memset(out, 0, sizeof(*out));
    if (!groups || num_groups == 0)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: no model: give the model's groups (all its layers)");
    if (!model_id || !model_id[0] || strlen(model_id) > MAX_MODEL_ID)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_open: model_id %s; give the model's id or revision, 1 to %u bytes",
                         model_id ? "is empty or too long" : "is missing", MAX_MODEL_ID);
    if (chunk_tokens == 0 || chunk_tokens > MAX_CHUNK_TOKENS)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: chunk_tokens %llu; valid are 1 to %u (default %u)",
                         ULL(chunk_tokens), MAX_CHUNK_TOKENS, KVRT_STORE_DEFAULT_CHUNK_TOKENS);
    size_t total = 0;
    for (size_t g = 0; g < num_groups; g++) {
        if (!groups[g].layers || groups[g].num_layers == 0)
            return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: group %zu of the model has no layers", g);
        total += groups[g].num_layers;
    }
    out->model_id = strdup(model_id);
    out->layers = calloc(total, sizeof(*out->layers));
    if (!out->model_id || !out->layers) {
        store_model_free(out);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_open: out of memory for %zu layers", total);
    }
    out->chunk_tokens = chunk_tokens;
    int rc = KVRT_OK;
    for (size_t g = 0; g < num_groups && rc == KVRT_OK; g++) {
        for (size_t i = 0; i < groups[g].num_layers && rc == KVRT_OK; i++) {
            const struct kvrt_layer_entry *e = &groups[g].layers[i];
            struct kvrt_spec_info in;
            if (!e->name || !e->name[0]) {
                rc = BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: layer %zu of group %zu has no name", i, g);
                break;
            }
            if ((rc = kvrt_spec_derive(&e->spec, 0, &in)) != KVRT_OK) {
                char msg[1024];
                snprintf(msg, sizeof(msg), "%s", kvrt_error_message());
                rc = BASE_FAIL(rc, "kvrt_store_open: layer \"%s\": %s", e->name, msg);
                break;
            }
            for (size_t l = 0; l < out->num_layers && rc == KVRT_OK; l++)
                if (out->layers[l].name && strcmp(out->layers[l].name, e->name) == 0)
                    rc = BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: the model names layer \"%s\" twice", e->name);
            if (rc != KVRT_OK)
                break;
            struct store_layer *L = &out->layers[out->num_layers];
            if ((rc = check_layer(e, &in, L)) != KVRT_OK)
                break;
            out->num_layers++;
            if (out->num_layers == 1)
                out->num_heads = e->spec.num_kv_heads;
            else if (e->spec.num_kv_heads != out->num_heads)
                rc = BASE_FAIL(KVRT_ERR_UNSUPPORTED,
                               "kvrt_store_open: layer \"%s\" has %llu KV heads, layer \"%s\" %llu; the store needs "
                               "one number of KV heads across the model",
                               e->name, ULL(e->spec.num_kv_heads), out->layers[0].name, ULL(out->num_heads));
        }
    }
    /* layer groups: G >= the layers (or 0) is one group, the format of a
     * store without groups, recorded as 0 */
    if (rc == KVRT_OK) {
        uint64_t L = out->num_layers;
        out->group_layers = layers_per_entry == 0 || layers_per_entry >= L ? L : layers_per_entry;
        out->num_groups = (L + out->group_layers - 1) / out->group_layers;
        out->layers_per_entry = out->num_groups > 1 ? out->group_layers : 0;
        /* an entry's index (group x heads + head) is 32 bits in keys */
        uint64_t entries;
        if (__builtin_mul_overflow(out->num_groups, out->num_heads, &entries) || entries > UINT32_MAX)
            rc = BASE_FAIL(KVRT_ERR_INVALID,
                           "kvrt_store_open: layers_per_entry %llu cuts %llu layers into %llu groups of %llu KV "
                           "heads, more than 2^32 entries per chunk; give a larger layers_per_entry",
                           ULL(layers_per_entry), ULL(L), ULL(out->num_groups), ULL(out->num_heads));
    }
    uint64_t group_bytes = 0;
    for (size_t l = 0; rc == KVRT_OK && l < out->num_layers; l++) {
        struct store_layer *L = &out->layers[l];
        uint64_t layer_bytes;
        if (l % out->group_layers == 0)
            group_bytes = 0;
        L->entry_offset = group_bytes;
        if (__builtin_mul_overflow(L->content, chunk_tokens, &layer_bytes) ||
            __builtin_add_overflow(group_bytes, layer_bytes, &group_bytes) || group_bytes > MAX_ENTRY_BYTES)
            rc = BASE_FAIL(KVRT_ERR_OVERFLOW,
                           "kvrt_store_open: one entry (%llu tokens of %llu layers) would exceed %llu bytes; lower "
                           "chunk_tokens or layers_per_entry",
                           ULL(chunk_tokens), ULL(out->group_layers), ULL(MAX_ENTRY_BYTES));
        if (group_bytes > out->payload_bytes)
            out->payload_bytes = group_bytes;
        out->cell_bytes += L->content;
    }
    if (rc == KVRT_OK)
        rc = store_fingerprint(out);
    if (rc != KVRT_OK)
        store_model_free(out);
    return rc;
}
