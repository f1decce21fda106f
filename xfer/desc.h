/*
 * A cache as a transfer sees it, on either side: its layout, its layers'
 * views and the bytes of each cell, rebuilt from a placement (this cache's,
 * or one kvrt recomputed from a peer's metadata).  Everything a peer names
 * (block ids, a layer and head selection) is checked here against it.
 *
 * Layer 1 of libkvrt-xfer (docs/xfer.md, "Layers"): libkvrt only.
 */
#ifndef KVRT_XFER_DESC_H
#define KVRT_XFER_DESC_H

#include <stdbool.h>
#include <stdint.h>

#include <kvrt/placement.h>

#include "limits.h"

/* One layer, in placement order. */
struct xfer_layer {
    const struct kvrt_spec *spec;
    struct kvrt_view view;           /* [B*r, H, N(k), C] in bytes */
    uint64_t kernel_blocks;          /* r */
    uint64_t kernel_states;          /* N(k) */
    uint64_t heads, states, content; /* H, N of a manager block, C bytes */
    uint64_t staging_offset;         /* within one block's staging bytes */
};

struct xfer_desc {
    enum kvrt_layout layout;
    kvrt_placement *placement;
    bool owns_placement; /* a peer's, rebuilt here */
    uint64_t num_blocks;
    uint64_t num_layers;
    struct xfer_layer *layers;
    uint64_t staging_per_block;
    uint64_t bytes;
};

/* What a transfer moves of each block: a layer range and a head range,
 * the same count on both sides. */
struct xfer_sel {
    uint64_t layer_start, num_layers;
    uint64_t head_start, num_heads;
};

/* A token range of one sequence (count 0: whole blocks).  The stream's
 * order walks it in segments of `seg` tokens (the block size of the side
 * whose layout orders the stream),
 * split at multiples of seg, so both sides agree on the order whatever
 * their own block sizes. */
struct xfer_tokens {
    uint64_t first, count, seg;
};

/* Describe `p`; `owns`: xfer_desc_free destroys it. */
int xfer_desc_init(struct xfer_desc *d, kvrt_placement *p, bool owns);
void xfer_desc_free(struct xfer_desc *d);

/* Byte offset of cell (layer, block, head, state) in the allocation. */
uint64_t xfer_desc_cell(const struct xfer_desc *d, uint64_t layer, uint64_t block, uint64_t head, uint64_t state);

/* Bytes of one block's selected cells (what a block contributes to a
 * transfer); 0 for an empty selection. */
uint64_t xfer_sel_block_bytes(const struct xfer_desc *d, const struct xfer_sel *s);
/* Every layer and every head. */
bool xfer_sel_full(const struct xfer_desc *d, const struct xfer_sel *s);

/*
 * Block ids, `n` of them, each in 0..limit-1 and, with `unique`, none
 * repeated; `side` ("local", "remote") and `name` go into the message.
 */
int xfer_check_ids(const int64_t *ids, uint64_t n, uint64_t limit, const char *side, const char *name, bool unique);
/* The same for entries [from, from + n) of a block table, named by their
 * index in the table. */
int xfer_check_table(const int64_t *table, uint64_t from, uint64_t n, uint64_t limit, const char *side,
                     const char *name, bool unique);
/* A selection inside every layer it names (KVRT_ERR_INVALID naming it). */
int xfer_check_sel(const struct xfer_desc *d, const struct xfer_sel *s, const char *what);

/*
 * Two caches a transfer may connect: the same number of layers and, per
 * layer, kind, element type, head sizes, states per block and bytes per
 * state; heads and layouts may differ.  KVRT_ERR_INVALID naming the first
 * difference with both values.
 */
int xfer_desc_compatible(const struct xfer_desc *here, const struct xfer_desc *peer);
/*
 * A whole-block transfer of the layers `sel` names between `here` and the
 * peer: every such layer holds the same tokens per block on both sides
 * (state layers: the same tokens per state).  KVRT_ERR_INVALID naming the
 * layer and both values.
 */
int xfer_sel_whole_blocks(const struct xfer_desc *here, const struct xfer_desc *peer, const struct xfer_sel *sel);
/*
 * A token range over the layers `sel` names: each holds one state per
 * token, and all have one block size, which *bs gets.  KVRT_ERR_INVALID
 * naming the layer otherwise; `side` ("here", "on the peer") goes into the
 * message.
 */
int xfer_sel_token_block_size(const struct xfer_desc *d, const struct xfer_sel *sel, const char *side, uint64_t *bs);
/*
 * The blocks of a `bs`-token table that tokens [first, first + count)
 * touch: indices [*from, *from + *n).  KVRT_ERR_OVERFLOW past 2^63 tokens.
 */
int xfer_tokens_blocks(uint64_t first, uint64_t count, uint64_t bs, uint64_t *from, uint64_t *n);

/* Same layout and equal specs for every layer: byte-for-byte the same pages. */
bool xfer_desc_same_shape(const struct xfer_desc *a, const struct xfer_desc *b);

#endif
