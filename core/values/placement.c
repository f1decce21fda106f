/*
 * Placement of groups of named layers in one allocation (docs/design.md §5).
 *
 * Every layer l of a set starts block b at offset + l*layer_stride +
 * b*block_stride.  Layer-compact layouts stack the sets' regions; block-
 * outermost layouts fix every set's block stride to the bytes of one whole
 * block and stack the sets inside it.  Groups overlay from offset 0.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <stdlib.h>
#include <string.h>

#include <kvrt/placement.h>

#include "checked.h"
#include "error.h"
#include "layout_internal.h"
#include "shapes.h"

struct placement_set {
    size_t group;
    size_t num_layers;
    size_t names_start; /* this set's slice of set_names */
    char **names;       /* = set_names + names_start */
    struct kvrt_spec spec;
    uint64_t page_size;
    uint64_t offset;
    struct kvrt_geometry geom;
};

struct kvrt_placement {
    enum kvrt_layout layout;
    uint64_t num_blocks;
    uint64_t kernel_block_size;
    uint64_t bytes_per_block;
    uint64_t size;
    size_t num_groups;
    size_t num_sets;
    struct placement_set *sets;
    char **names_storage; /* one strdup'd name per layer, all sets */
    size_t num_names;
    char **set_names; /* names_storage entries again, grouped by set */
};

/* The flat list of layers being placed, with what the checks need. */
struct flat_layer {
    const char *name;
    size_t group;
    size_t index; /* within its group */
    const struct kvrt_spec *spec;
    struct kvrt_spec_info info;
    size_t set;
};

static void placement_clear(kvrt_placement *p)
{
    for (size_t i = 0; p->names_storage && i < p->num_names; i++)
        free(p->names_storage[i]);
    free(p->names_storage);
    free(p->set_names);
    free(p->sets);
}

void kvrt_placement_destroy(kvrt_placement *p)
{
    if (!p)
        return;
    placement_clear(p);
    free(p);
}

static int check_groups(const struct kvrt_group *groups, size_t num_groups, size_t *total)
{
    size_t n = 0;
    if (!groups || num_groups == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "a placement needs at least 1 group of layers (got %zu%s)", num_groups,
                         groups ? "" : ", groups is NULL");
    for (size_t g = 0; g < num_groups; g++) {
        if (groups[g].num_layers == 0 || !groups[g].layers)
            return kvrt_fail(KVRT_ERR_INVALID, "group %zu has no layers; every group needs at least 1 layer", g);
        for (size_t i = 0; i < groups[g].num_layers; i++) {
            const char *name = groups[g].layers[i].name;
            if (!name || !*name)
                return kvrt_fail(KVRT_ERR_INVALID,
                                 "layer %zu of group %zu has no name; every layer needs a unique, "
                                 "non-empty name",
                                 i, g);
        }
        if (groups[g].num_layers > SIZE_MAX / sizeof(struct flat_layer) - n)
            return kvrt_fail(KVRT_ERR_OVERFLOW, "too many layers to place");
        n += groups[g].num_layers;
    }
    *total = n;
    return KVRT_OK;
}

static int cmp_flat_by_name(const void *a, const void *b)
{
    const struct flat_layer *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* Names are how engines find their layers; two with one name would make
 * find_layer ambiguous.  Sorting keeps this O(n log n) for big models. */
static int check_unique_names(struct flat_layer *flat, size_t n)
{
    /* An array of pointers, so sizeof(*sorted) is right; clang-tidy 14 flags
     * every sizeof of a pointer to a struct and has no option to tell. */
    /* NOLINTNEXTLINE(bugprone-sizeof-expression) */
    struct flat_layer **sorted = malloc(n * sizeof(*sorted));
    if (!sorted)
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory checking %zu layer names", n);
    for (size_t i = 0; i < n; i++)
        sorted[i] = &flat[i];
    qsort(sorted, n, sizeof(*sorted), cmp_flat_by_name); /* NOLINT(bugprone-sizeof-expression) */
    int rc = KVRT_OK;
    for (size_t i = 1; i < n && rc == KVRT_OK; i++) {
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) != 0)
            continue;
        const struct flat_layer *a = sorted[i - 1], *b = sorted[i];
        if (a->group > b->group || (a->group == b->group && a->index > b->index)) {
            const struct flat_layer *t = a;
            a = b;
            b = t;
        }
        rc = kvrt_fail(KVRT_ERR_INVALID,
                       "layer name \"%.128s\" is used twice (group %zu layer %zu and group %zu layer "
                       "%zu); every layer needs a unique name",
                       a->name, a->group, a->index, b->group, b->index);
    }
    free(sorted);
    return rc;
}

/* Derive every layer's spec and assign it to a set of identical specs in its
 * group, in order of first appearance. */
static int assign_sets(struct flat_layer *flat, size_t n, uint64_t kernel_block_size, size_t *num_sets,
                       size_t **set_first)
{
    size_t sets = 0, group_first_set = 0;
    size_t *first = malloc(n * sizeof(*first)); /* flat index of each set's first layer */
    if (!first)
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory placing %zu layers", n);
    for (size_t i = 0; i < n; i++) {
        struct kvrt_spec_info info;
        int rc = kvrt_spec_derive(flat[i].spec, kernel_block_size, &info);
        if (rc != KVRT_OK) {
            free(first);
            return kvrt_fail_context(rc, "layer \"%.128s\" (group %zu)", flat[i].name, flat[i].group);
        }
        flat[i].info = info;
        if (i > 0 && flat[i].group != flat[i - 1].group)
            group_first_set = sets;
        size_t s = group_first_set;
        while (s < sets && !kvrt_spec_equal(flat[first[s]].spec, flat[i].spec))
            s++;
        if (s == sets)
            first[sets++] = i;
        flat[i].set = s;
    }
    *num_sets = sets;
    *set_first = first;
    return KVRT_OK;
}

static int check_mixed_shapes(enum kvrt_layout layout, const struct flat_layer *flat, size_t n, size_t num_groups)
{
    struct kvrt_shapes shapes = {0};
    for (size_t i = 0; i < n; i++)
        kvrt_shapes_add(&shapes, &flat[i].info);
    const enum kvrt_shape_need need = kvrt_shapes_need(&shapes, num_groups);
    if (kvrt_shape_need_admits(need, layout))
        return KVRT_OK;
    char fits[64];
    const struct flat_layer *a = &flat[0];
    const struct flat_layer *b = &flat[shapes.other_page != SIZE_MAX ? shapes.other_page : shapes.other];
    return kvrt_fail(KVRT_ERR_REFUSED,
                     "layout %s cannot place layers of different shapes (\"%.128s\": %llu head slots x %llu "
                     "states, page %llu bytes; \"%.128s\": %llu x %llu, page %llu bytes) in %zu group%s: they "
                     "need %s; use one of %s",
                     kvrt_layout_name(layout), a->name, ULL(a->info.head_slots), ULL(a->info.states_per_block),
                     ULL(a->info.page_size), b->name, ULL(b->info.head_slots), ULL(b->info.states_per_block),
                     ULL(b->info.page_size), num_groups, num_groups == 1 ? "" : "s", kvrt_shape_need_placement(need),
                     kvrt_shape_need_layouts(need, fits, sizeof(fits)));
}

int kvrt_groups_shapes(const struct kvrt_group *groups, size_t num_groups, struct kvrt_shapes *shapes)
{
    size_t n = 0;
    int rc = check_groups(groups, num_groups, &n);
    *shapes = (struct kvrt_shapes){0};
    for (size_t g = 0; g < num_groups && rc == KVRT_OK; g++) {
        for (size_t i = 0; i < groups[g].num_layers && rc == KVRT_OK; i++) {
            struct kvrt_spec_info info;
            rc = kvrt_spec_derive(&groups[g].layers[i].spec, 0, &info);
            if (rc != KVRT_OK)
                return kvrt_fail_context(rc, "layer \"%.128s\" (group %zu)", groups[g].layers[i].name, g);
            kvrt_shapes_add(shapes, &info);
        }
    }
    return rc;
}

int kvrt_placement_mixed_shapes(const struct kvrt_group *groups, size_t num_groups, bool *mixed)
{
    if (!mixed)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_placement_mixed_shapes: mixed is NULL");
    struct kvrt_shapes shapes;
    int rc = kvrt_groups_shapes(groups, num_groups, &shapes);
    if (rc == KVRT_OK)
        *mixed = kvrt_shapes_mixed(&shapes);
    return rc;
}

static int compute_bytes_per_block(const struct flat_layer *flat, size_t n, uint64_t *out)
{
    uint64_t best = 0, sum = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && flat[i].group != flat[i - 1].group)
            sum = 0;
        if (kvrt_add_overflow(sum, flat[i].info.page_size, &sum))
            return kvrt_fail(KVRT_ERR_OVERFLOW,
                             "the pages of one block of group %zu do not fit in 64 bits (at layer "
                             "\"%.128s\", page %llu bytes); use smaller pages",
                             flat[i].group, flat[i].name, ULL(flat[i].info.page_size));
        best = sum > best ? sum : best;
    }
    *out = best;
    return KVRT_OK;
}

static int build_sets(kvrt_placement *p, const struct flat_layer *flat, size_t n, const size_t *first, size_t num_sets)
{
    p->sets = calloc(num_sets, sizeof(*p->sets));
    p->names_storage = calloc(n, sizeof(*p->names_storage));
    p->set_names = calloc(n, sizeof(*p->set_names));
    if (!p->sets || !p->names_storage || !p->set_names)
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory placing %zu layers", n);
    p->num_sets = num_sets;
    for (size_t s = 0; s < num_sets; s++) {
        p->sets[s].group = flat[first[s]].group;
        p->sets[s].spec = *flat[first[s]].spec;
        p->sets[s].page_size = flat[first[s]].info.page_size;
    }
    for (size_t i = 0; i < n; i++)
        p->sets[flat[i].set].num_layers++;
    /* One array holds every set's names, each set a slice in set order;
     * the slices are filled through their start index and only then turned
     * into pointers, so no set ever holds a pointer to an unfilled list. */
    size_t start = 0;
    for (size_t s = 0; s < num_sets; s++) {
        p->sets[s].names_start = start;
        start += p->sets[s].num_layers;
        p->sets[s].num_layers = 0;
    }
    for (size_t i = 0; i < n; i++) {
        struct placement_set *set = &p->sets[flat[i].set];
        p->names_storage[i] = strdup(flat[i].name);
        if (!p->names_storage[i])
            return kvrt_fail(KVRT_ERR_NOMEM, "out of memory copying layer names");
        p->num_names = i + 1;
        p->set_names[set->names_start + set->num_layers++] = p->names_storage[i];
    }
    for (size_t s = 0; s < num_sets; s++)
        p->sets[s].names = p->set_names + p->sets[s].names_start;
    return KVRT_OK;
}

/*
 * Views count in elements, and kernels load whole elements: every set must
 * start and step on its element size.  Pages of other element types (a state
 * spec of 77 bytes, say) can shift a set off that grid.  Silently rounding
 * would break the documented sizes, so this is refused with the fix.
 */
static int check_alignment(const struct placement_set *set, bool block_outer)
{
    const uint64_t elem = set->geom.info.elem_size;
    const char *what;
    uint64_t value;
    if (set->offset % elem != 0) {
        what = block_outer ? "its offset inside each block" : "its offset in the allocation";
        value = set->offset;
    } else if (set->geom.block_stride % elem != 0) {
        what = "the block stride (the bytes of one block across all layers)";
        value = set->geom.block_stride;
    } else {
        return KVRT_OK;
    }
    return kvrt_fail(KVRT_ERR_INVALID,
                     "layer \"%.128s\" (%s, %llu-byte elements) cannot be placed: %s is %llu bytes, "
                     "not a multiple of %llu, because the pages of the other layers add up to that; "
                     "pad their pages (page_size_padded) to multiples of %llu bytes",
                     set->names[0], kvrt_dtype_name(set->spec.dtype), ULL(elem), what, ULL(value), ULL(elem),
                     ULL(elem));
}

/* Strides and offsets of every set. */
static int lay_out_sets(kvrt_placement *p, bool check_align)
{
    const bool block_outer = kvrt_layout_block_outermost(p->layout);
    uint64_t offset = 0;
    for (size_t s = 0; s < p->num_sets; s++) {
        struct placement_set *set = &p->sets[s];
        struct kvrt_geometry_params gp;
        if (s == 0 || set->group != p->sets[s - 1].group)
            offset = 0;
        kvrt_geometry_params_default(&gp);
        gp.layout = p->layout;
        gp.spec = &set->spec;
        gp.num_layers = set->num_layers;
        gp.num_blocks = p->num_blocks;
        gp.kernel_block_size = p->kernel_block_size;
        if (block_outer)
            gp.fixed_strides[KVRT_AXIS_B] = p->bytes_per_block;
        int rc = kvrt_geometry_compute(&gp, &set->geom);
        if (rc != KVRT_OK)
            return kvrt_fail_context(rc, "layers of \"%.128s\" (group %zu)", set->names[0], set->group);
        set->offset = offset;
        if (check_align) {
            rc = check_alignment(set, block_outer);
            if (rc != KVRT_OK)
                return rc;
        }
        /* Sizes below are bounded by bytes_per_block * num_blocks, which
         * the caller has already computed without overflow. */
        if (block_outer)
            offset += set->num_layers * set->page_size;
        else
            offset += set->geom.total_bytes;
    }
    return KVRT_OK;
}

static int placement_build(enum kvrt_layout layout, const struct kvrt_group *groups, size_t num_groups,
                           uint64_t num_blocks, uint64_t kernel_block_size, bool check_align, kvrt_placement *p)
{
    struct flat_layer *flat = NULL;
    size_t n = 0, num_sets = 0, *first = NULL;
    int rc;

    p->layout = layout;
    p->num_blocks = num_blocks;
    p->kernel_block_size = kernel_block_size;
    p->num_groups = num_groups;
    if (!kvrt_layout_valid((int)layout))
        return kvrt_fail(KVRT_ERR_INVALID, "layout value %d is not valid; valid layouts are %s", (int)layout,
                         kvrt_layout_values_text());
    if (num_blocks == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "num_blocks 0 is not valid: a cache needs at least 1 block");
    rc = check_groups(groups, num_groups, &n);
    if (rc != KVRT_OK)
        return rc;

    flat = calloc(n, sizeof(*flat));
    if (!flat)
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory placing %zu layers", n);
    size_t k = 0;
    for (size_t g = 0; g < num_groups; g++) {
        for (size_t i = 0; i < groups[g].num_layers; i++, k++) {
            flat[k].name = groups[g].layers[i].name;
            flat[k].group = g;
            flat[k].index = i;
            flat[k].spec = &groups[g].layers[i].spec;
        }
    }

    rc = check_unique_names(flat, n);
    if (rc == KVRT_OK)
        rc = assign_sets(flat, n, kernel_block_size, &num_sets, &first);
    if (rc == KVRT_OK)
        rc = check_mixed_shapes(layout, flat, n, num_groups);
    if (rc == KVRT_OK)
        rc = compute_bytes_per_block(flat, n, &p->bytes_per_block);
    if (rc == KVRT_OK && kvrt_mul_overflow(p->bytes_per_block, num_blocks, &p->size))
        rc = kvrt_fail(KVRT_ERR_OVERFLOW,
                       "bytes per block %llu * num_blocks %llu does not fit in 64 bits; use fewer blocks",
                       ULL(p->bytes_per_block), ULL(num_blocks));
    if (rc == KVRT_OK)
        rc = build_sets(p, flat, n, first, num_sets);
    if (rc == KVRT_OK)
        rc = lay_out_sets(p, check_align);
    free(first);
    free(flat);
    return rc;
}

int kvrt_placement_create(enum kvrt_layout layout, const struct kvrt_group *groups, size_t num_groups,
                          uint64_t num_blocks, uint64_t kernel_block_size, kvrt_placement **out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_placement_create: out is NULL");
    *out = NULL;
    kvrt_placement *p = calloc(1, sizeof(*p));
    if (!p)
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory creating a placement");
    int rc = placement_build(layout, groups, num_groups, num_blocks, kernel_block_size, true, p);
    if (rc != KVRT_OK) {
        kvrt_placement_destroy(p);
        return rc;
    }
    *out = p;
    return KVRT_OK;
}

int kvrt_placement_blocks_for_budget(enum kvrt_layout layout, const struct kvrt_group *groups, size_t num_groups,
                                     uint64_t budget_bytes, uint64_t *num_blocks)
{
    kvrt_placement probe, *p;
    if (!num_blocks)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_placement_blocks_for_budget: num_blocks is NULL");
    /* One block gives bytes_per_block: the size is exactly bytes_per_block *
     * num_blocks for every layout.  The alignment check is left out here
     * because its outcome can depend on the number of blocks. */
    memset(&probe, 0, sizeof(probe));
    int rc = placement_build(layout, groups, num_groups, 1, 0, false, &probe);
    const uint64_t per_block = probe.bytes_per_block;
    placement_clear(&probe);
    if (rc != KVRT_OK)
        return rc;
    if (budget_bytes < per_block)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "a budget of %llu bytes does not hold one block: one block of every layer "
                         "takes %llu bytes; raise the budget or place fewer layers",
                         ULL(budget_bytes), ULL(per_block));
    /* Element sizes are at most 4 bytes, so some count among the last four
     * puts every layer-compact region on its element grid. */
    const uint64_t most = budget_bytes / per_block;
    for (uint64_t n = most; n >= 1 && most - n < 4; n--) {
        rc = kvrt_placement_create(layout, groups, num_groups, n, 0, &p);
        kvrt_placement_destroy(p);
        if (rc == KVRT_OK) {
            *num_blocks = n;
            return KVRT_OK;
        }
        if (rc != KVRT_ERR_INVALID)
            return rc;
    }
    /* Report the refusal of the count the budget asked for. */
    rc = kvrt_placement_create(layout, groups, num_groups, most, 0, &p);
    kvrt_placement_destroy(p);
    return rc;
}

enum kvrt_layout kvrt_placement_layout(const kvrt_placement *p)
{
    return p ? p->layout : KVRT_LAYOUT_LBNHC;
}

uint64_t kvrt_placement_bytes_per_block(const kvrt_placement *p)
{
    return p ? p->bytes_per_block : 0;
}

uint64_t kvrt_placement_size(const kvrt_placement *p)
{
    return p ? p->size : 0;
}

uint64_t kvrt_placement_num_blocks(const kvrt_placement *p)
{
    return p ? p->num_blocks : 0;
}

size_t kvrt_placement_num_sets(const kvrt_placement *p)
{
    return p ? p->num_sets : 0;
}

size_t kvrt_placement_num_groups(const kvrt_placement *p)
{
    return p ? p->num_groups : 0;
}

static int check_set(const char *fn, const kvrt_placement *p, size_t i)
{
    if (!p)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: placement is NULL", fn);
    if (i >= p->num_sets)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: set %zu is out of range; the placement has %zu sets "
                         "(valid 0..%zu)",
                         fn, i, p->num_sets, p->num_sets - 1);
    return KVRT_OK;
}

int kvrt_placement_get_set(const kvrt_placement *p, size_t i, struct kvrt_placement_set *out)
{
    int rc = check_set("kvrt_placement_get_set", p, i);
    if (rc != KVRT_OK)
        return rc;
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_placement_get_set: out is NULL");
    const struct placement_set *set = &p->sets[i];
    out->group = set->group;
    out->num_layers = set->num_layers;
    out->layer_names = (const char *const *)set->names;
    out->spec = &set->spec;
    out->layer_stride = set->geom.layer_stride;
    out->block_stride = set->geom.block_stride;
    out->offset = set->offset;
    out->geometry = set->geom;
    return KVRT_OK;
}

int kvrt_placement_layer_view(const kvrt_placement *p, size_t set, uint64_t layer, struct kvrt_view *out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_placement_layer_view: out is NULL");
    int rc = check_set("kvrt_placement_layer_view", p, set);
    if (rc != KVRT_OK)
        return rc;
    rc = kvrt_geometry_layer_view(&p->sets[set].geom, p->sets[set].offset, layer, out);
    if (rc != KVRT_OK)
        return kvrt_fail_context(rc, "set %zu (first layer \"%.128s\")", set, p->sets[set].names[0]);
    return KVRT_OK;
}

int kvrt_placement_find_layer(const kvrt_placement *p, const char *name, size_t *set, uint64_t *layer)
{
    if (!p || !name || !set || !layer)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_placement_find_layer: arguments must not be NULL");
    for (size_t s = 0; s < p->num_sets; s++) {
        for (size_t l = 0; l < p->sets[s].num_layers; l++) {
            if (strcmp(p->sets[s].names[l], name) == 0) {
                *set = s;
                *layer = l;
                return KVRT_OK;
            }
        }
    }
    return kvrt_fail(KVRT_ERR_INVALID,
                     "no layer named \"%.128s\" in this placement of %zu layers; names are exact and "
                     "case-sensitive",
                     name, p->num_names);
}
