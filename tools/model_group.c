/*
 * Grouping layers the way vLLM's hybrid KV-cache allocator does
 * (vllm/v1/core/kv_cache_utils.py, _get_kv_cache_groups_uniform_page_size):
 *
 *   - layers with the same kind and spec form one type, in order of first
 *     appearance;
 *   - the group size is the smallest type's layer count, or the largest's
 *     when that is less than 1.25 times the smallest (12 + 13 layers give
 *     two groups of 13, not five small ones);
 *   - a type of n layers becomes ceil(n / size) groups, group j taking
 *     layers j, j + k, j + 2k, ... (k groups), so each group spans the whole
 *     depth of the model the way vLLM assigns layers[j::k].
 *
 * Group g's layer i shares memory with every other group's layer i, so the
 * memory per block is that of the largest group.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/common.h>
#include <kvrt/spec.h>

#include "model_internal.h"

int model_builder_add(const struct model_ctx *c, struct model_builder *b, const char *name,
                      const char *type, const char *what, uint64_t window,
                      const struct kvrt_spec *spec)
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
    if (m->num_notes == KVRT_MODEL_MAX_NOTES)
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

int model_add_group(const struct model_ctx *c, struct kvrt_model *m, const char *name,
                    const char *what, uint64_t window, struct model_layer *layers, size_t n)
{
    if (m->num_groups == KVRT_MODEL_MAX_GROUPS)
        return model_fail(c, KVRT_ERR_INVALID, "more than %u groups; kvrt handles at most %u",
                          KVRT_MODEL_MAX_GROUPS, KVRT_MODEL_MAX_GROUPS);
    struct kvrt_model_group *grown = realloc(m->groups, (m->num_groups + 1) * sizeof(*grown));
    if (!grown)
        return model_fail(c, KVRT_ERR_NOMEM, "out of memory grouping the layers");
    m->groups = grown;
    struct kvrt_model_group *g = &m->groups[m->num_groups];
    memset(g, 0, sizeof(*g));
    g->name = model_strdup(name);
    g->what = model_strdup(what);
    g->window = window;
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
    return strcmp(a->type, b->type) == 0 && a->window == b->window &&
           kvrt_spec_equal(&a->spec, &b->spec);
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
    for (size_t i = 0; i < n; i++) {
        size_t t = 0;
        while (t < types && !same_type(&b->layers[first[t]], &b->layers[i]))
            t++;
        if (t == types)
            first[types++] = i;
        type_of[i] = t;
        count[t]++;
    }
    size_t smallest = n, largest = 0;
    for (size_t t = 0; t < types; t++) {
        smallest = count[t] < smallest ? count[t] : smallest;
        largest = count[t] > largest ? count[t] : largest;
    }
    /* largest < 1.25 * smallest, in integers. */
    const size_t size = 4 * largest < 5 * smallest ? largest : smallest;
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
    if (rc == KVRT_OK && types > 1)
        model_note(m, "%zu kinds of layer in %zu groups of up to %zu layers, as vLLM's hybrid "
                   "allocator groups them; groups share memory, so one block costs the pages of "
                   "the largest group", types, m->num_groups, size);
out:
    free(type_of);
    free(first);
    free(count);
    free(pick);
    return rc;
}
