/*
 * Internal: the shape rule (docs/design.md §5, §7 step 3), in one place for
 * kvrt_placement_mixed_shapes, placement and resolution.
 *
 * A layer's shape is its head slots, states per block and page size.
 *
 * Placement refuses what would make one layer's block reach into another
 * layer's: pages of different sizes need each page one run (a block-compact
 * layout); groups overlay and share block ids, so across several groups a
 * block must also be one span in every group (block outermost), and groups
 * of one page size but other head slots or states need either property
 * (otherwise their heads interleave differently).
 *
 * kvrt_shapes_need says which of these the layers demand, and it is the
 * only judge: placement accepts exactly the layouts kvrt_shape_need_admits,
 * and resolution told the groups keeps exactly those.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_SHAPES_H
#define KVRT_CORE_SHAPES_H

#include <stdbool.h>
#include <stddef.h>

#include <kvrt/placement.h>

/* What the layers' shapes demand of a layout. */
enum kvrt_shape_need {
    KVRT_SHAPES_ANY = 0,              /* one shape, or several in one group of one page size */
    KVRT_SHAPES_COMPACT_OR_OUTERMOST, /* overlaid groups of one page size, other head slots or states */
    KVRT_SHAPES_BLOCK_COMPACT,        /* pages of different sizes (in one group) */
    KVRT_SHAPES_BLOCK_OUTERMOST,      /* pages of different sizes across groups: block compact and outermost */
};

/* The layers seen so far; start from {0} and add each in placement order. */
struct kvrt_shapes {
    size_t count;
    struct kvrt_spec_info first;
    size_t other;      /* the first layer whose shape differs from layer 0's, or SIZE_MAX */
    size_t other_page; /* the first layer whose page size differs, or SIZE_MAX */
};

void kvrt_shapes_add(struct kvrt_shapes *s, const struct kvrt_spec_info *info);

/* Whether the layers seen mix shapes (kvrt_placement_mixed_shapes). */
bool kvrt_shapes_mixed(const struct kvrt_shapes *s);

/* The rule: what the layers seen, placed in num_groups groups, demand. */
enum kvrt_shape_need kvrt_shapes_need(const struct kvrt_shapes *s, size_t num_groups);

/* Derive every layer's spec (errors name the layer) into *shapes. */
int kvrt_groups_shapes(const struct kvrt_group *groups, size_t num_groups, struct kvrt_shapes *shapes);

bool kvrt_shape_need_admits(enum kvrt_shape_need need, enum kvrt_layout layout);

/* Words for messages and the trace, from the one table of needs:
 *   name       "block-compact", "block-compact or block-outermost", ...
 *   mix        what the layers do that demands it
 *   order      the outer axes such a layout has ("L and B outermost")
 *   why        what that gives ("each page one contiguous run")
 *   placement  what placement says the layers need
 * For KVRT_SHAPES_ANY every word but name is "". */
const char *kvrt_shape_need_name(enum kvrt_shape_need need);
const char *kvrt_shape_need_mix(enum kvrt_shape_need need);
const char *kvrt_shape_need_order(enum kvrt_shape_need need);
const char *kvrt_shape_need_why(enum kvrt_shape_need need);
const char *kvrt_shape_need_placement(enum kvrt_shape_need need);

/* The layouts `need` admits, in table order ("LBHNC, LBNHC, ..."), into buf. */
const char *kvrt_shape_need_layouts(enum kvrt_shape_need need, char *buf, size_t size);

#endif
