/*
 * Caches in canonical order (canon.c): where each (layer, head, token)
 * cell of a cache is, and the copies of a chunk between a cache and
 * canonical payloads.
 *
 * Layer 2 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_CANON_H
#define KVRT_STORE_CANON_H

#include <kvrt/transfer.h>

#include "entry.h"

/* Where one canonical layer's cells are in the cache: byte offsets. */
struct canon_layer {
    uint64_t offset;        /* of the layer's view */
    uint64_t kblock_stride; /* bytes from one kernel block to the next */
    uint64_t head_stride;   /* bytes from head slot h to h + 1 */
    uint64_t state_stride;  /* bytes from token slot n to n + 1 (in a kernel block) */
    uint64_t content;       /* C */
};

/* A cache seen by the store. */
struct canon_map {
    kvrt_cache *cache;
    const kvrt_placement *placement;
    uint8_t *host;                       /* the cache's first byte when host-addressable */
    uint64_t block_size;                 /* tokens per manager block */
    uint64_t kernel_size, kernel_blocks; /* k and r */
    uint64_t num_blocks;
    uint64_t heads;     /* head slots the cache holds */
    size_t first_layer; /* the model's layer of layers[0] */
    size_t num_layers;
    struct canon_layer *layers;
};

/* Map the model's layers [first, first + count) to the cache's (by name),
 * checking that each matches the model and holds `heads` heads. */
int canon_map_build(const struct store_model *m, kvrt_cache *cache, uint64_t heads, size_t first, size_t count,
                    struct canon_map *out);
void canon_map_free(struct canon_map *map);

/* The cells one request reads or writes: the cache's own memory (host), or
 * a host copy of the byte regions of its blocks (a cache without a host
 * address: downloaded, and uploaded again after a get). */
struct canon_io {
    const struct canon_map *map;
    const int64_t *table; /* the sequence's block table */
    bool staged;
    struct kvrt_region *regions; /* staged: sorted, each copied to copy + at[i] */
    size_t num_regions;
    uint64_t *at;
    uint8_t *copy;
};

/* Prepare the cells of blocks table[0 .. table_len). */
int canon_io_begin(struct canon_io *io, const struct canon_map *map, const int64_t *table, uint64_t table_len);
/* After a get: upload the staged copy (nothing for a host cache). */
int canon_io_commit(struct canon_io *io);
void canon_io_end(struct canon_io *io);

/* The copies of one chunk (tokens [first, first + chunk_tokens), the
 * layers of layer group `group`, which the map holds) between the cache's
 * head slots slots[0..n) and n canonical payloads of that group.  sums: NULL, or one checksum state per payload, fed
 * the payload's bytes in order as they are copied out (a put seals an entry without reading it again). */
struct canon_chunk {
    uint64_t first;
    uint64_t group;
    const uint64_t *slots;
    uint64_t n;
    uint8_t *const *payloads;
    XXH3_state_t *sums;
};
void canon_pack(const struct canon_io *io, const struct store_model *m, const struct canon_chunk *ch);
void canon_unpack(const struct canon_io *io, const struct store_model *m, const struct canon_chunk *ch);

#endif
