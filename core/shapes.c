/* The shape rule (shapes.h; docs/design.md §5, §7 step 3). */
#include <stdint.h>

#include <kvrt/layout.h>

#include "shapes.h"

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

enum kvrt_shape_need kvrt_shapes_need(const struct kvrt_shapes *s, size_t num_groups)
{
    if (s->count == 0 || s->other == SIZE_MAX)
        return KVRT_SHAPES_ANY;
    return num_groups > 1 && s->other_page != SIZE_MAX ? KVRT_SHAPES_BLOCK_OUTERMOST : KVRT_SHAPES_BLOCK_COMPACT;
}

bool kvrt_shapes_place(const struct kvrt_shapes *s, size_t num_groups, enum kvrt_layout layout, const char **needs)
{
    const bool compact = kvrt_layout_block_compact(layout), outermost = kvrt_layout_block_outermost(layout);
    const char *need = NULL;
    if (s->count && s->other_page != SIZE_MAX && num_groups > 1 && !(compact && outermost))
        need = "a block-compact, block-outermost layout (pages of different sizes in more than one group)";
    else if (s->count && s->other_page != SIZE_MAX && !compact)
        need = "a block-compact layout (pages of different sizes)";
    else if (s->count && s->other != SIZE_MAX && num_groups > 1 && !compact && !outermost)
        need = "a block-compact or block-outermost layout (groups of different head slots or states)";
    if (needs)
        *needs = need;
    return need == NULL;
}

bool kvrt_shape_need_admits(enum kvrt_shape_need need, enum kvrt_layout layout)
{
    switch (need) {
    case KVRT_SHAPES_ANY: return true;
    case KVRT_SHAPES_BLOCK_COMPACT: return kvrt_layout_block_compact(layout);
    case KVRT_SHAPES_BLOCK_OUTERMOST: return kvrt_layout_block_compact(layout) && kvrt_layout_block_outermost(layout);
    }
    return false;
}

const char *kvrt_shape_need_name(enum kvrt_shape_need need)
{
    return need == KVRT_SHAPES_BLOCK_OUTERMOST ? "block-compact and block-outermost"
           : need == KVRT_SHAPES_BLOCK_COMPACT ? "block-compact"
                                               : "any";
}
