/*
 * A model and its plan as JSON (kvrt_model_json, kvrt_model_plan_json):
 * the object `kvrt plan --model FILE --json` prints and the Python package
 * returns, built here once so that both give the same numbers.
 *
 * Layer 4 of libkvrt (core/models/; CONTRIBUTING.md, "Where things live").
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/layout.h>
#include <kvrt/placement.h>
#include <kvrt/spec.h>

#include "error.h"
#include "json_util.h"
#include "model_internal.h"
#include "reserved.h"

static json_t *opt_u64(uint64_t v, const char *what)
{
    return v == KVRT_UNSET ? json_null() : kvrt_json_u64(v, what);
}

static json_t *spec_json(const struct kvrt_spec *s)
{
    struct kvrt_spec_info in;
    json_t *o = json_object();
    bool state = s->kind == KVRT_SPEC_STATE;
    if (kvrt_spec_derive(s, 0, &in) != KVRT_OK) {
        json_decref(o);
        return NULL;
    }
    json_t *tps = json_array();
    json_array_append_new(tps, kvrt_json_u64(s->tokens_per_state_num, "tokens_per_state"));
    json_array_append_new(tps, kvrt_json_u64(s->tokens_per_state_den, "tokens_per_state"));
    bool ok = kvrt_json_put(o, "kind", kvrt_json_str(kvrt_spec_kind_name(s->kind))) &&
              kvrt_json_put(o, "dtype", state ? json_null() : kvrt_json_str(kvrt_dtype_name(s->dtype))) &&
              kvrt_json_put(o, "block_size", kvrt_json_u64(s->block_size, "block_size")) &&
              kvrt_json_put(o, "kv_heads", state ? json_null() : kvrt_json_u64(s->num_kv_heads, "kv_heads")) &&
              kvrt_json_put(o, "head_slots", kvrt_json_u64(in.head_slots, "head_slots")) &&
              kvrt_json_put(o, "head_size", state ? json_null() : kvrt_json_u64(in.head_size, "head_size")) &&
              kvrt_json_put(o, "head_size_v", state ? json_null() : kvrt_json_u64(in.head_size_v, "head_size_v")) &&
              kvrt_json_put(o, "tokens_per_state", tps) &&
              kvrt_json_put(o, "content_bytes", kvrt_json_u64(in.content_bytes, "content_bytes")) &&
              kvrt_json_put(o, "page_size_padded", opt_u64(s->page_size_padded, "page_size_padded")) &&
              kvrt_json_put(o, "page_bytes", kvrt_json_u64(in.page_size, "page_bytes"));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *settings_json(const struct kvrt_model *m)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < m->num_settings; i++) {
        json_t *e = json_object();
        if (!kvrt_json_put(e, "name", kvrt_json_str(m->settings[i].name)) ||
            !kvrt_json_put(e, "value", kvrt_json_str(m->settings[i].value)) ||
            !kvrt_json_put(e, "source", kvrt_json_str(m->settings[i].source)) || json_array_append_new(a, e) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static const char *usage_name(enum kvrt_model_usage u)
{
    return u == KVRT_MODEL_USAGE_STATE ? "state" : u == KVRT_MODEL_USAGE_SLIDING ? "sliding_window" : "full";
}

static json_t *model_object(const struct kvrt_model *m)
{
    json_t *o = json_object(), *groups = json_array(), *notes = json_array();
    for (size_t i = 0; notes && i < m->num_notes; i++)
        json_array_append_new(notes, kvrt_json_str(m->notes[i]));
    bool ok = kvrt_json_put(o, "name", kvrt_json_str(m->name)) &&
              kvrt_json_put(o, "source", kvrt_json_str(m->source)) &&
              kvrt_json_put(o, "format", kvrt_json_str(m->format)) &&
              kvrt_json_put(o, "architecture", kvrt_json_str(m->architecture)) &&
              kvrt_json_put(o, "num_layers", kvrt_json_u64(m->num_layers, "num_layers")) &&
              kvrt_json_put(o, "num_q_heads", kvrt_json_u64(m->num_q_heads, "num_q_heads")) &&
              kvrt_json_put(o, "settings", settings_json(m)) &&
              kvrt_json_put(o, "max_model_len",
                            m->max_model_len ? kvrt_json_u64(m->max_model_len, "max_model_len") : json_null()) &&
              kvrt_json_put(o, "max_model_len_source",
                            m->max_model_len_source ? kvrt_json_str(m->max_model_len_source) : json_null()) &&
              kvrt_json_put(o, "notes", notes);
    for (size_t g = 0; ok && g < m->num_groups; g++) {
        const struct model_group *grp = &m->groups[g];
        json_t *e = json_object(), *names = json_array();
        for (size_t i = 0; names && i < grp->num_layers; i++)
            json_array_append_new(names, kvrt_json_str(grp->layers[i].name));
        ok = kvrt_json_put(e, "name", kvrt_json_str(grp->name)) && kvrt_json_put(e, "what", kvrt_json_str(grp->what)) &&
             kvrt_json_put(e, "window", grp->window ? kvrt_json_u64(grp->window, "window") : json_null()) &&
             kvrt_json_put(e, "usage", kvrt_json_str(usage_name(grp->usage))) &&
             kvrt_json_put(e, "num_layers", kvrt_json_u64(grp->num_layers, "num_layers")) &&
             kvrt_json_put(e, "layers", names) && kvrt_json_put(e, "spec", spec_json(&grp->layers[0].spec)) &&
             json_array_append_new(groups, e) == 0;
    }
    if (!ok || !kvrt_json_put(o, "groups", groups)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int kvrt_model_json(const kvrt_model *m, char **out)
{
    if (!m || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_model_json: %s is NULL", m ? "out" : "the model");
    *out = NULL;
    kvrt_clear_error();
    return kvrt_json_dump(model_object(m), "the model's JSON", out);
}

void kvrt_model_plan_request_default(struct kvrt_model_plan_request *req)
{
    if (!req)
        return;
    memset(req, 0, sizeof(*req));
    req->layout = KVRT_LAYOUT_LBNHC;
}

/* Each group's bytes: the pages of all its layers, per block and in all. */
static json_t *groups_json(const struct kvrt_model *m, uint64_t blocks)
{
    json_t *a = json_array();
    for (size_t g = 0; a && g < m->num_groups; g++) {
        const struct model_group *grp = &m->groups[g];
        struct kvrt_spec_info in;
        uint64_t per_block = 0;
        for (size_t i = 0; i < grp->num_layers; i++)
            if (kvrt_spec_derive(&grp->layers[i].spec, 0, &in) == KVRT_OK)
                per_block += in.page_size;
        kvrt_spec_derive(&grp->layers[0].spec, 0, &in);
        const uint64_t bs = grp->layers[0].spec.block_size;
        /* Bounded by the placement's checked size. */
        json_t *e = json_object();
        bool ok = kvrt_json_put(e, "name", kvrt_json_str(grp->name)) &&
                  kvrt_json_put(e, "num_layers", kvrt_json_u64(grp->num_layers, "num_layers")) &&
                  kvrt_json_put(e, "page_bytes", kvrt_json_u64(in.page_size, "page_bytes")) &&
                  kvrt_json_put(e, "bytes_per_block", kvrt_json_u64(per_block, "bytes_per_block")) &&
                  kvrt_json_put(e, "bytes", kvrt_json_u64(per_block * blocks, "bytes")) &&
                  kvrt_json_put(e, "tokens", kvrt_json_u64(blocks * bs, "tokens")) && json_array_append_new(a, e) == 0;
        if (!ok) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *sets_json(const kvrt_placement *p)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < kvrt_placement_num_sets(p); i++) {
        struct kvrt_placement_set s;
        json_t *e = json_object(), *names = json_array();
        if (kvrt_placement_get_set(p, i, &s) != KVRT_OK || !e || !names) {
            json_decref(e);
            json_decref(names);
            json_decref(a);
            return NULL;
        }
        for (size_t l = 0; l < s.num_layers; l++)
            json_array_append_new(names, kvrt_json_str(s.layer_names[l]));
        bool ok = kvrt_json_put(e, "group", kvrt_json_u64(s.group, "group")) && kvrt_json_put(e, "layers", names) &&
                  kvrt_json_put(e, "offset", kvrt_json_u64(s.offset, "offset")) &&
                  kvrt_json_put(e, "layer_stride", kvrt_json_u64(s.layer_stride, "layer_stride")) &&
                  kvrt_json_put(e, "block_stride", kvrt_json_u64(s.block_stride, "block_stride")) &&
                  kvrt_json_put(e, "shape_bytes",
                                kvrt_json_u64_array(s.geometry.shape_bytes, KVRT_NUM_AXES, "shape_bytes")) &&
                  kvrt_json_put(e, "strides_bytes",
                                kvrt_json_u64_array(s.geometry.strides_bytes, KVRT_NUM_AXES, "strides_bytes")) &&
                  json_array_append_new(a, e) == 0;
        if (!ok) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* 1234567 as vLLM logs it: "1,234,567". */
static void with_commas(uint64_t v, char *out, size_t size)
{
    char digits[24];
    int n = snprintf(digits, sizeof(digits), "%" PRIu64, v);
    size_t o = 0;
    for (int i = 0; i < n && o + 2 < size; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
}

/* vLLM's figures for the budget: what it logs ("GPU KV cache size",
 * "Maximum concurrency"), and the numbers behind them.  Without a request
 * length (neither the model nor the request gives one) only the tokens
 * count. */
struct vllm_figures {
    struct kvrt_model_capacity cap;
    uint64_t len, batched;
    const char *len_source, *batched_source;
};

static int vllm_figures(const struct kvrt_model *m, const struct kvrt_model_plan_request *req, struct vllm_figures *f)
{
    f->len = req->max_model_len ? req->max_model_len : m->max_model_len;
    f->len_source = req->max_model_len ? req->max_model_len_source : m->max_model_len_source;
    f->batched = req->batched_tokens ? req->batched_tokens : KVRT_MODEL_DEFAULT_BATCHED_TOKENS;
    f->batched_source =
        req->batched_tokens ? req->batched_tokens_source : "default (vllm serve on a GPU of 70 GiB or more)";
    return kvrt_model_vllm_capacity(m, req->budget_bytes, f->len ? f->len : 1, f->batched, &f->cap);
}

static json_t *vllm_json(const struct vllm_figures *f)
{
    const struct kvrt_model_capacity cap = f->cap;
    const bool have_len = f->len != 0;
    const uint64_t len = f->len, batched = f->batched;
    const char *len_source = f->len_source, *batched_source = f->batched_source;
    char a[32], line[128];
    json_t *log = json_array();
    with_commas(cap.tokens, a, sizeof(a));
    snprintf(line, sizeof(line), "GPU KV cache size: %s tokens", a);
    json_array_append_new(log, kvrt_json_str(line));
    if (have_len) {
        with_commas(len, a, sizeof(a));
        snprintf(line, sizeof(line), "Maximum concurrency for %s tokens per request: %.2fx", a, cap.max_concurrency);
        json_array_append_new(log, kvrt_json_str(line));
    }
    json_t *o = json_object();
    bool ok =
        kvrt_json_put(o, "kv_cache_tokens", kvrt_json_u64(cap.tokens, "kv_cache_tokens")) &&
        kvrt_json_put(o, "num_blocks", kvrt_json_u64(cap.num_blocks, "num_blocks")) &&
        kvrt_json_put(o, "bytes_per_block", kvrt_json_u64(cap.bytes_per_block, "bytes_per_block")) &&
        kvrt_json_put(o, "max_model_len", have_len ? kvrt_json_u64(cap.max_model_len, "max_model_len") : json_null()) &&
        kvrt_json_put(o, "max_model_len_source", have_len && len_source ? kvrt_json_str(len_source) : json_null()) &&
        kvrt_json_put(o, "max_num_batched_tokens", kvrt_json_u64(batched, "max_num_batched_tokens")) &&
        kvrt_json_put(o, "max_num_batched_tokens_source", kvrt_json_str(batched_source ? batched_source : "")) &&
        kvrt_json_put(o, "blocks_per_request",
                      have_len ? kvrt_json_u64(cap.blocks_per_request, "blocks_per_request") : json_null()) &&
        kvrt_json_put(o, "max_concurrency", have_len ? json_real(cap.max_concurrency) : json_null()) &&
        kvrt_json_put(o, "request_bytes", have_len ? kvrt_json_u64(cap.request_bytes, "request_bytes") : json_null()) &&
        kvrt_json_put(o, "fits_one_request", have_len ? json_boolean(cap.fits_one_request) : json_null()) &&
        kvrt_json_put(o, "log", log);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int kvrt_model_plan_json(const kvrt_model *m, const struct kvrt_model_plan_request *req, char **out)
{
    if (!m || !req || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_model_plan_json: %s is NULL",
                         !m     ? "the model"
                         : !req ? "the request"
                                : "out");
    *out = NULL;
    int rc = kvrt_check_reserved(req->reserved, sizeof(req->reserved), "kvrt_model_plan_request");
    if (rc != KVRT_OK)
        return rc;
    struct vllm_figures vf;
    if (req->budget_bytes && (rc = vllm_figures(m, req, &vf)) != KVRT_OK)
        return rc;
    uint64_t blocks = req->num_blocks;
    if (req->budget_bytes && (rc = kvrt_placement_blocks_for_budget(req->layout, m->placement_groups, m->num_groups,
                                                                    req->budget_bytes, &blocks)) != KVRT_OK)
        return rc;
    kvrt_placement *p = NULL;
    if ((rc = kvrt_placement_create(req->layout, m->placement_groups, m->num_groups, blocks, req->kernel_block_size,
                                    &p)) != KVRT_OK)
        return rc;
    static const char letters[KVRT_NUM_AXES] = {'L', 'B', 'H', 'N', 'C'};
    int o[KVRT_NUM_AXES];
    char order[KVRT_NUM_AXES + 1];
    kvrt_layout_stride_order(kvrt_placement_layout(p), o);
    for (int i = 0; i < KVRT_NUM_AXES; i++)
        order[i] = letters[o[i]];
    order[KVRT_NUM_AXES] = '\0';
    blocks = kvrt_placement_num_blocks(p);
    kvrt_clear_error();
    json_t *root = json_object();
    bool ok =
        kvrt_json_put(root, "model", model_object(m)) &&
        kvrt_json_put(root, "layout", kvrt_json_str(kvrt_layout_name(req->layout))) &&
        kvrt_json_put(root, "layout_source", kvrt_json_str(req->layout_source ? req->layout_source : "default")) &&
        kvrt_json_put(root, "physical_order", kvrt_json_str(order)) &&
        kvrt_json_put(root, "num_blocks", kvrt_json_u64(blocks, "num_blocks")) &&
        kvrt_json_put(root, "budget_bytes",
                      req->budget_bytes ? kvrt_json_u64(req->budget_bytes, "budget_bytes") : json_null()) &&
        kvrt_json_put(root, "bytes_per_block", kvrt_json_u64(kvrt_placement_bytes_per_block(p), "bytes_per_block")) &&
        kvrt_json_put(root, "total_bytes", kvrt_json_u64(kvrt_placement_size(p), "total_bytes")) &&
        kvrt_json_put(root, "groups", groups_json(m, blocks)) && kvrt_json_put(root, "sets", sets_json(p)) &&
        kvrt_json_put(root, "vllm", req->budget_bytes ? vllm_json(&vf) : json_null());
    kvrt_placement_destroy(p);
    if (!ok) {
        json_decref(root);
        root = NULL;
    }
    return kvrt_json_dump(root, "the plan's JSON", out);
}
