/*
 * The kvrt model file (docs/model-format.md): explicit groups of layers and
 * their specs.  The schema is closed: an unknown key is an error, so a typo
 * never silently becomes a default.
 *
 * Layer 4 of libkvrt (core/models/; CONTRIBUTING.md, "Where things live").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/common.h>
#include <kvrt/spec.h>

#include "intmath.h"
#include "model_internal.h"

#define MAX_SIZE ((uint64_t)1 << 40)

static const char *const top_keys[] = {"format",     "version", "name",    "num_q_heads", "dtype",
                                       "block_size", "groups",  "comment", NULL};
static const char *const group_keys[] = {"name", "layers", "window", "what", "spec", "comment", NULL};
static const char *const spec_keys[] = {
    "kind",        "dtype",      "block_size",          "kv_heads",         "head_size",
    "head_size_v", "head_slots", "state_content_bytes", "tokens_per_state", "page_size_padded",
    NULL};

static int check_keys(const struct model_ctx *c, const json_t *obj, const char *where, const char *const *valid)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        size_t i = 0;
        while (valid[i] && strcmp(valid[i], key) != 0)
            i++;
        if (valid[i])
            continue;
        char list[256];
        size_t used = 0;
        list[0] = '\0';
        for (i = 0; valid[i] && used < sizeof(list); i++)
            used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", valid[i]);
        return model_fail(c, KVRT_ERR_INVALID, "unknown field \"%s%s\"; valid fields there are %s", where, key, list);
    }
    return KVRT_OK;
}

static int parse_dtype(const struct model_ctx *c, const json_t *obj, const char *where, bool *found,
                       enum kvrt_dtype *out)
{
    const char *text = NULL;
    int rc = model_get_string_opt(c, obj, where, "dtype", &text);
    *found = text != NULL;
    if (rc != KVRT_OK || !text)
        return rc;
    if (kvrt_dtype_parse(text, out) != KVRT_OK)
        return model_fail(c, KVRT_ERR_INVALID, "\"%sdtype\": %s", where, kvrt_error_message());
    return KVRT_OK;
}

static int parse_kind(const struct model_ctx *c, const json_t *spec, const char *where, enum kvrt_spec_kind *out)
{
    const char *text = NULL;
    int rc = model_get_string_opt(c, spec, where, "kind", &text);
    if (rc != KVRT_OK)
        return rc;
    if (!text)
        return model_fail(c, KVRT_ERR_INVALID, "the field \"%skind\" is missing; valid kinds are %s", where,
                          kvrt_spec_kind_valid_names());
    if (kvrt_spec_kind_parse(text, out) != KVRT_OK)
        return model_fail(c, KVRT_ERR_INVALID, "\"%skind\": %s", where, kvrt_error_message());
    return KVRT_OK;
}

static int parse_ratio(const struct model_ctx *c, const json_t *spec, const char *where, struct kvrt_spec *s)
{
    const json_t *v = json_object_get(spec, "tokens_per_state");
    if (!v || json_is_null(v))
        return KVRT_OK;
    if (json_is_integer(v))
        return model_get_u64(c, spec, where, "tokens_per_state", 1, MAX_SIZE, &s->tokens_per_state_num);
    unsigned long long num, den;
    char tail;
    const char *text = json_string_value(v);
    if (!text || sscanf(text, "%llu/%llu%c", &num, &den, &tail) != 2 || num == 0 || den == 0 || num > MAX_SIZE ||
        den > MAX_SIZE || text[0] < '0' || text[0] > '9')
        return model_fail(c, KVRT_ERR_INVALID,
                          "\"%stokens_per_state\" must be a whole number or a "
                          "string \"P/Q\" of whole numbers (e.g. \"1/2\" for two states per token)",
                          where);
    s->tokens_per_state_num = num;
    s->tokens_per_state_den = den;
    return KVRT_OK;
}

struct defaults {
    bool dtype_found;
    enum kvrt_dtype dtype;
    uint64_t block_size;
};

static int parse_spec(const struct model_ctx *c, const json_t *spec, const char *where, const struct defaults *d,
                      const struct kvrt_model_options *opt, struct kvrt_spec *s)
{
    bool found, dtype_found;
    int rc;
    if (!json_is_object(spec))
        return model_fail(c, KVRT_ERR_INVALID,
                          "\"%s\" is %s; it must be an object with at least "
                          "\"kind\"",
                          where, spec ? model_json_type(spec) : "missing");
    char w[96];
    snprintf(w, sizeof(w), "%s.", where);
    kvrt_spec_default(s);
    if ((rc = check_keys(c, spec, w, spec_keys)) || (rc = parse_kind(c, spec, w, &s->kind)))
        return rc;
    s->block_size = d->block_size;
    if ((rc = model_get_u64_opt(c, spec, w, "block_size", 1, MAX_SIZE, &s->block_size, &found)))
        return rc;
    if (opt->block_size)
        s->block_size = opt->block_size;
    if ((rc = parse_dtype(c, spec, w, &dtype_found, &s->dtype)))
        return rc;
    if (s->kind == KVRT_SPEC_STATE) {
        s->dtype = KVRT_DTYPE_UINT8;
        s->num_kv_heads = 1;
        if ((rc = model_get_u64(c, spec, w, "state_content_bytes", 1, MAX_SIZE, &s->state_content_bytes)))
            return rc;
    } else {
        if (!dtype_found)
            s->dtype = d->dtype;
        if (opt->dtype_given)
            s->dtype = opt->dtype;
        else if (!dtype_found && !d->dtype_found)
            return model_fail(c, KVRT_ERR_INVALID,
                              "the field \"%sdtype\" is missing (and there is no "
                              "top-level \"dtype\"); give the cache's element type, e.g. \"bf16\"",
                              w);
        s->num_kv_heads = 1;
        if (s->kind == KVRT_SPEC_ATTENTION &&
            (rc = model_get_u64(c, spec, w, "kv_heads", 1, MAX_SIZE, &s->num_kv_heads)))
            return rc;
        if (s->kind == KVRT_SPEC_MLA &&
            (rc = model_get_u64_opt(c, spec, w, "kv_heads", 1, MAX_SIZE, &s->num_kv_heads, &found)))
            return rc;
        if ((rc = model_get_u64(c, spec, w, "head_size", 1, MAX_SIZE, &s->head_size)))
            return rc;
        s->head_size_v = s->kind == KVRT_SPEC_MLA ? 0 : KVRT_UNSET;
        if ((rc = model_get_u64_opt(c, spec, w, "head_size_v", 0, MAX_SIZE, &s->head_size_v, &found)))
            return rc;
        if ((rc = parse_ratio(c, spec, w, s)))
            return rc;
    }
    if ((rc = model_get_u64_opt(c, spec, w, "head_slots", 1, MAX_SIZE, &s->num_head_slots, &found)) ||
        (rc = model_get_u64_opt(c, spec, w, "page_size_padded", 1, MAX_SIZE, &s->page_size_padded, &found)))
        return rc;
    struct kvrt_spec_info info;
    if ((rc = kvrt_spec_derive(s, 0, &info)) != KVRT_OK)
        return model_fail(c, rc, "\"%s\": %s", where, kvrt_error_message());
    return KVRT_OK;
}

static int parse_group(const struct model_ctx *c, const json_t *g, size_t index, const struct defaults *d,
                       const struct kvrt_model_options *opt, struct kvrt_model *m)
{
    char where[64], w[72];
    snprintf(where, sizeof(where), "groups[%zu]", index);
    snprintf(w, sizeof(w), "%s.", where);
    if (!json_is_object(g))
        return model_fail(c, KVRT_ERR_INVALID,
                          "\"%s\" is %s; each group is an object with \"name\", "
                          "\"layers\" and \"spec\"",
                          where, model_json_type(g));
    const char *name = NULL, *what = NULL;
    uint64_t window = 0, count = 0;
    bool found;
    int rc;
    if ((rc = check_keys(c, g, w, group_keys)) || (rc = model_get_string_opt(c, g, w, "name", &name)) ||
        (rc = model_get_string_opt(c, g, w, "what", &what)) ||
        (rc = model_get_u64_opt(c, g, w, "window", 1, MAX_SIZE, &window, &found)))
        return rc;
    if (!name || !*name)
        return model_fail(c, KVRT_ERR_INVALID, "the field \"%sname\" is missing or empty; name each group", w);
    char spec_where[80];
    snprintf(spec_where, sizeof(spec_where), "%sspec", w);
    struct kvrt_spec spec;
    memset(&spec, 0, sizeof(spec)); /* defined even on a path where model_fail's status were 0 */
    if ((rc = parse_spec(c, json_object_get(g, "spec"), spec_where, d, opt, &spec)))
        return rc;
    const json_t *layers = json_object_get(g, "layers");
    if (json_is_array(layers))
        count = json_array_size(layers);
    else if ((rc = model_get_u64(c, g, w, "layers", 1, KVRT_MODEL_MAX_LAYERS, &count)))
        return model_fail(c, KVRT_ERR_INVALID,
                          "\"%slayers\" must be a number of layers (1 to %u) or a "
                          "list of layer names",
                          w, KVRT_MODEL_MAX_LAYERS);
    if (count == 0 || m->num_layers + count > KVRT_MODEL_MAX_LAYERS)
        return model_fail(c, KVRT_ERR_INVALID,
                          "\"%slayers\" gives %llu layers; a group has 1 to %u and "
                          "the model at most %u in all",
                          w, (unsigned long long)count, KVRT_MODEL_MAX_LAYERS, KVRT_MODEL_MAX_LAYERS);
    struct model_layer *list = calloc(count, sizeof(*list));
    char(*names)[160] = calloc(count, sizeof(*names));
    if (!list || !names) {
        free(list);
        free(names);
        return model_fail(c, KVRT_ERR_NOMEM, "out of memory reading %s", where);
    }
    for (size_t i = 0; i < count && rc == KVRT_OK; i++) {
        if (json_is_array(layers)) {
            const char *s = json_string_value(json_array_get(layers, i));
            char key[48];
            snprintf(key, sizeof(key), "layers[%zu]", i);
            if (!s || !*s || strlen(s) >= sizeof(names[i]))
                rc = model_fail(c, KVRT_ERR_INVALID,
                                "\"%slayers[%zu]\" must be a non-empty layer name "
                                "of at most %zu characters",
                                w, i, sizeof(names[i]) - 1);
            else if ((rc = model_check_text(c, s, w, key, &s)) == KVRT_OK)
                snprintf(names[i], sizeof(names[i]), "%s", s);
        } else {
            snprintf(names[i], sizeof(names[i]), "%.120s.%zu", name, i);
        }
        list[i].name = names[i];
        list[i].spec = spec;
    }
    if (rc == KVRT_OK) {
        char desc[192];
        if (!what)
            snprintf(desc, sizeof(desc), "%s%s", kvrt_spec_kind_name(spec.kind), window ? " with a window" : "");
        rc = model_add_group(c, m, name, what ? what : desc, window, list, count);
    }
    free(list);
    free(names);
    return rc;
}

int model_parse_kvrt(const struct model_ctx *c, const json_t *root, const struct kvrt_model_options *opt,
                     struct kvrt_model *m)
{
    const char *format = NULL, *name = NULL;
    uint64_t version;
    bool found;
    struct defaults d = {false, KVRT_DTYPE_BF16, KVRT_MODEL_DEFAULT_BLOCK_SIZE};
    int rc;
    m->format = model_strdup("kvrt-model");
    m->architecture = model_strdup("");
    if ((rc = check_keys(c, root, "", top_keys)) || (rc = model_get_string_opt(c, root, "", "format", &format)))
        return rc;
    if (!format || strcmp(format, "kvrt-model") != 0)
        return model_fail(c, KVRT_ERR_INVALID,
                          "\"format\" must be \"kvrt-model\" in a kvrt model file "
                          "(a Hugging Face config.json has no \"format\" field)");
    if ((rc = model_get_u64(c, root, "", "version", 1, 1, &version)) ||
        (rc = model_get_string_opt(c, root, "", "name", &name)) ||
        (rc = parse_dtype(c, root, "", &d.dtype_found, &d.dtype)) ||
        (rc = model_get_u64_opt(c, root, "", "block_size", 1, MAX_SIZE, &d.block_size, &found)) ||
        (rc = model_get_u64_opt(c, root, "", "num_q_heads", 1, MAX_SIZE, &m->num_q_heads, &found)))
        return rc;
    if (name && *name) {
        free(m->name);
        if (!(m->name = model_strdup(name)))
            return model_fail(c, KVRT_ERR_NOMEM, "out of memory");
    }
    const json_t *groups = json_object_get(root, "groups");
    if (!json_is_array(groups) || json_array_size(groups) == 0)
        return model_fail(c, KVRT_ERR_INVALID,
                          "the field \"groups\" is %s; it must be a non-empty list "
                          "of groups",
                          groups ? model_json_type(groups) : "missing");
    for (size_t i = 0; i < json_array_size(groups) && rc == KVRT_OK; i++)
        rc = parse_group(c, json_array_get(groups, i), i, &d, opt, m);
    if (rc != KVRT_OK || m->num_q_heads)
        return rc;
    /* Decode needs a multiple of every attention layer's KV heads. */
    uint64_t q = 0;
    for (size_t g = 0; g < m->num_groups; g++) {
        const struct kvrt_spec *s = &m->groups[g].layers[0].spec;
        if (s->kind != KVRT_SPEC_ATTENTION)
            continue;
        if (!q)
            q = s->num_kv_heads;
        else if (kvrt_lcm_overflow(q, s->num_kv_heads, &q))
            q = UINT64_MAX;
        if (q > MAX_SIZE)
            return model_fail(c, KVRT_ERR_INVALID,
                              "the groups' KV head counts have no common multiple "
                              "below 2^40; give \"num_q_heads\"");
    }
    m->num_q_heads = q;
    return KVRT_OK;
}
