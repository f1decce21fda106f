/*
 * The staging order's layout (docs/design.md §9): for each block, every
 * layer in placement order, each its unpadded [H, N, C] page.  Gather and
 * scatter, the transfer library and the tools all read it from here.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <kvrt/placement.h>

#include "checked.h"
#include "error.h"

/* Walk the layers up to `layer` (or all, with layer == UINT64_MAX). */
static int walk(const kvrt_placement *p, uint64_t layer, uint64_t *offset, uint64_t *page, uint64_t *total,
                const char *fn)
{
    if (!p)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: placement is NULL", fn);
    uint64_t off = 0, seen = 0;
    for (size_t s = 0; s < kvrt_placement_num_sets(p); s++) {
        struct kvrt_placement_set set;
        int status = kvrt_placement_get_set(p, s, &set);
        if (status != KVRT_OK)
            return status;
        const struct kvrt_spec_info *info = &set.geometry.info;
        uint64_t bytes, all;
        if (kvrt_mul_overflow(info->head_slots, info->states_per_block, &bytes) ||
            kvrt_mul_overflow(bytes, info->content_bytes, &bytes) || kvrt_mul_overflow(bytes, set.num_layers, &all))
            return kvrt_fail(KVRT_ERR_OVERFLOW, "%s: a page of set %zu overflows", fn, s);
        if (layer != UINT64_MAX && layer < seen + set.num_layers) {
            *offset = off + (layer - seen) * bytes; /* below off + all: no overflow */
            *page = bytes;
            return KVRT_OK;
        }
        if (kvrt_add_overflow(off, all, &off))
            return kvrt_fail(KVRT_ERR_OVERFLOW, "%s: the staging bytes of a block overflow", fn);
        seen += set.num_layers;
    }
    if (layer != UINT64_MAX)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: layer %llu is out of range; the placement has %llu layers (valid 0..%llu)", fn,
                         (unsigned long long)layer, (unsigned long long)seen, (unsigned long long)seen - 1);
    *total = off;
    return KVRT_OK;
}

int kvrt_placement_staging_layer(const kvrt_placement *p, uint64_t layer, uint64_t *offset, uint64_t *bytes)
{
    if (!offset || !bytes)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_placement_staging_layer: NULL output");
    if (layer == UINT64_MAX)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_placement_staging_layer: layer %llu is out of range",
                         (unsigned long long)layer);
    return walk(p, layer, offset, bytes, NULL, "kvrt_placement_staging_layer");
}

int kvrt_placement_staging_bytes(const kvrt_placement *p, uint64_t *bytes_per_block)
{
    if (!bytes_per_block)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_placement_staging_bytes: NULL output");
    return walk(p, UINT64_MAX, NULL, NULL, bytes_per_block, "kvrt_placement_staging_bytes");
}
