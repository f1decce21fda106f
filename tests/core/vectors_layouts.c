/*
 * layouts.json in full: the six layouts in table order, their stride and
 * layer-view orders, the four derived properties, every valid spelling, the
 * aliases, and the spellings that must be refused (with a message that quotes
 * the value and lists the valid names).  Also VLLM_KV_CACHE_LAYOUT parsing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/layout.h>

#include "tap.h"
#include "vectors_json.h"

static bool same_ints(const json_t *want, const int *got, size_t n)
{
    if (!json_is_array(want) || json_array_size(want) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (json_integer_value(json_array_get(want, i)) != got[i])
            return false;
    return true;
}

/* Is `name` one whole comma-separated item of `list`? */
static bool list_has(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n) {
        bool start = p == list || p[-1] == ' ' || p[-1] == ',';
        bool end = p[n] == '\0' || p[n] == ',';
        if (start && end)
            return true;
    }
    return false;
}

static void check_layout(const json_t *v, int index)
{
    const char *name = json_string_value(json_object_get(v, "name"));
    enum kvrt_layout l = (enum kvrt_layout)index, parsed;
    int order[KVRT_NUM_AXES], view[4];

    tap_ok(name && kvrt_layout_name(l) && strcmp(kvrt_layout_name(l), name) == 0, "layout %d is %s (table order)",
           index, name);
    tap_ok(kvrt_layout_parse(name, &parsed) == KVRT_OK && parsed == l, "%s parses to value %d", name, index);
    tap_ok(kvrt_layout_stride_order(l, order) == KVRT_OK &&
               same_ints(json_object_get(v, "stride_order"), order, KVRT_NUM_AXES),
           "%s stride_order", name);
    tap_ok(kvrt_layout_layer_view_order(l, view) == KVRT_OK &&
               same_ints(json_object_get(v, "layer_view_order"), view, 4),
           "%s layer_view_order", name);
    tap_ok(kvrt_layout_layer_compact(l) == json_is_true(json_object_get(v, "layer_compact")), "%s layer_compact", name);
    tap_ok(kvrt_layout_block_contiguous(l) == json_is_true(json_object_get(v, "block_contiguous")),
           "%s block_contiguous", name);
    tap_ok(kvrt_layout_block_compact(l) == json_is_true(json_object_get(v, "block_compact")), "%s block_compact", name);
    tap_ok(kvrt_layout_block_outermost(l) == json_is_true(json_object_get(v, "block_outermost")), "%s block_outermost",
           name);
}

static void check_refused(const char *value)
{
    enum kvrt_layout out = KVRT_LAYOUT_BHLNC;
    char quoted[128];
    snprintf(quoted, sizeof(quoted), "\"%s\"", value);
    int rc = kvrt_layout_parse(value, &out);
    const char *msg = kvrt_error_message();
    tap_ok(rc == KVRT_ERR_INVALID, "\"%s\" is refused with KVRT_ERR_INVALID", value);
    tap_ok(out == KVRT_LAYOUT_BHLNC, "\"%s\": the output is left untouched", value);
    bool lists = true;
    for (int i = 0; i < KVRT_NUM_LAYOUTS; i++)
        lists &= strstr(msg, kvrt_layout_name((enum kvrt_layout)i)) != NULL;
    tap_ok(strstr(msg, quoted) && lists, "\"%s\": the message quotes it and lists the valid names", value);
    if (!strstr(msg, quoted) || !lists)
        tap_diag("message: %s", msg);
}

static void check_env(void)
{
    bool set = true;
    enum kvrt_layout l;

    unsetenv(KVRT_LAYOUT_ENV);
    tap_ok(kvrt_layout_from_env(&set, &l) == KVRT_OK && !set, "env unset: no constraint");

    setenv(KVRT_LAYOUT_ENV, "HND", 1);
    tap_ok(kvrt_layout_from_env(&set, &l) == KVRT_OK && set && l == KVRT_LAYOUT_LBHNC, "env HND: LBHNC");
    setenv(KVRT_LAYOUT_ENV, "BLNHC", 1);
    tap_ok(kvrt_layout_from_env(&set, &l) == KVRT_OK && set && l == KVRT_LAYOUT_BLNHC, "env BLNHC: BLNHC");

    /* Set but empty is an error, not "unset": it is usually a broken export. */
    const char *bad[] = {"", "hnd", "LBNHC "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char quoted[64];
        snprintf(quoted, sizeof(quoted), "\"%s\"", bad[i]);
        setenv(KVRT_LAYOUT_ENV, bad[i], 1);
        int rc = kvrt_layout_from_env(&set, &l);
        const char *msg = kvrt_error_message();
        tap_ok(rc == KVRT_ERR_INVALID && strstr(msg, quoted) && strstr(msg, KVRT_LAYOUT_ENV) && strstr(msg, "LBHNC"),
               "env \"%s\" is refused; the message names the variable, quotes the value and lists "
               "the valid names",
               bad[i]);
        tap_diag("message: %s", msg);
    }
    unsetenv(KVRT_LAYOUT_ENV);
}

static void check_out_of_range(void)
{
    int order[KVRT_NUM_AXES], view[4];
    enum kvrt_layout bad = (enum kvrt_layout)KVRT_NUM_LAYOUTS;
    tap_ok(!kvrt_layout_valid(KVRT_NUM_LAYOUTS) && !kvrt_layout_valid(-1), "values 6 and -1 are not layouts");
    tap_ok(kvrt_layout_name(bad) == NULL, "no name for value 6");
    tap_ok(kvrt_layout_stride_order(bad, order) == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "6"),
           "stride_order of value 6 is refused, naming the value");
    tap_ok(kvrt_layout_layer_view_order(bad, view) == KVRT_ERR_INVALID, "layer_view_order of value 6 is refused");
    tap_ok(!kvrt_layout_layer_compact(bad) && !kvrt_layout_block_outermost(bad) && !kvrt_layout_block_compact(bad) &&
               !kvrt_layout_block_contiguous(bad),
           "value 6 has none of the properties");
    enum kvrt_layout l;
    tap_ok(kvrt_layout_parse(NULL, &l) == KVRT_ERR_INVALID, "NULL name is refused");
}

int main(int argc, char **argv)
{
    json_t *root = vectors_load(vectors_dir_arg(argc, argv), "layouts.json");
    if (!root)
        return 1;
    tap_plan_dynamic();

    const json_t *layouts = json_object_get(root, "layouts");
    tap_ok(json_array_size(layouts) == KVRT_NUM_LAYOUTS, "the vectors list %d layouts", KVRT_NUM_LAYOUTS);
    size_t i;
    json_t *v;
    json_array_foreach(layouts, i, v) check_layout(v, (int)i);

    const json_t *names = json_object_get(root, "names");
    const char *valid = kvrt_layout_valid_names();
    json_array_foreach(json_object_get(names, "valid"), i, v)
    {
        const char *name = json_string_value(v);
        enum kvrt_layout l;
        tap_ok(kvrt_layout_parse(name, &l) == KVRT_OK, "\"%s\" is a valid name", name);
        tap_ok(list_has(valid, name), "\"%s\" is in kvrt_layout_valid_names()", name);
    }
    const char *alias;
    json_object_foreach(json_object_get(names, "aliases"), alias, v)
    {
        enum kvrt_layout l;
        tap_ok(kvrt_layout_parse(alias, &l) == KVRT_OK && strcmp(kvrt_layout_name(l), json_string_value(v)) == 0,
               "alias %s means %s", alias, json_string_value(v));
    }
    json_array_foreach(json_object_get(names, "invalid"), i, v) check_refused(json_string_value(v));

    check_out_of_range();
    check_env();
    json_decref(root);
    return tap_done();
}
