/*
 * The suite for one plugin: its declaration, then every layout it declares
 * x every element type it declares x every shape the layout can hold.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

bool conf_has_op(const struct conf_case *cs, uint32_t op)
{
    return (cs->plugin->info.ops & op) != 0;
}

kvrt_backend *conf_bind(struct conf_plugin *p, enum kvrt_layout layout)
{
    if (!p->bind_tried[layout]) {
        p->bind_tried[layout] = true;
        int status = kvrt_runtime_bind(p->rt, p->info.name, kvrt_layout_name(layout), &p->bound[layout]);
        if (status != KVRT_OK) {
            conf_diag_status("kvrt_runtime_bind", status);
            p->bound[layout] = NULL;
        }
    }
    return p->bound[layout];
}

/* A binding of some other plugin with a device, for "buffer from another
 * backend".  Host-memory backends first: they bind instantly. */
void conf_find_foreign(struct conf_plugin *p)
{
    static const char *const cheap[] = {"cpu", "template"};
    size_t n = kvrt_runtime_num_plugins(p->rt);
    snprintf(p->foreign_why, sizeof(p->foreign_why), "no other backend with a device is loaded");
    for (int pass = 0; pass < 2 && !p->foreign; pass++) {
        for (size_t i = 0; i < n && !p->foreign; i++) {
            struct kvrt_plugin_info info;
            if (kvrt_runtime_plugin_info(p->rt, i, &info) != KVRT_OK || strcmp(info.name, p->info.name) == 0 ||
                !info.available)
                continue;
            bool is_cheap = strcmp(info.name, cheap[0]) == 0 || strcmp(info.name, cheap[1]) == 0;
            if (is_cheap != (pass == 0))
                continue;
            enum kvrt_layout l = info.any_layout ? KVRT_LAYOUT_LBNHC : info.layouts[0];
            if (kvrt_runtime_bind(p->rt, info.name, kvrt_layout_name(l), &p->foreign) != KVRT_OK)
                p->foreign = NULL;
        }
    }
}

static void check_declaration(struct conf_plugin *p)
{
    const char *name = p->info.name;
    enum kvrt_layout missing = KVRT_LAYOUT_LBHNC;
    bool has_missing = false;
    for (int l = 0; l < KVRT_NUM_LAYOUTS && !has_missing; l++) {
        bool declared = false;
        for (size_t i = 0; i < p->num_layouts; i++)
            declared |= p->layouts[i] == (enum kvrt_layout)l;
        if (!declared) {
            missing = (enum kvrt_layout)l;
            has_missing = true;
        }
    }
    if (!has_missing) {
        tap_skip("%s: refusal of an undeclared layout: it declares every layout", name);
    } else {
        kvrt_backend *b = NULL;
        int status = kvrt_runtime_bind(p->rt, name, kvrt_layout_name(missing), &b);
        const char *msg = kvrt_error_message();
        bool named = strstr(msg, kvrt_layout_name(missing)) && strstr(msg, name);
        if (status != KVRT_ERR_REFUSED || !named)
            tap_diag("  returned %s: \"%s\"", kvrt_status_name(status), msg);
        tap_ok(status == KVRT_ERR_REFUSED && named && !b,
               "%s: binding undeclared layout %s is refused by name (KVRT_ERR_REFUSED)", name,
               kvrt_layout_name(missing));
    }

    int missing_type = -1;
    for (int t = 0; t < KVRT_NUM_DTYPES && missing_type < 0; t++)
        if (!(p->info.dtypes & (1u << t)))
            missing_type = t;
    kvrt_backend *b = conf_bind(p, p->layouts[0]);
    kvrt_placement *pl = NULL;
    if (missing_type < 0) {
        tap_skip("%s: refusal of an undeclared element type: it declares every type", name);
    } else if (!b ||
               conf_placement(CONF_SHAPE_BASIC, p->layouts[0], (enum kvrt_dtype)missing_type, false, &pl) != KVRT_OK) {
        tap_ok(false, "%s: refusal of undeclared element type %s: bind and placement", name,
               kvrt_dtype_name((enum kvrt_dtype)missing_type));
    } else {
        kvrt_cache *c = NULL;
        int status = kvrt_cache_create(b, pl, &c);
        const char *msg = kvrt_error_message();
        bool named = strstr(msg, kvrt_dtype_name((enum kvrt_dtype)missing_type)) != NULL;
        if (status != KVRT_ERR_UNSUPPORTED || !named)
            tap_diag("  returned %s: \"%s\"", kvrt_status_name(status), msg);
        tap_ok(status == KVRT_ERR_UNSUPPORTED && named && !c,
               "%s: a cache of undeclared element type %s is refused (KVRT_ERR_UNSUPPORTED)", name,
               kvrt_dtype_name((enum kvrt_dtype)missing_type));
        kvrt_cache_destroy(c);
    }
    kvrt_placement_destroy(pl);
}

/* wrapped: the cache is over caller memory (kvrt_cache_wrap) instead of
 * allocated, and must behave byte for byte the same. */
static void run_case(struct conf_plugin *p, kvrt_backend *b, enum kvrt_layout layout, enum kvrt_dtype dtype,
                     enum conf_shape shape, bool wrapped)
{
    struct conf_case cs;
    memset(&cs, 0, sizeof(cs));
    cs.plugin = p;
    cs.backend = b;
    cs.layout = layout;
    cs.dtype = dtype;
    cs.shape = shape;
    snprintf(cs.label, sizeof(cs.label), "%s %s %s %s%s", p->info.name, kvrt_layout_name(layout),
             kvrt_dtype_name(dtype), conf_shape_name(shape), wrapped ? " wrapped" : "");

    kvrt_placement *pl = NULL;
    int status = conf_placement(shape, layout, dtype, true, &pl);
    if (status == KVRT_OK && shape == CONF_SHAPE_BASIC && !wrapped) {
        /* Create and destroy once before the cache under test: destroy must
         * leave the backend usable. */
        kvrt_cache *scratch = NULL;
        status = kvrt_cache_create(b, pl, &scratch);
        kvrt_cache_destroy(scratch);
    }
    if (status == KVRT_OK)
        status = wrapped ? conf_cache_open_wrapped(p, b, pl, &cs.cache) : conf_cache_open(b, pl, &cs.cache);
    kvrt_placement_destroy(pl);
    if (status != KVRT_OK) {
        conf_diag_status("placement and cache", status);
        tap_ok(false, "%s: cache created", cs.label);
        free(cs.cache.memory);
        return;
    }
    if (wrapped)
        tap_ok(conf_cache_matches(&cs.cache) && kvrt_buffer_size(kvrt_cache_buffer(cs.cache.cache)) == cs.cache.bytes,
               "%s: cache of %llu bytes over zeroed caller memory", cs.label, (unsigned long long)cs.cache.bytes);
    else
        tap_ok(conf_cache_matches(&cs.cache) && kvrt_buffer_size(kvrt_cache_buffer(cs.cache.cache)) == cs.cache.bytes,
               "%s: cache of %llu bytes created (after a create/destroy) and zeroed", cs.label,
               (unsigned long long)cs.cache.bytes);

    void (*const checks[])(struct conf_case *) = {
        conf_check_tokens,  conf_fill_cache,   conf_check_copy,
        conf_check_staging, conf_check_decode, shape == CONF_SHAPE_BASIC ? conf_check_errors : NULL,
    };
    for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
        int failures = tap_failures();
        if (checks[i])
            checks[i](&cs);
        if (tap_failures() != failures)
            conf_cache_resync(&cs.cache);
    }
    conf_cache_close(&cs.cache);
    struct conf_memory *m = cs.cache.memory;
    if (m)
        tap_ok(m->released == 1 && m->address_seen,
               "%s: destroying the cache ran the release callback once, with the memory's address (%d runs)", cs.label,
               m->released);
    free(m);
}

static void describe(const struct conf_plugin *p)
{
    char layouts[128] = "", types[128] = "", ops[128] = "";
    static const char *const op_names[] = {"write", "read", "copy_blocks", "gather", "scatter", "decode"};
    for (size_t i = 0; i < p->num_layouts; i++)
        snprintf(layouts + strlen(layouts), sizeof(layouts) - strlen(layouts), "%s%s", i ? " " : "",
                 kvrt_layout_name(p->layouts[i]));
    for (int t = 0; t < KVRT_NUM_DTYPES; t++)
        if (p->info.dtypes & (1u << t))
            snprintf(types + strlen(types), sizeof(types) - strlen(types), "%s%s", *types ? " " : "",
                     kvrt_dtype_name((enum kvrt_dtype)t));
    for (int o = 0; o < 6; o++)
        if (p->info.ops & (1u << o))
            snprintf(ops + strlen(ops), sizeof(ops) - strlen(ops), "%s%s", *ops ? " " : "", op_names[o]);
    tap_diag("plugin \"%s\" %s (%s), ABI %u.%u", p->info.name, p->info.version, p->info.path, p->info.abi_major,
             p->info.abi_minor);
    tap_diag("  layouts: %s%s; types: %s; operations: %s", p->info.any_layout ? "any: " : "", layouts, types, ops);
}

void conf_run_plugin(kvrt_runtime *rt, const struct kvrt_runtime_options *options, size_t index, uint64_t seed)
{
    struct conf_plugin p;
    memset(&p, 0, sizeof(p));
    p.rt = rt;
    p.options = options;
    if (kvrt_runtime_plugin_info(rt, index, &p.info) != KVRT_OK) {
        tap_ok(false, "plugin %zu: kvrt_runtime_plugin_info: %s", index, kvrt_error_message());
        return;
    }
    if (p.info.any_layout) {
        for (int l = 0; l < KVRT_NUM_LAYOUTS; l++)
            p.layouts[p.num_layouts++] = (enum kvrt_layout)l;
    } else {
        for (size_t i = 0; i < p.info.num_layouts; i++)
            p.layouts[p.num_layouts++] = p.info.layouts[i];
    }
    describe(&p);
    if (!p.info.available) {
        for (size_t i = 0; i < p.num_layouts; i++)
            tap_skip("%s %s: no device: %s", p.info.name, kvrt_layout_name(p.layouts[i]), p.info.reason);
        return;
    }
    conf_rng_seed(&p.rng, seed);
    conf_find_foreign(&p);
    if (p.foreign)
        tap_diag("  buffers of another backend come from \"%s\"", kvrt_backend_name(p.foreign));
    check_declaration(&p);
    conf_check_import(&p);
    for (size_t i = 0; i < p.num_layouts; i++) {
        enum kvrt_layout layout = p.layouts[i];
        kvrt_backend *b = conf_bind(&p, layout);
        tap_ok(b != NULL, "%s: bind with layout %s", p.info.name, kvrt_layout_name(layout));
        if (!b)
            continue;
        if (kvrt_backend_layout(b) != layout || strcmp(kvrt_backend_name(b), p.info.name) != 0)
            tap_diag("  the binding reports backend \"%s\", layout %s", kvrt_backend_name(b),
                     kvrt_layout_name(kvrt_backend_layout(b)));
        for (int t = 0; t < KVRT_NUM_DTYPES; t++) {
            if (!(p.info.dtypes & (1u << t)))
                continue;
            for (int s = 0; s < CONF_NUM_SHAPES; s++)
                if (conf_shape_applies((enum conf_shape)s, layout))
                    run_case(&p, b, layout, (enum kvrt_dtype)t, (enum conf_shape)s, false);
        }
        /* Every shape once more over caller memory, in the first type. */
        int first_type = 0;
        while (first_type < KVRT_NUM_DTYPES && !(p.info.dtypes & (1u << first_type)))
            first_type++;
        for (int s = 0; p.info.import_alignment && first_type < KVRT_NUM_DTYPES && s < CONF_NUM_SHAPES; s++)
            if (conf_shape_applies((enum conf_shape)s, layout))
                run_case(&p, b, layout, (enum kvrt_dtype)first_type, (enum conf_shape)s, true);
    }
    conf_plugin_finish(&p);
}
