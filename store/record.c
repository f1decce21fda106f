/* The store record: what a directory was made for, kept in its database
 * (docs/store.md "The store directory").  JSON, so that people and the
 * tool read it as it is, and so that a refusal names the field that
 * differs.
 *
 * Layer 1 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <kvrt/dtype.h>
#include <kvrt/spec.h>

#include "record.h"

#define RECORD_FORMAT "kvrt-store"

char *store_record_text(const struct store_model *m)
{
    char fp[65];
    kvrt_store_hex(m->fingerprint, fp);
    json_t *layers = json_array();
    for (size_t l = 0; layers && l < m->num_layers; l++) {
        const struct store_layer *L = &m->layers[l];
        json_array_append_new(layers, json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "name", L->name, "kind",
                                                kvrt_spec_kind_name(L->kind), "dtype", kvrt_dtype_name(L->dtype),
                                                "head_size", (json_int_t)L->head_size, "head_size_v",
                                                (json_int_t)L->head_size_v, "cell_bytes", (json_int_t)L->content));
    }
    json_t *o = json_pack("{s:s, s:i, s:s, s:s, s:I, s:I, s:I, s:o}", "format", RECORD_FORMAT, "format_version",
                          (int)KVRT_STORE_FORMAT_VERSION, "model_id", m->model_id, "fingerprint", fp, "chunk_tokens",
                          (json_int_t)m->chunk_tokens, "num_heads", (json_int_t)m->num_heads, "entry_bytes",
                          (json_int_t)m->payload_bytes, "layers", layers);
    /* only a store of layer groups records it: one group's record is
     * that of a store without groups */
    if (o && m->num_groups > 1)
        json_object_set_new(o, "layers_per_entry", json_integer((json_int_t)m->layers_per_entry));
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return text;
}

static const char *str_of(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool int_of(json_t *o, const char *k, uint64_t *out)
{
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

static int damaged(const char *path, const char *what)
{
    return BASE_FAIL(KVRT_ERR_INVALID,
                     "kvrt_store_open: the store record in \"%s\" is damaged (%s); it is not a store this "
                     "libkvrt-store can read (`kvrt store stat` shows it)",
                     path, what);
}

static json_t *parse(const char *text, size_t len, const char *path, int *rc)
{
    json_error_t err;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!json_is_object(o)) {
        json_decref(o);
        *rc = damaged(path, "not a JSON object");
        return NULL;
    }
    const char *f = str_of(o, "format");
    uint64_t v = 0;
    if (!f || strcmp(f, RECORD_FORMAT) != 0) {
        json_decref(o);
        *rc = damaged(path, "no \"format\": \"kvrt-store\"");
        return NULL;
    }
    if (!int_of(o, "format_version", &v) || v != KVRT_STORE_FORMAT_VERSION) {
        json_decref(o);
        *rc = BASE_FAIL(KVRT_ERR_INVALID,
                        "kvrt_store_open: the store in \"%s\" has format_version %llu; this libkvrt-store reads "
                        "version %u (give another path, or use the libkvrt-store that wrote it)",
                        path, ULL(v), KVRT_STORE_FORMAT_VERSION);
        return NULL;
    }
    *rc = KVRT_OK;
    return o;
}

static int differs(const char *path, const char *field, const char *theirs, const char *ours)
{
    return BASE_FAIL(KVRT_ERR_INVALID,
                     "kvrt_store_open: the store in \"%s\" was written for %s %s; this store is for %s %s (a store "
                     "directory holds one model and chunk size: give another path)",
                     path, field, theirs, field, ours);
}

static int differs_u64(const char *path, const char *field, uint64_t theirs, uint64_t ours)
{
    char a[32], b[32];
    snprintf(a, sizeof(a), "%llu", ULL(theirs));
    snprintf(b, sizeof(b), "%llu", ULL(ours));
    return differs(path, field, a, b);
}

static int differs_str(const char *path, const char *field, const char *theirs, const char *ours)
{
    char a[1100], b[1100];
    snprintf(a, sizeof(a), "\"%s\"", theirs ? theirs : "(none)");
    snprintf(b, sizeof(b), "\"%s\"", ours);
    return differs(path, field, a, b);
}

int store_record_compare(const char *text, size_t len, const struct store_model *m, const char *path)
{
    int rc;
    json_t *o = parse(text, len, path, &rc);
    if (!o)
        return rc;
    uint64_t v = 0;
    json_t *layers = json_object_get(o, "layers");
    const char *id = str_of(o, "model_id");
    if (!int_of(o, "chunk_tokens", &v) || v != m->chunk_tokens)
        rc = differs_u64(path, "chunk_tokens", v, m->chunk_tokens);
    else if (!id || strcmp(id, m->model_id) != 0)
        rc = differs_str(path, "model_id", id, m->model_id);
    else if (!int_of(o, "num_heads", &v) || v != m->num_heads)
        rc = differs_u64(path, "num_heads (the model's KV heads)", v, m->num_heads);
    else if (!json_is_array(layers) || json_array_size(layers) != m->num_layers)
        rc = differs_u64(path, "the number of layers", json_array_size(layers), m->num_layers);
    for (size_t l = 0; rc == KVRT_OK && l < m->num_layers; l++) {
        json_t *e = json_array_get(layers, l);
        const struct store_layer *L = &m->layers[l];
        char field[96];
        uint64_t hs = 0, hv = 0;
        const char *s;
        if (!(s = str_of(e, "name")) || strcmp(s, L->name) != 0) {
            snprintf(field, sizeof(field), "layer %zu's name", l);
            rc = differs_str(path, field, s, L->name);
        } else if (!(s = str_of(e, "kind")) || strcmp(s, kvrt_spec_kind_name(L->kind)) != 0) {
            snprintf(field, sizeof(field), "layer \"%s\"'s kind", L->name);
            rc = differs_str(path, field, s, kvrt_spec_kind_name(L->kind));
        } else if (!(s = str_of(e, "dtype")) || strcmp(s, kvrt_dtype_name(L->dtype)) != 0) {
            snprintf(field, sizeof(field), "layer \"%s\"'s dtype", L->name);
            rc = differs_str(path, field, s, kvrt_dtype_name(L->dtype));
        } else if (!int_of(e, "head_size", &hs) || hs != L->head_size) {
            snprintf(field, sizeof(field), "layer \"%s\"'s head_size", L->name);
            rc = differs_u64(path, field, hs, L->head_size);
        } else if (!int_of(e, "head_size_v", &hv) || hv != L->head_size_v) {
            snprintf(field, sizeof(field), "layer \"%s\"'s head_size_v", L->name);
            rc = differs_u64(path, field, hv, L->head_size_v);
        }
    }
    if (rc == KVRT_OK) {
        uint64_t g = 0;
        if (json_object_get(o, "layers_per_entry") && !int_of(o, "layers_per_entry", &g))
            rc = damaged(path, "layers_per_entry is not a count");
        else if (g != m->layers_per_entry)
            rc = BASE_FAIL(KVRT_ERR_INVALID,
                           "kvrt_store_open: the store in \"%s\" was written with layers_per_entry %llu%s; this "
                           "store has layers_per_entry %llu%s (entries of one directory hold one cut of the layers: "
                           "give the directory's, or another path)",
                           path, ULL(g), g ? "" : " (every layer)", ULL(m->layers_per_entry),
                           m->layers_per_entry ? "" : " (every layer)");
    }
    if (rc == KVRT_OK) {
        char fp[65];
        kvrt_store_hex(m->fingerprint, fp);
        const char *theirs = str_of(o, "fingerprint");
        if (!theirs || strcmp(theirs, fp) != 0)
            rc = differs_str(path, "fingerprint", theirs, fp);
    }
    json_decref(o);
    return rc;
}

int store_record_model(const char *text, size_t len, const char *path, struct store_model *out)
{
    int rc;
    memset(out, 0, sizeof(*out));
    json_t *o = parse(text, len, path, &rc);
    if (!o)
        return rc;
    json_t *layers = json_object_get(o, "layers");
    const char *id = str_of(o, "model_id");
    uint64_t chunk = 0, heads = 0, per_entry = 0;
    size_t n = json_array_size(layers);
    if (json_object_get(o, "layers_per_entry") && !int_of(o, "layers_per_entry", &per_entry)) {
        json_decref(o);
        return damaged(path, "layers_per_entry is not a count");
    }
    if (!id || !int_of(o, "chunk_tokens", &chunk) || !int_of(o, "num_heads", &heads) || n == 0 || n > 65536 ||
        heads == 0 || heads > (1u << 20)) {
        json_decref(o);
        return damaged(path, "model_id, chunk_tokens, num_heads or layers missing or out of range");
    }
    struct kvrt_layer_entry *entries = calloc(n, sizeof(*entries));
    if (!entries) {
        json_decref(o);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    }
    rc = KVRT_OK;
    for (size_t l = 0; l < n && rc == KVRT_OK; l++) {
        json_t *e = json_array_get(layers, l);
        struct kvrt_spec *sp = &entries[l].spec;
        kvrt_spec_default(sp);
        entries[l].name = str_of(e, "name");
        const char *kind = str_of(e, "kind"), *dtype = str_of(e, "dtype");
        uint64_t hs = 0, hv = 0;
        enum kvrt_spec_kind k = KVRT_SPEC_ATTENTION;
        enum kvrt_dtype d = KVRT_DTYPE_FP16;
        if (!entries[l].name || !kind || !dtype || kvrt_spec_kind_parse(kind, &k) != KVRT_OK ||
            kvrt_dtype_parse(dtype, &d) != KVRT_OK || !int_of(e, "head_size", &hs) || !int_of(e, "head_size_v", &hv))
            rc = damaged(path, "a layer without a valid name, kind, dtype or head sizes");
        sp->kind = k;
        sp->dtype = d;
        sp->block_size = 16;
        sp->num_kv_heads = heads;
        sp->head_size = hs;
        sp->head_size_v = hv;
    }
    if (rc == KVRT_OK) {
        struct kvrt_group g = {entries, n};
        rc = store_model_build(&g, 1, id, chunk, per_entry, out);
        if (rc != KVRT_OK) {
            char msg[1024];
            snprintf(msg, sizeof(msg), "%s", kvrt_error_message());
            rc = damaged(path, msg);
        }
    }
    if (rc == KVRT_OK) {
        char fp[65];
        kvrt_store_hex(out->fingerprint, fp);
        const char *theirs = str_of(o, "fingerprint");
        if (!theirs || strcmp(theirs, fp) != 0) {
            store_model_free(out);
            rc = damaged(path, "its fingerprint is not the one its fields give");
        }
    }
    free(entries);
    json_decref(o);
    return rc;
}
