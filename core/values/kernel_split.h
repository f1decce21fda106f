/* Internal: the kernel-block split rule, in one place.  A manager block of
 * block_size tokens may be viewed as r = block_size / k kernel blocks of k
 * tokens (docs/design.md §4; decisions in docs/geometry.md).  The spec side
 * decides whether k can split a block's states; the geometry side whether a
 * layout keeps a block one dense page that can be cut into r slices.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_KERNEL_SPLIT_H
#define KVRT_CORE_KERNEL_SPLIT_H

#include <stdint.h>

#include <kvrt/geometry.h>
#include <kvrt/spec.h>

/* k (0 = no split) against the spec: it must divide block_size and may not
 * split a state spec.  Sets info->kernel_block_size and
 * info->kernel_blocks_per_block. */
int kvrt_kernel_split_block(const struct kvrt_spec *spec, uint64_t kernel_block_size, struct kvrt_spec_info *info);

/* After the states of a block and of a kernel block are counted: the r
 * kernel blocks must hold exactly the block's states (N is rounded down per
 * block, so an inexact split would drop states). */
int kvrt_kernel_split_states(const struct kvrt_spec *spec, const struct kvrt_spec_info *info);

/* A padded page cannot be split. */
int kvrt_kernel_split_unpadded(const struct kvrt_spec_info *info);

/* The layout side, decided on the unsplit geometry: the manager block's
 * byte stride must be the unpadded page, and
 * no H, N or C axis of extent > 1 may sit outside B in `order`.
 * `block_stride` and `extent` are those of the unsplit walk. */
int kvrt_kernel_split_layout(const char *layout_name, const int order[KVRT_NUM_AXES],
                             const uint64_t extent[KVRT_NUM_AXES], uint64_t block_stride,
                             const struct kvrt_spec_info *info);

#endif
