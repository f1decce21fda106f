/* The shape rule (shapes.h; docs/design.md §5, §7 step 3).
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <stdint.h>
#include <stdio.h>

#include <kvrt/layout.h>

#include "shapes.h"

static const struct {
    const char *name, *mix, *order, *why, *placement;
} needs[] = {
    [KVRT_SHAPES_ANY] = {"any", "", "", "", ""},
    [KVRT_SHAPES_COMPACT_OR_OUTERMOST] = {"block-compact or block-outermost",
                                          "the groups overlay with other head slots or states",
                                          "L and B, or B, outermost", "each page one run or each block one span",
                                          "a block-compact or block-outermost layout (groups of different head slots "
                                          "or states)"},
    [KVRT_SHAPES_BLOCK_COMPACT] = {"block-compact", "the specs mix head, state or page shapes", "L and B outermost",
                                   "each page one contiguous run", "a block-compact layout (pages of different sizes)"},
    [KVRT_SHAPES_BLOCK_OUTERMOST] = {"block-compact and block-outermost",
                                     "the groups overlay with different page sizes", "B then L outermost",
                                     "one span per block in every group",
                                     "a block-compact, block-outermost layout (pages of different sizes in more than "
                                     "one group)"},
};

void kvrt_shapes_add(struct kvrt_shapes *s, const struct kvrt_spec_info *info)
{
    if (s->count == 0) {
        s->first = *info;
        s->other = SIZE_MAX;
        s->other_page = SIZE_MAX;
    }
    if (s->other == SIZE_MAX &&
        (info->head_slots != s->first.head_slots || info->states_per_block != s->first.states_per_block ||
         info->page_size != s->first.page_size))
        s->other = s->count;
    if (s->other_page == SIZE_MAX && info->page_size != s->first.page_size)
        s->other_page = s->count;
    s->count++;
}

bool kvrt_shapes_mixed(const struct kvrt_shapes *s)
{
    return s->count > 0 && s->other != SIZE_MAX;
}

enum kvrt_shape_need kvrt_shapes_need(const struct kvrt_shapes *s, size_t num_groups)
{
    if (!kvrt_shapes_mixed(s))
        return KVRT_SHAPES_ANY;
    if (s->other_page != SIZE_MAX)
        return num_groups > 1 ? KVRT_SHAPES_BLOCK_OUTERMOST : KVRT_SHAPES_BLOCK_COMPACT;
    /* One page size: within one group every set has its own region or its
     * own slice of each block; overlaid groups must not interleave heads. */
    return num_groups > 1 ? KVRT_SHAPES_COMPACT_OR_OUTERMOST : KVRT_SHAPES_ANY;
}

bool kvrt_shape_need_admits(enum kvrt_shape_need need, enum kvrt_layout layout)
{
    const bool compact = kvrt_layout_block_compact(layout), outermost = kvrt_layout_block_outermost(layout);
    switch (need) {
    case KVRT_SHAPES_ANY: return kvrt_layout_valid((int)layout);
    case KVRT_SHAPES_COMPACT_OR_OUTERMOST: return compact || outermost;
    case KVRT_SHAPES_BLOCK_COMPACT: return compact;
    case KVRT_SHAPES_BLOCK_OUTERMOST: return compact && outermost;
    }
    return false;
}

static bool valid_need(enum kvrt_shape_need need)
{
    return (unsigned)need < sizeof(needs) / sizeof(needs[0]);
}

const char *kvrt_shape_need_name(enum kvrt_shape_need need)
{
    return valid_need(need) ? needs[need].name : "";
}

const char *kvrt_shape_need_mix(enum kvrt_shape_need need)
{
    return valid_need(need) ? needs[need].mix : "";
}

const char *kvrt_shape_need_order(enum kvrt_shape_need need)
{
    return valid_need(need) ? needs[need].order : "";
}

const char *kvrt_shape_need_why(enum kvrt_shape_need need)
{
    return valid_need(need) ? needs[need].why : "";
}

const char *kvrt_shape_need_placement(enum kvrt_shape_need need)
{
    return valid_need(need) ? needs[need].placement : "";
}

const char *kvrt_shape_need_layouts(enum kvrt_shape_need need, char *buf, size_t size)
{
    size_t used = 0;
    if (size == 0)
        return buf;
    buf[0] = '\0';
    for (int l = 0; l < KVRT_NUM_LAYOUTS && used < size; l++)
        if (kvrt_shape_need_admits(need, (enum kvrt_layout)l))
            used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "",
                                     kvrt_layout_name((enum kvrt_layout)l));
    return buf;
}
