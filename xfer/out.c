/*
 * Outgoing streams: the bytes of a push posted here, or of a pull a peer
 * asked this cache for.  Regions go straight from the cache, one message
 * per run (rendezvous: the receiver's UCX fetches them into the
 * destination; short runs eager); staged transfers are packed chunk by chunk
 * into send slots, so that chunk k+1 is packed while chunk k is on the wire.
 * DONE follows the last data message; a push is complete when the receiver
 * acknowledges that it holds every byte.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_internal.h"

/* Data messages in flight per stream: enough to keep UCX's pipeline full,
 * few enough that many streams share the wire. */
#define WINDOW 16u
/* Below this a run goes eager (copied; no rendezvous round trip). */
#define EAGER_MAX (16u << 10)

struct xfer_out *xfer_out_new(kvrt_xfer_agent *a, kvrt_xfer_peer *p, uint64_t xid)
{
    struct xfer_out *o = calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    o->agent = a;
    o->peer = p;
    o->xid = xid;
    o->status = KVRT_XFER_PENDING;
    o->last_activity = xfer_now();
    o->next = a->outs;
    a->outs = o;
    return o;
}

void xfer_out_free(struct xfer_out *o)
{
    free(o->ops);
    free(o->ids);
    free(o->begin_ids);
    free(o->note);
    free(o);
}

static void finish(struct xfer_out *o, int status, const char *why)
{
    o->finished = true;
    o->status = status;
    xfer_stream_ended(o->agent, &o->h, status, why);
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
    kvrt_xfer_peer *p = o->peer;
    if (!p || p->state != KVRT_XFER_PEER_CONNECTED)
        return;
    /* Tell the receiver: it drops what arrived and reports nothing. */
    if (o->serving) {
        struct xfer_done_msg m = {xfer_hdr_for(p, o->xid), status, XFER_DATA_REPLY, 0};
        xfer_ctl_send_copy(p, XFER_AM_DONE, &m, sizeof(m), why, strlen(why));
    } else {
        struct xfer_abort_msg m = {xfer_hdr_for(p, o->xid), 0, 0};
        xfer_ctl_send_copy(p, XFER_AM_ABORT, &m, sizeof(m), NULL, 0);
    }
}

static void data_sent(void *req, ucs_status_t st, void *user)
{
    struct xfer_req *r = user;
    struct xfer_out *o = r->out;
    kvrt_xfer_agent *a = r->agent;
    xfer_req_done(r);
    o->inflight--;
    xfer_pool_give(a, r->slot);
    if (st == UCS_OK) {
        o->bytes_done += r->bytes;
        a->stats.bytes_sent += r->bytes;
        o->last_activity = xfer_now();
    } else if (!o->finished) {
        /* A rejected message: the receiver refused it (its reason follows
         * in an acknowledgement), or the peer is gone. */
        xfer_out_fail(o, KVRT_ERR_DEVICE, "kvrt-xfer: sending to peer %s failed: %s",
                      o->peer ? o->peer->name : "(closed)", ucs_status_string(st));
    }
    xfer_req_free(r);
    if (req)
        ucp_request_free(req);
}

/* One data message; false when the stream failed. */
static bool send_data(struct xfer_out *o, const void *buf, uint64_t len, uint64_t dst, uint32_t chunk, int slot,
                      ucp_mem_h memh)
{
    kvrt_xfer_agent *a = o->agent;
    struct xfer_req *r = xfer_req_new(a, 0);
    if (!r) {
        xfer_pool_give(a, slot);
        xfer_out_fail(o, KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a message");
        return false;
    }
    r->out = o;
    r->slot = slot;
    r->bytes = len;
    uint32_t flags = (o->staged ? XFER_DATA_STAGED : 0u) | (o->serving ? XFER_DATA_REPLY : 0u);
    r->hdr.data = (struct xfer_data_msg){xfer_hdr_for(o->peer, o->xid), dst, chunk, flags};
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    prm.cb.send = data_sent;
    prm.user_data = r;
    /* Staged chunks always rendezvous: the receiver takes a slot first. */
    prm.flags = (o->staged || len > EAGER_MAX) ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER;
    if (memh) {
        prm.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        prm.memh = memh;
    }
    o->inflight++;
    xfer_req_start(r);
    void *req = ucp_am_send_nbx(o->peer->data_ep, XFER_AM_DATA, &r->hdr.data, sizeof(r->hdr.data), buf, len, &prm);
    if (UCS_PTR_IS_ERR(req))
        data_sent(NULL, UCS_PTR_STATUS(req), r);
    else if (req == NULL)
        data_sent(NULL, UCS_OK, r);
    return !o->finished;
}

static bool send_begin(struct xfer_out *o)
{
    kvrt_xfer_peer *p = o->peer;
    size_t bytes = o->nblocks * sizeof(int64_t);
    struct xfer_req *r = xfer_req_new(o->agent, bytes);
    if (!r) {
        xfer_out_fail(o, KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a message");
        return false;
    }
    r->hdr.begin = (struct xfer_begin_msg){xfer_hdr_for(p, o->xid), XFER_BEGIN_PUSH_STAGED, 0, o->nblocks, o->rsel,
                                           o->chunk_blocks,         o->total_bytes};
    if (bytes)
        memcpy(r->payload, o->begin_ids, bytes);
    free(o->begin_ids);
    o->begin_ids = NULL;
    o->begin_sent = true;
    int rc = xfer_ctl_send(p, XFER_AM_BEGIN, r, sizeof(r->hdr.begin));
    if (rc != KVRT_OK)
        xfer_out_fail(o, rc, "%s", kvrt_error_message());
    return !o->finished;
}

static void send_done(struct xfer_out *o)
{
    kvrt_xfer_peer *p = o->peer;
    o->done_sent = true;
    struct xfer_done_msg m = {xfer_hdr_for(p, o->xid), KVRT_OK, o->serving ? XFER_DATA_REPLY : 0u, o->total_bytes};
    if (o->note)
        m.flags |= XFER_DONE_NOTE;
    int rc = xfer_ctl_send_copy(p, XFER_AM_DONE, &m, sizeof(m), o->note, o->note_len);
    if (rc != KVRT_OK)
        xfer_out_fail(o, rc, "%s", kvrt_error_message());
}

static void issue_regions(struct xfer_out *o)
{
    kvrt_xfer_agent *a = o->agent;
    uint64_t max = xfer_max_message();
    while (o->next_op < o->nops && o->inflight < WINDOW) {
        const struct xfer_op *op = &o->ops[o->next_op];
        uint64_t len = op->len - o->op_pos < max ? op->len - o->op_pos : max;
        if (!send_data(o, a->cache_addr + op->loff + o->op_pos, len, op->roff + o->op_pos, 0, -1, a->cache_memh))
            return;
        o->op_pos += len;
        if (o->op_pos == op->len) {
            o->next_op++;
            o->op_pos = 0;
        }
    }
}

static void issue_chunks(struct xfer_out *o)
{
    kvrt_xfer_agent *a = o->agent;
    while (o->next_chunk < o->nchunks && o->inflight < WINDOW) {
        int slot = xfer_pool_take(a, true);
        if (slot < 0)
            return; /* every send slot is on the wire: next round */
        uint64_t first = o->next_chunk * o->chunk_blocks;
        uint64_t n = o->nblocks - first < o->chunk_blocks ? o->nblocks - first : o->chunk_blocks;
        int rc = xfer_pool_pack(a, slot, o->ids + first, n, &o->sel);
        if (rc != KVRT_OK) {
            xfer_pool_give(a, slot);
            xfer_out_fail(o, rc, "kvrt-xfer: packing chunk %llu for peer %s: %s", ULL(o->next_chunk), o->peer->name,
                          kvrt_error_message());
            return;
        }
        uint32_t k = (uint32_t)o->next_chunk++;
        if (!send_data(o, xfer_pool_slot(a, slot), n * o->block_bytes, 0, k, slot, a->pool.memh))
            return;
    }
}

void xfer_out_issue(struct xfer_out *o)
{
    if (o->finished)
        return;
    if (!o->peer || o->peer->state != KVRT_XFER_PEER_CONNECTED)
        return; /* the peer's cleanup fails it */
    if (!o->peer->wired)
        return; /* nothing on an endpoint still being set up */
    if (o->staged && !o->serving && !o->begin_sent && !send_begin(o))
        return;
    if (o->staged)
        issue_chunks(o);
    else
        issue_regions(o);
    if (o->finished)
        return;
    bool posted = o->staged ? o->next_chunk == o->nchunks : o->next_op == o->nops;
    if (posted && !o->done_sent)
        send_done(o);
    if (!o->finished && o->done_sent && o->inflight == 0 && (o->serving || o->acked))
        finish(o, KVRT_OK, "");
}

static struct xfer_out *find(kvrt_xfer_agent *a, kvrt_xfer_peer *p, uint64_t xid, bool serving)
{
    for (struct xfer_out *o = a->outs; o; o = o->next)
        if (o->peer == p && o->xid == xid && o->serving == serving && !o->finished)
            return o;
    return NULL;
}

void xfer_out_on_ack(kvrt_xfer_peer *p, const struct xfer_ack_msg *m, const void *data, size_t len)
{
    struct xfer_out *o = find(p->agent, p, m->h.xid, false);
    if (!o)
        return;
    o->acked = true;
    o->last_activity = xfer_now();
    if (m->status != KVRT_OK) {
        /* The receiver failed; the ABORT this sends lets it forget the
         * stream. */
        int n = len > 512 ? 512 : (int)len;
        xfer_out_fail(o, m->status, "kvrt-xfer: peer %s could not take the transfer: %.*s", p->name, n,
                      (const char *)data);
    }
}

void xfer_out_on_abort(kvrt_xfer_peer *p, uint64_t xid)
{
    struct xfer_out *o = find(p->agent, p, xid, true);
    if (o) {
        /* The requester gave its pull up: stop, say nothing more. */
        o->peer = NULL;
        xfer_out_fail(o, KVRT_ERR_STATE, "kvrt-xfer: peer %s gave its pull up", p->name);
        o->peer = p;
    }
}

/* A pull asks for runs of this cache: each inside it. */
static int check_runs(kvrt_xfer_agent *a, const struct xfer_op *runs, uint64_t n, uint64_t *total)
{
    if (!a->addressable && n > 0)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: a pull of regions from a cache without a host address");
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t end;
        if (runs[i].len == 0 || __builtin_add_overflow(runs[i].loff, runs[i].len, &end) || end > a->local.bytes ||
            __builtin_add_overflow(sum, runs[i].len, &sum))
            return XFER_FAIL(KVRT_ERR_INVALID,
                             "kvrt-xfer: pull run %llu (%llu bytes at %llu) is outside this cache's %llu bytes", ULL(i),
                             ULL(runs[i].len), ULL(runs[i].loff), ULL(a->local.bytes));
    }
    *total = sum;
    return KVRT_OK;
}

/* Serve a pull: check everything it names, then send like a push. */
static int serve(kvrt_xfer_peer *p, const struct xfer_begin_msg *m, const void *data, size_t len)
{
    kvrt_xfer_agent *a = p->agent;
    bool staged = m->kind == XFER_BEGIN_PULL_STAGED;
    if (m->kind != XFER_BEGIN_PULL_STAGED && m->kind != XFER_BEGIN_PULL_REGIONS)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: a request of kind %u; valid are 1 to 3", m->kind);
    size_t item = staged ? sizeof(int64_t) : 3 * sizeof(uint64_t);
    if (m->count > len / item || m->count * item != len)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: a pull announces %llu items but carries %zu bytes",
                         ULL(m->count), len);
    struct xfer_out *o = xfer_out_new(a, p, m->h.xid);
    if (!o)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a pull");
    o->serving = true;
    o->staged = staged;
    int rc = KVRT_OK;
    void *copy = malloc(len ? len : 1);
    /* The requester sent (source, destination, length) runs, source ours,
     * or the source ids. */
    if (staged)
        o->ids = copy;
    else
        o->ops = copy;
    if (!copy)
        rc = XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a pull");
    else if (len)
        memcpy(copy, data, len);
    if (rc == KVRT_OK && !staged) {
        o->nops = m->count;
        rc = check_runs(a, o->ops, m->count, &o->total_bytes);
    } else if (rc == KVRT_OK) {
        o->nblocks = m->count;
        o->sel = m->sel;
        o->chunk_blocks = m->chunk_blocks;
        rc = xfer_check_ids(o->ids, o->nblocks, a->local.num_blocks, "local", "the pull's ids", false);
        if (rc == KVRT_OK)
            rc = xfer_check_sel(&a->local, &o->sel, "a pull");
        if (rc == KVRT_OK && (o->chunk_blocks == 0 || o->chunk_blocks > a->pool.chunk / a->local.staging_per_block))
            rc = XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: a pull in chunks of %llu blocks; this side's hold %llu",
                           ULL(o->chunk_blocks), ULL(a->pool.chunk / a->local.staging_per_block));
        if (rc == KVRT_OK) {
            o->block_bytes = xfer_sel_block_bytes(&a->local, &o->sel);
            o->total_bytes = o->nblocks * o->block_bytes;
            o->nchunks = (o->nblocks + o->chunk_blocks - 1) / o->chunk_blocks;
        }
    }
    if (rc == KVRT_OK && o->total_bytes != m->total_bytes)
        rc = XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: a pull of %llu bytes announces %llu", ULL(o->total_bytes),
                       ULL(m->total_bytes));
    if (rc != KVRT_OK) {
        o->finished = true; /* reaped; never counted */
        return rc;
    }
    xfer_out_issue(o);
    return KVRT_OK;
}

void xfer_out_on_begin(kvrt_xfer_peer *p, const struct xfer_begin_msg *m, const void *data, size_t len)
{
    int rc = serve(p, m, data, len);
    if (rc == KVRT_OK)
        return;
    char why[640];
    snprintf(why, sizeof(why), "%s", kvrt_error_message());
    p->agent->stats.failed++;
    struct xfer_done_msg d = {xfer_hdr_for(p, m->h.xid), rc, XFER_DATA_REPLY, 0};
    xfer_ctl_send_copy(p, XFER_AM_DONE, &d, sizeof(d), why, strlen(why));
}
