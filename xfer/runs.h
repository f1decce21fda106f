/*
 * A stream's bytes and where they live on one side.
 *
 * Both sides of a transfer agree on one order of the cells it moves (a
 * cell: one head's one state of one layer of one block, its C bytes): the
 * nesting of a layout (0..5) or kvrt's staging order (block, layer, [H, N,
 * C]), over the request's blocks in request order.  Each side maps that
 * order onto its own cache, from its own ids and its own geometry, as runs:
 * (offset, length) pieces of its allocation, in stream order, merged where
 * they touch.  No offset ever crosses the wire: a side writes only where
 * its own runs say, so a peer can name chunks, never places.
 *
 * The chunking is computed once here, for push and pull alike: chunk k is
 * stream bytes [k * chunk, min((k + 1) * chunk, total)).
 *
 * Layer 3 of libkvrt-xfer: the cache description only.
 */
#ifndef KVRT_XFER_RUNS_H
#define KVRT_XFER_RUNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "desc.h"

struct xfer_run {
    uint64_t off, len;
};

struct xfer_runs {
    struct xfer_run *v;
    uint64_t *end; /* stream position after run i */
    size_t n;
    uint64_t total;
};

/* The loop axes of a stream's order, outermost first (its C innermost
 * after them): a layout's nesting (0..5), or 6 (WIRE_ORDER_STAGING), kvrt's
 * staging order (block, layer, head, state). */
enum { XFER_AX_L, XFER_AX_B, XFER_AX_H, XFER_AX_N, XFER_NUM_AX };
void xfer_runs_axes(unsigned order, int axis[XFER_NUM_AX]);

/* `order`: 0..5 a layout's nesting, 6 (WIRE_ORDER_STAGING) staging order. */
int xfer_runs_build(const struct xfer_desc *d, const int64_t *ids, uint64_t nblocks, const struct xfer_sel *sel,
                    unsigned order, struct xfer_runs *out);
/*
 * The runs of a token range (tok->count > 0): `ids` is this side's block
 * table from the block holding token tok->first on (`nids` of them, as
 * xfer_tokens_blocks counts them), `bs` its block size.  The cells are
 * walked in `order` with the block axis over tok->seg-token segments, so
 * both sides walk the same cells in the same order.
 */
int xfer_runs_build_tokens(const struct xfer_desc *d, const int64_t *ids, uint64_t nids, uint64_t bs,
                           const struct xfer_tokens *tok, const struct xfer_sel *sel, unsigned order,
                           struct xfer_runs *out);
void xfer_runs_free(struct xfer_runs *r);
/* A piece at the stream's end, merged with the last one when they touch;
 * `cap` is the arrays' room.  false: out of memory. */
bool xfer_runs_append(struct xfer_runs *r, size_t *cap, uint64_t off, uint64_t len);

/* Stream bytes [pos, pos + len) are one piece of the cache at *off. */
bool xfer_runs_single(const struct xfer_runs *r, uint64_t pos, uint64_t len, uint64_t *off);
/* Stream bytes [pos, pos + len) as pieces of the cache at `base`, into
 * iov (cap of them): the number of pieces, which may be more than cap
 * (then only cap were written). */
size_t xfer_runs_iov(const struct xfer_runs *r, uint8_t *base, uint64_t pos, uint64_t len, struct iovec *iov,
                     size_t cap);
/* Copy stream bytes [pos, pos + len) between the cache at `base` and a
 * contiguous buffer (gather: cache -> buf; scatter: buf -> cache). */
void xfer_runs_gather(const struct xfer_runs *r, const uint8_t *base, uint64_t pos, uint64_t len, uint8_t *buf);
void xfer_runs_scatter(const struct xfer_runs *r, uint8_t *base, uint64_t pos, uint64_t len, const uint8_t *buf);

struct xfer_chunking {
    uint64_t total, chunk, count;
};

/* KVRT_ERR_INVALID when total or chunk is 0. */
int xfer_chunking_init(struct xfer_chunking *c, uint64_t total, uint64_t chunk);
uint64_t xfer_chunk_pos(const struct xfer_chunking *c, uint64_t k);
uint64_t xfer_chunk_len(const struct xfer_chunking *c, uint64_t k);

#endif
