/*
 * What the stream layer's files share among themselves (stream.c: the
 * streams of an agent and BEGIN; out.c: outgoing streams; in.c: incoming
 * streams).  Not for the layers above: they use stream.h.
 *
 * Layer 4 of libkvrt-xfer.
 */
#ifndef KVRT_XFER_STREAM_PARTS_H
#define KVRT_XFER_STREAM_PARTS_H

#include "stream.h"

/* Data messages in flight per stream: enough to keep UCX's pipeline full,
 * few enough that many streams share the wire. */
#define XFER_WINDOW 16u
/* Chunks up to this go eager (copied; no rendezvous round trip). */
#define XFER_EAGER_MAX (16u << 10)
/* A peer may have at most this many transfers under way here, holding at
 * most this many bytes of block ids. */
#define XFER_MAX_LIVE 1024u
#define XFER_MAX_ID_BYTES (64ull << 20)

struct xfer_ready {
    struct xfer_ready *next;
    struct xfer_in *in;
    uint64_t chunk;
    int slot;      /* the receive slot holding it, or -1 */
    uint8_t *heap; /* or bytes copied from an eager message */
};

struct xfer_deferred {
    struct xfer_deferred *next;
    struct xfer_in *in;
    void *desc;
    uint64_t chunk;
};

/* out.c */
struct xfer_out *xfer_out_new(struct xfer_streams *s, struct xfer_link *l, uint64_t xid);
void xfer_out_free(struct xfer_out *o);
void xfer_out_fail(struct xfer_out *o, int status, const char *fmt, ...) KVRT_PRINTF(3, 4);
void xfer_out_issue(struct xfer_out *o);
/* The requester of a pull served here gave it up. */
void xfer_out_on_abort_pull(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m);

/* in.c */
struct xfer_in *xfer_in_new(struct xfer_streams *s, struct xfer_link *l, uint64_t xid, bool pull);
void xfer_in_free(struct xfer_in *in);
/* Fail; `tell`: the peer hears (a push's sender gets ACK with the reason,
 * a pulled peer ABORT). */
void xfer_in_fail(struct xfer_in *in, int status, bool tell, const char *fmt, ...) KVRT_PRINTF(4, 5);
struct xfer_in *xfer_in_find(struct xfer_streams *s, struct xfer_link *l, uint64_t xid, bool pull);
void xfer_in_scatter_ready(struct xfer_streams *s);
void xfer_in_start_deferred(struct xfer_streams *s);
void xfer_in_finish(struct xfer_streams *s);

/* span.c */
/* A stream ended: counted (a failure under its reason, from its link's
 * cause or its status), then told to its owner once.  l may be NULL. */
void xfer_stream_done(struct xfer_streams *s, const struct xfer_link *l, xfer_stream_end *on_end, void *owner,
                      int status, const char *why);
/* A failure counted under its reason (refuse_pull has no stream to end). */
void xfer_stream_count_failure(struct xfer_streams *s, const struct xfer_link *l, int status);

#endif
