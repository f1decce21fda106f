/*
 * Geometry of one set of same-shaped layers (docs/design.md §4).
 *
 * Strides are found by one walk over the physical positions, innermost to
 * outermost, carrying the span of everything inside.  A padded page and the
 * caller's fixed strides are both just "this axis strides by more than the
 * span inside it"; the walk treats them the same way.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <string.h>

#include <kvrt/geometry.h>

#include "checked.h"
#include "error.h"
#include "kernel_split.h"
#include "layout_internal.h"
#include "reserved.h"

static const char axis_names[KVRT_NUM_AXES] = {'L', 'B', 'H', 'N', 'C'};

void kvrt_geometry_params_default(struct kvrt_geometry_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof(*params));
    params->layout = KVRT_LAYOUT_LBNHC;
    for (int a = 0; a < KVRT_NUM_AXES; a++)
        params->fixed_strides[a] = KVRT_UNSET;
}

/* Physical position of the innermost of {L, B}: the axis that strides by a
 * whole page. */
static int page_position(const int order[KVRT_NUM_AXES])
{
    for (int p = KVRT_NUM_AXES - 1; p >= 0; p--)
        if (order[p] == KVRT_AXIS_L || order[p] == KVRT_AXIS_B)
            return p;
    return 0;
}

/*
 * The walk.  `fixed` is per kernel block for B.  `padded_page` (0 = none)
 * is the least stride of the page axis; a fixed stride there must reach it.
 */
static int walk_strides(const char *layout_name, const int order[KVRT_NUM_AXES], const uint64_t extent[KVRT_NUM_AXES],
                        const uint64_t fixed[KVRT_NUM_AXES], uint64_t padded_page, uint64_t strides[KVRT_NUM_AXES],
                        uint64_t *total)
{
    const int page_pos = page_position(order);
    uint64_t span = 1;

    for (int p = KVRT_NUM_AXES - 1; p >= 0; p--) {
        const int axis = order[p];
        uint64_t stride = span;
        /* The padded size is a floor: fixed inner strides may already have
         * made the page longer. */
        if (p == page_pos && padded_page > span)
            stride = span = padded_page;
        if (fixed[axis] != KVRT_UNSET) {
            /* A fixed stride below the span inside it would make two indices
             * of this axis share bytes. */
            if (extent[axis] > 1 && fixed[axis] < span)
                return kvrt_fail(KVRT_ERR_INVALID,
                                 "fixed stride %llu of axis %c (extent %llu) in layout %s is smaller "
                                 "than the %llu bytes of the axes inside it, so its entries would "
                                 "overlap; fix it to at least %llu or leave it unset",
                                 ULL(fixed[axis]), axis_names[axis], ULL(extent[axis]), layout_name, ULL(span),
                                 ULL(span));
            stride = fixed[axis];
        }
        strides[axis] = stride;
        uint64_t outer;
        if (kvrt_mul_overflow(stride, extent[axis], &outer))
            return kvrt_fail(KVRT_ERR_OVERFLOW,
                             "layout %s: stride %llu of axis %c * its extent %llu does not fit in 64 "
                             "bits; use fewer blocks or layers, or smaller pages",
                             layout_name, ULL(stride), axis_names[axis], ULL(extent[axis]));
        /* An axis of extent 1 with a small fixed stride still encloses
         * everything inside it. */
        span = outer > span ? outer : span;
    }
    *total = span;
    return KVRT_OK;
}

/* Padding adds bytes after each page; only axes that step whole pages (L, B)
 * or that do not step at all may sit outside it. */
static int check_padding(const char *layout_name, const int order[KVRT_NUM_AXES], const uint64_t extent[KVRT_NUM_AXES],
                         const struct kvrt_spec_info *info)
{
    const int page_pos = page_position(order);
    for (int p = 0; p < page_pos; p++) {
        const int axis = order[p];
        if (axis == KVRT_AXIS_L || axis == KVRT_AXIS_B || extent[axis] == 1)
            continue;
        return kvrt_fail(KVRT_ERR_REFUSED,
                         "layout %s cannot hold a padded page (page_size_padded %llu > page %llu "
                         "bytes): axis %c (extent %llu) lies outside the page, so padding would cut "
                         "through it; use a layout whose page is contiguous such as LBNHC, LBHNC, "
                         "BLNHC or BLHNC, or leave page_size_padded unset",
                         layout_name, ULL(info->page_size), ULL(info->unpadded_page_size), axis_names[axis],
                         ULL(extent[axis]));
    }
    return KVRT_OK;
}

struct walk_input {
    const char *layout_name;
    int order[KVRT_NUM_AXES];
    uint64_t extent[KVRT_NUM_AXES];
    uint64_t fixed[KVRT_NUM_AXES];
    uint64_t padded_page;
};

/* The unsplit walk that the kernel-split rule judges (core/values/kernel_split.c). */
static int check_split(const struct walk_input *in, const struct kvrt_spec_info *info,
                       const struct kvrt_spec_info *whole)
{
    uint64_t strides[KVRT_NUM_AXES], total;
    uint64_t extent[KVRT_NUM_AXES];

    memcpy(extent, in->extent, sizeof(extent));
    extent[KVRT_AXIS_B] /= info->kernel_blocks_per_block;
    extent[KVRT_AXIS_N] = whole->states_per_block;
    int rc = kvrt_kernel_split_unpadded(info);
    if (rc != KVRT_OK)
        return rc;
    rc = walk_strides(in->layout_name, in->order, extent, in->fixed, 0, strides, &total);
    if (rc != KVRT_OK)
        return rc;
    return kvrt_kernel_split_layout(in->layout_name, in->order, extent, strides[KVRT_AXIS_B], info);
}

static int check_params(const struct kvrt_geometry_params *params)
{
    if (!kvrt_layout_valid((int)params->layout))
        return kvrt_fail(KVRT_ERR_INVALID, "layout value %d is not valid; valid layouts are %s", (int)params->layout,
                         kvrt_layout_values_text());
    if (!params->spec)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_geometry_compute: params->spec is NULL");
    if (params->num_layers == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "num_layers 0 is not valid: a geometry needs at least 1 layer");
    if (params->num_blocks == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "num_blocks 0 is not valid: a cache needs at least 1 block");
    if (params->fixed_strides[KVRT_AXIS_C] != KVRT_UNSET && params->fixed_strides[KVRT_AXIS_C] != 1)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "fixed stride %llu of axis C is not valid: content bytes are contiguous, so "
                         "the C stride is always 1; leave it unset",
                         ULL(params->fixed_strides[KVRT_AXIS_C]));
    return KVRT_OK;
}

int kvrt_geometry_compute(const struct kvrt_geometry_params *params, struct kvrt_geometry *out)
{
    struct kvrt_geometry g;
    struct kvrt_spec_info whole;
    struct walk_input in;
    int rc;

    if (!params || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_geometry_compute: params and out must not be NULL");
    rc = kvrt_check_reserved(params->reserved, sizeof(params->reserved), "kvrt_geometry_params");
    if (rc != KVRT_OK)
        return rc;
    rc = check_params(params);
    if (rc != KVRT_OK)
        return rc;
    memset(&g, 0, sizeof(g));
    rc = kvrt_spec_derive(params->spec, params->kernel_block_size, &g.info);
    if (rc != KVRT_OK)
        return rc;
    const uint64_t r = g.info.kernel_blocks_per_block;

    memset(&in, 0, sizeof(in));
    in.layout_name = kvrt_layout_name(params->layout);
    kvrt_layout_stride_order(params->layout, in.order);
    in.extent[KVRT_AXIS_L] = params->num_layers;
    if (kvrt_mul_overflow(params->num_blocks, r, &in.extent[KVRT_AXIS_B]))
        return kvrt_fail(KVRT_ERR_OVERFLOW,
                         "num_blocks %llu * kernel blocks per block %llu does not fit in 64 bits; "
                         "use fewer blocks",
                         ULL(params->num_blocks), ULL(r));
    in.extent[KVRT_AXIS_H] = g.info.head_slots;
    in.extent[KVRT_AXIS_N] = g.info.states_per_kernel_block;
    in.extent[KVRT_AXIS_C] = g.info.content_bytes;
    memcpy(in.fixed, params->fixed_strides, sizeof(in.fixed));
    if (g.info.page_size != g.info.unpadded_page_size)
        in.padded_page = g.info.page_size;

    if (in.padded_page) {
        rc = check_padding(in.layout_name, in.order, in.extent, &g.info);
        if (rc != KVRT_OK)
            return rc;
    }
    if (r > 1) {
        rc = kvrt_spec_derive(params->spec, 0, &whole);
        if (rc != KVRT_OK)
            return rc;
        rc = check_split(&in, &g.info, &whole);
        if (rc != KVRT_OK)
            return rc;
        /* The caller fixes B per manager block; the walk strides kernel blocks. */
        if (in.fixed[KVRT_AXIS_B] != KVRT_UNSET) {
            if (in.fixed[KVRT_AXIS_B] % r != 0)
                return kvrt_fail(KVRT_ERR_INVALID,
                                 "fixed block stride %llu is not a multiple of the %llu kernel blocks "
                                 "per block; fix it to a multiple of %llu",
                                 ULL(in.fixed[KVRT_AXIS_B]), ULL(r), ULL(r));
            in.fixed[KVRT_AXIS_B] /= r;
        }
    }

    rc = walk_strides(in.layout_name, in.order, in.extent, in.fixed, in.padded_page, g.strides_bytes, &g.total_bytes);
    if (rc != KVRT_OK)
        return rc;

    g.layout = params->layout;
    g.num_layers = params->num_layers;
    g.num_blocks = params->num_blocks;
    memcpy(g.shape_bytes, in.extent, sizeof(g.shape_bytes));
    g.layer_stride = g.strides_bytes[KVRT_AXIS_L];
    /* Cannot overflow: the walk already multiplied the kernel stride by
     * num_blocks * r >= r. */
    g.block_stride = g.strides_bytes[KVRT_AXIS_B] * r;
    *out = g;
    return KVRT_OK;
}

int kvrt_geometry_layer_view(const struct kvrt_geometry *geom, uint64_t base_offset, uint64_t layer,
                             struct kvrt_view *out)
{
    struct kvrt_view v;
    uint64_t rel;

    if (!geom || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_geometry_layer_view: geom and out must not be NULL");
    if (layer >= geom->num_layers)
        return kvrt_fail(KVRT_ERR_INVALID, "layer %llu is out of range: the geometry has %llu layers (valid 0..%llu)",
                         ULL(layer), ULL(geom->num_layers), ULL(geom->num_layers - 1));
    if (geom->info.elem_size == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_geometry_layer_view: the geometry has element size 0; fill it with "
                                           "kvrt_geometry_compute");
    if (kvrt_mul_overflow(layer, geom->layer_stride, &rel) || kvrt_add_overflow(base_offset, rel, &v.offset_bytes))
        return kvrt_fail(KVRT_ERR_OVERFLOW, "view offset %llu + layer %llu * layer stride %llu does not fit in 64 bits",
                         ULL(base_offset), ULL(layer), ULL(geom->layer_stride));

    v.elem_size = geom->info.elem_size;
    for (int i = 0; i < 4; i++) {
        const int axis = i + 1;
        v.shape_bytes[i] = geom->shape_bytes[axis];
        v.strides_bytes[i] = geom->strides_bytes[axis];
        v.shape[i] = v.shape_bytes[i];
        if (axis == KVRT_AXIS_C)
            break;
        if (v.strides_bytes[i] % v.elem_size != 0)
            return kvrt_fail(KVRT_ERR_INVALID,
                             "the stride %llu of axis %c is not a multiple of the element size %llu, "
                             "so it cannot be expressed in elements; fix strides to multiples of %llu",
                             ULL(v.strides_bytes[i]), axis_names[axis], ULL(v.elem_size), ULL(v.elem_size));
        v.strides[i] = v.strides_bytes[i] / v.elem_size;
    }
    /* The byte pair (shape_bytes, strides_bytes) counts C in bytes with
     * stride 1; the element pair counts it in elements.  Spec derivation
     * guarantees C is a whole number of elements. */
    v.shape[3] = v.shape_bytes[3] / v.elem_size;
    v.strides[3] = 1;
    *out = v;
    return KVRT_OK;
}
