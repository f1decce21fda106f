/*
 * Grouping layers the way vLLM's hybrid KV-cache allocator does
 * (vllm/v1/core/kv_cache_utils.py, _get_kv_cache_groups_uniform_page_size):
 *
 *   - layers with the same kind and spec form one type, in order of first
 *     appearance;
 *   - when every layer has the same kind, window and block size (specs may
 *     differ: DeepSeek-V3.2's MLA and indexer layers), all layers form one
 *     group whose block holds every layer's page (UniformTypeKVCacheSpecs);
 *   - otherwise pages must be one size: a type with smaller pages gets a
 *     block that many times larger (unify_kv_cache_spec_page_size), and a
 *     size that does not divide the largest is refused, as vLLM raises;
 *   - the group size is the smallest type's layer count, or the largest's
 *     when that is less than 1.5 times the smallest (12 + 13 layers give
 *     two groups of 13, not five small ones);
 *   - a type of n layers becomes ceil(n / size) groups, group j taking
 *     layers j, j + k, j + 2k, ... (k groups), so each group spans the whole
 *     depth of the model the way vLLM assigns layers[j::k].
 *
 * Group g's layer i shares memory with every other group's layer i, so the
 * memory per block is that of the largest group.  (vLLM commit
 * 001cabc1be16a59a70d720ed61a13b678c060a18; docs/models.md.)
 *
 * Layer 4 of libkvrt (core/models/; CONTRIBUTING.md, "Where things live").
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/common.h>
#include <kvrt/spec.h>

#include "model_internal.h"

int model_builder_add(const struct model_ctx *c, struct model_builder *b, const char *name, const char *type,
                      const char *what, uint64_t window, const struct kvrt_spec *spec)
{
    if (b->num_layers == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        struct model_layer *grown = realloc(b->layers, cap * sizeof(*grown));
        if (!grown)
            return model_fail(c, KVRT_ERR_NOMEM, "out of memory reading the layers");
        b->layers = grown;
        b->cap = cap;
    }
    struct model_layer *l = &b->layers[b->num_layers];
    l->name = model_strdup(name);
    l->type = model_strdup(type);
    l->what = model_strdup(what);
    l->window = window;
    l->spec = *spec;
    if (!l->name || !l->type || !l->what) {
        free(l->name);
        free(l->type);
        free(l->what);
        return model_fail(c, KVRT_ERR_NOMEM, "out of memory reading the layers");
    }
    b->num_layers++;
    return KVRT_OK;
}

void model_builder_free(struct model_builder *b)
{
    for (size_t i = 0; i < b->num_layers; i++) {
        free(b->layers[i].name);
        free(b->layers[i].type);
        free(b->layers[i].what);
    }
    free(b->layers);
    memset(b, 0, sizeof(*b));
}

void model_note(struct kvrt_model *m, const char *fmt, ...)
{
    if (m->num_notes == MODEL_MAX_NOTES)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    char *copy = model_strdup(buf);
    if (copy)
        m->notes[m->num_notes++] = copy;
}

void model_setting(struct kvrt_model *m, const char *name, const char *value, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    size_t i = 0;
    while (i < m->num_settings && strcmp(m->settings[i].name, name) != 0)
        i++;
    if (i == MODEL_MAX_SETTINGS)
        return;
    struct model_setting s = {model_strdup(name), model_strdup(value), model_strdup(buf)};
    if (!s.name || !s.value || !s.source) {
        free(s.name);
        free(s.value);
        free(s.source);
        return;
    }
    if (i < m->num_settings) {
        free(m->settings[i].name);
        free(m->settings[i].value);
        free(m->settings[i].source);
    } else {
        m->num_settings++;
    }
    m->settings[i] = s;
}

int model_add_group(const struct model_ctx *c, struct kvrt_model *m, const char *name, const char *what,
                    uint64_t window, struct model_layer *layers, size_t n)
{
    if (m->num_groups == KVRT_MODEL_MAX_GROUPS)
        return model_fail(c, KVRT_ERR_INVALID, "more than %u groups; kvrt handles at most %u", KVRT_MODEL_MAX_GROUPS,
                          KVRT_MODEL_MAX_GROUPS);
    struct model_group *grown = realloc(m->groups, (m->num_groups + 1) * sizeof(*grown));
    if (!grown)
        return model_fail(c, KVRT_ERR_NOMEM, "out of memory grouping the layers");
    m->groups = grown;
    struct model_group *g = &m->groups[m->num_groups];
    memset(g, 0, sizeof(*g));
    g->name = model_strdup(name);
    g->what = model_strdup(what);
    g->window = window;
    g->usage = n && layers[0].spec.kind == KVRT_SPEC_STATE ? KVRT_MODEL_USAGE_STATE
               : window                                    ? KVRT_MODEL_USAGE_SLIDING
                                                           : KVRT_MODEL_USAGE_FULL;
    g->layers = calloc(n ? n : 1, sizeof(*g->layers));
    if (!g->name || !g->what || !g->layers) {
        free(g->name);
        free(g->what);
        free(g->layers);
        return model_fail(c, KVRT_ERR_NOMEM, "out of memory grouping the layers");
    }
    m->num_groups++;
    for (size_t i = 0; i < n; i++) {
        char *copy = model_strdup(layers[i].name);
        if (!copy)
            return model_fail(c, KVRT_ERR_NOMEM, "out of memory grouping the layers");
        g->layers[i].name = copy;
        g->layers[i].spec = layers[i].spec;
        g->num_layers++;
    }
    m->num_layers += n;
    return KVRT_OK;
}

static bool same_type(const struct model_layer *a, const struct model_layer *b)
{
    return strcmp(a->type, b->type) == 0 && a->window == b->window && kvrt_spec_equal(&a->spec, &b->spec);
}

static uint64_t page_of(const struct kvrt_spec *s)
{
    struct kvrt_spec_info in;
    return kvrt_spec_derive(s, 0, &in) == KVRT_OK ? in.page_size : 0;
}

/* All layers of one kind, window and block size: one group, every layer in
 * order (vLLM's uniform spec, or UniformTypeKVCacheSpecs when specs differ). */
static int one_group(const struct model_ctx *c, struct model_builder *b, struct kvrt_model *m, size_t types,
                     const size_t *first)
{
    char what[256];
    size_t used = 0;
    what[0] = '\0';
    for (size_t t = 0; t < types && used < sizeof(what); t++) {
        bool seen = false;
        for (size_t u = 0; u < t; u++)
            seen = seen || strcmp(b->layers[first[u]].what, b->layers[first[t]].what) == 0;
        if (!seen)
            used +=
                (size_t)snprintf(what + used, sizeof(what) - used, "%s%s", used ? " + " : "", b->layers[first[t]].what);
    }
    int rc = model_add_group(c, m, b->layers[0].type, what, b->layers[0].window, b->layers, b->num_layers);
    if (rc == KVRT_OK && types > 1)
        model_note(m,
                   "%zu layer shapes of one kind in one group, as vLLM's "
                   "UniformTypeKVCacheSpecs keeps them: one block holds a page of every layer",
                   types);
    return rc;
}

/* vLLM's unify_kv_cache_spec_page_size: smaller pages get proportionally
 * larger blocks; a page size that does not divide the largest is an error. */
static int unify_pages(const struct model_ctx *c, struct model_builder *b, struct kvrt_model *m, size_t types,
                       const size_t *first, const size_t *type_of)
{
    uint64_t largest = 0;
    for (size_t t = 0; t < types; t++) {
        uint64_t p = page_of(&b->layers[first[t]].spec);
        largest = p > largest ? p : largest;
    }
    for (size_t t = 0; t < types; t++) {
        const struct model_layer *proto = &b->layers[first[t]];
        const uint64_t p = page_of(&proto->spec);
        if (p == 0 || p == largest)
            continue;
        if (largest % p != 0)
            return model_fail(c, KVRT_ERR_INVALID,
                              "%s layers have %llu-byte pages and others %llu; "
                              "vLLM cannot give them one page size (unify_kv_cache_spec_page_size "
                              "raises NotImplementedError), so kvrt does not size this model",
                              proto->type, (unsigned long long)p, (unsigned long long)largest);
        const uint64_t ratio = largest / p;
        uint64_t grown;
        if (__builtin_mul_overflow(proto->spec.block_size, ratio, &grown))
            return model_fail(c, KVRT_ERR_OVERFLOW,
                              "%s layers: a block %llu times larger does not fit "
                              "in 64 bits",
                              proto->type, (unsigned long long)ratio);
        model_note(m,
                   "%s layers: block of %llu tokens, %llu times the others', so that every "
                   "page is %llu bytes (vLLM's unify_kv_cache_spec_page_size)",
                   proto->type, (unsigned long long)grown, (unsigned long long)ratio, (unsigned long long)largest);
        for (size_t i = 0; i < b->num_layers; i++)
            if (type_of[i] == t)
                b->layers[i].spec.block_size *= ratio;
    }
    return KVRT_OK;
}

int model_group_like_vllm(const struct model_ctx *c, struct model_builder *b, struct kvrt_model *m)
{
    const size_t n = b->num_layers;
    if (n == 0)
        return model_fail(c, KVRT_ERR_INVALID, "the model has no layers that keep a KV cache");
    size_t *type_of = malloc(n * sizeof(*type_of));
    size_t *first = malloc(n * sizeof(*first)); /* first layer of each type */
    size_t *count = calloc(n, sizeof(*count));
    struct model_layer *pick = malloc(n * sizeof(*pick));
    int rc = KVRT_OK;
    if (!type_of || !first || !count || !pick) {
        rc = model_fail(c, KVRT_ERR_NOMEM, "out of memory grouping %zu layers", n);
        goto out;
    }
    size_t types = 0;
    bool uniform_kind = true;
    for (size_t i = 0; i < n; i++) {
        size_t t = 0;
        while (t < types && !same_type(&b->layers[first[t]], &b->layers[i]))
            t++;
        if (t == types)
            first[types++] = i;
        type_of[i] = t;
        count[t]++;
        uniform_kind = uniform_kind && strcmp(b->layers[i].type, b->layers[0].type) == 0 &&
                       b->layers[i].window == b->layers[0].window &&
                       b->layers[i].spec.block_size == b->layers[0].spec.block_size &&
                       b->layers[i].spec.kind != KVRT_SPEC_STATE;
    }
    if (types == 1 || uniform_kind) {
        rc = one_group(c, b, m, types, first);
        goto out;
    }
    if ((rc = unify_pages(c, b, m, types, first, type_of)) != KVRT_OK)
        goto out;
    size_t smallest = n, largest = 0;
    for (size_t t = 0; t < types; t++) {
        smallest = count[t] < smallest ? count[t] : smallest;
        largest = count[t] > largest ? count[t] : largest;
    }
    /* largest < 1.5 * smallest, in integers. */
    const size_t size = 2 * largest < 3 * smallest ? largest : smallest;
    for (size_t t = 0; t < types && rc == KVRT_OK; t++) {
        const struct model_layer *proto = &b->layers[first[t]];
        const size_t k = (count[t] + size - 1) / size;
        for (size_t j = 0; j < k && rc == KVRT_OK; j++) {
            size_t picked = 0, seen = 0;
            for (size_t i = 0; i < n; i++) {
                if (type_of[i] != t)
                    continue;
                if (seen++ % k == j)
                    pick[picked++] = b->layers[i];
            }
            /* One type of several spec shapes (rare) gets a numbered name. */
            size_t same_name = 0;
            for (size_t u = 0; u < t; u++)
                same_name += strcmp(b->layers[first[u]].type, proto->type) == 0;
            char name[160];
            int w = snprintf(name, sizeof(name), "%s", proto->type);
            if (same_name && w > 0 && (size_t)w < sizeof(name))
                w += snprintf(name + w, sizeof(name) - (size_t)w, "-%zu", same_name + 1);
            if (k > 1 && w > 0 && (size_t)w < sizeof(name))
                snprintf(name + w, sizeof(name) - (size_t)w, ".%zu", j);
            rc = model_add_group(c, m, name, proto->what, proto->window, pick, picked);
        }
    }
    if (rc == KVRT_OK)
        model_note(m,
                   "%zu kinds of layer in %zu groups of up to %zu layers, as vLLM's hybrid "
                   "allocator groups them; groups share memory, so one block costs the pages of "
                   "the largest group",
                   types, m->num_groups, size);
out:
    free(type_of);
    free(first);
    free(count);
    free(pick);
    return rc;
}
