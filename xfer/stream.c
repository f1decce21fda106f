/*
 * The streams of an agent: a peer's BEGIN (every check of what it names,
 * then a stream), and the rounds of progress that move them along.
 *
 * Layer 4 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream_parts.h"

void xfer_streams_init(struct xfer_streams *s, xt *t, struct xfer_local *local, struct xfer_pool *pool,
                       struct kvrt_xfer_stats *stats)
{
    memset(s, 0, sizeof(*s));
    s->t = t;
    s->local = local;
    s->pool = pool;
    s->stats = stats;
    s->ready_tail = &s->ready;
    s->deferred_tail = &s->deferred;
    s->next_xid = 1;
}

void xfer_streams_free(struct xfer_streams *s)
{
    while (s->ready) {
        struct xfer_ready *r = s->ready;
        s->ready = r->next;
        free(r->heap);
        free(r);
    }
    while (s->deferred) {
        struct xfer_deferred *d = s->deferred;
        s->deferred = d->next;
        free(d);
    }
    while (s->outs) {
        struct xfer_out *o = s->outs;
        s->outs = o->next;
        xfer_out_free(o);
    }
    free(s->iov);
    s->iov = NULL;
    while (s->ins) {
        struct xfer_in *in = s->ins;
        s->ins = in->next;
        xfer_in_free(in);
    }
}

/* ---- BEGIN ------------------------------------------------------------------ */

static unsigned live_streams(const struct xfer_streams *s, const struct xfer_link *l)
{
    unsigned n = 0;
    for (const struct xfer_in *in = s->ins; in; in = in->next)
        n += in->link == l && !in->pull && !in->finished;
    for (const struct xfer_out *o = s->outs; o; o = o->next)
        n += o->link == l && o->serving && !o->finished;
    return n;
}

/* A push refused after its BEGIN: kept failed so that its chunks are
 * refused quietly until its sender gives it up. */
static void refuse_push(struct xfer_streams *s, struct xfer_link *l, uint64_t xid, int status, const char *why)
{
    struct xfer_in *in = xfer_in_new(s, l, xid, false);
    if (!in) {
        struct wire_status m = {wire_hdr_make(&l->me, xid), status, 0};
        xfer_link_send(l, WIRE_ACK, &m, sizeof(m), why, xfer_reason_len(why));
        return;
    }
    xfer_in_fail(in, status, true, "%s", why);
}

static void refuse_pull(struct xfer_streams *s, struct xfer_link *l, uint64_t xid, int status, const char *why)
{
    struct wire_status m = {wire_hdr_make(&l->me, xid), status, 0};
    xfer_stream_count_failure(s, l, status);
    xfer_link_send(l, WIRE_END, &m, sizeof(m), why, xfer_reason_len(why));
}

/* Everything a BEGIN names, against this cache: false and *why when the
 * peer broke the protocol (a peer that read this side's metadata never
 * sends such a BEGIN). */
static bool begin_span(struct xfer_streams *s, const struct wire_begin *b, const void *ids_data, struct xfer_span *sp,
                       char *why, size_t n)
{
    const struct xfer_local *loc = s->local;
    bool push = b->kind == WIRE_PUSH;
    memset(sp, 0, sizeof(*sp));
    sp->order = b->order;
    sp->nblocks = b->count;
    sp->sel = (struct xfer_sel){b->layer_start, b->num_layers, b->head_start, b->num_heads};
    sp->tok = (struct xfer_tokens){b->token_first, b->token_count, b->token_seg};
    sp->ids = xfer_ids_copy(ids_data, b->count);
    int rc = KVRT_OK;
    if (!sp->ids)
        rc = BASE_FAIL(KVRT_ERR_NOMEM, "out of memory for %llu block ids", ULL(b->count));
    if (rc == KVRT_OK)
        rc = xfer_check_ids(sp->ids, sp->nblocks, loc->desc.num_blocks, "local", push ? "its BEGIN" : "its pull", push);
    if (rc == KVRT_OK)
        rc = xfer_check_sel(&loc->desc, &sp->sel, push ? "its BEGIN" : "its pull");
    if (rc == KVRT_OK && !loc->addr && sp->order != WIRE_ORDER_STAGING)
        rc = BASE_FAIL(KVRT_ERR_INVALID, "asked for a layout's byte order from a cache without a host address "
                                         "(it moves in staging order)");
    if (rc == KVRT_OK && sp->tok.count) {
        uint64_t from, touched;
        rc = xfer_sel_token_block_size(&loc->desc, &sp->sel, "here", &sp->bs);
        if (rc == KVRT_OK)
            rc = xfer_tokens_blocks(sp->tok.first, sp->tok.count, sp->bs, &from, &touched);
        if (rc == KVRT_OK && touched != sp->nblocks)
            rc = BASE_FAIL(KVRT_ERR_INVALID,
                           "named %llu blocks for tokens %llu+%llu, which touch %llu %llu-token blocks",
                           ULL(sp->nblocks), ULL(sp->tok.first), ULL(sp->tok.count), ULL(touched), ULL(sp->bs));
        if (rc == KVRT_OK)
            rc = xfer_runs_build_tokens(&loc->desc, sp->ids, sp->nblocks, sp->bs, &sp->tok, &sp->sel, sp->order,
                                        &sp->runs);
    } else if (rc == KVRT_OK && loc->addr) {
        rc = xfer_runs_build(&loc->desc, sp->ids, sp->nblocks, &sp->sel, sp->order, &sp->runs);
    }
    if (rc == KVRT_OK)
        rc = xfer_span_chunking(sp, loc, b->chunk_bytes);
    if (rc == KVRT_OK) {
        uint64_t whole = loc->addr ? b->chunk_bytes : sp->chunk_blocks * loc->desc.staging_per_block;
        if (whole > s->pool->chunk)
            rc = BASE_FAIL(KVRT_ERR_INVALID, "asked for chunks of %llu bytes; this side's staging slots hold %llu",
                           ULL(whole), ULL(s->pool->chunk));
    }
    if (rc == KVRT_OK && sp->ch.total != b->total_bytes)
        rc = BASE_FAIL(KVRT_ERR_INVALID, "announced %llu bytes for a transfer of %llu bytes here", ULL(b->total_bytes),
                       ULL(sp->ch.total));
    if (rc == KVRT_OK)
        return true;
    snprintf(why, n, "sent a BEGIN this cache cannot take: %s", kvrt_error_message());
    xfer_span_free(sp);
    return false;
}

void xfer_streams_on_begin(struct xfer_streams *s, struct xfer_link *l, const struct wire_msg *m,
                           bool (*granted)(void *ctx, int64_t id, bool write), void *ctx, bool *denied)
{
    const struct wire_begin *b = &m->u.begin;
    bool push = b->kind == WIRE_PUSH;
    char why[800];
    *denied = false;
    if (m->xid <= l->last_begun) {
        snprintf(why, sizeof(why), "began stream %llu after stream %llu (a peer's stream ids only grow)", ULL(m->xid),
                 ULL(l->last_begun));
        xfer_link_violation(l, why);
        return;
    }
    l->last_begun = m->xid;
    uint64_t id_bytes = b->count * sizeof(int64_t);
    if (live_streams(s, l) >= XFER_MAX_LIVE || l->id_bytes + id_bytes > XFER_MAX_ID_BYTES) {
        snprintf(why, sizeof(why),
                 "kvrt-xfer: peer %s has %u transfers (%llu bytes of block ids) under way here; at most %u "
                 "(%llu bytes)",
                 l->name, live_streams(s, l), ULL(l->id_bytes), XFER_MAX_LIVE, ULL(XFER_MAX_ID_BYTES));
        s->stats->refused_limit++;
        (push ? refuse_push : refuse_pull)(s, l, m->xid, KVRT_ERR_REFUSED, why);
        return;
    }
    struct xfer_span sp;
    if (!begin_span(s, b, m->payload, &sp, why, sizeof(why))) {
        xfer_link_violation(l, why);
        return;
    }
    for (uint64_t i = 0; granted && i < sp.nblocks; i++)
        if (!granted(ctx, sp.ids[i], push)) {
            snprintf(why, sizeof(why), "kvrt-xfer: block %lld is not granted to peer %s for %s", (long long)sp.ids[i],
                     l->name, push ? "writing" : "reading");
            xfer_span_free(&sp);
            *denied = true;
            (push ? refuse_push : refuse_pull)(s, l, m->xid, KVRT_ERR_REFUSED, why);
            return;
        }
    sp.held = id_bytes;
    l->id_bytes += id_bytes;
    if (!push) {
        struct xfer_out *o = xfer_out_new(s, l, m->xid);
        if (!o) {
            xfer_span_free(&sp);
            refuse_pull(s, l, m->xid, KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a pull");
            return;
        }
        o->serving = true;
        o->span = sp;
        /* The puller reads the chunks here, if it proved it may. */
        o->span.refs = (b->flags & WIRE_BEGIN_REFS) && l->read_by_peer;
        xfer_out_issue(o);
        return;
    }
    struct xfer_in *in = xfer_in_new(s, l, m->xid, false);
    uint8_t *seen = calloc(sp.ch.count / 8 + 1, 1);
    uint8_t *note = (b->flags & WIRE_BEGIN_NOTE) ? malloc(b->note_len + 1) : NULL;
    if (!in || !seen || ((b->flags & WIRE_BEGIN_NOTE) && !note)) {
        free(seen);
        free(note);
        xfer_span_free(&sp);
        if (in)
            xfer_in_fail(in, KVRT_ERR_NOMEM, true, "kvrt-xfer: out of memory for a transfer");
        else
            refuse_push(s, l, m->xid, KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a transfer");
        return;
    }
    if (note) {
        memcpy(note, m->payload + id_bytes, b->note_len);
        note[b->note_len] = '\0';
    }
    in->span = sp;
    in->seen = seen;
    in->has_note = note != NULL;
    in->note = note;
    in->note_len = b->note_len;
}

/* ---- progress --------------------------------------------------------------- */

void xfer_streams_progress(struct xfer_streams *s)
{
    xfer_in_start_deferred(s);
    xfer_in_scatter_ready(s);
    for (struct xfer_out *o = s->outs; o; o = o->next)
        xfer_out_issue(o);
    xfer_in_finish(s);
}

bool xfer_streams_busy(const struct xfer_streams *s)
{
    if (s->ready)
        return true;
    if (s->deferred && s->pool->nfree_recv > 0)
        return true;
    for (const struct xfer_out *o = s->outs; o; o = o->next)
        if (!o->finished && o->link && xfer_link_ready(o->link) && o->next_chunk < o->span.ch.count &&
            o->inflight < XFER_WINDOW && s->pool->nfree_send > 0)
            return true;
    return false;
}

void xfer_streams_fail_link(struct xfer_streams *s, struct xfer_link *l, int status, const char *why)
{
    for (struct xfer_out *o = s->outs; o; o = o->next)
        if (o->link == l) {
            xfer_out_fail(o, status, "kvrt-xfer: %s before the transfer completed", why);
            o->link = NULL;
        }
    for (struct xfer_in *in = s->ins; in; in = in->next)
        if (in->link == l) {
            xfer_in_fail(in, status, false, "kvrt-xfer: %s before the transfer completed", why);
            in->link = NULL;
        }
    /* Chunks that waited for a slot go back to UCX. */
    for (struct xfer_deferred **d = &s->deferred; *d;) {
        if ((*d)->in->finished) {
            struct xfer_deferred *x = *d;
            *d = x->next;
            x->in->deferred--;
            xt_release(s->t, x->desc);
            free(x);
        } else {
            d = &(*d)->next;
        }
    }
    s->deferred_tail = &s->deferred;
    while (*s->deferred_tail)
        s->deferred_tail = &(*s->deferred_tail)->next;
}

void xfer_streams_check_stalls(struct xfer_streams *s, double now, double timeout, bool agent_was_idle)
{
    /* The agent itself may not have been progressed for a while (a busy
     * engine): that is no stall of the peers. */
    if (agent_was_idle) {
        for (struct xfer_out *o = s->outs; o; o = o->next)
            o->last_activity = now;
        for (struct xfer_in *in = s->ins; in; in = in->next)
            in->last_activity = now;
    }
    for (struct xfer_out *o = s->outs; o; o = o->next)
        if (!o->finished && o->link && now - o->last_activity > timeout)
            xfer_link_fail_as(o->link, XFER_CAUSE_TIMEOUT, "no progress for %g s on a transfer", timeout);
    for (struct xfer_in *in = s->ins; in; in = in->next)
        if (!in->finished && in->link && now - in->last_activity > timeout)
            xfer_link_fail_as(in->link, XFER_CAUSE_TIMEOUT, "no progress for %g s on a transfer", timeout);
}

void xfer_streams_reap(struct xfer_streams *s)
{
    for (struct xfer_out **o = &s->outs; *o;) {
        struct xfer_out *x = *o;
        if (x->finished && x->inflight == 0) {
            *o = x->next;
            xfer_out_free(x);
        } else {
            o = &x->next;
        }
    }
    for (struct xfer_in **i = &s->ins; *i;) {
        struct xfer_in *x = *i;
        /* A peer's failed push stays until its sender's last word, so that
         * its late chunks are refused quietly rather than called lies. */
        bool done_with = x->pull || x->ended || !x->link || x->status == KVRT_OK;
        if (x->finished && x->inflight == 0 && x->deferred == 0 && done_with) {
            *i = x->next;
            xfer_in_free(x);
        } else {
            i = &x->next;
        }
    }
}

void xfer_streams_count(const struct xfer_streams *s, uint64_t *out, uint64_t *in)
{
    *out = *in = 0;
    for (const struct xfer_out *o = s->outs; o; o = o->next)
        (*out)++;
    for (const struct xfer_in *x = s->ins; x; x = x->next)
        (*in)++;
}

void xfer_streams_release_waiting(struct xfer_streams *s)
{
    while (s->deferred) {
        struct xfer_deferred *d = s->deferred;
        s->deferred = d->next;
        xt_release(s->t, d->desc);
        free(d);
    }
    s->deferred_tail = &s->deferred;
}
