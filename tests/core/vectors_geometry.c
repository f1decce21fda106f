/*
 * geometry.json: every case through kvrt_geometry_compute and through a
 * single-group placement (the "natural" placement the vectors describe), and
 * every error case through both.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_vectors.h"
#include "tap.h"

struct vcase {
    const char *id;
    enum kvrt_layout layout;
    uint64_t num_layers, num_blocks, kernel_block_size;
    struct kvrt_spec spec;
};

static bool read_case(const json_t *c, struct vcase *vc)
{
    const char *why = NULL;
    vc->id = json_string_value(json_object_get(c, "id"));
    if (!vc->id)
        vc->id = "?";
    const char *layout = json_string_value(json_object_get(c, "layout"));
    if (!layout || kvrt_layout_parse(layout, &vc->layout) != KVRT_OK || !cv_u64(c, "num_layers", &vc->num_layers) ||
        !cv_u64(c, "num_blocks", &vc->num_blocks) || !cv_u64(c, "kernel_block_size", &vc->kernel_block_size) ||
        !cv_spec(json_object_get(c, "spec"), &vc->spec, &why)) {
        tap_ok(false, "%s: case is readable", vc->id);
        if (why)
            tap_diag("  %s", why);
        return false;
    }
    if (vc->kernel_block_size == KVRT_UNSET)
        vc->kernel_block_size = 0;
    return true;
}

static bool check_view(const char *id, const char *route, uint64_t l, const struct kvrt_view *v, const json_t *want)
{
    uint64_t off;
    bool ok = cv_u64(want, "offset_bytes", &off) && off == v->offset_bytes;
    if (!ok)
        tap_diag("  offset got %llu", (unsigned long long)v->offset_bytes);
    ok = cv_eq_array(json_object_get(want, "shape"), v->shape, 4) && ok;
    ok = cv_eq_array(json_object_get(want, "strides"), v->strides, 4) && ok;
    /* The byte pair must agree with the element pair. */
    for (int i = 0; i < 3; i++)
        ok = ok && v->strides_bytes[i] == v->strides[i] * v->elem_size && v->shape_bytes[i] == v->shape[i];
    ok = ok && v->shape_bytes[3] == v->shape[3] * v->elem_size;
    return tap_ok(ok, "%s: %s view of layer %llu", id, route, (unsigned long long)l);
}

static void check_geometry(const struct vcase *vc, const json_t *expect)
{
    struct kvrt_geometry_params gp;
    struct kvrt_geometry g;
    uint64_t v;

    kvrt_geometry_params_default(&gp);
    gp.layout = vc->layout;
    gp.spec = &vc->spec;
    gp.num_layers = vc->num_layers;
    gp.num_blocks = vc->num_blocks;
    gp.kernel_block_size = vc->kernel_block_size;
    int rc = kvrt_geometry_compute(&gp, &g);
    if (!tap_ok(rc == KVRT_OK, "%s: geometry computes", vc->id)) {
        tap_diag("  %s: %s", kvrt_status_name(rc), kvrt_error_message());
        return;
    }
    tap_ok(cv_u64(expect, "page_size_bytes", &v) && v == g.info.page_size, "%s: page size %llu", vc->id,
           (unsigned long long)g.info.page_size);
    tap_ok(cv_eq_array(json_object_get(expect, "shape_bytes"), g.shape_bytes, KVRT_NUM_AXES), "%s: shape_bytes",
           vc->id);
    tap_ok(cv_eq_array(json_object_get(expect, "strides_bytes"), g.strides_bytes, KVRT_NUM_AXES), "%s: strides_bytes",
           vc->id);
    TAP_EQ_U64(g.total_bytes, json_integer_value(json_object_get(expect, "total_bytes")), "%s: total_bytes", vc->id);
    TAP_EQ_U64(g.layer_stride, json_integer_value(json_object_get(expect, "layer_stride")), "%s: layer_stride", vc->id);
    TAP_EQ_U64(g.block_stride, json_integer_value(json_object_get(expect, "block_stride")), "%s: block_stride", vc->id);
    const json_t *layers = json_object_get(expect, "layers");
    tap_ok(json_array_size(layers) == vc->num_layers, "%s: one expected view per layer", vc->id);
    for (uint64_t l = 0; l < json_array_size(layers); l++) {
        struct kvrt_view view;
        rc = kvrt_geometry_layer_view(&g, 0, l, &view);
        if (!tap_ok(rc == KVRT_OK, "%s: geometry view of layer %llu", vc->id, (unsigned long long)l)) {
            tap_diag("  %s", kvrt_error_message());
            continue;
        }
        check_view(vc->id, "geometry", l, &view, json_array_get(layers, l));
    }
}

/* The same case as one group of identical layers. */
static int place(const struct vcase *vc, kvrt_placement **p)
{
    struct kvrt_layer_entry *layers = calloc(vc->num_layers, sizeof(*layers));
    char(*names)[32] = calloc(vc->num_layers, sizeof(*names));
    int rc = KVRT_ERR_NOMEM;
    if (layers && names) {
        for (uint64_t l = 0; l < vc->num_layers; l++) {
            snprintf(names[l], sizeof(names[l]), "layer.%llu", (unsigned long long)l);
            layers[l].name = names[l];
            layers[l].spec = vc->spec;
        }
        struct kvrt_group group = {layers, vc->num_layers};
        rc = kvrt_placement_create(vc->layout, &group, 1, vc->num_blocks, vc->kernel_block_size, p);
    }
    free(layers);
    free(names);
    return rc;
}

static void check_placement(const struct vcase *vc, const json_t *expect)
{
    kvrt_placement *p = NULL;
    struct kvrt_placement_set set;
    int rc = place(vc, &p);
    if (!tap_ok(rc == KVRT_OK, "%s: single-group placement", vc->id)) {
        tap_diag("  %s: %s", kvrt_status_name(rc), kvrt_error_message());
        return;
    }
    bool ok = kvrt_placement_num_sets(p) == 1 && kvrt_placement_get_set(p, 0, &set) == KVRT_OK;
    tap_ok(ok && set.offset == 0 && set.num_layers == vc->num_layers &&
               (int64_t)set.layer_stride == json_integer_value(json_object_get(expect, "layer_stride")) &&
               (int64_t)set.block_stride == json_integer_value(json_object_get(expect, "block_stride")) &&
               (int64_t)kvrt_placement_size(p) == json_integer_value(json_object_get(expect, "total_bytes")),
           "%s: placement has one set with the expected strides and size", vc->id);
    const json_t *layers = json_object_get(expect, "layers");
    for (uint64_t l = 0; ok && l < json_array_size(layers); l++) {
        struct kvrt_view view;
        rc = kvrt_placement_layer_view(p, 0, l, &view);
        if (!tap_ok(rc == KVRT_OK, "%s: placement view of layer %llu", vc->id, (unsigned long long)l))
            continue;
        check_view(vc->id, "placement", l, &view, json_array_get(layers, l));
    }
    kvrt_placement_destroy(p);
}

static void check_error(const struct vcase *vc, const json_t *c)
{
    struct kvrt_geometry_params gp;
    struct kvrt_geometry g;
    const json_t *mentions = json_object_get(c, "expect_error_mentions");

    kvrt_geometry_params_default(&gp);
    gp.layout = vc->layout;
    gp.spec = &vc->spec;
    gp.num_layers = vc->num_layers;
    gp.num_blocks = vc->num_blocks;
    gp.kernel_block_size = vc->kernel_block_size;
    int rc = kvrt_geometry_compute(&gp, &g);
    tap_ok(rc != KVRT_OK && *kvrt_error_message(), "%s: geometry refuses (%s)", vc->id, kvrt_status_name(rc));
    tap_diag("  %s", kvrt_error_message());
    tap_ok(cv_mentions(mentions, kvrt_error_message()), "%s: geometry message names the cause", vc->id);

    kvrt_placement *p = NULL;
    rc = place(vc, &p);
    tap_ok(rc != KVRT_OK && p == NULL, "%s: placement refuses (%s)", vc->id, kvrt_status_name(rc));
    tap_ok(cv_mentions(mentions, kvrt_error_message()), "%s: placement message names the cause", vc->id);
    kvrt_placement_destroy(p);
}

int main(int argc, char **argv)
{
    size_t i;
    json_t *c;
    tap_plan_dynamic();
    json_t *root = cv_load(argc, argv, "geometry.json");
    if (!root)
        return 1;
    json_array_foreach(json_object_get(root, "cases"), i, c)
    {
        struct vcase vc;
        if (!read_case(c, &vc))
            continue;
        check_geometry(&vc, json_object_get(c, "expect"));
        check_placement(&vc, json_object_get(c, "expect"));
    }
    json_array_foreach(json_object_get(root, "errors"), i, c)
    {
        struct vcase vc;
        if (read_case(c, &vc))
            check_error(&vc, c);
    }
    tap_ok(json_array_size(json_object_get(root, "cases")) > 0 && json_array_size(json_object_get(root, "errors")) > 0,
           "geometry.json has cases and error cases");
    json_decref(root);
    return tap_done();
}
