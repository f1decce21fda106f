/*
 * The library's answers as JSON: the layouts, a geometry and a resolution,
 * exactly as `kvrt layouts --json`, `kvrt plan --json` (for flags) and
 * `kvrt resolve --json` print them and as kvrt.layouts(), kvrt.plan() and
 * kvrt.resolve() return them.  One producer, so the tool and the Python
 * package cannot drift apart.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <stdio.h>
#include <string.h>

#include <kvrt/geometry.h>
#include <kvrt/layout.h>
#include <kvrt/resolve.h>

#include "error.h"
#include "json_reports.h"
#include "json_util.h"
#include "resolve_internal.h"

static const char axis_letters[KVRT_NUM_AXES] = {'L', 'B', 'H', 'N', 'C'};

/* "LBNHC" for a layout's stride order. */
static json_t *physical_order(const int order[KVRT_NUM_AXES])
{
    char text[KVRT_NUM_AXES + 1];
    for (int p = 0; p < KVRT_NUM_AXES; p++)
        text[p] = axis_letters[order[p]];
    text[KVRT_NUM_AXES] = '\0';
    return json_string(text);
}

static json_t *layout_json(enum kvrt_layout l)
{
    int order[KVRT_NUM_AXES], view[4];
    kvrt_layout_stride_order(l, order);
    kvrt_layout_layer_view_order(l, view);
    json_t *o = json_object();
    bool ok = kvrt_json_put(o, "name", json_string(kvrt_layout_name(l))) &&
              kvrt_json_put(o, "value", json_integer((json_int_t)l)) &&
              kvrt_json_put(o, "stride_order", kvrt_json_int_array(order, KVRT_NUM_AXES)) &&
              kvrt_json_put(o, "physical_order", physical_order(order)) &&
              kvrt_json_put(o, "layer_view_order", kvrt_json_int_array(view, 4)) &&
              kvrt_json_put(o, "layer_compact", json_boolean(kvrt_layout_layer_compact(l))) &&
              kvrt_json_put(o, "block_outermost", json_boolean(kvrt_layout_block_outermost(l))) &&
              kvrt_json_put(o, "block_compact", json_boolean(kvrt_layout_block_compact(l))) &&
              kvrt_json_put(o, "block_contiguous", json_boolean(kvrt_layout_block_contiguous(l)));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int kvrt_layouts_json(char **out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_layouts_json: out is NULL");
    kvrt_clear_error();
    json_t *root = json_object(), *layouts = NULL, *aliases = NULL, *valid = NULL;
    bool ok = kvrt_json_put(root, "layouts", layouts = json_array()) &&
              kvrt_json_put(root, "aliases", aliases = json_object()) &&
              kvrt_json_put(root, "valid_names", valid = json_array()) &&
              kvrt_json_put(root, "env", json_string(KVRT_LAYOUT_ENV));
    for (int i = 0; ok && i < KVRT_NUM_LAYOUTS; i++)
        ok = kvrt_json_append(layouts, layout_json((enum kvrt_layout)i)) &&
             kvrt_json_append(valid, json_string(kvrt_layout_name((enum kvrt_layout)i)));
    /* Aliases are every valid spelling that is not a canonical name, so the
     * list can never drift from what kvrt_layout_parse accepts. */
    char list[256];
    snprintf(list, sizeof(list), "%s", kvrt_layout_valid_names());
    for (char *save = NULL, *tok = strtok_r(list, ", ", &save); ok && tok; tok = strtok_r(NULL, ", ", &save)) {
        enum kvrt_layout l;
        if (kvrt_layout_parse(tok, &l) == KVRT_OK && strcmp(tok, kvrt_layout_name(l)) != 0)
            ok = kvrt_json_put(aliases, tok, json_string(kvrt_layout_name(l))) &&
                 kvrt_json_append(valid, json_string(tok));
    }
    if (!ok) {
        json_decref(root);
        root = NULL;
    }
    return kvrt_json_dump(root, "the layouts' JSON", out);
}

static json_t *view_json(const struct kvrt_geometry *g, uint64_t layer)
{
    struct kvrt_view v;
    if (kvrt_geometry_layer_view(g, 0, layer, &v) != KVRT_OK)
        return NULL;
    json_t *o = json_object();
    bool ok = kvrt_json_put(o, "layer", kvrt_json_u64(layer, "layer")) &&
              kvrt_json_put(o, "offset_bytes", kvrt_json_u64(v.offset_bytes, "offset_bytes")) &&
              kvrt_json_put(o, "shape", kvrt_json_u64_array(v.shape, 4, "shape")) &&
              kvrt_json_put(o, "strides", kvrt_json_u64_array(v.strides, 4, "strides")) &&
              kvrt_json_put(o, "shape_bytes", kvrt_json_u64_array(v.shape_bytes, 4, "shape_bytes")) &&
              kvrt_json_put(o, "strides_bytes", kvrt_json_u64_array(v.strides_bytes, 4, "strides_bytes"));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int kvrt_geometry_json(const struct kvrt_geometry_params *params, const char *layout_source, uint64_t budget_bytes,
                       char **out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_geometry_json: out is NULL");
    struct kvrt_geometry g;
    int rc = kvrt_geometry_compute(params, &g);
    if (rc != KVRT_OK)
        return rc;
    const struct kvrt_spec *s = params->spec;
    const struct kvrt_spec_info *in = &g.info;
    int order[KVRT_NUM_AXES];
    kvrt_layout_stride_order(g.layout, order);
    kvrt_clear_error();
    json_t *root = json_object(), *layers = NULL;
    bool ok =
        kvrt_json_put(root, "layout", json_string(kvrt_layout_name(g.layout))) &&
        kvrt_json_put(root, "layout_source", kvrt_json_str(layout_source)) &&
        kvrt_json_put(root, "stride_order", kvrt_json_int_array(order, KVRT_NUM_AXES)) &&
        kvrt_json_put(root, "physical_order", physical_order(order)) &&
        kvrt_json_put(root, "kind", json_string(kvrt_spec_kind_name(s->kind))) &&
        /* A state layer's bytes are opaque: it has no element type. */
        kvrt_json_put(root, "dtype",
                      s->kind == KVRT_SPEC_STATE ? json_null() : json_string(kvrt_dtype_name(s->dtype))) &&
        kvrt_json_put(root, "elem_size", kvrt_json_u64(in->elem_size, "elem_size")) &&
        kvrt_json_put(root, "num_layers", kvrt_json_u64(g.num_layers, "num_layers")) &&
        kvrt_json_put(root, "num_blocks", kvrt_json_u64(g.num_blocks, "num_blocks")) &&
        kvrt_json_put(root, "kernel_block_size", kvrt_json_u64(in->kernel_block_size, "kernel_block_size")) &&
        kvrt_json_put(root, "kernel_blocks_per_block",
                      kvrt_json_u64(in->kernel_blocks_per_block, "kernel_blocks_per_block")) &&
        kvrt_json_put(root, "page_size_bytes", kvrt_json_u64(in->page_size, "page_size_bytes")) &&
        kvrt_json_put(root, "unpadded_page_size_bytes",
                      kvrt_json_u64(in->unpadded_page_size, "unpadded_page_size_bytes")) &&
        kvrt_json_put(root, "shape_bytes", kvrt_json_u64_array(g.shape_bytes, KVRT_NUM_AXES, "shape_bytes")) &&
        kvrt_json_put(root, "strides_bytes", kvrt_json_u64_array(g.strides_bytes, KVRT_NUM_AXES, "strides_bytes")) &&
        kvrt_json_put(root, "total_bytes", kvrt_json_u64(g.total_bytes, "total_bytes")) &&
        kvrt_json_put(root, "layer_stride", kvrt_json_u64(g.layer_stride, "layer_stride")) &&
        kvrt_json_put(root, "block_stride", kvrt_json_u64(g.block_stride, "block_stride")) &&
        kvrt_json_put(root, "budget_bytes", budget_bytes ? kvrt_json_u64(budget_bytes, "budget_bytes") : json_null()) &&
        kvrt_json_put(root, "layers", layers = json_array());
    for (uint64_t l = 0; ok && l < g.num_layers; l++)
        ok = kvrt_json_append(layers, view_json(&g, l));
    if (!ok) {
        json_decref(root);
        root = NULL;
    }
    return kvrt_json_dump(root, "the geometry's JSON", out);
}

static json_t *step_json(const struct kvrt_trace_step *st)
{
    const char *kind = kvrt_trace_kind_name(st->kind);
    json_t *o = json_object();
    bool ok = kvrt_json_put(o, "step", json_string(kind ? kind : "unknown")) &&
              kvrt_json_put(o, "text", kvrt_json_str(st->text));
    if (ok && st->layout != KVRT_TRACE_NO_LAYOUT)
        ok = kvrt_json_put(o, "layout", json_string(kvrt_layout_name((enum kvrt_layout)st->layout)));
    if (ok && st->backend)
        ok = kvrt_json_put(o, "backend", kvrt_json_str(st->backend));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *kvrt_json_trace_steps(const struct kvrt_trace *trace)
{
    json_t *steps = json_array();
    for (size_t i = 0; steps && i < trace->count; i++) {
        struct kvrt_trace_step st;
        if (kvrt_trace_get(trace, i, &st, "kvrt_json_trace_steps") != KVRT_OK ||
            !kvrt_json_append(steps, step_json(&st))) {
            json_decref(steps);
            return NULL;
        }
    }
    return steps;
}

int kvrt_resolver_json(const kvrt_resolver *r, char **out)
{
    enum kvrt_layout chosen;
    if (!r || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_resolver_json: resolver and out must not be NULL");
    if (!kvrt_resolver_last(r, &chosen))
        return kvrt_fail(KVRT_ERR_STATE, "kvrt_resolver_json: the last resolve did not choose a layout (or there "
                                         "was none); call kvrt_resolver_resolve first");
    enum kvrt_layout cands[KVRT_NUM_LAYOUTS];
    size_t n = kvrt_resolver_candidates(r, cands);
    kvrt_clear_error();
    /* The lists are filled once the root holds them, so that one release of
     * the root frees everything on any failure. */
    json_t *root = json_object(), *candidates = NULL, *trace = NULL;
    bool ok = kvrt_json_put(root, "layout", json_string(kvrt_layout_name(chosen))) &&
              kvrt_json_put(root, "candidates", candidates = json_array()) &&
              kvrt_json_put(root, "warning", json_boolean(kvrt_resolver_warned(r))) &&
              kvrt_json_put(root, "env", kvrt_json_str(kvrt_resolver_env(r))) &&
              kvrt_json_put(root, "trace", trace = json_array()) &&
              kvrt_json_put(root, "steps", kvrt_json_trace_steps(kvrt_resolver_steps(r)));
    for (size_t i = 0; ok && i < n; i++)
        ok = kvrt_json_append(candidates, json_string(kvrt_layout_name(cands[i])));
    /* One string per line, as `kvrt resolve` prints the trace. */
    for (const char *p = kvrt_resolver_trace(r); ok && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        ok = kvrt_json_append(trace, kvrt_json_strn(p, len));
        p += len + (nl ? 1 : 0);
    }
    if (!ok) {
        json_decref(root);
        root = NULL;
    }
    return kvrt_json_dump(root, "the resolution's JSON", out);
}
