#include <stdio.h>
#include <stdlib.h>

#include "fixtures.h"
#include "tap.h"

struct kvrt_spec fixture_attention(enum kvrt_dtype dtype, uint64_t block_size, uint64_t num_kv_heads,
                                   uint64_t head_size)
{
    struct kvrt_spec s;
    kvrt_spec_default(&s);
    s.dtype = dtype;
    s.block_size = block_size;
    s.num_kv_heads = num_kv_heads;
    s.head_size = head_size;
    return s;
}

int fixture_placement(enum kvrt_layout layout, const struct kvrt_spec *spec, size_t num_layers, uint64_t num_blocks,
                      kvrt_placement **out)
{
    *out = NULL;
    if (num_layers > FIXTURE_MAX_LAYERS) {
        tap_diag("fixture_placement: %zu layers, at most %d", num_layers, FIXTURE_MAX_LAYERS);
        return KVRT_ERR_INVALID;
    }
    char names[FIXTURE_MAX_LAYERS][8];
    struct kvrt_layer_entry layers[FIXTURE_MAX_LAYERS];
    for (size_t l = 0; l < num_layers; l++) {
        snprintf(names[l], sizeof(names[l]), "l%zu", l);
        layers[l].name = names[l];
        layers[l].spec = *spec;
    }
    struct kvrt_group g = {layers, num_layers};
    int rc = kvrt_placement_create(layout, &g, 1, num_blocks, 0, out);
    if (rc != KVRT_OK)
        tap_diag("placement %s: %s", kvrt_layout_name(layout), kvrt_error_message());
    return rc;
}

kvrt_cache *fixture_cache(kvrt_runtime *rt, const char *backend, enum kvrt_layout layout, const struct kvrt_spec *spec,
                          size_t num_layers, uint64_t num_blocks)
{
    kvrt_backend *b = NULL;
    if (kvrt_runtime_bind(rt, backend, kvrt_layout_name(layout), &b) != KVRT_OK) {
        tap_diag("bind %s %s: %s", backend, kvrt_layout_name(layout), kvrt_error_message());
        return NULL;
    }
    kvrt_placement *p = NULL;
    kvrt_cache *c = NULL;
    if (fixture_placement(layout, spec, num_layers, num_blocks, &p) == KVRT_OK &&
        kvrt_cache_create(b, p, &c) != KVRT_OK)
        tap_diag("cache %s %s: %s", backend, kvrt_layout_name(layout), kvrt_error_message());
    kvrt_placement_destroy(p);
    return c;
}

kvrt_runtime *fixture_runtime(const char *plugin_path, void (*log)(void *, enum kvrt_log_level, const char *))
{
    struct kvrt_runtime_options o;
    kvrt_runtime_options_default(&o);
    o.plugin_path = plugin_path;
    o.search_default_paths = false;
    o.log = log;
    kvrt_runtime *rt = NULL;
    if (kvrt_runtime_open(&o, &rt) != KVRT_OK)
        tap_diag("kvrt_runtime_open: %s", kvrt_error_message());
    return rt;
}

void fixture_test_plugins(const char **dir, const char **cpu_path)
{
    *dir = getenv("KVRT_TEST_PLUGIN_DIR");
    *cpu_path = getenv("KVRT_TEST_CPU_PLUGIN");
    if (!*dir || !*cpu_path)
        tap_skip_all("KVRT_TEST_PLUGIN_DIR / KVRT_TEST_CPU_PLUGIN not set (run through meson test)");
}
