/*
 * Internal: the shape rules (docs/design.md §5, §7 step 3), in one place for
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
 * Resolution keeps the layouts placement accepts, and prefers, for any mix
 * of shapes, those whose pages are one run: every layout it keeps is one
 * placement accepts.
 */
#ifndef KVRT_CORE_SHAPES_H
#define KVRT_CORE_SHAPES_H

#include <stdbool.h>
#include <stddef.h>

#include <kvrt/placement.h>

/* What resolution keeps for the layers' shapes. */
enum kvrt_shape_need {
    KVRT_SHAPES_ANY = 0,         /* one shape: every layout */
    KVRT_SHAPES_BLOCK_COMPACT,   /* mixed shapes */
    KVRT_SHAPES_BLOCK_OUTERMOST, /* and page sizes that differ across groups: block compact and outermost */
};

/* The layers seen so far; start from {0} and add each in placement order. */
struct kvrt_shapes {
    size_t count;
    struct kvrt_spec_info first;
    size_t other;      /* the first layer whose shape differs from layer 0's, or SIZE_MAX */
    size_t other_page; /* the first layer whose page size differs, or SIZE_MAX */
};

void kvrt_shapes_add(struct kvrt_shapes *s, const struct kvrt_spec_info *info);

/* What resolution keeps for the layers seen, placed in num_groups groups. */
enum kvrt_shape_need kvrt_shapes_need(const struct kvrt_shapes *s, size_t num_groups);

/* Whether placement accepts `layout` for the layers seen, in num_groups
 * groups; when it does not, *needs (may be NULL) says what it needs. */
bool kvrt_shapes_place(const struct kvrt_shapes *s, size_t num_groups, enum kvrt_layout layout, const char **needs);

/* Derive every layer's spec (errors name the layer) and say what they demand. */
int kvrt_groups_shape_need(const struct kvrt_group *groups, size_t num_groups, enum kvrt_shape_need *need);

bool kvrt_shape_need_admits(enum kvrt_shape_need need, enum kvrt_layout layout);

/* "block-compact" or "block-compact and block-outermost", for messages. */
const char *kvrt_shape_need_name(enum kvrt_shape_need need);

#endif
