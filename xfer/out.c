/*
 * Outgoing streams: the chunks of a push posted here, or of a pull a peer
 * asked this cache for.  A chunk that is one piece of the cache goes
 * straight from it (rendezvous: the receiver's UCX fetches it into place;
 * short chunks eager); any other is packed into a send slot first, so that
 * chunk k+1 is packed while chunk k is on the wire.  A push is complete
 * when its receiver acknowledges that every chunk is in place; a served
 * pull when every chunk's send completed (the receiver fetched it).
 *
 * On one host, to a receiver that proved it reads this process (link_cma.c),
 * a chunk goes by reference instead: its address (in the cache, or in a
 * sealed send slot), which the receiver reads straight into its runs and
 * RELEASEs.  The slot is held until then, or until the stream fails: the
 * slot's seal then moves when it is reused, which the receiver sees.
 *
 * Layer 4 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "stream_parts.h"

struct xfer_out *xfer_out_new(struct xfer_streams *s, struct xfer_link *l, uint64_t xid)
{
    struct xfer_out *o = calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    o->env = s;
    o->link = l;
    o->xid = xid;
    o->status = KVRT_XFER_PENDING;
    o->last_activity = base_now();
    o->next = s->outs;
    s->outs = o;
    return o;
}

void xfer_out_free(struct xfer_out *o)
{
    if (o->link)
        o->link->id_bytes -= o->span.held;
    for (unsigned i = 0; i < o->nrefs; i++)
        xfer_pool_give(o->env->pool, o->refs[i].slot);
    free(o->refs);
    xfer_span_free(&o->span);
    free(o);
}

/* Chunks given by reference that will not be released now: their slots go
 * back (a reader still at one sees its seal move). */
static void drop_refs(struct xfer_out *o)
{
    for (unsigned i = 0; i < o->nrefs; i++)
        xfer_pool_give(o->env->pool, o->refs[i].slot);
    o->inflight -= o->nrefs;
    o->nrefs = 0;
}

static void finish(struct xfer_out *o, int status, const char *why)
{
    o->finished = true;
    o->status = status;
    xfer_stream_done(o->env, o->link, &o->on_end, o->owner, status, why);
}

void xfer_out_fail(struct xfer_out *o, int status, const char *fmt, ...)
{
    if (o->finished)
        return;
    char why[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    finish(o, status, why);
    drop_refs(o);
    struct xfer_link *l = o->link;
    if (!l || l->state != KVRT_XFER_PEER_CONNECTED)
        return;
    /* Tell the receiver: it drops what arrived and reports nothing. */
    if (o->serving) {
        struct wire_status m = {wire_hdr_make(&l->me, o->xid), status, 0};
        xfer_link_send(l, WIRE_END, &m, sizeof(m), why, xfer_reason_len(why));
    } else {
        struct wire_abort m = {wire_hdr_make(&l->me, o->xid), 0, 0};
        xfer_link_send(l, WIRE_ABORT, &m, sizeof(m), NULL, 0);
    }
}

void xfer_out_abandon(struct xfer_out *o)
{
    xfer_out_fail(o, KVRT_ERR_STATE, "kvrt-xfer: released before it completed");
}

struct sent_ctx {
    struct xfer_out *o;
    int slot;
    uint64_t bytes;
};

static void data_sent(void *user, int status, size_t len, const char *why)
{
    struct sent_ctx *c = user;
    struct xfer_out *o = c->o;
    struct xfer_streams *s = o->env;
    (void)len;
    o->inflight--;
    xfer_pool_give(s->pool, c->slot);
    if (status == KVRT_OK) {
        s->stats->bytes_sent += c->bytes;
        o->last_activity = base_now();
    } else if (!o->finished) {
        /* Refused by the receiver (its reason follows in an ACK or END), or
         * the peer is gone. */
        xfer_out_fail(o, KVRT_ERR_DEVICE, "kvrt-xfer: sending to peer %s failed: %s", xfer_link_name(o->link), why);
    }
    free(c);
}

/* Chunk k by reference: the receiver reads it at buf (in `slot`, or the
 * cache when -1) and releases it. */
static bool give_ref(struct xfer_out *o, uint64_t k, const uint8_t *buf, uint64_t len, int slot)
{
    struct xfer_streams *s = o->env;
    if (!o->refs && !(o->refs = calloc(XFER_WINDOW, sizeof(*o->refs)))) {
        xfer_pool_give(s->pool, slot);
        xfer_out_fail(o, KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a message");
        return false;
    }
    struct wire_ref ref = {(uint64_t)(uintptr_t)buf, len, 0, 0};
    if (slot >= 0) {
        const uint64_t *seal;
        ref.seal = xfer_pool_seal(s->pool, slot, &seal);
        ref.seal_addr = (uint64_t)(uintptr_t)seal;
    }
    uint32_t flags = WIRE_DATA_REF | (o->serving ? WIRE_DATA_REPLY : 0u);
    struct wire_data h = {wire_hdr_make(&o->link->me, o->xid), k, flags, 0};
    o->refs[o->nrefs++] = (struct xfer_ref_out){k, len, slot};
    o->inflight++;
    o->next_chunk++;
    int rc = xfer_link_send(o->link, WIRE_DATA, &h, sizeof(h), &ref, sizeof(ref));
    if (rc != KVRT_OK) {
        xfer_out_fail(o, rc, "%s", kvrt_error_message());
        return false;
    }
    return !o->finished;
}

/* Chunk next_chunk, if a slot is there when it needs one; false to stop
 * for this round. */
static bool send_chunk(struct xfer_out *o)
{
    struct xfer_streams *s = o->env;
    const struct xfer_local *loc = s->local;
    struct xfer_span *sp = &o->span;
    uint64_t k = o->next_chunk, pos = xfer_chunk_pos(&sp->ch, k), len = xfer_chunk_len(&sp->ch, k);
    const uint8_t *buf;
    xt_mem *mem;
    int slot = -1;
    uint64_t off;
    if (loc->addr && xfer_runs_single(&sp->runs, pos, len, &off)) {
        buf = loc->addr + off;
        mem = loc->mem;
    } else {
        if ((slot = xfer_pool_take(s->pool, true)) < 0)
            return false;
        uint8_t *dst = xfer_pool_slot(s->pool, slot);
        if (loc->addr) {
            xfer_runs_gather(&sp->runs, loc->addr, pos, len, dst);
        } else {
            uint64_t first = k * sp->chunk_blocks, n = len / xfer_sel_block_bytes(&loc->desc, &sp->sel);
            int rc = xfer_pool_pack(s->pool, loc, slot, sp->ids + first, n, &sp->sel);
            if (rc != KVRT_OK) {
                xfer_pool_give(s->pool, slot);
                xfer_out_fail(o, rc, "kvrt-xfer: packing chunk %llu for peer %s: %s", ULL(k), xfer_link_name(o->link),
                              kvrt_error_message());
                return false;
            }
        }
        buf = dst;
        mem = s->pool->mem;
    }
    if (sp->refs)
        return give_ref(o, k, buf, len, slot);
    struct sent_ctx *c = malloc(sizeof(*c));
    if (!c) {
        xfer_pool_give(s->pool, slot);
        xfer_out_fail(o, KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a message");
        return false;
    }
    *c = (struct sent_ctx){o, slot, len};
    struct wire_data h = {wire_hdr_make(&o->link->me, o->xid), k, o->serving ? WIRE_DATA_REPLY : 0u, 0};
    o->inflight++;
    o->next_chunk++;
    int rc = xt_send(o->link->ep, WIRE_DATA, &h, sizeof(h), buf, len, len > XFER_EAGER_MAX ? XT_RNDV : XT_EAGER, mem,
                     data_sent, c);
    if (rc != KVRT_OK) {
        o->inflight--;
        xfer_pool_give(s->pool, slot);
        free(c);
        xfer_out_fail(o, rc, "%s", kvrt_error_message());
        return false;
    }
    return !o->finished;
}

void xfer_out_issue(struct xfer_out *o)
{
    if (o->finished || !o->link || !xfer_link_ready(o->link))
        return; /* a failed peer's cleanup fails it */
    while (o->next_chunk < o->span.ch.count && o->inflight < XFER_WINDOW)
        if (!send_chunk(o))
            break;
    if (!o->finished && o->next_chunk == o->span.ch.count && o->inflight == 0 && (o->serving || o->acked))
        finish(o, KVRT_OK, "");
}

int xfer_push_post(struct xfer_streams *s, struct xfer_link *l, struct xfer_span *span, int64_t *remote_ids, uint64_t n,
                   const struct xfer_sel *rsel, const void *note, size_t note_len, xfer_stream_end on_end, void *owner,
                   struct xfer_out **out)
{
    *out = NULL;
    size_t ids_bytes = n * sizeof(int64_t);
    uint8_t *payload = malloc(ids_bytes + note_len + 1);
    if (!payload) {
        free(remote_ids);
        xfer_span_free(span);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_post: out of memory");
    }
    memcpy(payload, remote_ids, ids_bytes);
    if (note_len)
        memcpy(payload + ids_bytes, note, note_len);
    free(remote_ids);
    uint64_t xid = s->next_xid++;
    struct wire_begin b = {wire_hdr_make(&l->me, xid),
                           WIRE_PUSH,
                           note ? WIRE_BEGIN_NOTE : 0u,
                           span->order,
                           n,
                           rsel->layer_start,
                           rsel->num_layers,
                           rsel->head_start,
                           rsel->num_heads,
                           span->ch.chunk,
                           span->ch.total,
                           note_len,
                           span->tok.first,
                           span->tok.count,
                           span->tok.seg};
    /* BEGIN goes out (or waits for the wire-up) now, so that BEGINs leave
     * in the order of their stream ids, which the receiver holds us to. */
    int rc = xfer_link_send(l, WIRE_BEGIN, &b, sizeof(b), payload, ids_bytes + note_len);
    free(payload);
    if (rc != KVRT_OK) {
        xfer_span_free(span);
        return rc;
    }
    struct xfer_out *o = xfer_out_new(s, l, xid);
    if (!o) {
        xfer_span_free(span);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_post: out of memory");
    }
    o->span = *span;
    memset(span, 0, sizeof(*span));
    o->on_end = on_end;
    o->owner = owner;
    /* Before the first issue, which may end the stream (and clear *out
     * through on_end) at once. */
    *out = o;
    xfer_out_issue(o);
    return KVRT_OK;
}

static struct xfer_out *find(struct xfer_streams *s, struct xfer_link *l, uint64_t xid, bool serving)
{
    for (struct xfer_out *o = s->outs; o; o = o->next)
        if (o->link == l && o->xid == xid && o->serving == serving && !o->finished)
            return o;
    return NULL;
}

void xfer_streams_on_ack(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m)
{
    char why[200];
    struct xfer_out *o = find(s, l, m->xid, false);
    if (!o) {
        /* A push of ours that ended here first (released, failed): its ACK
         * may still come; one we never began is a lie. */
        if (m->xid >= s->next_xid) {
            snprintf(why, sizeof(why), "sent ACK for stream %llu, which this side never began", ULL(m->xid));
            xfer_link_violation(l, why);
        }
        return;
    }
    o->last_activity = base_now();
    int status = m->u.status.status;
    if (status != KVRT_OK) {
        /* The receiver failed; the ABORT this sends lets it forget the
         * stream. */
        int n = m->len > XFER_MAX_REASON ? (int)XFER_MAX_REASON : (int)m->len;
        xfer_out_fail(o, status, "kvrt-xfer: peer %s could not take the transfer: %.*s", l->name, n,
                      (const char *)m->payload);
        return;
    }
    if (o->next_chunk < o->span.ch.count) {
        snprintf(why, sizeof(why), "acknowledged stream %llu after %llu of its %llu chunks were sent", ULL(m->xid),
                 ULL(o->next_chunk), ULL(o->span.ch.count));
        xfer_link_violation(l, why);
        return;
    }
    o->acked = true;
    xfer_out_issue(o);
}

void xfer_out_on_abort_pull(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m)
{
    struct xfer_out *o = find(s, l, m->xid, true);
    if (o) {
        /* The requester gave its pull up: stop, say nothing more. */
        o->link = NULL;
        xfer_out_fail(o, KVRT_ERR_STATE, "kvrt-xfer: peer %s gave its pull up", l->name);
        o->link = l;
    } else if (m->xid > l->last_begun) {
        char why[160];
        snprintf(why, sizeof(why), "gave up stream %llu, which it never began", ULL(m->xid));
        xfer_link_violation(l, why);
    }
}

void xfer_streams_on_release(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m)
{
    bool serving = (m->u.release.flags & WIRE_RELEASE_PULL) != 0;
    uint64_t k = m->u.release.chunk;
    char why[200];
    struct xfer_out *o = find(s, l, m->xid, serving);
    if (!o) {
        /* A stream that failed here gave its chunks back; one that never
         * was is a lie. */
        if (serving ? m->xid > l->last_begun : m->xid >= s->next_xid) {
            snprintf(why, sizeof(why), "released a chunk of stream %llu, which this side never %s", ULL(m->xid),
                     serving ? "served" : "began");
            xfer_link_violation(l, why);
        }
        return;
    }
    for (unsigned i = 0; i < o->nrefs; i++) {
        if (o->refs[i].chunk != k)
            continue;
        xfer_pool_give(s->pool, o->refs[i].slot);
        s->stats->bytes_sent += o->refs[i].len;
        o->refs[i] = o->refs[--o->nrefs];
        o->inflight--;
        o->last_activity = base_now();
        xfer_out_issue(o);
        return;
    }
    snprintf(why, sizeof(why), "released chunk %llu of stream %llu, which it does not hold by reference", ULL(k),
             ULL(m->xid));
    xfer_link_violation(l, why);
}
