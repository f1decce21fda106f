/*
 * Streams: the bytes of one transfer on one side.
 *
 * An outgoing stream sends a push posted here, or serves a peer's pull; an
 * incoming stream receives a peer's push, or a pull posted here.  Both
 * sides know the stream's order, blocks and selection, so each maps chunk k
 * to its own cache by itself (runs.h): a chunk that is one piece of the
 * cache goes straight between the cache and the wire; any other is packed
 * into a staging slot, or received into one and scattered.
 *
 * What arrives is checked against the stream: every chunk index in range
 * and seen once, its length the one the chunking gives.  A stream is
 * complete only when every chunk is in place, so every byte it promised
 * arrived exactly once; only then is a push acknowledged and its
 * notification delivered.  A message that breaks these rules fails its
 * peer (xfer_link_violation).
 *
 * Layer 4 of libkvrt-xfer: link, pool, runs, wire, transport.
 */
#ifndef KVRT_XFER_STREAM_H
#define KVRT_XFER_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "link.h"
#include "pool.h"
#include "runs.h"
#include "wire.h"

/* What a stream moves on this side. */
struct xfer_span {
    unsigned order;        /* a layout (0..5) or WIRE_ORDER_STAGING */
    uint64_t nblocks;      /* in request order */
    int64_t *ids;          /* this side's ids (owned) */
    struct xfer_sel sel;   /* this side's selection */
    struct xfer_runs runs; /* a host cache's pieces, in stream order */
    struct xfer_chunking ch;
    uint64_t chunk_blocks;  /* staged through the backend: whole blocks per chunk */
    uint64_t held;          /* bytes of a peer's block ids counted on its link */
    struct xfer_tokens tok; /* a token range (count 0: whole blocks)... */
    uint64_t bs;            /* ...over `ids`, a table of bs-token blocks */
    bool refs;              /* chunks go by reference: the receiver reads them here (one host) */
};

/* A chunk given by reference, until the receiver RELEASEs it. */
struct xfer_ref_out {
    uint64_t chunk, len;
    int slot; /* the send slot it lies in, or -1 (the cache itself) */
};

/* The outcome of a stream, for whoever waits on it (a handle). */
typedef void (*xfer_stream_end)(void *owner, int status, const char *why);

struct xfer_streams;

struct xfer_out {
    struct xfer_out *next;
    struct xfer_streams *env;
    struct xfer_link *link; /* NULL once its peer is gone */
    uint64_t xid;
    bool serving; /* a peer's pull */
    struct xfer_span span;
    uint64_t next_chunk;
    unsigned inflight;
    bool acked; /* a push: the receiver has it all */
    bool finished;
    int status;
    xfer_stream_end on_end;
    void *owner;
    double last_activity;
    struct xfer_ref_out *refs; /* given by reference, not yet released */
    unsigned nrefs;
};

struct xfer_in {
    struct xfer_in *next;
    struct xfer_streams *env;
    struct xfer_link *link;
    uint64_t xid;
    bool pull; /* posted here */
    struct xfer_span span;
    uint8_t *seen; /* a bit per chunk */
    uint64_t chunks_done;
    unsigned inflight, deferred;
    bool ended; /* the initiator's last word came (its push's ABORT) */
    bool finished;
    int status;
    bool has_note;
    uint8_t *note; /* a push's notification, delivered when complete; a
                    * pull's, sent to the peer then */
    size_t note_len;
    xfer_stream_end on_end;
    void *owner;
    double last_activity;
};

struct xfer_ready;
struct xfer_deferred;

/* What the streams of one agent share. */
struct xfer_streams {
    xt *t;
    struct xfer_local *local;
    struct xfer_pool *pool;
    struct kvrt_xfer_stats *stats;
    struct xfer_out *outs;
    struct xfer_in *ins;
    struct xfer_ready *ready, **ready_tail;
    struct xfer_deferred *deferred, **deferred_tail;
    uint64_t next_xid;
    /* A peer's push complete: its notification (taken; NUL-terminated),
     * from that link. */
    int (*deliver)(void *owner, struct xfer_link *from, uint8_t *note, size_t len);
    void *deliver_owner;
    /* The first failure of a peer's push, for kvrt_xfer_progress. */
    int served_error;
    char served_why[640];
    /* Pieces of a chunk read by reference (scratch). */
    struct iovec *iov;
    size_t iov_cap;
};

void xfer_streams_init(struct xfer_streams *s, xt *t, struct xfer_local *local, struct xfer_pool *pool,
                       struct kvrt_xfer_stats *stats);
/* Every stream goes (after the transport ended: no callback is pending). */
void xfer_streams_free(struct xfer_streams *s);

/*
 * Post a push: BEGIN (the receiver's ids, remote_n of them, its selection,
 * the span's token range and the notification) goes ahead of the data.  `span` (this side's) and `remote_ids` are taken
 * over.  A stream with its handle's callback, or an error (nothing sent).
 */
int xfer_push_post(struct xfer_streams *s, struct xfer_link *l, struct xfer_span *span, int64_t *remote_ids,
                   uint64_t remote_n, const struct xfer_sel *remote_sel, const void *note, size_t note_len,
                   xfer_stream_end on_end, void *owner, struct xfer_out **out);
/* Post a pull: BEGIN asks the peer for its `remote_ids` (remote_n of them;
 * a token range's come from the span's); `refs`: this side reads the
 * chunks in the peer's memory (one host). */
int xfer_pull_post(struct xfer_streams *s, struct xfer_link *l, struct xfer_span *span, const int64_t *remote_ids,
                   uint64_t remote_n, bool refs, const struct xfer_sel *remote_sel, const void *note, size_t note_len,
                   xfer_stream_end on_end, void *owner, struct xfer_in **out);
/* The initiator gives it up (released): the peer is told. */
void xfer_out_abandon(struct xfer_out *o);
void xfer_in_abandon(struct xfer_in *in);

/* ---- what a peer sent (the wire checked it; the stream checks the rest) --- */

/*
 * A peer's BEGIN.  `granted` (NULL: no grants required) says whether this
 * side's block `id` may be written (push) or read (pull) by that peer;
 * *denied is set when it refused for that reason.
 */
void xfer_streams_on_begin(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m,
                           bool (*granted)(void *ctx, int64_t id, bool write), void *ctx, bool *denied);
enum xt_verdict xfer_streams_on_data(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m);
void xfer_streams_on_ack(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m);
void xfer_streams_on_end(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m);
void xfer_streams_on_abort(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m);
/* The receiver read a chunk this side gave by reference. */
void xfer_streams_on_release(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m);

/* ---- progress ----------------------------------------------------------------- */

/* Scatter received chunks, start chunks that waited for a slot, send what
 * the windows allow, report what is complete. */
void xfer_streams_progress(struct xfer_streams *s);
/* Work that needs no UCX event (a wait must not sleep). */
bool xfer_streams_busy(const struct xfer_streams *s);
/* The peer of `l` failed or closed: its streams fail, naming it. */
void xfer_streams_fail_link(struct xfer_streams *s, struct xfer_link *l, int status, const char *why);
/* Streams that made no progress for `timeout` seconds fail their link. */
void xfer_streams_check_stalls(struct xfer_streams *s, double now, double timeout, bool agent_was_idle);
/* Finished streams with nothing in UCX's hands go. */
void xfer_streams_reap(struct xfer_streams *s);
/* Counts for kvrt_xfer_agent_stats. */
void xfer_streams_count(const struct xfer_streams *s, uint64_t *out, uint64_t *in);

/* The span's chunking from its runs (host) or blocks (staged): chunks of
 * whole blocks when the cache has no host address. */
int xfer_span_chunking(struct xfer_span *sp, const struct xfer_local *local, uint64_t chunk_bytes);
void xfer_span_free(struct xfer_span *sp);
/* Block ids copied (from a message they need not be aligned in). */
int64_t *xfer_ids_copy(const void *src, uint64_t n);
/* At the agent's end, after the transport quiesced: chunks that waited
 * for a slot go back to UCX. */
void xfer_streams_release_waiting(struct xfer_streams *s);

#endif
