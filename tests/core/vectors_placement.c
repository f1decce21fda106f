/* placement.json: groups of named layers placed in one allocation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_vectors.h"
#include "tap.h"

struct groups {
    struct kvrt_group *groups;
    size_t num_groups;
};

static void free_groups(struct groups *g)
{
    for (size_t i = 0; g->groups && i < g->num_groups; i++)
        free((void *)g->groups[i].layers);
    free(g->groups);
}

static bool read_groups(const json_t *arr, struct groups *out)
{
    size_t gi, li;
    const json_t *group, *layer;
    out->num_groups = json_array_size(arr);
    out->groups = calloc(out->num_groups ? out->num_groups : 1, sizeof(*out->groups));
    if (!out->groups)
        return false;
    json_array_foreach(arr, gi, group)
    {
        struct kvrt_layer_entry *layers = calloc(json_array_size(group) + 1, sizeof(*layers));
        if (!layers)
            return false;
        out->groups[gi].layers = layers;
        out->groups[gi].num_layers = json_array_size(group);
        json_array_foreach(group, li, layer)
        {
            const char *why;
            layers[li].name = json_string_value(json_object_get(layer, "layer"));
            if (!layers[li].name || !cv_spec(json_object_get(layer, "spec"), &layers[li].spec, &why))
                return false;
        }
    }
    return true;
}

static void check_success(size_t id, kvrt_placement *p, const json_t *expect)
{
    const json_t *sets = json_object_get(expect, "placements");
    size_t si;
    const json_t *want;

    TAP_EQ_U64(kvrt_placement_bytes_per_block(p), json_integer_value(json_object_get(expect, "bytes_per_block")),
               "case %zu: bytes_per_block", id);
    TAP_EQ_U64(kvrt_placement_size(p), json_integer_value(json_object_get(expect, "size")), "case %zu: size", id);
    TAP_EQ_U64(kvrt_placement_num_sets(p), json_array_size(sets), "case %zu: number of sets", id);
    json_array_foreach(sets, si, want)
    {
        struct kvrt_placement_set set;
        if (!tap_ok(kvrt_placement_get_set(p, si, &set) == KVRT_OK, "case %zu: set %zu exists", id, si))
            continue;
        const json_t *names = json_object_get(want, "layers");
        bool names_ok = set.num_layers == json_array_size(names);
        for (size_t l = 0; names_ok && l < set.num_layers; l++) {
            const char *name = json_string_value(json_array_get(names, l));
            size_t fs;
            uint64_t fl;
            names_ok = name && strcmp(name, set.layer_names[l]) == 0 &&
                       kvrt_placement_find_layer(p, name, &fs, &fl) == KVRT_OK && fs == si && fl == l;
        }
        tap_ok(names_ok, "case %zu set %zu: layers in order, found by name", id, si);
        TAP_EQ_U64(set.layer_stride, json_integer_value(json_object_get(want, "layer_stride")),
                   "case %zu set %zu: layer_stride", id, si);
        TAP_EQ_U64(set.block_stride, json_integer_value(json_object_get(want, "block_stride")),
                   "case %zu set %zu: block_stride", id, si);
        TAP_EQ_U64(set.offset, json_integer_value(json_object_get(want, "offset")), "case %zu set %zu: offset", id, si);
    }
}

int main(int argc, char **argv)
{
    size_t id;
    json_t *c;
    tap_plan_dynamic();
    json_t *root = cv_load(argc, argv, "placement.json");
    if (!root)
        return 1;
    json_array_foreach(json_object_get(root, "cases"), id, c)
    {
        struct groups g = {0};
        enum kvrt_layout layout;
        uint64_t num_blocks;
        const char *lname = json_string_value(json_object_get(c, "layout"));
        if (!tap_ok(read_groups(json_object_get(c, "groups"), &g) && lname &&
                        kvrt_layout_parse(lname, &layout) == KVRT_OK && cv_u64(c, "num_blocks", &num_blocks),
                    "case %zu: readable", id)) {
            free_groups(&g);
            continue;
        }
        kvrt_placement *p = NULL;
        int rc = kvrt_placement_create(layout, g.groups, g.num_groups, num_blocks, 0, &p);
        const json_t *mentions = json_object_get(c, "expect_error_mentions");
        if (mentions) {
            tap_ok(rc == KVRT_ERR_REFUSED && p == NULL, "case %zu (%s): refused, got %s", id, lname,
                   kvrt_status_name(rc));
            tap_diag("  %s", kvrt_error_message());
            tap_ok(cv_mentions(mentions, kvrt_error_message()) && strstr(kvrt_error_message(), "BLHNC"),
                   "case %zu: message names the layout and suggests BLHNC", id);
        } else if (tap_ok(rc == KVRT_OK, "case %zu (%s): placed", id, lname)) {
            check_success(id, p, json_object_get(c, "expect"));
        } else {
            tap_diag("  %s: %s", kvrt_status_name(rc), kvrt_error_message());
        }
        kvrt_placement_destroy(p);
        free_groups(&g);
    }
    json_decref(root);
    return tap_done();
}
