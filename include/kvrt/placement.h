/*
 * kvrt — placement of groups of named layers in one allocation.
 *
 * Layer-compact layouts give each layer its own region; block-outermost
 * layouts interleave all layers' pages inside each block.  Groups overlay
 * the same bytes from offset 0.  Within a group, layers with identical specs
 * form one set (in order of first appearance), and each set gets one
 * (layer_stride, block_stride, offset) triple.
 */
#ifndef KVRT_PLACEMENT_H
#define KVRT_PLACEMENT_H

#include <stdbool.h>
#include <kvrt/common.h>
#include <kvrt/geometry.h>

#ifdef __cplusplus
extern "C" {
#endif

struct kvrt_layer_entry {
    const char *name; /* copied by kvrt_placement_create */
    struct kvrt_spec spec;
};

struct kvrt_group {
    const struct kvrt_layer_entry *layers;
    size_t num_layers;
};

typedef struct kvrt_placement kvrt_placement;

/**
 * Whether the layers of the groups mix shapes (docs/design.md §5, §7): two
 * of them differ in head slots, states per block or page size, which a
 * different element type, block size, head count or size, tokens per state
 * or padding each bring about.  Resolution told so keeps only block-compact
 * layouts (kvrt_runtime_resolve, kvrt_resolver_set_mixed_shapes); given the
 * groups themselves (kvrt_runtime_resolve_groups, kvrt_resolver_set_groups)
 * it keeps exactly the layouts placement accepts for them.  This is the one
 * definition; pass its answer rather than deciding again.
 * @return KVRT_OK; KVRT_ERR_INVALID for no groups, an empty group, a layer
 *   without a name, or a spec kvrt_spec_derive refuses (prefixed with the
 *   layer's name).
 */
KVRT_API int kvrt_placement_mixed_shapes(const struct kvrt_group *groups, size_t num_groups, bool *mixed);

/**
 * Place the groups.  kernel_block_size 0 = no splitting.
 * @return KVRT_OK; KVRT_ERR_REFUSED when the layout would let one layer's
 *   block reach into another's: pages of different sizes need a
 *   block-compact layout, and in more than one group a block-outermost one
 *   too; groups of one page size but other head slots or states need a
 *   block-compact or a block-outermost one (the message names the layout,
 *   two layers' shapes, and the layouts that fit);
 *   KVRT_ERR_INVALID for no groups, an empty group, a missing or duplicated
 *   layer name, and a set whose offset or block stride is not a multiple of
 *   its element size (pages of other layers, e.g. an odd-sized state page,
 *   pushed it off its grid: pad those pages); errors of kvrt_spec_derive /
 *   kvrt_geometry_compute otherwise, prefixed with the layer's name.
 */
KVRT_API int kvrt_placement_create(enum kvrt_layout layout, const struct kvrt_group *groups, size_t num_groups,
                                   uint64_t num_blocks, uint64_t kernel_block_size, kvrt_placement **out);

KVRT_API void kvrt_placement_destroy(kvrt_placement *p);

/**
 * Largest number of blocks whose placement (without kernel splitting) fits
 * in budget_bytes and can be created.
 * KVRT_ERR_INVALID when not even one block fits (message gives the bytes of
 * one block); the errors of kvrt_placement_create otherwise.
 */
KVRT_API int kvrt_placement_blocks_for_budget(enum kvrt_layout layout, const struct kvrt_group *groups,
                                              size_t num_groups, uint64_t budget_bytes, uint64_t *num_blocks);

KVRT_API enum kvrt_layout kvrt_placement_layout(const kvrt_placement *p);
KVRT_API uint64_t kvrt_placement_bytes_per_block(const kvrt_placement *p);
KVRT_API uint64_t kvrt_placement_size(const kvrt_placement *p);
KVRT_API uint64_t kvrt_placement_num_blocks(const kvrt_placement *p);
KVRT_API size_t kvrt_placement_num_sets(const kvrt_placement *p);
KVRT_API size_t kvrt_placement_num_groups(const kvrt_placement *p);

/* One set of identical specs in a group. */
struct kvrt_placement_set {
    size_t group; /* index of its group */
    size_t num_layers;
    const char *const *layer_names; /* owned by the placement */
    const struct kvrt_spec *spec;   /* owned by the placement */
    uint64_t layer_stride;
    uint64_t block_stride;
    uint64_t offset;
    struct kvrt_geometry geometry; /* strides, views of this set */
};

/** Describe set i (0 <= i < num_sets); pointers stay valid with p. */
KVRT_API int kvrt_placement_get_set(const kvrt_placement *p, size_t i, struct kvrt_placement_set *out);

/** View of layer `layer` (index within its set) of set `set`. */
KVRT_API int kvrt_placement_layer_view(const kvrt_placement *p, size_t set, uint64_t layer, struct kvrt_view *out);

/** Find a layer by name: its set and index within the set. */
KVRT_API int kvrt_placement_find_layer(const kvrt_placement *p, const char *name, size_t *set, uint64_t *layer);

/**
 * The staging order (docs/design.md §9), the layout gather and scatter use
 * and two engines meet on: per block, every layer in placement order, each
 * its unpadded [H, N, C] page.  Layer `layer` counts over all sets in
 * placement order (0 .. layers - 1): *offset is where its page starts within
 * one block's staging bytes, *bytes its size (H x N x C).
 */
KVRT_API int kvrt_placement_staging_layer(const kvrt_placement *p, uint64_t layer, uint64_t *offset, uint64_t *bytes);
/** Staging bytes of one block (every layer's unpadded page). */
KVRT_API int kvrt_placement_staging_bytes(const kvrt_placement *p, uint64_t *bytes_per_block);

#ifdef __cplusplus
}
#endif
#endif
