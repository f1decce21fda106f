/*
 * libkvrt's answers as JSON (kvrt_layouts_json, kvrt_geometry_json,
 * kvrt_resolver_json), which the tool prints and the Python package
 * returns: they parse, they say what the structs say, a name that is not
 * UTF-8 arrives as U+FFFD, a number JSON readers cannot take exactly is
 * refused, and a resolver that chose nothing has no answer.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <kvrt/kvrt.h>

#include "fixtures.h"
#include "tap.h"

static json_t *parsed(int rc, char *text, const char *what)
{
    json_t *root = rc == KVRT_OK ? json_loads(text, 0, NULL) : NULL;
    if (!tap_ok(root != NULL, "%s: valid JSON", what))
        tap_diag("  %s: %s", kvrt_status_name(rc), rc == KVRT_OK ? text : kvrt_error_message());
    kvrt_free(text);
    return root;
}

static long long num(const json_t *o, const char *key)
{
    return (long long)json_integer_value(json_object_get(o, key));
}

static void check_layouts(void)
{
    char *text = NULL;
    int rc = kvrt_layouts_json(&text);
    json_t *r = parsed(rc, text, "kvrt_layouts_json");
    const json_t *layouts = json_object_get(r, "layouts"), *bhlnc = json_array_get(layouts, KVRT_LAYOUT_BHLNC);
    tap_ok(json_array_size(layouts) == KVRT_NUM_LAYOUTS &&
               strcmp(json_string_value(json_object_get(bhlnc, "name")), "BHLNC") == 0 &&
               strcmp(json_string_value(json_object_get(bhlnc, "physical_order")), "BHLNC") == 0 &&
               json_is_true(json_object_get(bhlnc, "block_outermost")) &&
               json_is_false(json_object_get(bhlnc, "block_compact")) &&
               strcmp(json_string_value(json_object_get(json_object_get(r, "aliases"), "NHD")), "LBNHC") == 0,
           "the layouts in table order with their properties, and the aliases");
    json_decref(r);
    tap_ok(kvrt_layouts_json(NULL) == KVRT_ERR_INVALID, "NULL out: KVRT_ERR_INVALID");
}

static void check_geometry(void)
{
    struct kvrt_spec spec = fixture_attention(KVRT_DTYPE_BF16, 16, 8, 128);
    struct kvrt_geometry_params p;
    struct kvrt_geometry g;
    kvrt_geometry_params_default(&p);
    p.layout = KVRT_LAYOUT_BLHNC;
    p.spec = &spec;
    p.num_layers = 3;
    p.num_blocks = 10;
    char *text = NULL;
    int rc = kvrt_geometry_json(&p, "--layout", 0, &text);
    json_t *r = parsed(rc, text, "kvrt_geometry_json");
    kvrt_geometry_compute(&p, &g);
    const json_t *layers = json_object_get(r, "layers");
    struct kvrt_view v;
    kvrt_geometry_layer_view(&g, 0, 2, &v);
    tap_ok(num(r, "total_bytes") == (long long)g.total_bytes && num(r, "block_stride") == (long long)g.block_stride &&
               json_array_size(layers) == 3 &&
               num(json_array_get(layers, 2), "offset_bytes") == (long long)v.offset_bytes &&
               strcmp(json_string_value(json_object_get(r, "layout_source")), "--layout") == 0 &&
               json_is_null(json_object_get(r, "budget_bytes")) &&
               strcmp(json_string_value(json_object_get(r, "dtype")), "bf16") == 0,
           "the geometry and every layer's view, as kvrt_geometry_compute has them");
    json_decref(r);

    /* 2^37 blocks of 2^26-byte pages: 2^63 bytes, one past JSON's largest
     * integer (and within 64 bits). */
    spec = fixture_attention(KVRT_DTYPE_FP32, 1u << 16, 64, 2);
    p.num_layers = 1;
    p.num_blocks = (uint64_t)1 << 37;
    text = NULL;
    rc = kvrt_geometry_json(&p, NULL, 0, &text);
    tap_ok(rc == KVRT_ERR_OVERFLOW && strstr(kvrt_error_message(), "total_bytes") &&
               strstr(kvrt_error_message(), "largest JSON integer"),
           "a size past JSON's integers is refused, naming it");
    kvrt_free(text);
    p.num_blocks = 0;
    tap_ok(kvrt_geometry_json(&p, NULL, 0, &text) == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "num_blocks"),
           "a geometry kvrt_geometry_compute refuses: its error");
}

static void check_resolver(void)
{
    kvrt_resolver *r = NULL;
    char *text = NULL;
    const enum kvrt_layout list[2] = {KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_BLHNC};
    kvrt_resolver_create(&r);
    kvrt_resolver_set_env(r, NULL);
    tap_ok(kvrt_resolver_json(r, &text) == KVRT_ERR_STATE, "before a resolve: KVRT_ERR_STATE");
    kvrt_resolver_declare(r, "gpu\xff\xfe", list, 2);
    enum kvrt_layout chosen;
    kvrt_resolver_resolve(r, &chosen);
    int rc = kvrt_resolver_json(r, &text);
    json_t *root = parsed(rc, text, "kvrt_resolver_json");
    const json_t *steps = json_object_get(root, "steps"), *decl = json_array_get(steps, 1);
    tap_ok(strcmp(json_string_value(json_object_get(root, "layout")), "LBHNC") == 0 &&
               json_array_size(json_object_get(root, "candidates")) == 2 &&
               json_is_null(json_object_get(root, "env")) &&
               json_array_size(json_object_get(root, "trace")) == json_array_size(steps) &&
               strcmp(json_string_value(json_object_get(decl, "backend")), "gpu\xef\xbf\xbd\xef\xbf\xbd") == 0,
           "the choice, candidates, trace and steps; a name that is not UTF-8 arrives as U+FFFD");
    json_decref(root);
    tap_ok(kvrt_resolver_json(NULL, &text) == KVRT_ERR_INVALID && kvrt_resolver_json(r, NULL) == KVRT_ERR_INVALID,
           "NULL arguments: KVRT_ERR_INVALID");
    kvrt_resolver_destroy(r);
}

int main(void)
{
    tap_plan_dynamic();
    check_layouts();
    check_geometry();
    check_resolver();
    return tap_done();
}
