/*
 * Incoming streams: a peer's push into this cache, or the bytes of a pull
 * posted here.  A region message is received straight into the cache (after
 * a bounds check); a staged chunk is received into a receive slot -- or
 * waits, its rendezvous descriptor kept, until one is free -- and scattered
 * by the next round of progress.  A stream is complete when DONE has come
 * and every byte it announced is in place; only then is a push's
 * notification queued and acknowledged, so a failed transfer is never
 * reported complete.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_internal.h"

struct xfer_in *xfer_in_new(kvrt_xfer_agent *a, kvrt_xfer_peer *p, uint64_t xid, bool pull)
{
    struct xfer_in *in = calloc(1, sizeof(*in));
    if (!in)
        return NULL;
    in->agent = a;
    in->peer = p;
    in->xid = xid;
    in->pull = pull;
    in->status = KVRT_XFER_PENDING;
    in->last_activity = xfer_now();
    in->next = a->ins;
    a->ins = in;
    return in;
}

void xfer_in_free(struct xfer_in *in)
{
    free(in->ids);
    free(in->why);
    free(in->note);
    free(in);
}

static void finish(struct xfer_in *in, int status, const char *why)
{
    in->finished = true;
    in->status = status;
    xfer_stream_ended(in->agent, &in->h, status, why);
}

/* The stream fails; `tell`: the peer hears of it (a push's sender gets
 * this side's reason, a pulled peer stops serving). */
static void vfail(struct xfer_in *in, int status, bool tell, const char *fmt, va_list ap)
{
    if (in->finished)
        return;
    char why[640];
    vsnprintf(why, sizeof(why), fmt, ap);
    finish(in, status, why);
    kvrt_xfer_agent *a = in->agent;
    if (tell && !in->pull && a->served_error == KVRT_OK) {
        a->served_error = status;
        snprintf(a->served_why, sizeof(a->served_why), "%s", why);
    }
    kvrt_xfer_peer *p = in->peer;
    if (!tell || !p || p->state != KVRT_XFER_PEER_CONNECTED)
        return;
    if (!in->pull) {
        struct xfer_ack_msg m = {xfer_hdr_for(p, in->xid), status, 0};
        xfer_ctl_send_copy(p, XFER_AM_ACK, &m, sizeof(m), why, strlen(why));
    } else {
        struct xfer_abort_msg m = {xfer_hdr_for(p, in->xid), XFER_ABORT_PULL, 0};
        xfer_ctl_send_copy(p, XFER_AM_ABORT, &m, sizeof(m), NULL, 0);
    }
}

void xfer_in_fail(struct xfer_in *in, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(in, status, true, fmt, ap);
    va_end(ap);
}

/* Failed without a word to the peer: it gave the stream up, or told why. */
static void fail_quietly(struct xfer_in *in, int status, const char *fmt, ...) KVRT_PRINTF(3, 4);

static void fail_quietly(struct xfer_in *in, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(in, status, false, fmt, ap);
    va_end(ap);
}

static struct xfer_in *find(kvrt_xfer_agent *a, kvrt_xfer_peer *p, uint64_t xid, bool pull)
{
    for (struct xfer_in *in = a->ins; in; in = in->next)
        if (in->peer == p && in->xid == xid && in->pull == pull)
            return in;
    return NULL;
}

/* A peer's push: found, or begun by whichever of its messages came first. */
static struct xfer_in *push_stream(kvrt_xfer_peer *p, uint64_t xid)
{
    struct xfer_in *in = find(p->agent, p, xid, false);
    if (!in && !(in = xfer_in_new(p->agent, p, xid, false)))
        xfer_peer_fail(p, "out of memory for its transfer");
    return in;
}

static void data_received(void *req, ucs_status_t st, size_t len, void *user)
{
    struct xfer_req *r = user;
    struct xfer_in *in = r->in;
    kvrt_xfer_agent *a = r->agent;
    xfer_req_done(r);
    in->inflight--;
    if (st != UCS_OK) {
        xfer_pool_give(a, r->slot);
        xfer_in_fail(in, KVRT_ERR_DEVICE, "kvrt-xfer: receiving from peer %s failed: %s",
                     in->peer ? in->peer->name : "(closed)", ucs_status_string(st));
    } else if (in->staged) {
        struct xfer_ready *x = calloc(1, sizeof(*x));
        if (!x) {
            xfer_pool_give(a, r->slot);
            xfer_in_fail(in, KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a received chunk");
        } else {
            *x = (struct xfer_ready){NULL, in, r->chunk, r->slot, len};
            *a->ready_tail = x;
            a->ready_tail = &x->next;
        }
        in->last_activity = xfer_now();
    } else {
        in->bytes_got += len;
        a->stats.bytes_received += len;
        in->last_activity = xfer_now();
    }
    xfer_req_free(r);
    if (req)
        ucp_request_free(req);
}

/* Receive a rendezvous message into `dst` (the cache, or a slot). */
static void receive(struct xfer_in *in, void *desc, void *dst, uint64_t len, int slot, uint32_t chunk, ucp_mem_h memh)
{
    kvrt_xfer_agent *a = in->agent;
    struct xfer_req *r = xfer_req_new(a, 0);
    if (!r) {
        xfer_pool_give(a, slot);
        ucp_am_data_release(a->worker, desc);
        xfer_in_fail(in, KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a receive");
        return;
    }
    r->in = in;
    r->slot = slot;
    r->chunk = chunk;
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    prm.cb.recv_am = data_received;
    prm.user_data = r;
    if (memh) {
        prm.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        prm.memh = memh;
    }
    in->inflight++;
    xfer_req_start(r);
    void *req = ucp_am_recv_data_nbx(a->worker, desc, dst, len, &prm);
    if (UCS_PTR_IS_ERR(req))
        data_received(NULL, UCS_PTR_STATUS(req), 0, r);
    else if (req == NULL)
        data_received(NULL, UCS_OK, len, r);
}

static uint64_t chunk_bytes(const struct xfer_in *in, uint32_t k)
{
    uint64_t first = (uint64_t)k * in->chunk_blocks;
    uint64_t n = in->nblocks - first < in->chunk_blocks ? in->nblocks - first : in->chunk_blocks;
    return n * in->block_bytes;
}

/* A staged chunk whose layout is known: into a free receive slot. */
static bool start_chunk(struct xfer_in *in, void *desc, uint32_t k, uint64_t len)
{
    kvrt_xfer_agent *a = in->agent;
    if (k >= in->nchunks || len != chunk_bytes(in, k)) {
        ucp_am_data_release(a->worker, desc);
        xfer_in_fail(in, KVRT_ERR_INVALID, "kvrt-xfer: peer %s sent chunk %u of %llu bytes; expected %llu chunks",
                     in->peer ? in->peer->name : "(closed)", k, ULL(len), ULL(in->nchunks));
        return true;
    }
    int slot = xfer_pool_take(a, false);
    if (slot < 0)
        return false;
    receive(in, desc, xfer_pool_slot(a, slot), len, slot, k, a->pool.memh);
    return true;
}

static bool defer(struct xfer_in *in, void *desc, uint32_t k, uint64_t len)
{
    kvrt_xfer_agent *a = in->agent;
    struct xfer_deferred *d = calloc(1, sizeof(*d));
    if (!d)
        return false;
    *d = (struct xfer_deferred){NULL, in, desc, k, len};
    *a->deferred_tail = d;
    a->deferred_tail = &d->next;
    in->deferred++;
    return true;
}

ucs_status_t xfer_in_on_data(kvrt_xfer_peer *p, const struct xfer_data_msg *m, void *data, size_t len, bool rndv)
{
    kvrt_xfer_agent *a = p->agent;
    bool reply = (m->flags & XFER_DATA_REPLY) != 0, staged = (m->flags & XFER_DATA_STAGED) != 0;
    struct xfer_in *in = reply ? find(a, p, m->h.xid, true) : push_stream(p, m->h.xid);
    if (!in || in->finished)
        return rndv ? UCS_ERR_CANCELED : UCS_OK; /* given up: the sender is told so */
    if (!reply && in->bytes_got == 0 && in->inflight == 0 && in->deferred == 0 && !in->begun)
        in->staged = staged;
    if (in->staged != staged || (staged && !rndv)) {
        xfer_in_fail(in, KVRT_ERR_INVALID, "kvrt-xfer: peer %s mixed region and staged messages in one transfer",
                     p->name);
        return rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;
    }
    in->last_activity = xfer_now();
    if (staged) {
        if ((!in->begun || !start_chunk(in, data, m->chunk, len)) && !defer(in, data, m->chunk, len)) {
            xfer_in_fail(in, KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a waiting chunk");
            return UCS_ERR_NO_MEMORY;
        }
        return UCS_INPROGRESS;
    }
    uint64_t end;
    if (!a->addressable || __builtin_add_overflow(m->offset, (uint64_t)len, &end) || end > a->local.bytes) {
        xfer_in_fail(in, KVRT_ERR_INVALID, "kvrt-xfer: peer %s sent %zu bytes for offset %llu; this cache %s", p->name,
                     len, ULL(m->offset), a->addressable ? "is smaller" : "has no host address");
        return rndv ? UCS_ERR_INVALID_PARAM : UCS_OK;
    }
    if (rndv) {
        receive(in, data, a->cache_addr + m->offset, len, -1, 0, a->cache_memh);
        return UCS_INPROGRESS;
    }
    memcpy(a->cache_addr + m->offset, data, len);
    in->bytes_got += len;
    a->stats.bytes_received += len;
    return UCS_OK;
}

/* A staged push announces its ids and selection: check them all. */
static int begin(struct xfer_in *in, const struct xfer_begin_msg *m, const void *data, size_t len)
{
    kvrt_xfer_agent *a = in->agent;
    if (in->begun || in->bytes_got || (in->inflight && !in->staged))
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: a second start of one transfer");
    if (m->count > len / sizeof(int64_t) || m->count * sizeof(int64_t) != len)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: a transfer announces %llu blocks but carries %zu bytes of ids",
                         ULL(m->count), len);
    /* Copied first: the ids in a message need not be aligned. */
    in->ids = malloc(len ? len : 1);
    if (!in->ids)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a transfer's ids");
    if (len)
        memcpy(in->ids, data, len);
    int rc = xfer_check_ids(in->ids, m->count, a->local.num_blocks, "local", "the transfer's ids", true);
    if (rc == KVRT_OK)
        rc = xfer_check_sel(&a->local, &m->sel, "a transfer");
    uint64_t fits = a->pool.chunk / a->local.staging_per_block;
    if (rc == KVRT_OK && (m->chunk_blocks == 0 || m->chunk_blocks > fits))
        rc = XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: chunks of %llu blocks; this side's hold %llu",
                       ULL(m->chunk_blocks), ULL(fits));
    if (rc != KVRT_OK)
        return rc;
    in->block_bytes = xfer_sel_block_bytes(&a->local, &m->sel);
    if (in->block_bytes * m->count != m->total_bytes || (in->done_seen && in->total_bytes != m->total_bytes))
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: a transfer of %llu blocks of %llu bytes announces %llu bytes",
                         ULL(m->count), ULL(in->block_bytes), ULL(m->total_bytes));
    in->staged = true;
    in->begun = true;
    in->nblocks = m->count;
    in->sel = m->sel;
    in->chunk_blocks = m->chunk_blocks;
    in->nchunks = (m->count + m->chunk_blocks - 1) / m->chunk_blocks;
    in->total_bytes = m->total_bytes;
    return KVRT_OK;
}

void xfer_in_on_begin(kvrt_xfer_peer *p, const struct xfer_begin_msg *m, const void *data, size_t len)
{
    struct xfer_in *in = push_stream(p, m->h.xid);
    if (!in || in->finished)
        return;
    int rc = begin(in, m, data, len);
    if (rc != KVRT_OK)
        xfer_in_fail(in, rc, "kvrt-xfer: refused a transfer from peer %s: %s", p->name, kvrt_error_message());
    in->last_activity = xfer_now();
}

void xfer_in_on_done(kvrt_xfer_peer *p, const struct xfer_done_msg *m, const void *data, size_t len)
{
    bool reply = (m->flags & XFER_DATA_REPLY) != 0;
    struct xfer_in *in = reply ? find(p->agent, p, m->h.xid, true) : push_stream(p, m->h.xid);
    if (!in)
        return;
    in->ended = true;
    if (in->finished)
        return;
    in->last_activity = xfer_now();
    if (m->status != KVRT_OK) {
        /* A pull the peer could not serve: its reason. */
        in->peer = NULL; /* it knows */
        fail_quietly(in, m->status, "kvrt-xfer: peer %s refused the pull: %.*s", p->name, len > 512 ? 512 : (int)len,
                     (const char *)data);
        in->peer = p;
        return;
    }
    if (in->done_seen || (reply && m->total_bytes != in->total_bytes) ||
        (in->begun && !reply && m->total_bytes != in->total_bytes)) {
        xfer_in_fail(in, KVRT_ERR_INVALID, "kvrt-xfer: peer %s announced %llu bytes for a transfer of %llu", p->name,
                     ULL(m->total_bytes), ULL(in->total_bytes));
        return;
    }
    in->done_seen = true;
    in->total_bytes = m->total_bytes;
    if (!reply && (m->flags & XFER_DONE_NOTE)) {
        in->note = malloc(len + 1);
        if (!in->note) {
            xfer_in_fail(in, KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a notification");
            return;
        }
        memcpy(in->note, data, len);
        in->note[len] = '\0';
        in->note_len = len;
    }
}

void xfer_in_on_abort(kvrt_xfer_peer *p, uint64_t xid)
{
    struct xfer_in *in = find(p->agent, p, xid, false);
    if (in) {
        in->ended = true;
        fail_quietly(in, KVRT_ERR_STATE, "kvrt-xfer: peer %s gave the transfer up", p->name);
    }
}

void xfer_in_scatter_ready(kvrt_xfer_agent *a)
{
    while (a->ready) {
        struct xfer_ready *x = a->ready;
        a->ready = x->next;
        if (!a->ready)
            a->ready_tail = &a->ready;
        struct xfer_in *in = x->in;
        if (!in->finished) {
            uint64_t first = (uint64_t)x->chunk * in->chunk_blocks;
            uint64_t n = x->bytes / in->block_bytes;
            int rc = xfer_pool_unpack(a, x->slot, in->ids + first, n, &in->sel);
            if (rc != KVRT_OK) {
                xfer_in_fail(in, rc, "kvrt-xfer: scattering chunk %u from peer %s: %s", x->chunk,
                             in->peer ? in->peer->name : "(closed)", kvrt_error_message());
            } else {
                in->chunks_done++;
                in->bytes_got += x->bytes;
                a->stats.bytes_received += x->bytes;
                in->last_activity = xfer_now();
            }
        }
        xfer_pool_give(a, x->slot);
        free(x);
        /* A freed slot lets a waiting chunk in before the next scatter, so
         * its bytes travel while this side scatters. */
        xfer_in_start_deferred(a);
    }
}

void xfer_in_start_deferred(kvrt_xfer_agent *a)
{
    for (struct xfer_deferred **d = &a->deferred; *d;) {
        struct xfer_deferred *x = *d;
        bool gone = x->in->finished;
        if (gone)
            ucp_am_data_release(a->worker, x->desc);
        else if (!x->in->begun || !start_chunk(x->in, x->desc, x->chunk, x->bytes)) {
            if (x->in->begun && a->pool.nfree_recv == 0)
                break; /* no slot: keep the order */
            d = &x->next;
            continue;
        }
        x->in->deferred--;
        *d = x->next;
        free(x);
    }
    a->deferred_tail = &a->deferred;
    while (*a->deferred_tail)
        a->deferred_tail = &(*a->deferred_tail)->next;
}

/* Streams whose every byte is in: report them, once. */
void xfer_in_finish(kvrt_xfer_agent *a)
{
    for (struct xfer_in *in = a->ins; in; in = in->next) {
        if (in->finished || !in->done_seen || in->inflight || in->deferred)
            continue;
        if (in->staged && !in->begun)
            continue;
        if (in->bytes_got != in->total_bytes || (in->staged && in->chunks_done != in->nchunks)) {
            if (in->bytes_got > in->total_bytes)
                xfer_in_fail(in, KVRT_ERR_INVALID, "kvrt-xfer: peer %s sent %llu bytes for a transfer of %llu",
                             in->peer ? in->peer->name : "(closed)", ULL(in->bytes_got), ULL(in->total_bytes));
            continue;
        }
        kvrt_xfer_peer *p = in->peer;
        if (!in->pull) {
            if (in->note) {
                xfer_note_push(a, p, in->note, in->note_len);
                in->note = NULL;
            }
            struct xfer_ack_msg m = {xfer_hdr_for(p, in->xid), KVRT_OK, 0};
            xfer_ctl_send_copy(p, XFER_AM_ACK, &m, sizeof(m), NULL, 0);
        } else if (in->note) {
            struct xfer_hdr h = xfer_hdr_for(p, 0);
            xfer_ctl_send_copy(p, XFER_AM_NOTIFY, &h, sizeof(h), in->note, in->note_len);
        }
        finish(in, KVRT_OK, "");
    }
}
