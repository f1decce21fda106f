/*
 * NULL arguments to every public function, by the rule in kvrt/common.h:
 * a required output that is NULL is KVRT_ERR_INVALID naming the function;
 * outputs documented as "may be NULL" are skipped; void *_default()
 * functions do nothing; accessors return 0, NULL or false for a NULL
 * handle; destroy/close accept NULL.
 *
 * Every call goes through a macro that records the function's name; the
 * last test points read the public headers (argv[1]) and check that every
 * KVRT_API function was called here, so a new function cannot be missed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/dlpack.h>
#include <kvrt/kvrt.h>
#include <kvrt/parallel.h>

#include "tap.h"

#define MAX_CALLED 256
static const char *called[MAX_CALLED];
static size_t num_called;

static void record(const char *fn)
{
    for (size_t i = 0; i < num_called; i++)
        if (strcmp(called[i], fn) == 0)
            return;
    if (num_called < MAX_CALLED)
        called[num_called++] = fn;
}

/* A required output (or handle) is NULL: KVRT_ERR_INVALID naming fn. */
static void invalid(int rc, const char *fn, const char *what)
{
    record(fn);
    const char *msg = kvrt_error_message();
    if (!tap_ok(rc == KVRT_ERR_INVALID && strstr(msg, fn), "%s(%s) -> KVRT_ERR_INVALID naming it", fn, what))
        tap_diag("  got %s: %s", kvrt_status_name(rc), msg);
}

/* A NULL input (not an output): KVRT_ERR_INVALID with a message. */
static void invalid_input(int rc, const char *fn, const char *what)
{
    record(fn);
    if (!tap_ok(rc == KVRT_ERR_INVALID && *kvrt_error_message(), "%s(%s) -> KVRT_ERR_INVALID", fn, what))
        tap_diag("  got %s: %s", kvrt_status_name(rc), kvrt_error_message());
}

/* No status to check: the call returned (no crash) with `ok` holding. */
static void returns(bool ok, const char *fn, const char *what)
{
    record(fn);
    tap_ok(ok, "%s(%s) returns the neutral value", fn, what);
}

#define INVALID(fn, what, ...) invalid(fn(__VA_ARGS__), #fn, what)
#define INPUT(fn, what, ...) invalid_input(fn(__VA_ARGS__), #fn, what)
#define RETURNS(fn, what, check) (record(#fn), returns((check), #fn, what))
#define VOID_CALL(fn, what, ...) (fn(__VA_ARGS__), returns(true, #fn, what))

static struct kvrt_spec attention(void)
{
    struct kvrt_spec s;
    kvrt_spec_default(&s);
    s.dtype = KVRT_DTYPE_FP32;
    s.block_size = 4;
    s.num_kv_heads = 2;
    s.head_size = 4;
    return s;
}

/* kvrt/model.h. */
static void model_functions(void)
{
    VOID_CALL(kvrt_model_options_default, "NULL", NULL);
    VOID_CALL(kvrt_model_plan_request_default, "NULL", NULL);
    INVALID(kvrt_model_open, "\"config.json\", NULL, NULL", "config.json", NULL, NULL);
    kvrt_model *m = NULL;
    INPUT(kvrt_model_open, "NULL, NULL, out", NULL, NULL, &m);
    INVALID(kvrt_model_parse, "\"{}\", 2, NULL, NULL, NULL", "{}", 2, NULL, NULL, NULL);
    INPUT(kvrt_model_parse, "NULL, 0, NULL, NULL, out", NULL, 0, NULL, NULL, &m);
    struct kvrt_spec spec = attention();
    INVALID(kvrt_model_from_spec, "spec, 1, NULL, NULL", &spec, 1, NULL, NULL);
    INPUT(kvrt_model_from_spec, "NULL, 1, NULL, out", NULL, 1, NULL, &m);
    VOID_CALL(kvrt_model_destroy, "NULL", NULL);
    RETURNS(kvrt_model_get_info, "NULL", kvrt_model_get_info(NULL) == NULL);
    RETURNS(kvrt_model_mixed_shapes, "NULL", kvrt_model_mixed_shapes(NULL) == 0);
    struct kvrt_model_capacity cap;
    INVALID(kvrt_model_vllm_capacity, "NULL, ...", NULL, 1, 1, 1, &cap);
    struct kvrt_model_plan_request req;
    kvrt_model_plan_request_default(&req);
    char *text = NULL;
    INVALID(kvrt_model_plan_json, "NULL, req, out", NULL, &req, &text);
    INVALID(kvrt_model_json, "NULL, out", NULL, &text);
    RETURNS(kvrt_kv_cache_dtype_name, "99", kvrt_kv_cache_dtype_name((enum kvrt_kv_cache_dtype)99) == NULL);
    INVALID(kvrt_kv_cache_dtype_parse, "\"auto\", NULL", "auto", NULL);
    INPUT(kvrt_kv_cache_dtype_parse, "NULL, out", NULL, &(enum kvrt_kv_cache_dtype){0});
    RETURNS(kvrt_attention_backend_name, "99", kvrt_attention_backend_name((enum kvrt_attention_backend)99) == NULL);
    INVALID(kvrt_attention_backend_parse, "\"FLASH_ATTN\", NULL", "FLASH_ATTN", NULL);
    INPUT(kvrt_attention_backend_parse, "NULL, out", NULL, &(enum kvrt_attention_backend){0});
}

/* kvrt/parallel.h. */
static void parallel_functions(void)
{
    INVALID(kvrt_tp_heads, "8, 2, 0, NULL", 8, 2, 0, NULL);
    RETURNS(kvrt_tp_direction_name, "99", kvrt_tp_direction_name((enum kvrt_tp_direction)99) == NULL);
    INVALID(kvrt_tp_direction_parse, "\"pull\", NULL", "pull", NULL);
    INPUT(kvrt_tp_direction_parse, "NULL, out", NULL, &(enum kvrt_tp_direction){0});
    RETURNS(kvrt_tp_direction_valid_names, "", kvrt_tp_direction_valid_names() != NULL);
    INVALID(kvrt_tp_map, "..., NULL count", 8, 2, 0, 2, 0, KVRT_TP_PULL, NULL, 0, NULL);
    INVALID(kvrt_pp_partition_env, "NULL, NULL", NULL, NULL);
    uint64_t v = 0;
    INVALID(kvrt_pp_layers, "8, 2, 0, NULL, count", 8, 2, 0, NULL, &v);
    INVALID(kvrt_pp_layers_partition, "8, 2, 0, NULL, NULL, count", 8, 2, 0, NULL, NULL, &v);
}

static void pure_functions(void)
{
    RETURNS(kvrt_error_message, "", kvrt_error_message() != NULL);
    RETURNS(kvrt_escape_controls, "NULL, 8, \"x\"", kvrt_escape_controls(NULL, 8, "x") == 0);
    char esc[8] = "zzzz";
    RETURNS(kvrt_escape_controls, "buf, 8, NULL", kvrt_escape_controls(esc, sizeof(esc), NULL) == 0 && !esc[0]);
    RETURNS(kvrt_error_report, "INVALID, NULL (clears the message)",
            kvrt_error_report(KVRT_ERR_INVALID, NULL) == KVRT_ERR_INVALID && kvrt_error_message()[0] == '\0');
    RETURNS(kvrt_status_name, "-99", strcmp(kvrt_status_name(-99), "KVRT_ERR_UNKNOWN") == 0);
    VOID_CALL(kvrt_free, "NULL", NULL);
    RETURNS(kvrt_utf8_repair, "NULL, 0, \"x\", 1 (measures)", kvrt_utf8_repair(NULL, 0, "x", 1) == 1);
    RETURNS(kvrt_utf8_repair, "buf, 8, NULL, 3", kvrt_utf8_repair(esc, sizeof(esc), NULL, 3) == 0 && !esc[0]);
    RETURNS(kvrt_version, "", kvrt_version() != NULL);
    RETURNS(kvrt_dtype_size, "-1", kvrt_dtype_size((enum kvrt_dtype) - 1) == 0);
    RETURNS(kvrt_dtype_name, "-1", kvrt_dtype_name((enum kvrt_dtype) - 1) == NULL);
    RETURNS(kvrt_dtype_valid_names, "", kvrt_dtype_valid_names() != NULL);
    RETURNS(kvrt_device_type_name, "-1", kvrt_device_type_name((enum kvrt_device_type) - 1) == NULL);
    RETURNS(kvrt_memory_kind_name, "-1", kvrt_memory_kind_name((enum kvrt_memory_kind) - 1) == NULL);
    INVALID(kvrt_dtype_parse, "\"fp32\", NULL", "fp32", NULL);
    INPUT(kvrt_dtype_parse, "NULL, out", NULL, &(enum kvrt_dtype){0});

    VOID_CALL(kvrt_geometry_params_default, "NULL", NULL);
    VOID_CALL(kvrt_spec_default, "NULL", NULL);
    VOID_CALL(kvrt_runtime_options_default, "NULL", NULL);
    VOID_CALL(kvrt_decode_params_default, "NULL", NULL);

    struct kvrt_spec s = attention();
    struct kvrt_geometry_params gp;
    kvrt_geometry_params_default(&gp);
    gp.layout = KVRT_LAYOUT_LBHNC;
    gp.spec = &s;
    gp.num_layers = 2;
    gp.num_blocks = 4;
    struct kvrt_geometry g;
    INVALID(kvrt_geometry_compute, "params, NULL", &gp, NULL);
    INVALID(kvrt_geometry_compute, "NULL, out", NULL, &g);
    INVALID(kvrt_geometry_json, "params, NULL, 0, NULL", &gp, NULL, 0, NULL);
    if (kvrt_geometry_compute(&gp, &g) != KVRT_OK)
        tap_diag("geometry: %s", kvrt_error_message());
    INVALID(kvrt_geometry_layer_view, "geom, 0, 0, NULL", &g, 0, 0, NULL);
    INVALID(kvrt_geometry_layer_view, "NULL, 0, 0, out", NULL, 0, 0, &(struct kvrt_view){0});

    RETURNS(kvrt_kv_cache_dtype_valid_names, "", kvrt_kv_cache_dtype_valid_names() != NULL);
    RETURNS(kvrt_attention_backend_choices, "", kvrt_attention_backend_choices() != NULL);
    RETURNS(kvrt_layout_valid, "-1", !kvrt_layout_valid(-1));
    RETURNS(kvrt_layout_name, "-1", kvrt_layout_name((enum kvrt_layout) - 1) == NULL);
    INVALID(kvrt_layout_parse, "\"NHD\", NULL", "NHD", NULL);
    INPUT(kvrt_layout_parse, "NULL, out", NULL, &(enum kvrt_layout){0});
    INVALID(kvrt_layout_stride_order, "LBHNC, NULL", KVRT_LAYOUT_LBHNC, NULL);
    INVALID(kvrt_layout_layer_view_order, "LBHNC, NULL", KVRT_LAYOUT_LBHNC, NULL);
    RETURNS(kvrt_layout_layer_compact, "-1", !kvrt_layout_layer_compact((enum kvrt_layout) - 1));
    RETURNS(kvrt_layout_block_outermost, "-1", !kvrt_layout_block_outermost((enum kvrt_layout) - 1));
    RETURNS(kvrt_layout_block_compact, "-1", !kvrt_layout_block_compact((enum kvrt_layout) - 1));
    RETURNS(kvrt_layout_block_contiguous, "-1", !kvrt_layout_block_contiguous((enum kvrt_layout) - 1));
    RETURNS(kvrt_layout_valid_names, "", kvrt_layout_valid_names() != NULL);
    INVALID(kvrt_layouts_json, "NULL", NULL);
    RETURNS(kvrt_layout_default, "", kvrt_layout_valid((int)kvrt_layout_default()));
    INVALID(kvrt_layout_from_env_or_default, "NULL, NULL", NULL, NULL);
    INVALID(kvrt_layout_from_env, "NULL, out", NULL, &(enum kvrt_layout){0});
    INVALID(kvrt_layout_from_env, "is_set, NULL", &(bool){false}, NULL);
    INVALID(kvrt_layout_choose, "NULL, NULL, source", NULL, NULL, &(enum kvrt_setting_source){KVRT_SOURCE_DEFAULT});

    RETURNS(kvrt_setting_variable, "-1", kvrt_setting_variable((enum kvrt_setting) - 1) == NULL);
    RETURNS(kvrt_setting_summary, "-1", kvrt_setting_summary((enum kvrt_setting) - 1) == NULL);
    RETURNS(kvrt_setting_source_name, "-1", kvrt_setting_source_name((enum kvrt_setting_source) - 1) == NULL);
    RETURNS(kvrt_setting_get, "LAYOUT, NULL, NULL, NULL (may be NULL)",
            kvrt_setting_get(KVRT_SETTING_LAYOUT, NULL, NULL, NULL) == KVRT_OK);
    RETURNS(kvrt_setting_origin, "-1, DEFAULT, NULL",
            kvrt_setting_origin((enum kvrt_setting) - 1, KVRT_SOURCE_DEFAULT, NULL) == NULL);

    INVALID(kvrt_spec_derive, "spec, 0, NULL", &s, 0, NULL);
    INVALID(kvrt_spec_derive, "NULL, 0, out", NULL, 0, &(struct kvrt_spec_info){0});
    RETURNS(kvrt_spec_equal, "NULL, NULL", kvrt_spec_equal(NULL, NULL) == 0 || kvrt_spec_equal(NULL, NULL) == 1);
    RETURNS(kvrt_spec_kind_name, "-1", kvrt_spec_kind_name((enum kvrt_spec_kind) - 1) == NULL);
    RETURNS(kvrt_spec_kind_valid_names, "", kvrt_spec_kind_valid_names() != NULL);
    INVALID(kvrt_spec_apply_defaults, "NULL", NULL);
    INVALID(kvrt_spec_kind_parse, "\"mla\", NULL", "mla", NULL);
    INPUT(kvrt_spec_kind_parse, "NULL, out", NULL, &(enum kvrt_spec_kind){0});
}

static kvrt_placement *placement(void)
{
    struct kvrt_layer_entry layers[2] = {{"l0", attention()}, {"l1", attention()}};
    struct kvrt_group grp = {layers, 2};
    INVALID(kvrt_placement_create, "..., NULL", KVRT_LAYOUT_LBHNC, &grp, 1, 4, 0, NULL);
    INVALID(kvrt_placement_blocks_for_budget, "..., NULL", KVRT_LAYOUT_LBHNC, &grp, 1, 1 << 20, NULL);
    INVALID(kvrt_placement_mixed_shapes, "&grp, 1, NULL", &grp, 1, NULL);
    kvrt_placement *p = NULL;
    if (kvrt_placement_create(KVRT_LAYOUT_LBHNC, &grp, 1, 4, 0, &p) != KVRT_OK)
        tap_diag("placement: %s", kvrt_error_message());
    return p;
}

static void placement_functions(const kvrt_placement *p)
{
    VOID_CALL(kvrt_placement_destroy, "NULL", NULL);
    RETURNS(kvrt_placement_layout, "NULL", kvrt_layout_valid((int)kvrt_placement_layout(NULL)));
    RETURNS(kvrt_placement_bytes_per_block, "NULL", kvrt_placement_bytes_per_block(NULL) == 0);
    RETURNS(kvrt_placement_size, "NULL", kvrt_placement_size(NULL) == 0);
    RETURNS(kvrt_placement_num_blocks, "NULL", kvrt_placement_num_blocks(NULL) == 0);
    RETURNS(kvrt_placement_num_sets, "NULL", kvrt_placement_num_sets(NULL) == 0);
    RETURNS(kvrt_placement_num_groups, "NULL", kvrt_placement_num_groups(NULL) == 0);
    INVALID(kvrt_placement_get_set, "p, 0, NULL", p, 0, NULL);
    INVALID(kvrt_placement_get_set, "NULL, 0, out", NULL, 0, &(struct kvrt_placement_set){0});
    INVALID(kvrt_placement_layer_view, "p, 0, 0, NULL", p, 0, 0, NULL);
    INVALID(kvrt_placement_layer_view, "NULL, 0, 0, out", NULL, 0, 0, &(struct kvrt_view){0});
    INVALID(kvrt_placement_find_layer, "p, \"l1\", NULL, layer", p, "l1", NULL, &(uint64_t){0});
    INVALID(kvrt_placement_find_layer, "p, \"l1\", set, NULL", p, "l1", &(size_t){0}, NULL);
    INVALID(kvrt_placement_staging_layer, "p, 0, NULL, bytes", p, 0, NULL, &(uint64_t){0});
    INVALID(kvrt_placement_staging_layer, "NULL, 0, offset, bytes", NULL, 0, &(uint64_t){0}, &(uint64_t){0});
    INVALID(kvrt_placement_staging_bytes, "p, NULL", p, NULL);
    INVALID(kvrt_placement_staging_bytes, "NULL, bytes", NULL, &(uint64_t){0});
    const uint64_t ids[1] = {0};
    INVALID(kvrt_transfer_regions, "p, ids, 1, NULL, n", p, ids, 1, NULL, &(size_t){0});
    struct kvrt_region *regions = NULL;
    INVALID(kvrt_transfer_regions, "p, ids, 1, regions, NULL", p, ids, 1, &regions, NULL);
}

static void resolver_functions(void)
{
    INVALID(kvrt_resolver_create, "NULL", NULL);
    VOID_CALL(kvrt_resolver_destroy, "NULL", NULL);
    kvrt_resolver *r = NULL;
    if (kvrt_resolver_create(&r) != KVRT_OK)
        tap_diag("resolver: %s", kvrt_error_message());
    const enum kvrt_layout list[1] = {KVRT_LAYOUT_LBHNC};
    INVALID(kvrt_resolver_declare, "NULL, ...", NULL, "x", list, 1);
    INVALID(kvrt_resolver_declare_any, "NULL, ...", NULL, "x");
    INVALID(kvrt_resolver_set_mixed_shapes, "NULL, false", NULL, false);
    INVALID(kvrt_resolver_set_groups, "NULL, ...", NULL, NULL, 0);
    INPUT(kvrt_resolver_set_groups, "r, NULL, 0", r, NULL, 0);
    INVALID(kvrt_resolver_set_env, "NULL, ...", NULL, "NHD");
    INVALID(kvrt_resolver_set_preference, "NULL, ...", NULL, "NHD", "test");
    INVALID(kvrt_resolver_resolve, "r, NULL", r, NULL);
    INVALID(kvrt_resolver_json, "r, NULL", r, NULL);
    enum kvrt_layout chosen;
    kvrt_resolver_declare(r, "x", list, 1);
    if (kvrt_resolver_resolve(r, &chosen) != KVRT_OK)
        tap_diag("resolve: %s", kvrt_error_message());
    RETURNS(kvrt_resolver_candidates, "r, NULL (may be NULL)", kvrt_resolver_candidates(r, NULL) == 1);
    RETURNS(kvrt_resolver_candidates, "NULL, NULL", kvrt_resolver_candidates(NULL, NULL) == 0);
    RETURNS(kvrt_resolver_warned, "NULL", !kvrt_resolver_warned(NULL));
    RETURNS(kvrt_resolver_recorded, "r, NULL (may be NULL)", kvrt_resolver_recorded(r, NULL));
    RETURNS(kvrt_resolver_trace, "NULL", kvrt_resolver_trace(NULL) != NULL);
    RETURNS(kvrt_resolver_num_trace_steps, "NULL", kvrt_resolver_num_trace_steps(NULL) == 0);
    struct kvrt_trace_step step;
    INVALID(kvrt_resolver_trace_step, "NULL, 0, step", NULL, 0, &step);
    INVALID(kvrt_resolver_trace_step, "r, 0, NULL", r, 0, NULL);
    RETURNS(kvrt_trace_kind_name, "-1 (not a kind)", kvrt_trace_kind_name((enum kvrt_trace_kind) - 1) == NULL);
    kvrt_resolver_destroy(r);
}

static void runtime_functions(const char *plugin, const kvrt_placement *p)
{
    INVALID(kvrt_runtime_open, "options, NULL", NULL, NULL);
    VOID_CALL(kvrt_runtime_close, "NULL", NULL);
    struct kvrt_runtime_options o;
    kvrt_runtime_options_default(&o);
    o.plugin_path = plugin;
    o.search_default_paths = false;
    kvrt_runtime *rt = NULL;
    if (!tap_ok(kvrt_runtime_open(&o, &rt) == KVRT_OK, "runtime opens with the fault plugin"))
        return;
    RETURNS(kvrt_runtime_num_plugins, "NULL", kvrt_runtime_num_plugins(NULL) == 0);
    INVALID(kvrt_runtime_plugin_info, "rt, 0, NULL", rt, 0, NULL);
    RETURNS(kvrt_runtime_find_plugin, "rt, \"fault\", NULL (may be NULL)",
            kvrt_runtime_find_plugin(rt, "fault", NULL) == KVRT_OK);
    INVALID(kvrt_runtime_find_plugin, "NULL, \"fault\", index", NULL, "fault", &(size_t){0});
    RETURNS(kvrt_runtime_plugin_admits, "NULL", !kvrt_runtime_plugin_admits(NULL, 0, KVRT_LAYOUT_LBHNC));
    RETURNS(kvrt_runtime_num_skipped, "NULL", kvrt_runtime_num_skipped(NULL) == 0);
    INVALID(kvrt_runtime_skipped, "NULL, 0, NULL, NULL", NULL, 0, NULL, NULL);
    INVALID(kvrt_runtime_default_backend, "rt, NULL", rt, NULL);
    INVALID(kvrt_runtime_choose_backend, "rt, NULL, NULL, NULL", rt, NULL, NULL, NULL);
    RETURNS(kvrt_runtime_backend_priority, "", strstr(kvrt_runtime_backend_priority(), "cpu") != NULL);
    const char *one[1] = {"fault"};
    INVALID(kvrt_runtime_resolve, "rt, ..., NULL", rt, one, 1, false, NULL, NULL);
    INVALID(kvrt_runtime_resolve_groups, "rt, ..., NULL groups", rt, one, 1, NULL, 0, NULL, &(enum kvrt_layout){0});
    RETURNS(kvrt_runtime_trace, "NULL", kvrt_runtime_trace(NULL) != NULL);
    RETURNS(kvrt_runtime_num_trace_steps, "NULL", kvrt_runtime_num_trace_steps(NULL) == 0);
    struct kvrt_trace_step step;
    INVALID(kvrt_runtime_trace_step, "NULL, 0, step", NULL, 0, &step);
    INVALID(kvrt_runtime_trace_step, "rt, 0, NULL", rt, 0, NULL);
    INVALID(kvrt_runtime_trace_json, "rt, NULL", rt, NULL);
    INVALID(kvrt_runtime_bind, "rt, \"fault\", \"LBHNC\", NULL", rt, "fault", "LBHNC", NULL);
    INVALID(kvrt_runtime_bind_layout, "rt, \"fault\", LBHNC, NULL", rt, "fault", KVRT_LAYOUT_LBHNC, NULL);

    RETURNS(kvrt_backend_name, "NULL", kvrt_backend_name(NULL) == NULL);
    RETURNS(kvrt_backend_layout, "NULL", kvrt_layout_valid((int)kvrt_backend_layout(NULL)));
    RETURNS(kvrt_backend_supports_dtype, "NULL", !kvrt_backend_supports_dtype(NULL, KVRT_DTYPE_FP32));
    RETURNS(kvrt_backend_ops, "NULL", kvrt_backend_ops(NULL) == 0);
    INVALID(kvrt_backend_device_info, "NULL, out", NULL, &(struct kvrt_device_info){0});

    kvrt_backend *b = NULL;
    if (!tap_ok(kvrt_runtime_bind(rt, "fault", "LBHNC", &b) == KVRT_OK, "fault backend bound")) {
        kvrt_runtime_close(rt);
        return;
    }
    INVALID(kvrt_buffer_create, "b, 64, NULL", b, 64, NULL);
    VOID_CALL(kvrt_buffer_destroy, "NULL", NULL);
    RETURNS(kvrt_buffer_size, "NULL", kvrt_buffer_size(NULL) == 0);
    kvrt_buffer *buf = NULL;
    kvrt_buffer_create(b, 64, &buf);
    INVALID(kvrt_backend_device_info, "b, NULL", b, NULL);
    INVALID(kvrt_buffer_address, "buf, NULL, NULL", buf, NULL, NULL);
    INVALID(kvrt_backend_copy_bandwidth, "b, 64, NULL", b, 64, NULL);
    INVALID(kvrt_buffer_upload, "NULL, ...", NULL, 0, "x", 1);
    INVALID(kvrt_buffer_download, "buf, 0, NULL, 8", buf, 0, NULL, 8);
    INVALID(kvrt_buffer_zero, "NULL, 0, 8", NULL, 0, 8);

    INVALID(kvrt_cache_create, "b, p, NULL", b, p, NULL);
    VOID_CALL(kvrt_cache_destroy, "NULL", NULL);
    RETURNS(kvrt_cache_buffer, "NULL", kvrt_cache_buffer(NULL) == NULL);
    RETURNS(kvrt_cache_placement, "NULL", kvrt_cache_placement(NULL) == NULL);
    RETURNS(kvrt_cache_num_layers, "NULL", kvrt_cache_num_layers(NULL) == 0);
    kvrt_cache *c = NULL;
    if (kvrt_cache_create(b, p, &c) != KVRT_OK)
        tap_diag("cache: %s", kvrt_error_message());
    INVALID(kvrt_cache_layer_index, "c, \"l1\", NULL", c, "l1", NULL);
    INVALID(kvrt_cache_staging_bytes, "c, 1, NULL", c, 1, NULL);
    int64_t slot = 0;
    INVALID(kvrt_cache_write, "NULL, ...", NULL, 0, 1, &slot, buf, 0, buf, 0);
    /* read's outputs are its buffers: NULL K is refused before any work. */
    INVALID(kvrt_cache_read, "c, 0, 1, slots, NULL, ...", c, 0, 1, &slot, NULL, 0, buf, 0);
    INVALID(kvrt_cache_copy_blocks, "NULL, ...", NULL, 1, (int64_t[]){0, 1});
    INVALID(kvrt_cache_gather, "NULL, 1, ids, NULL, 0", NULL, 1, (int64_t[]){0}, NULL, 0);
    INVALID(kvrt_cache_scatter, "NULL, ...", NULL, 1, (int64_t[]){0}, buf, 0);
    INVALID(kvrt_cache_decode, "c, 0, NULL", c, 0, NULL);
    INVALID(kvrt_cache_retain, "NULL", NULL);
    VOID_CALL(kvrt_cache_release, "NULL", NULL);
    VOID_CALL(kvrt_memory_default, "NULL", NULL);
    struct kvrt_memory m;
    kvrt_memory_default(&m);
    INVALID(kvrt_cache_wrap, "b, p, m, NULL", b, p, &m, NULL);
    INVALID(kvrt_cache_wrap, "b, p, NULL, out", b, p, NULL, &(kvrt_cache *){NULL});
    RETURNS(kvrt_cache_is_wrapped, "NULL", !kvrt_cache_is_wrapped(NULL));

    DLManagedTensor *t = NULL;
    INVALID(kvrt_cache_export_layer, "NULL, 0, ALL, out", NULL, 0, KVRT_VIEW_ALL, &t);
    INVALID(kvrt_cache_export_layers, "NULL, ALL, out", NULL, KVRT_VIEW_ALL, &t);
    INVALID(kvrt_cache_from_dlpack, "b, p, NULL, out", b, p, NULL, &(kvrt_cache *){NULL});
    RETURNS(kvrt_dlpack_live_tensors, "", kvrt_dlpack_live_tensors() == 0);
    VOID_CALL(kvrt_dlpack_capsule_destructor, "NULL", NULL);
    kvrt_runtime_close(rt);
}

/* Every KVRT_API function named in the public headers was called above. */
static void check_coverage(const char *include_dir, char **headers, size_t num_headers)
{
    size_t seen = 0, missing = 0;
    for (size_t h = 0; h < num_headers; h++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/kvrt/%s", include_dir, headers[h]);
        FILE *f = fopen(path, "r");
        if (!f) {
            tap_ok(false, "public header %s readable", path);
            continue;
        }
        char line[512];
        while (fgets(line, sizeof(line), f)) {
            if (strncmp(line, "KVRT_API ", 9) != 0)
                continue;
            /* The name is the identifier just before the first '('. */
            char *paren = strchr(line, '(');
            if (!paren)
                continue;
            *paren = '\0';
            char *name = paren;
            while (name > line &&
                   (name[-1] == '_' || (name[-1] >= 'a' && name[-1] <= 'z') || (name[-1] >= '0' && name[-1] <= '9')))
                name--;
            seen++;
            bool found = false;
            for (size_t i = 0; i < num_called && !found; i++)
                found = strcmp(called[i], name) == 0;
            if (!found) {
                missing++;
                tap_diag("  %s (kvrt/%s) is not called by this test", name, headers[h]);
            }
        }
        fclose(f);
    }
    tap_ok(seen > 80 && missing == 0, "all %zu public functions are called with NULL arguments (%zu missing)", seen,
           missing);
}

int main(int argc, char **argv)
{
    const char *plugin = getenv("KVRT_TEST_FAULT_PLUGIN");
    if (argc < 3 || !plugin)
        tap_skip_all("needs the include folder and the public headers as arguments, and KVRT_TEST_FAULT_PLUGIN; "
                     "run through meson test");
    tap_plan_dynamic();
    pure_functions();
    model_functions();
    parallel_functions();
    kvrt_placement *p = placement();
    placement_functions(p);
    resolver_functions();
    runtime_functions(plugin, p);
    kvrt_placement_destroy(p);
    check_coverage(argv[1], argv + 2, (size_t)argc - 2);
    return tap_done();
}
