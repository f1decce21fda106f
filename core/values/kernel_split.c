/* How a kernel block splits a manager block: its sizes, states and
 * layouts checked.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include "kernel_split.h"

#include <stdbool.h>

#include "error.h"

int kvrt_kernel_split_block(const struct kvrt_spec *spec, uint64_t kernel_block_size, struct kvrt_spec_info *info)
{
    const uint64_t bs = spec->block_size;
    const uint64_t k = kernel_block_size ? kernel_block_size : bs;
    if (bs % k != 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "kernel_block_size %llu does not divide block_size %llu; use a divisor of "
                         "block_size, or 0 for no splitting",
                         ULL(k), ULL(bs));
    info->kernel_block_size = k;
    info->kernel_blocks_per_block = bs / k;

    if (spec->kind == KVRT_SPEC_STATE && k != bs)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "kernel_block_size %llu would split the blocks of a state spec, which keeps "
                         "one state per block (block_size %llu); use kernel_block_size 0 or %llu",
                         ULL(k), ULL(bs), ULL(bs));
    return KVRT_OK;
}

int kvrt_kernel_split_states(const struct kvrt_spec *spec, const struct kvrt_spec_info *info)
{
    const uint64_t num = spec->tokens_per_state_num, den = spec->tokens_per_state_den;
    /* N is rounded down per block; a kernel block that rounds down too would
     * silently drop states of the block, so the split must be exact. */
    if (info->kernel_blocks_per_block * info->states_per_kernel_block != info->states_per_block)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "kernel_block_size %llu does not split the states of a block evenly: at "
                         "tokens_per_state %llu/%llu a block of %llu tokens holds %llu states, but "
                         "%llu kernel blocks of %llu states hold %llu; use a kernel_block_size whose "
                         "token count is a multiple of tokens_per_state",
                         ULL(info->kernel_block_size), ULL(num), ULL(den), ULL(spec->block_size),
                         ULL(info->states_per_block), ULL(info->kernel_blocks_per_block),
                         ULL(info->states_per_kernel_block),
                         ULL(info->kernel_blocks_per_block * info->states_per_kernel_block));
    return KVRT_OK;
}

int kvrt_kernel_split_unpadded(const struct kvrt_spec_info *info)
{
    if (info->page_size != info->unpadded_page_size)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "kernel_block_size %llu splits each block, but the page is padded "
                         "(page_size_padded %llu > page %llu bytes) and a padded page cannot be "
                         "split; leave page_size_padded unset or kernel_block_size 0",
                         ULL(info->kernel_block_size), ULL(info->page_size), ULL(info->unpadded_page_size));
    return KVRT_OK;
}

/* A manager block may be re-viewed as r kernel blocks only when its bytes
 * are one dense unpadded page: then the r kernel pages are simply
 * consecutive slices of it. */
int kvrt_kernel_split_layout(const char *layout_name, const int order[KVRT_NUM_AXES],
                             const uint64_t extent[KVRT_NUM_AXES], uint64_t block_stride,
                             const struct kvrt_spec_info *info)
{
    bool dense = block_stride == info->unpadded_page_size;
    for (int p = 0; p < KVRT_NUM_AXES && dense; p++) {
        const int axis = order[p];
        if (axis == KVRT_AXIS_B)
            break;
        /* H, N or C outside B would scatter a block's bytes. */
        if (axis != KVRT_AXIS_L && extent[axis] > 1)
            dense = false;
    }
    if (dense)
        return KVRT_OK;
    return kvrt_fail(KVRT_ERR_REFUSED,
                     "kernel_block_size %llu cannot split the blocks of layout %s: a block there is "
                     "not one dense page (block stride %llu bytes, page H*N*C = %llu bytes); use a "
                     "smaller block size (block_size = kernel_block_size %llu) or a layer-compact "
                     "layout such as LBNHC",
                     ULL(info->kernel_block_size), layout_name, ULL(block_stride), ULL(info->unpadded_page_size),
                     ULL(info->kernel_block_size));
}
