/*
 * What a stream's two ends (in.c, out.c) and BEGIN (stream.c) share below
 * them: a stream's span (its block ids, runs and chunking) and a stream's
 * end (counted, then told to its owner once).
 *
 * Layer 4 of libkvrt-xfer (docs/xfer.md, "Layers"), below stream.c, in.c
 * and out.c, which call it.
 */
#include <stdlib.h>
#include <string.h>

#include "stream_parts.h"

void xfer_span_free(struct xfer_span *sp)
{
    free(sp->ids);
    xfer_runs_free(&sp->runs);
    memset(sp, 0, sizeof(*sp));
}

int64_t *xfer_ids_copy(const void *src, uint64_t n)
{
    int64_t *ids = malloc(n ? n * sizeof(int64_t) : 1);
    if (ids && n)
        memcpy(ids, src, n * sizeof(int64_t));
    return ids;
}

int xfer_span_chunking(struct xfer_span *sp, const struct xfer_local *local, uint64_t chunk_bytes)
{
    uint64_t total;
    if (local->addr) {
        total = sp->runs.total;
    } else {
        uint64_t block = xfer_sel_block_bytes(&local->desc, &sp->sel);
        if (block == 0 || __builtin_mul_overflow(block, sp->nblocks, &total))
            return BASE_FAIL(KVRT_ERR_OVERFLOW, "kvrt-xfer: %llu blocks of %llu bytes overflow", ULL(sp->nblocks),
                             ULL(block));
        if (chunk_bytes % block != 0)
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt-xfer: chunks of %llu bytes are not whole blocks of %llu bytes (this cache moves "
                             "whole blocks through its backend)",
                             ULL(chunk_bytes), ULL(block));
        sp->chunk_blocks = chunk_bytes / block;
    }
    return xfer_chunking_init(&sp->ch, total, chunk_bytes);
}

void xfer_stream_count_failure(struct xfer_streams *s, const struct xfer_link *l, int status)
{
    struct kvrt_xfer_stats *st = s->stats;
    st->failed++;
    /* The link's cause first: a stream that failed with its peer names
     * the peer's failure, whatever status it was given. */
    enum xfer_fail_cause cause = l ? l->cause : XFER_CAUSE_NONE;
    if (cause == XFER_CAUSE_NONE && l && l->state == KVRT_XFER_PEER_CLOSED)
        cause = XFER_CAUSE_CLOSED;
    switch (cause) {
    case XFER_CAUSE_TIMEOUT: st->failed_timeout++; return;
    case XFER_CAUSE_VIOLATION: st->failed_violation++; return;
    case XFER_CAUSE_CONNECTION: st->failed_connection++; return;
    case XFER_CAUSE_CLOSED: st->failed_peer_closed++; return;
    case XFER_CAUSE_NONE: break;
    }
    if (status == KVRT_ERR_REFUSED)
        st->failed_refused++;
    else if (status == KVRT_ERR_STATE)
        st->failed_released++;
    else
        st->failed_other++;
}

void xfer_stream_done(struct xfer_streams *s, const struct xfer_link *l, xfer_stream_end *on_end, void *owner,
                      int status, const char *why)
{
    if (status == KVRT_OK)
        s->stats->completed++;
    else
        xfer_stream_count_failure(s, l, status);
    xfer_stream_end fn = *on_end;
    *on_end = NULL;
    if (fn)
        fn(owner, status, why);
}
