/*
 * The six standardized layouts.  The table below is the only place a layout's
 * structure is written down; every property is computed from stride_order so
 * that a property can never disagree with the order it describes.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/layout.h>

#include "error.h"
#include "layout_internal.h"
#include "settings_internal.h"

struct layout_entry {
    const char *name;
    int stride_order[KVRT_NUM_AXES];
};

/* Table order of docs/design.md §2; the enum values index this array. */
static const struct layout_entry layouts[KVRT_NUM_LAYOUTS] = {
    [KVRT_LAYOUT_LBHNC] = {"LBHNC", {0, 1, 2, 3, 4}}, [KVRT_LAYOUT_LBNHC] = {"LBNHC", {0, 1, 3, 2, 4}},
    [KVRT_LAYOUT_LHBNC] = {"LHBNC", {0, 2, 1, 3, 4}}, [KVRT_LAYOUT_BLHNC] = {"BLHNC", {1, 0, 2, 3, 4}},
    [KVRT_LAYOUT_BLNHC] = {"BLNHC", {1, 0, 3, 2, 4}}, [KVRT_LAYOUT_BHLNC] = {"BHLNC", {1, 2, 0, 3, 4}},
};

/* The spellings vLLM users already type for the two layer-compact layouts
 * ("D"/"C" both name the content axis). */
static const struct {
    const char *name;
    enum kvrt_layout layout;
} aliases[] = {
    {"NHD", KVRT_LAYOUT_LBNHC},
    {"HND", KVRT_LAYOUT_LBHNC},
    {"NHC", KVRT_LAYOUT_LBNHC},
    {"HNC", KVRT_LAYOUT_LBHNC},
};

/* The order kvrt picks from when no backend constrains it: the layouts vLLM
 * users run most come first (docs/design.md §7, step 1).  A fact about the
 * layouts, so it lives with them; resolution ranks by it. */
static const enum kvrt_layout default_preference[KVRT_NUM_LAYOUTS] = {
    KVRT_LAYOUT_LBNHC, KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_BLNHC, KVRT_LAYOUT_BLHNC, KVRT_LAYOUT_BHLNC, KVRT_LAYOUT_LHBNC,
};

const enum kvrt_layout *kvrt_layout_default_preference(void)
{
    return default_preference;
}

enum kvrt_layout kvrt_layout_default(void)
{
    return default_preference[0];
}

bool kvrt_layout_valid(int layout)
{
    return layout >= 0 && layout < KVRT_NUM_LAYOUTS;
}

const char *kvrt_layout_name(enum kvrt_layout layout)
{
    return kvrt_layout_valid((int)layout) ? layouts[layout].name : NULL;
}

/* The lists in messages are written once from the tables above, so a new
 * alias or layout can never be missing from them. */
static char valid_names[128];
static char alias_meanings[160];
static char values_text[128];
static char table_text[64];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void write_names(void)
{
    size_t n = 0;
    for (int i = 0; i < KVRT_NUM_LAYOUTS; i++)
        n += (size_t)snprintf(valid_names + n, sizeof(valid_names) - n, "%s%s", n ? ", " : "", layouts[i].name);
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        n += (size_t)snprintf(valid_names + n, sizeof(valid_names) - n, ", %s", aliases[i].name);
    /* The layouts alone, before the aliases were appended. */
    size_t layouts_end = 0;
    for (int i = 0; i < KVRT_NUM_LAYOUTS; i++)
        layouts_end += strlen(layouts[i].name) + (i ? 2 : 0);
    snprintf(table_text, sizeof(table_text), "%.*s", (int)layouts_end, valid_names);
    size_t v = 0;
    for (int i = 0; i < KVRT_NUM_LAYOUTS; i++)
        v += (size_t)snprintf(values_text + v, sizeof(values_text) - v, "%s%d (%s)", v ? ", " : "", i, layouts[i].name);
    /* "NHD and NHC mean LBNHC, HND and HNC mean LBHNC": grouped per layout,
     * in the order each layout first appears among the aliases. */
    size_t m = 0;
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = aliases[j].layout != aliases[i].layout;
        if (!first)
            continue;
        size_t count = 0;
        for (size_t j = i; j < sizeof(aliases) / sizeof(aliases[0]); j++) {
            if (aliases[j].layout != aliases[i].layout)
                continue;
            m += (size_t)snprintf(alias_meanings + m, sizeof(alias_meanings) - m, "%s%s",
                                  count ? " and " : (m ? ", " : ""), aliases[j].name);
            count++;
        }
        m += (size_t)snprintf(alias_meanings + m, sizeof(alias_meanings) - m, " %s %s", count > 1 ? "mean" : "means",
                              layouts[aliases[i].layout].name);
    }
}

const char *kvrt_layout_valid_names(void)
{
    pthread_once(&names_once, write_names);
    return valid_names;
}

const char *kvrt_layout_table_text(void)
{
    pthread_once(&names_once, write_names);
    return table_text;
}

const char *kvrt_layout_values_text(void)
{
    pthread_once(&names_once, write_names);
    return values_text;
}

static const char *layout_alias_meanings(void)
{
    pthread_once(&names_once, write_names);
    return alias_meanings;
}

int kvrt_layout_parse(const char *name, enum kvrt_layout *out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_layout_parse: out is NULL");
    if (!name)
        return kvrt_fail(KVRT_ERR_INVALID, "layout name is NULL; valid names are %s", kvrt_layout_valid_names());
    for (int i = 0; i < KVRT_NUM_LAYOUTS; i++) {
        if (strcmp(name, layouts[i].name) == 0) {
            *out = (enum kvrt_layout)i;
            return KVRT_OK;
        }
    }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (strcmp(name, aliases[i].name) == 0) {
            *out = aliases[i].layout;
            return KVRT_OK;
        }
    }
    char quoted[256];
    kvrt_quote(quoted, sizeof(quoted), name);
    return kvrt_fail(KVRT_ERR_INVALID, "unknown layout \"%s\"; valid names (exact, case-sensitive) are %s (%s)", quoted,
                     kvrt_layout_valid_names(), layout_alias_meanings());
}

static int check_layout(const char *fn, enum kvrt_layout layout)
{
    if (kvrt_layout_valid((int)layout))
        return KVRT_OK;
    return kvrt_fail(KVRT_ERR_INVALID, "%s: layout value %d is not one of the %d layouts (0..%d)", fn, (int)layout,
                     KVRT_NUM_LAYOUTS, KVRT_NUM_LAYOUTS - 1);
}

int kvrt_layout_stride_order(enum kvrt_layout layout, int out[KVRT_NUM_AXES])
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_layout_stride_order: out is NULL; pass an array to receive the order");
    int rc = check_layout("kvrt_layout_stride_order", layout);
    if (rc != KVRT_OK)
        return rc;
    memcpy(out, layouts[layout].stride_order, sizeof(layouts[layout].stride_order));
    return KVRT_OK;
}

int kvrt_layout_layer_view_order(enum kvrt_layout layout, int out[4])
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "kvrt_layout_layer_view_order: out is NULL; pass an array to receive the order");
    int rc = check_layout("kvrt_layout_layer_view_order", layout);
    if (rc != KVRT_OK)
        return rc;
    /* A per-layer view has no L axis, so the remaining axes keep their
     * relative physical order and shift down by one. */
    int n = 0;
    for (int p = 0; p < KVRT_NUM_AXES; p++) {
        int axis = layouts[layout].stride_order[p];
        if (axis != KVRT_AXIS_L)
            out[n++] = axis - 1;
    }
    return KVRT_OK;
}

static const int *order_of(enum kvrt_layout layout)
{
    return kvrt_layout_valid((int)layout) ? layouts[layout].stride_order : NULL;
}

bool kvrt_layout_layer_compact(enum kvrt_layout layout)
{
    const int *o = order_of(layout);
    return o && o[0] == KVRT_AXIS_L;
}

bool kvrt_layout_block_outermost(enum kvrt_layout layout)
{
    const int *o = order_of(layout);
    return o && o[0] == KVRT_AXIS_B;
}

bool kvrt_layout_block_compact(enum kvrt_layout layout)
{
    const int *o = order_of(layout);
    return o && ((o[0] == KVRT_AXIS_L && o[1] == KVRT_AXIS_B) || (o[0] == KVRT_AXIS_B && o[1] == KVRT_AXIS_L));
}

bool kvrt_layout_block_contiguous(enum kvrt_layout layout)
{
    const int *o = order_of(layout);
    return o && o[2] == KVRT_AXIS_H && o[3] == KVRT_AXIS_N && o[4] == KVRT_AXIS_C;
}

/* The layout `name` or VLLM_KV_CACHE_LAYOUT gives; *out is left alone when
 * neither does (*source DEFAULT). */
static int given_layout(const char *name, enum kvrt_layout *out, enum kvrt_setting_source *source)
{
    const char *value = kvrt_setting_value(KVRT_SETTING_LAYOUT, name, source);
    if (!value)
        return KVRT_OK;
    /* A set-but-empty variable is almost always a broken export line; treating
     * it as "unset" would silently ignore what the user meant to constrain. */
    int rc = kvrt_layout_parse(value, out);
    if (rc != KVRT_OK && !name)
        return kvrt_fail_context(rc, "%s is set but not a valid layout (unset it to let kvrt choose)", KVRT_LAYOUT_ENV);
    return rc;
}

int kvrt_layout_choose(const char *name, enum kvrt_layout *out, enum kvrt_setting_source *source)
{
    enum kvrt_setting_source from = KVRT_SOURCE_DEFAULT;
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_layout_choose: out is NULL");
    int rc = given_layout(name, out, &from);
    if (rc != KVRT_OK)
        return rc;
    if (from == KVRT_SOURCE_DEFAULT)
        *out = kvrt_layout_default();
    if (source)
        *source = from;
    return KVRT_OK;
}

int kvrt_layout_from_env_or_default(enum kvrt_layout *out, bool *from_env)
{
    enum kvrt_setting_source from = KVRT_SOURCE_DEFAULT;
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_layout_from_env_or_default: out is NULL");
    int rc = kvrt_layout_choose(NULL, out, &from);
    if (rc == KVRT_OK && from_env)
        *from_env = from == KVRT_SOURCE_ENVIRONMENT;
    return rc;
}

int kvrt_layout_from_env(bool *is_set, enum kvrt_layout *out)
{
    enum kvrt_setting_source from = KVRT_SOURCE_DEFAULT;
    if (!is_set || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_layout_from_env: is_set and out must not be NULL");
    int rc = given_layout(NULL, out, &from);
    if (rc == KVRT_OK)
        *is_set = from == KVRT_SOURCE_ENVIRONMENT;
    return rc;
}
