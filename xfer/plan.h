/*
 * Planning: the complete check of a request against both caches, the
 * choice of the stream's byte order (the method) and chunk size, and this
 * side's span of it.  The peer computes its own span from the BEGIN.
 *
 *   REGIONS  same layout and specs, every layer and head: the common
 *            layout's order, so both sides' runs are the core's transfer
 *            regions and chunks go from cache to cache.
 *   DIRECT   two host caches of different layouts (or a selection): the
 *            source's order, so the sender's runs are long and the
 *            receiver scatters.
 *   STAGING  kvrt's staging order (block, layer, [H, N, C]); the only order
 *            a cache without a host address moves in (whole blocks through
 *            its backend).
 *
 * Layer 5 of libkvrt-xfer: streams, the cache description, metadata.
 */
#ifndef KVRT_XFER_PLAN_H
#define KVRT_XFER_PLAN_H

#include "metadata.h"
#include "stream.h"

struct xfer_planned {
    enum kvrt_xfer_method method;
    bool push;
    struct xfer_span local; /* this side's (its chunking set) */
    int64_t *remote_ids;    /* the peer's (copied; a token range's: the blocks it touches) */
    uint64_t remote_n;
    bool pull_refs; /* a pull whose chunks this side reads in the peer (one host) */
    struct xfer_sel remote_sel;
};

/*
 * Check `r` and plan it between this cache (`local`, whose staging slots
 * hold `local_chunk` bytes) and the peer's (`peer`).  `in_place`: the
 * receiver reads the chunks in the sender's memory (the link says the
 * destination side may read the source side, one host).  *out gets the
 * plan's report.  On failure nothing is held.
 */
int xfer_plan_make(const struct xfer_local *local, uint64_t local_chunk, const struct xfer_md *peer, bool in_place,
                   const struct kvrt_xfer_request *r, struct xfer_planned *ps, struct kvrt_xfer_plan *out);
void xfer_planned_free(struct xfer_planned *ps);

/* "0 (auto), 1 (regions), ...": the valid method values, for messages. */
const char *xfer_method_values(void);
/* The rule of libkvrt-xfer's reserved bytes (libkvrt's own names libkvrt's
 * API version; this one names libkvrt-xfer's, whose structs these are). */
int xfer_check_reserved(const uint8_t *bytes, size_t n, const char *what);

#endif
