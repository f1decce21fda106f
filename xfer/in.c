/*
 * Incoming streams: a peer's push into this cache, or the chunks of a pull
 * posted here.  Each chunk is checked against the stream (in range, once,
 * the right length) before a byte of it is placed; it then goes straight
 * into the cache when it is one piece of it, or into a receive slot --
 * waiting, its rendezvous descriptor kept, until one is free -- to be
 * scattered by the next round of progress.  A stream is complete when every
 * chunk is in place; only then is a push's notification delivered and the
 * push acknowledged, so a failed transfer is never reported complete.
 *
 * A chunk given by reference (one host, link_cma.c) is read straight from
 * the sender's memory into this cache's runs, and RELEASEd.
 *
 * Layer 4 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "stream_parts.h"

struct xfer_in *xfer_in_new(struct xfer_streams *s, struct xfer_link *l, uint64_t xid, bool pull)
{
    struct xfer_in *in = calloc(1, sizeof(*in));
    if (!in)
        return NULL;
    in->env = s;
    in->link = l;
    in->xid = xid;
    in->pull = pull;
    in->status = KVRT_XFER_PENDING;
    in->last_activity = base_now();
    in->next = s->ins;
    s->ins = in;
    return in;
}

void xfer_in_free(struct xfer_in *in)
{
    if (in->link)
        in->link->id_bytes -= in->span.held;
    xfer_span_free(&in->span);
    free(in->seen);
    free(in->note);
    free(in);
}

static void finish(struct xfer_in *in, int status, const char *why)
{
    in->finished = true;
    in->status = status;
    xfer_stream_done(in->env, in->link, &in->on_end, in->owner, status, why);
}

static void vfail(struct xfer_in *in, int status, bool tell, const char *fmt, va_list ap)
{
    if (in->finished)
        return;
    char why[640];
    vsnprintf(why, sizeof(why), fmt, ap);
    finish(in, status, why);
    struct xfer_streams *s = in->env;
    if (tell && !in->pull && s->served_error == KVRT_OK) {
        s->served_error = status;
        snprintf(s->served_why, sizeof(s->served_why), "%s", why);
    }
    struct xfer_link *l = in->link;
    if (!tell || !l || l->state != KVRT_XFER_PEER_CONNECTED)
        return;
    if (!in->pull) {
        struct wire_status m = {wire_hdr_make(&l->me, in->xid), status, 0};
        xfer_link_send(l, WIRE_ACK, &m, sizeof(m), why, xfer_reason_len(why));
    } else {
        struct wire_abort m = {wire_hdr_make(&l->me, in->xid), WIRE_ABORT_PULL, 0};
        xfer_link_send(l, WIRE_ABORT, &m, sizeof(m), NULL, 0);
    }
}

void xfer_in_fail(struct xfer_in *in, int status, bool tell, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(in, status, tell, fmt, ap);
    va_end(ap);
}

void xfer_in_abandon(struct xfer_in *in)
{
    xfer_in_fail(in, KVRT_ERR_STATE, true, "kvrt-xfer: released before it completed");
}

struct xfer_in *xfer_in_find(struct xfer_streams *s, struct xfer_link *l, uint64_t xid, bool pull)
{
    for (struct xfer_in *in = s->ins; in; in = in->next)
        if (in->link == l && in->xid == xid && in->pull == pull)
            return in;
    return NULL;
}

int xfer_pull_post(struct xfer_streams *s, struct xfer_link *l, struct xfer_span *span, const int64_t *remote_ids,
                   uint64_t n, bool refs, const struct xfer_sel *rsel, const void *note, size_t note_len,
                   xfer_stream_end on_end, void *owner, struct xfer_in **out)
{
    *out = NULL;
    uint64_t xid = s->next_xid++;
    struct wire_begin b = {wire_hdr_make(&l->me, xid),
                           WIRE_PULL,
                           refs ? WIRE_BEGIN_REFS : 0u,
                           span->order,
                           n,
                           rsel->layer_start,
                           rsel->num_layers,
                           rsel->head_start,
                           rsel->num_heads,
                           span->ch.chunk,
                           span->ch.total,
                           0,
                           span->tok.first,
                           span->tok.count,
                           span->tok.seg};
    struct xfer_in *in = xfer_in_new(s, l, xid, true);
    uint8_t *seen = calloc(span->ch.count / 8 + 1, 1);
    uint8_t *copy = note_len ? malloc(note_len) : NULL;
    if (!in || !seen || (note_len && !copy)) {
        if (in)
            in->finished = true;
        free(seen);
        free(copy);
        xfer_span_free(span);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_post: out of memory");
    }
    if (note_len)
        memcpy(copy, note, note_len);
    in->has_note = note != NULL;
    in->seen = seen;
    in->note = copy;
    in->note_len = note_len;
    in->span = *span;
    memset(span, 0, sizeof(*span));
    int rc = xfer_link_send(l, WIRE_BEGIN, &b, sizeof(b), remote_ids, n * sizeof(int64_t));
    if (rc != KVRT_OK) {
        in->finished = true; /* reaped; never counted */
        return rc;
    }
    in->on_end = on_end;
    in->owner = owner;
    *out = in;
    return KVRT_OK;
}

/* ---- data ------------------------------------------------------------------- */

struct recv_ctx {
    struct xfer_in *in;
    uint64_t chunk;
    int slot;
};

static void chunk_placed(struct xfer_in *in, uint64_t len)
{
    in->chunks_done++;
    in->env->stats->bytes_received += len;
    in->last_activity = base_now();
}

static void queue_ready(struct xfer_streams *s, struct xfer_in *in, uint64_t chunk, int slot, uint8_t *heap)
{
    struct xfer_ready *x = malloc(sizeof(*x));
    if (!x) {
        xfer_pool_give(s->pool, slot);
        free(heap);
        in->inflight--;
        xfer_in_fail(in, KVRT_ERR_NOMEM, true, "kvrt-xfer: out of memory for a received chunk");
        return;
    }
    *x = (struct xfer_ready){NULL, in, chunk, slot, heap};
    *s->ready_tail = x;
    s->ready_tail = &x->next;
}

static void received(void *user, int status, size_t len, const char *why)
{
    struct recv_ctx *c = user;
    struct xfer_in *in = c->in;
    struct xfer_streams *s = in->env;
    (void)len;
    if (status != KVRT_OK) {
        in->inflight--;
        xfer_pool_give(s->pool, c->slot);
        xfer_in_fail(in, KVRT_ERR_DEVICE, true, "kvrt-xfer: receiving from peer %s failed: %s",
                     xfer_link_name(in->link), why);
    } else if (c->slot >= 0) {
        /* Still in flight until it is scattered. */
        queue_ready(s, in, c->chunk, c->slot, NULL);
        in->last_activity = base_now();
    } else {
        in->inflight--;
        chunk_placed(in, xfer_chunk_len(&in->span.ch, c->chunk));
    }
    free(c);
}

/* A rendezvous chunk into dst (the cache, or a slot). */
static void receive(struct xfer_in *in, void *desc, uint64_t chunk, void *dst, int slot, xt_mem *mem)
{
    struct xfer_streams *s = in->env;
    struct recv_ctx *c = malloc(sizeof(*c));
    if (!c) {
        xfer_pool_give(s->pool, slot);
        xt_release(s->t, desc);
        xfer_in_fail(in, KVRT_ERR_NOMEM, true, "kvrt-xfer: out of memory for a receive");
        return;
    }
    *c = (struct recv_ctx){in, chunk, slot};
    in->inflight++;
    int rc = xt_recv(s->t, desc, dst, xfer_chunk_len(&in->span.ch, chunk), mem, received, c);
    if (rc != KVRT_OK) {
        in->inflight--;
        xfer_pool_give(s->pool, slot);
        free(c);
        xfer_in_fail(in, rc, true, "%s", kvrt_error_message());
    }
}

/* Into a free receive slot, or false when there is none. */
static bool start_in_slot(struct xfer_in *in, void *desc, uint64_t chunk)
{
    struct xfer_pool *p = in->env->pool;
    int slot = xfer_pool_take(p, false);
    if (slot < 0)
        return false;
    receive(in, desc, chunk, xfer_pool_slot(p, slot), slot, p->mem);
    return true;
}

static bool defer(struct xfer_in *in, void *desc, uint64_t chunk)
{
    struct xfer_streams *s = in->env;
    struct xfer_deferred *d = malloc(sizeof(*d));
    if (!d)
        return false;
    *d = (struct xfer_deferred){NULL, in, desc, chunk};
    *s->deferred_tail = d;
    s->deferred_tail = &d->next;
    in->deferred++;
    return true;
}

/* The chunk of a message, `len` bytes, checked against its stream; false:
 * the peer broke the protocol (its link fails). */
static bool check_chunk(struct xfer_in *in, struct xfer_link *l, const struct wire_msg *m, uint64_t len)
{
    char why[200];
    uint64_t k = m->u.data.chunk, count = in->span.ch.count;
    if (k >= count)
        snprintf(why, sizeof(why), "sent chunk %llu of stream %llu, which has %llu chunks", ULL(k), ULL(in->xid),
                 ULL(count));
    else if (in->seen[k / 8] & (1u << (k % 8)))
        snprintf(why, sizeof(why), "sent chunk %llu of stream %llu twice", ULL(k), ULL(in->xid));
    else if (len != xfer_chunk_len(&in->span.ch, k))
        snprintf(why, sizeof(why), "sent chunk %llu of stream %llu with %llu bytes; it has %llu", ULL(k), ULL(in->xid),
                 ULL(len), ULL(xfer_chunk_len(&in->span.ch, k)));
    else
        return true;
    xfer_link_violation(l, why);
    return false;
}

/* Chunk k given by reference: read into this cache's runs, then released. */
static void read_ref(struct xfer_in *in, struct xfer_link *l, uint64_t k, const struct wire_ref *ref)
{
    struct xfer_streams *s = in->env;
    const struct xfer_local *loc = s->local;
    uint64_t pos = xfer_chunk_pos(&in->span.ch, k);
    size_t n = xfer_runs_iov(&in->span.runs, loc->addr, pos, ref->len, s->iov, s->iov_cap);
    if (n > s->iov_cap) {
        struct iovec *v = realloc(s->iov, n * sizeof(*v));
        if (!v) {
            xfer_in_fail(in, KVRT_ERR_NOMEM, true, "kvrt-xfer: out of memory for a chunk's pieces");
            return;
        }
        s->iov = v;
        s->iov_cap = n;
        xfer_runs_iov(&in->span.runs, loc->addr, pos, ref->len, s->iov, s->iov_cap);
    }
    bool reused;
    int rc = xfer_link_read(l, ref, s->iov, n, &reused);
    if (rc != KVRT_OK) {
        if (reused)
            xfer_in_fail(in, KVRT_ERR_STATE, true, "kvrt-xfer: peer %s took chunk %llu back before it was read",
                         l->name, ULL(k));
        return; /* otherwise the link failed, and its streams with it */
    }
    chunk_placed(in, ref->len);
    s->stats->bytes_read_in_place += ref->len;
    struct wire_release r = {wire_hdr_make(&l->me, in->xid), k, in->pull ? WIRE_RELEASE_PULL : 0u, 0};
    xfer_link_send(l, WIRE_RELEASE, &r, sizeof(r), NULL, 0);
}

enum xt_verdict xfer_streams_on_data(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m)
{
    bool reply = (m->u.data.flags & WIRE_DATA_REPLY) != 0;
    struct xfer_in *in = xfer_in_find(s, l, m->xid, reply);
    if (!in) {
        /* A stream that ended here (given up, refused, released) may still
         * see its last chunks; a stream that never was is a lie. */
        bool late = reply ? m->xid < s->next_xid : m->xid <= l->last_begun;
        if (!late) {
            char why[160];
            snprintf(why, sizeof(why),
                     reply ? "sent a reply for stream %llu, which this side never asked for"
                           : "sent data for stream %llu before its BEGIN",
                     ULL(m->xid));
            xfer_link_violation(l, why);
        }
        return XT_REFUSE;
    }
    if (in->finished)
        return XT_REFUSE; /* the peer was told, or told us */
    struct wire_ref ref;
    bool by_ref = (m->u.data.flags & WIRE_DATA_REF) != 0;
    if (by_ref) {
        memcpy(&ref, m->payload, sizeof(ref));
        if (!l->reads_peer || !s->local->addr) {
            xfer_link_violation(l, "gave a chunk by reference, which this side did not offer to read");
            return XT_REFUSE;
        }
        if (!xfer_link_ref_inside(l, &ref))
            return XT_REFUSE;
    }
    if (!check_chunk(in, l, m, by_ref ? ref.len : m->len))
        return XT_REFUSE;
    uint64_t k = m->u.data.chunk;
    in->seen[k / 8] |= (uint8_t)(1u << (k % 8));
    in->last_activity = base_now();
    if (by_ref) {
        read_ref(in, l, k, &ref);
        return XT_DONE;
    }
    const struct xfer_local *loc = s->local;
    struct xfer_span *sp = &in->span;
    uint64_t pos = xfer_chunk_pos(&sp->ch, k), off;
    if (!m->rndv) {
        if (loc->addr) {
            xfer_runs_scatter(&sp->runs, loc->addr, pos, m->len, m->payload);
            chunk_placed(in, m->len);
        } else {
            uint8_t *heap = malloc(m->len);
            if (!heap) {
                xfer_in_fail(in, KVRT_ERR_NOMEM, true, "kvrt-xfer: out of memory for a received chunk");
                return XT_DONE;
            }
            memcpy(heap, m->payload, m->len);
            in->inflight++;
            queue_ready(s, in, k, -1, heap);
        }
        return XT_DONE;
    }
    void *desc = (void *)m->payload;
    if (loc->addr && xfer_runs_single(&sp->runs, pos, m->len, &off)) {
        receive(in, desc, k, loc->addr + off, -1, loc->mem);
        return XT_KEEP;
    }
    if (start_in_slot(in, desc, k))
        return XT_KEEP;
    if (!defer(in, desc, k)) {
        xfer_in_fail(in, KVRT_ERR_NOMEM, true, "kvrt-xfer: out of memory for a waiting chunk");
        return XT_REFUSE;
    }
    return XT_KEEP;
}

void xfer_in_scatter_ready(struct xfer_streams *s)
{
    while (s->ready) {
        struct xfer_ready *x = s->ready;
        s->ready = x->next;
        if (!s->ready)
            s->ready_tail = &s->ready;
        struct xfer_in *in = x->in;
        const uint8_t *src = x->heap ? x->heap : xfer_pool_slot(s->pool, x->slot);
        uint64_t len = xfer_chunk_len(&in->span.ch, x->chunk);
        if (!in->finished) {
            const struct xfer_local *loc = s->local;
            int rc = KVRT_OK;
            if (loc->addr) {
                xfer_runs_scatter(&in->span.runs, loc->addr, xfer_chunk_pos(&in->span.ch, x->chunk), len, src);
            } else {
                uint64_t first = x->chunk * in->span.chunk_blocks;
                rc = xfer_pool_unpack(s->pool, loc, src, in->span.ids + first,
                                      len / xfer_sel_block_bytes(&loc->desc, &in->span.sel), &in->span.sel);
            }
            if (rc != KVRT_OK)
                xfer_in_fail(in, rc, true, "kvrt-xfer: scattering chunk %llu from peer %s: %s", ULL(x->chunk),
                             xfer_link_name(in->link), kvrt_error_message());
            else
                chunk_placed(in, len);
        }
        in->inflight--;
        xfer_pool_give(s->pool, x->slot);
        free(x->heap);
        free(x);
        /* A freed slot lets a waiting chunk in before the next scatter, so
         * its bytes travel while this side scatters. */
        xfer_in_start_deferred(s);
    }
}

void xfer_in_start_deferred(struct xfer_streams *s)
{
    for (struct xfer_deferred **d = &s->deferred; *d;) {
        struct xfer_deferred *x = *d;
        if (x->in->finished)
            xt_release(s->t, x->desc);
        else if (!start_in_slot(x->in, x->desc, x->chunk))
            break; /* no slot: keep the order */
        x->in->deferred--;
        *d = x->next;
        free(x);
    }
    s->deferred_tail = &s->deferred;
    while (*s->deferred_tail)
        s->deferred_tail = &(*s->deferred_tail)->next;
}

/* Streams whose every chunk is in place: report them, once. */
void xfer_in_finish(struct xfer_streams *s)
{
    for (struct xfer_in *in = s->ins; in; in = in->next) {
        if (in->finished || in->inflight || in->deferred || in->chunks_done != in->span.ch.count)
            continue;
        struct xfer_link *l = in->link;
        if (!in->pull) {
            if (in->has_note) {
                int rc = s->deliver(s->deliver_owner, l, in->note, in->note_len);
                in->note = NULL;
                in->has_note = false;
                if (rc != KVRT_OK) {
                    xfer_in_fail(in, rc, true, "%s", kvrt_error_message());
                    continue;
                }
            }
            struct wire_status m = {wire_hdr_make(&l->me, in->xid), KVRT_OK, 0};
            xfer_link_send(l, WIRE_ACK, &m, sizeof(m), NULL, 0);
        } else if (in->has_note) {
            struct wire_hdr h = wire_hdr_make(&l->me, in->xid);
            xfer_link_send(l, WIRE_NOTIFY, &h, sizeof(h), in->note, in->note_len);
        }
        finish(in, KVRT_OK, "");
    }
}

void xfer_streams_on_end(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m)
{
    struct xfer_in *in = xfer_in_find(s, l, m->xid, true);
    if (!in) {
        if (m->xid >= s->next_xid) {
            char why[160];
            snprintf(why, sizeof(why), "ended stream %llu, which this side never asked for", ULL(m->xid));
            xfer_link_violation(l, why);
        }
        return;
    }
    int n = m->len > XFER_MAX_REASON ? (int)XFER_MAX_REASON : (int)m->len;
    /* A pull the peer could not serve: its reason; it knows. */
    xfer_in_fail(in, m->u.status.status, false, "kvrt-xfer: peer %s refused the pull: %.*s", l->name, n,
                 (const char *)m->payload);
}

void xfer_streams_on_abort(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m)
{
    if (m->u.abort.flags & WIRE_ABORT_PULL) {
        xfer_out_on_abort_pull(s, l, m);
        return;
    }
    struct xfer_in *in = xfer_in_find(s, l, m->xid, false);
    if (in) {
        in->ended = true;
        xfer_in_fail(in, KVRT_ERR_STATE, false, "kvrt-xfer: peer %s gave the transfer up", l->name);
    } else if (m->xid > l->last_begun) {
        char why[160];
        snprintf(why, sizeof(why), "gave up stream %llu, which it never began", ULL(m->xid));
        xfer_link_violation(l, why);
    }
}
