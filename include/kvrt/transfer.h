/*
 * kvrt — transfer regions: the byte runs an RDMA/NIXL-style engine registers.
 */
#ifndef KVRT_TRANSFER_H
#define KVRT_TRANSFER_H

#include <kvrt/common.h>
#include <kvrt/placement.h>

#ifdef __cplusplus
extern "C" {
#endif

struct kvrt_region {
    uint64_t offset;
    uint64_t length;
};

/**
 * The minimal sorted list of contiguous (offset, length) runs that covers
 * exactly the pages of the given blocks for every layer of every set, with
 * adjacent and overlapping (overlaid groups) runs merged.  A padded page is
 * covered with its padding (the run is page_size_padded long), so padded
 * block-outermost pages still merge into one run per block.  Duplicated
 * block ids are allowed (covered once).  No ids: KVRT_OK, NULL, 0.
 * *regions is allocated by kvrt; release it with kvrt_free().
 * @return KVRT_OK; KVRT_ERR_INVALID for a block id out of range (message gives
 *   the id and the number of blocks).
 */
KVRT_API int kvrt_transfer_regions(const kvrt_placement *p, const uint64_t *block_ids, size_t num_block_ids,
                                   struct kvrt_region **regions, size_t *num_regions);

#ifdef __cplusplus
}
#endif
#endif
