/*
 * fuzz-geometry: spec derivation, geometry, per-layer views, placement of
 * 1-3 groups of 1-3 layers, the block budget and transfer regions, all from
 * one stream of biased 64-bit values (fuzz_value).
 *
 * Every call must end in either a clean error (a documented status and a
 * message) or a result that keeps every byte it describes inside the
 * allocation, never lets two layers of one group share a byte, and lists
 * transfer runs sorted, merged and covering exactly the requested pages.
 * Offsets are checked in 128-bit arithmetic, so a wrapped 64-bit size in the
 * core cannot hide behind the same wrap in the check.  The byte-by-byte
 * checks (bitmaps) only run on allocations up to BITMAP_MAX bytes; larger
 * ones get the analytic checks only, which keeps every input fast.
 */
#include <stdbool.h>

#include <kvrt/geometry.h>
#include <kvrt/placement.h>
#include <kvrt/spec.h>
#include <kvrt/transfer.h>

#include "fuzz.h"

__extension__ typedef unsigned __int128 u128;

#define BITMAP_MAX ((uint64_t)1 << 18) /* bytes of allocation checked byte by byte */
#define MAX_VIEW_LAYERS 16             /* first layers whose views are checked, plus the last */
#define MAX_RUNS ((uint64_t)1 << 16)   /* upper bound of transfer runs one input may ask for */
#define MAX_GROUPS 3
#define MAX_GROUP_LAYERS 3
#define MAX_IDS 6

#define ULL(x) ((unsigned long long)(x))

/* Not NULL: what a failed call must overwrite in its outputs. */
static struct kvrt_region poison_region;
static char poison_placement;

/* Scratch bitmaps, one byte per allocation byte. */
static uint8_t map_a[BITMAP_MAX], map_b[BITMAP_MAX], map_c[BITMAP_MAX];

static bool ok_status(int rc)
{
    return rc == KVRT_OK || rc == KVRT_ERR_INVALID || rc == KVRT_ERR_OVERFLOW || rc == KVRT_ERR_REFUSED;
}

static void check_outcome(int rc, const char *call)
{
    FUZZ_CHECK(ok_status(rc), "%s returned %d (%s), not one of its documented statuses", call, rc,
               kvrt_status_name(rc));
    if (rc != KVRT_OK)
        fuzz_check_error(rc, call);
}

/* ---- reading the input ------------------------------------------------ */

static void read_spec(struct fuzz_input *in, struct kvrt_spec *s)
{
    kvrt_spec_default(s);
    /* -1 and one past the last value stand for invalid enums. */
    s->kind = (enum kvrt_spec_kind)((int)(fuzz_u8(in) % 5) - 1);
    s->dtype = (enum kvrt_dtype)((int)(fuzz_u8(in) % (KVRT_NUM_DTYPES + 2)) - 1);
    s->block_size = fuzz_value(in);
    s->num_kv_heads = fuzz_value(in);
    s->head_size = fuzz_value(in);
    /* Optional fields are left at their defaults unless the input says
     * otherwise, so that the common spellings are reached often. */
    const uint8_t present = fuzz_u8(in);
    if (present & 0x01)
        s->head_size_v = fuzz_value(in);
    if (present & 0x02)
        s->num_head_slots = fuzz_value(in);
    if (present & 0x04)
        s->state_content_bytes = fuzz_value(in);
    if (present & 0x08)
        s->tokens_per_state_num = fuzz_value(in);
    if (present & 0x10)
        s->tokens_per_state_den = fuzz_value(in);
    if (present & 0x20)
        s->page_size_padded = fuzz_value(in);
}

/* ---- boxes: the bytes a view or a whole set describes ------------------ */

/* Extents and byte strides in logical order [L, B, H, N, C]; B counts
 * kernel blocks. */
struct box {
    uint64_t base;
    uint64_t extent[KVRT_NUM_AXES];
    uint64_t stride[KVRT_NUM_AXES];
};

static u128 box_reach(const struct box *b)
{
    u128 last = b->base;
    for (int a = 0; a < KVRT_NUM_AXES; a++)
        last += (u128)(b->extent[a] - 1) * b->stride[a];
    return last;
}

static u128 box_cells(const struct box *b)
{
    u128 n = 1;
    for (int a = 0; a < KVRT_NUM_AXES && n <= ((u128)1 << 64); a++)
        n *= b->extent[a];
    return n;
}

static struct box geometry_box(const struct kvrt_geometry *g, uint64_t base)
{
    struct box b;
    b.base = base;
    memcpy(b.extent, g->shape_bytes, sizeof(b.extent));
    memcpy(b.stride, g->strides_bytes, sizeof(b.stride));
    return b;
}

enum mark_mode { MARK_UNIQUE, MARK_SET };

/* Mark every byte of the box; MARK_UNIQUE fails on a byte marked twice.
 * The caller has checked that the box lies below `limit` <= BITMAP_MAX and
 * that its cell count is small. */
static void box_mark(const struct box *b, uint8_t *map, uint64_t limit, enum mark_mode mode, const char *what)
{
    const uint64_t *e = b->extent, *s = b->stride;
    for (uint64_t l = 0; l < e[0]; l++)
        for (uint64_t k = 0; k < e[1]; k++)
            for (uint64_t h = 0; h < e[2]; h++)
                for (uint64_t n = 0; n < e[3]; n++) {
                    const uint64_t start = b->base + l * s[0] + k * s[1] + h * s[2] + n * s[3];
                    for (uint64_t c = 0; c < e[4]; c++) {
                        const uint64_t at = start + c * s[4];
                        FUZZ_CHECK(at < limit,
                                   "%s: byte %llu (layer %llu block %llu head %llu state %llu) "
                                   "lies outside the %llu-byte allocation",
                                   what, ULL(at), ULL(l), ULL(k), ULL(h), ULL(n), ULL(limit));
                        FUZZ_CHECK(mode != MARK_UNIQUE || !map[at],
                                   "%s: byte %llu (layer %llu block %llu head %llu state %llu) is used twice", what,
                                   ULL(at), ULL(l), ULL(k), ULL(h), ULL(n));
                        map[at] = 1;
                    }
                }
}

/* No two index tuples of the box share a byte: walking the physical order
 * from the innermost axis, each stepping axis must clear everything the
 * axes inside it reach. */
static void check_nesting(const struct box *b, const int order[KVRT_NUM_AXES], const char *what)
{
    u128 reach = 0;
    for (int p = KVRT_NUM_AXES - 1; p >= 0; p--) {
        const int a = order[p];
        if (b->extent[a] <= 1)
            continue;
        FUZZ_CHECK((u128)b->stride[a] > reach,
                   "%s: axis %c (extent %llu) strides %llu bytes, but the axes inside it reach %llu bytes: "
                   "entries overlap",
                   what, "LBHNC"[a], ULL(b->extent[a]), ULL(b->stride[a]), ULL((uint64_t)reach));
        reach += (u128)(b->extent[a] - 1) * b->stride[a];
    }
}

/* ---- spec and geometry -------------------------------------------------- */

static void check_info(const struct kvrt_spec *s, uint64_t kernel_block_size, const struct kvrt_spec_info *i)
{
    FUZZ_CHECK(i->elem_size > 0 && i->head_slots > 0 && i->states_per_block > 0 && i->content_bytes > 0 &&
                   i->kernel_block_size > 0 && i->kernel_blocks_per_block > 0 && i->states_per_kernel_block > 0,
               "derived a zero quantity");
    FUZZ_CHECK((u128)i->kernel_block_size * i->kernel_blocks_per_block == s->block_size,
               "k %llu * r %llu != block_size %llu", ULL(i->kernel_block_size), ULL(i->kernel_blocks_per_block),
               ULL(s->block_size));
    FUZZ_CHECK(kernel_block_size == 0 || kernel_block_size == i->kernel_block_size,
               "kernel_block_size %llu became %llu", ULL(kernel_block_size), ULL(i->kernel_block_size));
    FUZZ_CHECK((u128)i->states_per_kernel_block * i->kernel_blocks_per_block == i->states_per_block,
               "N(k) %llu * r %llu != N %llu", ULL(i->states_per_kernel_block), ULL(i->kernel_blocks_per_block),
               ULL(i->states_per_block));
    FUZZ_CHECK(i->content_bytes % i->elem_size == 0, "C %llu not a multiple of the element size %llu",
               ULL(i->content_bytes), ULL(i->elem_size));
    FUZZ_CHECK((u128)i->head_slots * i->states_per_block * i->content_bytes == i->unpadded_page_size,
               "page %llu != H %llu * N %llu * C %llu", ULL(i->unpadded_page_size), ULL(i->head_slots),
               ULL(i->states_per_block), ULL(i->content_bytes));
    FUZZ_CHECK(i->page_size >= i->unpadded_page_size && i->page_size % i->elem_size == 0,
               "padded page %llu (page %llu, element %llu)", ULL(i->page_size), ULL(i->unpadded_page_size),
               ULL(i->elem_size));
    if (s->kind == KVRT_SPEC_STATE)
        FUZZ_CHECK(i->head_slots == 1 && i->states_per_block == 1 && i->content_bytes == s->state_content_bytes,
                   "state spec: H %llu N %llu C %llu", ULL(i->head_slots), ULL(i->states_per_block),
                   ULL(i->content_bytes));
}

static void check_view(const struct kvrt_geometry *g, uint64_t l, const struct kvrt_view *v, u128 limit,
                       const char *what)
{
    const uint64_t elem = g->info.elem_size;
    FUZZ_CHECK(v->elem_size == elem, "%s: view element size %llu, geometry %llu", what, ULL(v->elem_size), ULL(elem));
    u128 last = v->offset_bytes;
    for (int i = 0; i < 4; i++) {
        FUZZ_CHECK(v->shape_bytes[i] == g->shape_bytes[i + 1] && v->strides_bytes[i] == g->strides_bytes[i + 1],
                   "%s: layer %llu view axis %d disagrees with the geometry", what, ULL(l), i);
        if (i < 3)
            FUZZ_CHECK((u128)v->strides[i] * elem == v->strides_bytes[i] && v->shape[i] == v->shape_bytes[i],
                       "%s: layer %llu view axis %d: %llu elements != %llu bytes", what, ULL(l), i, ULL(v->strides[i]),
                       ULL(v->strides_bytes[i]));
        last += (u128)(v->shape_bytes[i] - 1) * v->strides_bytes[i];
    }
    FUZZ_CHECK(v->strides[3] == 1 && v->strides_bytes[3] == 1 && (u128)v->shape[3] * elem == v->shape_bytes[3],
               "%s: layer %llu: C is not contiguous whole elements", what, ULL(l));
    FUZZ_CHECK(last < limit, "%s: layer %llu view reaches byte %llu of a %llu-byte allocation", what, ULL(l),
               ULL((uint64_t)last), ULL((uint64_t)limit));
}

/* Check the views of the first layers and the last one. */
static void check_views(const struct kvrt_geometry *g, uint64_t base, u128 limit, const char *what)
{
    for (uint64_t l = 0; l < g->num_layers; l++) {
        if (l == MAX_VIEW_LAYERS && g->num_layers > MAX_VIEW_LAYERS + 1)
            l = g->num_layers - 1;
        struct kvrt_view v;
        int rc = kvrt_geometry_layer_view(g, base, l, &v);
        /* A fixed stride off the element grid cannot be expressed in
         * elements; that is a clean refusal. */
        check_outcome(rc, "kvrt_geometry_layer_view");
        if (rc != KVRT_OK) {
            FUZZ_CHECK(rc == KVRT_ERR_INVALID || rc == KVRT_ERR_OVERFLOW, "view refused with %d", rc);
            return;
        }
        FUZZ_CHECK(v.offset_bytes == base + l * g->layer_stride, "%s: layer %llu offset %llu", what, ULL(l),
                   ULL(v.offset_bytes));
        check_view(g, l, &v, limit, what);
    }
    struct kvrt_view v;
    FUZZ_CHECK(kvrt_geometry_layer_view(g, base, g->num_layers, &v) == KVRT_ERR_INVALID,
               "%s: a view past the last layer was not refused", what);
}

static void check_geometry(const struct kvrt_geometry_params *gp, const struct kvrt_geometry *g)
{
    struct kvrt_spec_info info;
    FUZZ_CHECK(kvrt_spec_derive(gp->spec, gp->kernel_block_size, &info) == KVRT_OK,
               "geometry accepted a spec that kvrt_spec_derive refuses");
    FUZZ_CHECK(memcmp(&info, &g->info, sizeof(info)) == 0, "geometry info differs from kvrt_spec_derive");
    check_info(gp->spec, gp->kernel_block_size, &g->info);

    const uint64_t r = g->info.kernel_blocks_per_block;
    FUZZ_CHECK(g->layout == gp->layout && g->num_layers == gp->num_layers && g->num_blocks == gp->num_blocks,
               "geometry does not echo its parameters");
    FUZZ_CHECK(g->shape_bytes[KVRT_AXIS_L] == gp->num_layers &&
                   (u128)g->shape_bytes[KVRT_AXIS_B] == (u128)gp->num_blocks * r &&
                   g->shape_bytes[KVRT_AXIS_H] == info.head_slots &&
                   g->shape_bytes[KVRT_AXIS_N] == info.states_per_kernel_block &&
                   g->shape_bytes[KVRT_AXIS_C] == info.content_bytes,
               "shape_bytes is not [L, B*r, H, N(k), C]");
    FUZZ_CHECK(g->strides_bytes[KVRT_AXIS_C] == 1, "C stride %llu", ULL(g->strides_bytes[KVRT_AXIS_C]));
    FUZZ_CHECK(g->layer_stride == g->strides_bytes[KVRT_AXIS_L] &&
                   (u128)g->block_stride == (u128)g->strides_bytes[KVRT_AXIS_B] * r,
               "layer/block stride disagree with the strides");
    for (int a = 0; a < KVRT_NUM_AXES; a++) {
        if (gp->fixed_strides[a] == KVRT_UNSET)
            continue;
        const u128 got = a == KVRT_AXIS_B ? (u128)g->strides_bytes[a] * r : g->strides_bytes[a];
        FUZZ_CHECK(got == gp->fixed_strides[a], "fixed stride %llu of axis %c became %llu", ULL(gp->fixed_strides[a]),
                   "LBHNC"[a], ULL((uint64_t)got));
    }

    int order[KVRT_NUM_AXES];
    FUZZ_CHECK(kvrt_layout_stride_order(g->layout, order) == KVRT_OK, "no stride order");
    const struct box b = geometry_box(g, 0);
    const u128 reach = box_reach(&b);
    FUZZ_CHECK(reach < g->total_bytes, "the last byte %llu is outside total_bytes %llu", ULL((uint64_t)reach),
               ULL(g->total_bytes));
    check_nesting(&b, order, "geometry");

    /* The padded page is a floor for the page axis (innermost of L, B). */
    if (info.page_size > info.unpadded_page_size) {
        for (int p = KVRT_NUM_AXES - 1; p >= 0; p--) {
            if (order[p] != KVRT_AXIS_L && order[p] != KVRT_AXIS_B)
                continue;
            if (g->shape_bytes[order[p]] > 1)
                FUZZ_CHECK(g->strides_bytes[order[p]] >= info.page_size, "padded page %llu but axis %c strides %llu",
                           ULL(info.page_size), "LBHNC"[order[p]], ULL(g->strides_bytes[order[p]]));
            break;
        }
    }

    if (g->total_bytes <= BITMAP_MAX && box_cells(&b) <= BITMAP_MAX) {
        memset(map_a, 0, g->total_bytes);
        box_mark(&b, map_a, g->total_bytes, MARK_UNIQUE, "geometry");
    }
    check_views(g, 0, g->total_bytes, "geometry");
}

/* ---- placement ---------------------------------------------------------- */

struct fuzz_layers {
    char names[MAX_GROUPS * MAX_GROUP_LAYERS][12];
    struct kvrt_layer_entry entries[MAX_GROUPS * MAX_GROUP_LAYERS];
    struct kvrt_group groups[MAX_GROUPS];
    size_t num_groups, num_layers;
};

static void read_layers(struct fuzz_input *in, const struct kvrt_spec *base, struct fuzz_layers *f)
{
    memset(f, 0, sizeof(*f));
    f->num_groups = 1 + fuzz_u8(in) % MAX_GROUPS;
    for (size_t g = 0; g < f->num_groups; g++) {
        const size_t n = 1 + fuzz_u8(in) % MAX_GROUP_LAYERS;
        f->groups[g].layers = &f->entries[f->num_layers];
        f->groups[g].num_layers = n;
        for (size_t i = 0; i < n; i++) {
            const size_t k = f->num_layers++;
            struct kvrt_layer_entry *e = &f->entries[k];
            const uint8_t sel = fuzz_u8(in);
            switch (sel & 3) {
            case 0:
            case 1:
                snprintf(f->names[k], sizeof(f->names[k]), "g%zu.l%zu", g, i);
                e->name = f->names[k];
                break;
            case 2: /* a name used before: must be refused */
                e->name = k ? f->entries[fuzz_u8(in) % k].name : f->names[k];
                snprintf(f->names[k], sizeof(f->names[k]), "first");
                break;
            default: /* raw bytes, maybe empty, or no name at all */
                for (size_t j = 0; j + 1 < sizeof(f->names[k]); j++)
                    if (!(f->names[k][j] = (char)fuzz_u8(in)))
                        break;
                e->name = (sel & 0x80) && (sel & 0x40) ? NULL : f->names[k];
                break;
            }
            switch ((sel >> 2) & 3) {
            case 0: e->spec = *base; break;
            case 1: e->spec = k ? f->entries[k - 1].spec : *base; break;
            case 2: /* the same cache with a different head count or padding */
                e->spec = *base;
                if (sel & 0x10)
                    e->spec.num_kv_heads = 1 + fuzz_u8(in) % 8;
                else
                    e->spec.page_size_padded = fuzz_value(in);
                break;
            default: read_spec(in, &e->spec); break;
            }
        }
    }
}

struct set_info {
    struct kvrt_placement_set s;
    struct box box;
};

static void check_placement(const kvrt_placement *p, const struct fuzz_layers *f, enum kvrt_layout layout,
                            uint64_t num_blocks, uint64_t kernel_block_size)
{
    const uint64_t size = kvrt_placement_size(p), per_block = kvrt_placement_bytes_per_block(p);
    const size_t nsets = kvrt_placement_num_sets(p);
    const bool block_outer = kvrt_layout_block_outermost(layout);
    int order[KVRT_NUM_AXES];
    FUZZ_CHECK(kvrt_layout_stride_order(layout, order) == KVRT_OK, "no stride order");
    FUZZ_CHECK(kvrt_placement_layout(p) == layout && kvrt_placement_num_blocks(p) == num_blocks &&
                   kvrt_placement_num_groups(p) == f->num_groups,
               "placement does not echo its parameters");
    FUZZ_CHECK((u128)per_block * num_blocks == size, "size %llu != %llu bytes per block * %llu blocks", ULL(size),
               ULL(per_block), ULL(num_blocks));
    FUZZ_CHECK(nsets >= f->num_groups && nsets <= f->num_layers, "%zu sets for %zu groups of %zu layers", nsets,
               f->num_groups, f->num_layers);

    struct set_info sets[MAX_GROUPS * MAX_GROUP_LAYERS];
    size_t layers = 0;
    for (size_t i = 0; i < nsets; i++) {
        struct set_info *si = &sets[i];
        FUZZ_CHECK(kvrt_placement_get_set(p, i, &si->s) == KVRT_OK, "get_set %zu", i);
        const struct kvrt_placement_set *s = &si->s;
        const struct kvrt_geometry *g = &s->geometry;
        FUZZ_CHECK(s->group < f->num_groups && (i == 0 || s->group >= sets[i - 1].s.group), "set %zu has group %zu", i,
                   s->group);
        FUZZ_CHECK(s->num_layers >= 1 && g->num_layers == s->num_layers && g->num_blocks == num_blocks &&
                       g->layout == layout,
                   "set %zu geometry does not match the set", i);
        FUZZ_CHECK(s->layer_stride == g->layer_stride && s->block_stride == g->block_stride,
                   "set %zu strides disagree with its geometry", i);
        layers += s->num_layers;
        check_info(s->spec, kernel_block_size, &g->info);
        /* Documented refusal otherwise: kernels load whole elements. */
        FUZZ_CHECK(s->offset % g->info.elem_size == 0 && s->block_stride % g->info.elem_size == 0,
                   "set %zu (\"%s\") is off its %llu-byte element grid: offset %llu, block stride %llu", i,
                   s->layer_names[0], ULL(g->info.elem_size), ULL(s->offset), ULL(s->block_stride));
        if (block_outer)
            FUZZ_CHECK(s->block_stride == per_block, "set %zu block stride %llu, %llu bytes per block", i,
                       ULL(s->block_stride), ULL(per_block));
        si->box = geometry_box(g, s->offset);
        const u128 reach = box_reach(&si->box);
        FUZZ_CHECK(reach < size, "set %zu (\"%s\") reaches byte %llu of a %llu-byte allocation", i, s->layer_names[0],
                   ULL((uint64_t)reach), ULL(size));
        check_nesting(&si->box, order, "placement set");
        if (kvrt_layout_block_compact(layout)) {
            /* A whole padded page of the last layer and block stays inside. */
            const u128 page_end = (u128)s->offset + (u128)(s->num_layers - 1) * s->layer_stride +
                                  (u128)(num_blocks - 1) * s->block_stride + g->info.page_size;
            FUZZ_CHECK(page_end <= size, "set %zu: the last page ends at %llu, past %llu", i, ULL((uint64_t)page_end),
                       ULL(size));
        }
        for (uint64_t l = 0; l < s->num_layers; l++) {
            struct kvrt_view v;
            FUZZ_CHECK(kvrt_placement_layer_view(p, i, l, &v) == KVRT_OK, "set %zu layer %llu has no view", i, ULL(l));
            FUZZ_CHECK(v.offset_bytes == s->offset + l * s->layer_stride, "set %zu layer %llu offset", i, ULL(l));
            check_view(g, l, &v, size, "placement");
            size_t fs;
            uint64_t fl;
            FUZZ_CHECK(kvrt_placement_find_layer(p, s->layer_names[l], &fs, &fl) == KVRT_OK && fs == i && fl == l,
                       "layer \"%s\" is not found where it is", s->layer_names[l]);
        }
    }
    FUZZ_CHECK(layers == f->num_layers, "%zu layers placed, %zu given", layers, f->num_layers);
    for (size_t k = 0; k < f->num_layers; k++) {
        size_t fs;
        uint64_t fl;
        FUZZ_CHECK(kvrt_placement_find_layer(p, f->entries[k].name, &fs, &fl) == KVRT_OK, "layer \"%s\" was not placed",
                   f->entries[k].name);
        FUZZ_CHECK(kvrt_spec_equal(sets[fs].s.spec, &f->entries[k].spec), "layer \"%s\" got another spec",
                   f->entries[k].name);
    }

    /* Layers of one group never share a byte; groups overlay each other.
     * Analytically: stacked regions (layer-compact) or stacked slices of
     * each block (block-outermost) must not intersect. */
    for (size_t i = 0; i < nsets; i++) {
        for (size_t j = i + 1; j < nsets; j++) {
            if (sets[i].s.group != sets[j].s.group)
                continue;
            struct box a = sets[i].box, b = sets[j].box;
            if (block_outer)
                a.extent[KVRT_AXIS_B] = b.extent[KVRT_AXIS_B] = 1;
            const u128 a_end = box_reach(&a), b_end = box_reach(&b);
            FUZZ_CHECK(a_end < b.base || b_end < a.base,
                       "sets %zu and %zu of group %zu overlap: [%llu, %llu] and [%llu, %llu]", i, j, sets[i].s.group,
                       ULL(a.base), ULL((uint64_t)a_end), ULL(b.base), ULL((uint64_t)b_end));
            if (block_outer)
                FUZZ_CHECK(a_end < per_block && b_end < per_block, "sets %zu, %zu leave their block", i, j);
        }
    }
    if (size > BITMAP_MAX)
        return;
    for (size_t g = 0; g < f->num_groups; g++) {
        memset(map_a, 0, size);
        for (size_t i = 0; i < nsets; i++)
            if (sets[i].s.group == g && box_cells(&sets[i].box) <= BITMAP_MAX)
                box_mark(&sets[i].box, map_a, size, MARK_UNIQUE, "placement group");
    }
}

/* ---- transfer regions --------------------------------------------------- */

static void check_regions(const kvrt_placement *p, const uint64_t *ids, size_t n, const struct kvrt_region *r,
                          size_t nr)
{
    const uint64_t size = kvrt_placement_size(p);
    if (n == 0) {
        FUZZ_CHECK(r == NULL && nr == 0, "no ids gave %zu regions", nr);
        return;
    }
    FUZZ_CHECK(r != NULL && nr > 0, "%zu ids gave no regions", n);
    for (size_t i = 0; i < nr; i++) {
        FUZZ_CHECK(r[i].length > 0, "region %zu is empty", i);
        FUZZ_CHECK((u128)r[i].offset + r[i].length <= size, "region %zu [%llu, +%llu) leaves the %llu bytes", i,
                   ULL(r[i].offset), ULL(r[i].length), ULL(size));
        /* Sorted and merged: a gap separates consecutive runs. */
        if (i > 0)
            FUZZ_CHECK((u128)r[i - 1].offset + r[i - 1].length < r[i].offset,
                       "regions %zu [%llu, +%llu) and %zu [%llu, +%llu) are unsorted, overlap or touch", i - 1,
                       ULL(r[i - 1].offset), ULL(r[i - 1].length), i, ULL(r[i].offset), ULL(r[i].length));
    }
    if (size > BITMAP_MAX)
        return;

    /* need: the cells of the requested blocks; pages: need plus the padding
     * of their pages, which the regions include by contract; have: what the
     * regions cover.  need must be covered, and have must be exactly pages. */
    memset(map_a, 0, size);
    memset(map_b, 0, size);
    memset(map_c, 0, size);
    const size_t nsets = kvrt_placement_num_sets(p);
    for (size_t s = 0; s < nsets; s++) {
        struct kvrt_placement_set set;
        kvrt_placement_get_set(p, s, &set);
        const struct kvrt_geometry *g = &set.geometry;
        const uint64_t r_k = g->info.kernel_blocks_per_block;
        for (size_t i = 0; i < n; i++) {
            struct box b = geometry_box(g, set.offset + ids[i] * set.block_stride);
            b.extent[KVRT_AXIS_B] = r_k;
            if (box_cells(&b) > BITMAP_MAX)
                return;
            box_mark(&b, map_a, size, MARK_SET, "requested block");
            box_mark(&b, map_b, size, MARK_SET, "requested block");
            if (g->info.page_size > g->info.unpadded_page_size)
                for (uint64_t l = 0; l < set.num_layers; l++) {
                    const uint64_t start = b.base + l * set.layer_stride;
                    FUZZ_CHECK((u128)start + g->info.page_size <= size,
                               "padded page at %llu leaves the "
                               "allocation",
                               ULL(start));
                    memset(map_b + start, 1, g->info.page_size);
                }
        }
    }
    for (size_t i = 0; i < nr; i++)
        memset(map_c + r[i].offset, 1, r[i].length);
    for (uint64_t x = 0; x < size; x++) {
        FUZZ_CHECK(!map_a[x] || map_c[x], "byte %llu of a requested page is not in any region", ULL(x));
        FUZZ_CHECK(!map_c[x] || map_b[x], "region byte %llu belongs to no requested page", ULL(x));
        FUZZ_CHECK(!map_b[x] || map_c[x], "padding byte %llu of a requested page is not in any region", ULL(x));
    }
}

/* Upper bound of the runs a request can split into (C is contiguous). */
static u128 runs_bound(const kvrt_placement *p, size_t n)
{
    u128 total = 0;
    for (size_t s = 0; s < kvrt_placement_num_sets(p); s++) {
        struct kvrt_placement_set set;
        kvrt_placement_get_set(p, s, &set);
        const struct kvrt_geometry *g = &set.geometry;
        u128 runs = (u128)set.num_layers * g->info.kernel_blocks_per_block;
        runs *= g->shape_bytes[KVRT_AXIS_H];
        if (runs > MAX_RUNS)
            return runs;
        total += runs * g->shape_bytes[KVRT_AXIS_N] * n;
    }
    return total;
}

static void fuzz_transfer(struct fuzz_input *in, const kvrt_placement *p)
{
    const uint64_t num_blocks = kvrt_placement_num_blocks(p);
    const size_t rounds = 1 + fuzz_u8(in) % 3;
    for (size_t round = 0; round < rounds; round++) {
        uint64_t ids[MAX_IDS];
        const size_t n = fuzz_u8(in) % (MAX_IDS + 1);
        bool in_range = true;
        for (size_t i = 0; i < n; i++) {
            const uint8_t sel = fuzz_u8(in);
            if ((sel & 3) == 3)
                ids[i] = fuzz_value(in); /* most likely out of range */
            else if ((sel & 3) == 2 && i > 0)
                ids[i] = ids[i - 1] + (sel >> 7); /* duplicates and neighbours */
            else
                ids[i] = num_blocks <= 0xff ? (uint64_t)(sel >> 2) % (num_blocks + 1) : num_blocks - 1 - (sel >> 2);
            in_range = in_range && ids[i] < num_blocks;
        }
        if (runs_bound(p, n) > MAX_RUNS)
            continue;
        struct kvrt_region *r = &poison_region;
        size_t nr = 12345;
        int rc = kvrt_transfer_regions(p, ids, n, &r, &nr);
        FUZZ_LOG("transfer of %zu ids: %s, %zu regions\n", n, rc == KVRT_OK ? "ok" : kvrt_error_message(),
                 rc == KVRT_OK ? nr : 0);
        if (!in_range) {
            FUZZ_CHECK(rc == KVRT_ERR_INVALID, "an out-of-range block id was not refused (rc %d)", rc);
            fuzz_check_error(rc, "kvrt_transfer_regions");
            FUZZ_CHECK(r == NULL && nr == 0, "a refused request left regions behind");
            continue;
        }
        FUZZ_CHECK(rc == KVRT_OK || rc == KVRT_ERR_NOMEM, "kvrt_transfer_regions failed with %d", rc);
        if (rc != KVRT_OK) {
            fuzz_check_error(rc, "kvrt_transfer_regions");
            continue;
        }
        check_regions(p, ids, n, r, nr);
        kvrt_free(r);
    }
}

static void fuzz_budget(struct fuzz_input *in, const struct fuzz_layers *f, enum kvrt_layout layout)
{
    const uint64_t budget = fuzz_value(in);
    uint64_t n = 0;
    int rc = kvrt_placement_blocks_for_budget(layout, f->groups, f->num_groups, budget, &n);
    FUZZ_LOG("budget %llu: %s, %llu blocks\n", ULL(budget), rc == KVRT_OK ? "ok" : kvrt_error_message(), ULL(n));
    check_outcome(rc, "kvrt_placement_blocks_for_budget");
    if (rc != KVRT_OK)
        return;
    kvrt_placement *p = NULL;
    FUZZ_CHECK(n >= 1, "a budget of %llu gave 0 blocks", ULL(budget));
    rc = kvrt_placement_create(layout, f->groups, f->num_groups, n, 0, &p);
    FUZZ_CHECK(rc == KVRT_OK, "the %llu blocks a budget of %llu allows cannot be placed", ULL(n), ULL(budget));
    FUZZ_CHECK(kvrt_placement_size(p) <= budget, "%llu blocks take %llu bytes, over the budget %llu", ULL(n),
               ULL(kvrt_placement_size(p)), ULL(budget));
    const uint64_t per_block = kvrt_placement_bytes_per_block(p);
    kvrt_placement_destroy(p);
    /* Largest: one more block must not fit or must not be placeable. */
    if (n < UINT64_MAX && (u128)(n + 1) * per_block <= budget) {
        rc = kvrt_placement_create(layout, f->groups, f->num_groups, n + 1, 0, &p);
        kvrt_placement_destroy(p);
        FUZZ_CHECK(rc != KVRT_OK, "a budget of %llu holds %llu blocks, not the %llu reported", ULL(budget), ULL(n + 1),
                   ULL(n));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in = {data, size};
    struct kvrt_spec spec;
    struct kvrt_geometry_params gp;
    struct kvrt_geometry g;

    read_spec(&in, &spec);
    kvrt_geometry_params_default(&gp);
    gp.layout = (enum kvrt_layout)((int)(fuzz_u8(&in) % (KVRT_NUM_LAYOUTS + 2)) - 1);
    gp.spec = &spec;
    gp.num_layers = fuzz_value(&in);
    gp.num_blocks = fuzz_value(&in);
    const uint8_t flags = fuzz_u8(&in);
    gp.kernel_block_size = (flags & 1) ? fuzz_value(&in) : 0;
    for (int a = 0; a < KVRT_NUM_AXES; a++)
        if (flags & (2u << a))
            gp.fixed_strides[a] = fuzz_value(&in);

    struct kvrt_spec_info info;
    int rc = kvrt_spec_derive(&spec, gp.kernel_block_size, &info);
    check_outcome(rc, "kvrt_spec_derive");
    if (rc == KVRT_OK) {
        check_info(&spec, gp.kernel_block_size, &info);
    } else {
        /* kvrt_spec_equal is a query: it must leave the last message alone. */
        char before[2048];
        snprintf(before, sizeof(before), "%s", kvrt_error_message());
        FUZZ_CHECK(kvrt_spec_equal(&spec, &spec), "a spec differs from itself");
        FUZZ_CHECK(strcmp(before, kvrt_error_message()) == 0, "kvrt_spec_equal changed the message");
    }

    FUZZ_LOG("derive: %s\n", rc == KVRT_OK ? "ok" : kvrt_error_message());
    rc = kvrt_geometry_compute(&gp, &g);
    FUZZ_LOG("geometry: %s\n", rc == KVRT_OK ? "ok" : kvrt_error_message());
    check_outcome(rc, "kvrt_geometry_compute");
    const bool have_geometry = rc == KVRT_OK;
    if (have_geometry)
        check_geometry(&gp, &g);

    /* Placement reuses layout, block count and kernel block size. */
    struct fuzz_layers f;
    read_layers(&in, &spec, &f);
    const uint64_t num_blocks = gp.num_blocks;
    kvrt_placement *p = (kvrt_placement *)(void *)&poison_placement;
    rc = kvrt_placement_create(gp.layout, f.groups, f.num_groups, num_blocks, gp.kernel_block_size, &p);
    FUZZ_LOG("placement of %zu groups, %zu layers: %s\n", f.num_groups, f.num_layers,
             rc == KVRT_OK ? "ok" : kvrt_error_message());
    check_outcome(rc, "kvrt_placement_create");
    if (rc != KVRT_OK) {
        FUZZ_CHECK(p == NULL, "a refused placement left a handle");
    } else {
        check_placement(p, &f, gp.layout, num_blocks, gp.kernel_block_size);
        fuzz_transfer(&in, p);
        kvrt_placement_destroy(p);
    }
    if (fuzz_u8(&in) & 1)
        fuzz_budget(&in, &f, gp.layout);

    /* Read last so that the seed format above stays stable: a view of the
     * last layer at any base offset is placed there or refused as an
     * overflow, never wrapped. */
    if (have_geometry) {
        const uint64_t base = fuzz_value(&in), l = g.num_layers - 1;
        struct kvrt_view v;
        rc = kvrt_geometry_layer_view(&g, base, l, &v);
        check_outcome(rc, "kvrt_geometry_layer_view");
        const u128 want = (u128)base + (u128)l * g.layer_stride;
        if (rc == KVRT_OK)
            FUZZ_CHECK(want == v.offset_bytes, "view at base %llu has offset %llu", ULL(base), ULL(v.offset_bytes));
        else if (rc == KVRT_ERR_OVERFLOW)
            FUZZ_CHECK(want > UINT64_MAX, "view at base %llu refused as an overflow, but it fits", ULL(base));
    }
    return 0;
}
