/*
 * Entry buffers (buffers.c): slot-sized, 4 KiB-aligned, from slabs of huge
 * pages.
 *
 * Layer 2 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_BUFFERS_H
#define KVRT_STORE_BUFFERS_H

#include <stdint.h>

#include "warn.h"

/* Slot-sized buffers from slabs of huge pages, kept once released (not
 * locked: the memory tier's lock guards its pool). */
struct buf_pool {
    uint64_t buf_bytes, per_slab, slab_bytes;
    uint8_t **slabs;
    uint64_t num_slabs;
    uint8_t *carve; /* the next unused buffer of the newest slab */
    uint64_t carve_left;
    uint8_t **spare; /* room for every buffer of every slab */
    uint64_t num_spare;
};

int buf_pool_init(struct buf_pool *p, uint64_t buf_bytes);
void buf_pool_free(struct buf_pool *p);
/* A buffer, 4 KiB-aligned (zero when new); NULL when out of memory. */
uint8_t *buf_pool_get(struct buf_pool *p);
void buf_pool_put(struct buf_pool *p, uint8_t *buf);

#endif
