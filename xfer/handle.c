/*
 * Handles: a transfer posted here, from kvrt_xfer_post to kvrt_xfer_release.
 * A push is an outgoing stream; a pull is an incoming stream plus the
 * request (BEGIN) that makes the peer serve it.  The handle outlives its
 * stream (and the agent): it keeps the outcome and the plan.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_internal.h"

void xfer_handle_finish(kvrt_xfer_handle *h, int status, const char *why)
{
    if (h->status != KVRT_XFER_PENDING)
        return;
    h->status = status;
    snprintf(h->why, sizeof(h->why), "%s", why ? why : "");
    h->plan.seconds = xfer_now() - h->t_post;
}

void xfer_stream_ended(kvrt_xfer_agent *a, kvrt_xfer_handle **h, int status, const char *why)
{
    if (status == KVRT_OK)
        a->stats.completed++;
    else
        a->stats.failed++;
    if (*h) {
        xfer_handle_finish(*h, status, why);
        (*h)->out = NULL;
        (*h)->in = NULL;
        *h = NULL;
    }
}

static int copy_bytes(const void *src, size_t n, void **out)
{
    *out = malloc(n ? n : 1);
    if (!*out)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_post: out of memory for %zu bytes", n);
    if (n)
        memcpy(*out, src, n);
    return KVRT_OK;
}

static int post_push(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *r, struct xfer_planned *ps,
                     kvrt_xfer_handle *h, uint64_t xid)
{
    struct xfer_out *o = xfer_out_new(a, p, xid);
    if (!o)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_post: out of memory");
    o->h = h;
    h->out = o;
    int rc = KVRT_OK;
    if (r->notification)
        rc = copy_bytes(r->notification, r->notification_len, (void **)&o->note);
    o->note_len = r->notification_len;
    if (ps->method == KVRT_XFER_STAGING) {
        o->staged = true;
        o->nblocks = r->num_blocks;
        o->sel = ps->in.lsel;
        o->rsel = ps->in.rsel;
        o->block_bytes = ps->block_bytes;
        o->chunk_blocks = ps->chunk_blocks;
        o->nchunks = (r->num_blocks + ps->chunk_blocks - 1) / ps->chunk_blocks;
        o->total_bytes = r->num_blocks * ps->block_bytes;
        if (rc == KVRT_OK)
            rc = copy_bytes(r->local_ids, r->num_blocks * sizeof(int64_t), (void **)&o->ids);
        if (rc == KVRT_OK)
            rc = copy_bytes(r->remote_ids, r->num_blocks * sizeof(int64_t), (void **)&o->begin_ids);
    } else {
        o->ops = ps->ops;
        o->nops = ps->nops;
        ps->ops = NULL;
        for (size_t i = 0; i < o->nops; i++)
            o->total_bytes += o->ops[i].len;
    }
    if (rc != KVRT_OK) {
        o->finished = true;
        h->out = NULL;
        return rc;
    }
    xfer_out_issue(o);
    return KVRT_OK;
}

static int post_pull(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *r, struct xfer_planned *ps,
                     kvrt_xfer_handle *h, uint64_t xid)
{
    bool staged = ps->method == KVRT_XFER_STAGING;
    size_t count = staged ? r->num_blocks : ps->nops;
    size_t bytes = count * (staged ? sizeof(int64_t) : sizeof(struct xfer_op));
    struct xfer_req *msg = xfer_req_new(a, bytes);
    struct xfer_in *in = msg ? xfer_in_new(a, p, xid, true) : NULL;
    if (!in) {
        xfer_req_free(msg);
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_post: out of memory");
    }
    in->h = h;
    h->in = in;
    in->begun = true;
    in->staged = staged;
    int rc = KVRT_OK;
    if (r->notification)
        rc = copy_bytes(r->notification, r->notification_len, (void **)&in->note);
    in->note_len = r->notification_len;
    struct xfer_begin_msg *m = &msg->hdr.begin;
    *m = (struct xfer_begin_msg){xfer_hdr_for(p, xid), 0, 0, count, ps->in.rsel, 0, 0};
    if (staged) {
        in->nblocks = r->num_blocks;
        in->sel = ps->in.lsel;
        in->block_bytes = ps->block_bytes;
        in->chunk_blocks = ps->chunk_blocks;
        in->nchunks = (r->num_blocks + ps->chunk_blocks - 1) / ps->chunk_blocks;
        in->total_bytes = r->num_blocks * ps->block_bytes;
        if (rc == KVRT_OK)
            rc = copy_bytes(r->local_ids, r->num_blocks * sizeof(int64_t), (void **)&in->ids);
        m->kind = XFER_BEGIN_PULL_STAGED;
        m->chunk_blocks = ps->chunk_blocks;
        if (bytes)
            memcpy(msg->payload, r->remote_ids, bytes);
    } else {
        /* The peer serves (its offset, this side's offset, length). */
        struct xfer_op *runs = (struct xfer_op *)(void *)msg->payload;
        for (size_t i = 0; i < ps->nops; i++) {
            runs[i] = (struct xfer_op){ps->ops[i].roff, ps->ops[i].loff, ps->ops[i].len};
            in->total_bytes += ps->ops[i].len;
        }
        m->kind = XFER_BEGIN_PULL_REGIONS;
    }
    m->total_bytes = in->total_bytes;
    if (rc == KVRT_OK)
        rc = xfer_ctl_send(p, XFER_AM_BEGIN, msg, sizeof(*m));
    else
        xfer_req_free(msg);
    if (rc != KVRT_OK) {
        in->finished = true;
        in->h = NULL;
        h->in = NULL;
    }
    return rc;
}

int kvrt_xfer_post(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *req, kvrt_xfer_handle **out)
{
    if (!a || !p || !req || !out)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_post: NULL argument");
    *out = NULL;
    kvrt_xfer_handle *h = calloc(1, sizeof(*h));
    if (!h)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_post: out of memory");
    xfer_lock(a);
    struct xfer_planned ps;
    int rc = xfer_plan_make(a, p, req, &ps, &h->plan);
    if (rc == KVRT_OK) {
        h->agent = a;
        h->status = KVRT_XFER_PENDING;
        h->t_post = xfer_now();
        uint64_t xid = a->next_xid++;
        rc = req->direction == KVRT_XFER_PUSH ? post_push(a, p, req, &ps, h, xid) : post_pull(a, p, req, &ps, h, xid);
    }
    free(ps.ops);
    if (rc != KVRT_OK) {
        xfer_unlock(a);
        free(h);
        return rc;
    }
    h->next = a->handles;
    a->handles = h;
    xfer_unlock(a);
    *out = h;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

/* The handle's state, its message set for this thread.  Lock held. */
static int state(kvrt_xfer_handle *h)
{
    if (h->status == KVRT_XFER_PENDING || h->status == KVRT_OK) {
        kvrt_error_report(KVRT_OK, NULL);
        return h->status;
    }
    return kvrt_error_report(h->status, "%s", h->why);
}

int kvrt_xfer_test(kvrt_xfer_handle *h)
{
    if (!h)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_test: handle is NULL");
    kvrt_xfer_agent *a = h->agent;
    if (!a)
        return state(h);
    xfer_lock(a);
    if (h->status == KVRT_XFER_PENDING)
        xfer_progress_round(a);
    int rc = state(h);
    xfer_unlock(a);
    return rc;
}

int kvrt_xfer_wait(kvrt_xfer_handle *h, double timeout_s)
{
    if (!h)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_wait: handle is NULL");
    if (timeout_s != timeout_s)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_wait: timeout is not a number");
    kvrt_xfer_agent *a = h->agent;
    if (!a)
        return state(h);
    /* A negative timeout waits for the end, which the transfer's own
     * inactivity timeout bounds. */
    double deadline = timeout_s < 0 ? 1e300 : xfer_now() + timeout_s;
    xfer_lock(a);
    for (;;) {
        xfer_progress_round(a);
        if (h->status != KVRT_XFER_PENDING || xfer_now() >= deadline)
            break;
        xfer_unlock(a);
        xfer_idle(a, deadline);
        xfer_lock(a);
    }
    int rc = state(h);
    xfer_unlock(a);
    return rc;
}

int kvrt_xfer_handle_plan(kvrt_xfer_handle *h, struct kvrt_xfer_plan *plan)
{
    if (!h || !plan)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_handle_plan: NULL argument");
    kvrt_xfer_agent *a = h->agent;
    if (a)
        xfer_lock(a);
    *plan = h->plan;
    if (a)
        xfer_unlock(a);
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

void kvrt_xfer_release(kvrt_xfer_handle *h)
{
    if (!h)
        return;
    kvrt_xfer_agent *a = h->agent;
    if (a) {
        xfer_lock(a);
        if (h->out)
            xfer_out_fail(h->out, KVRT_ERR_STATE, "kvrt-xfer: released before it completed");
        if (h->in)
            xfer_in_fail(h->in, KVRT_ERR_STATE, "kvrt-xfer: released before it completed");
        for (kvrt_xfer_handle **hp = &a->handles; *hp; hp = &(*hp)->next)
            if (*hp == h) {
                *hp = h->next;
                break;
            }
        xfer_unlock(a);
    }
    free(h);
}

int kvrt_xfer_transfer(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *req,
                       struct kvrt_xfer_plan *plan)
{
    kvrt_xfer_handle *h;
    int rc = kvrt_xfer_post(a, p, req, &h);
    if (rc != KVRT_OK)
        return rc;
    rc = kvrt_xfer_wait(h, -1);
    char why[sizeof(h->why)];
    snprintf(why, sizeof(why), "%s", kvrt_error_message());
    if (plan)
        *plan = h->plan;
    kvrt_xfer_release(h);
    if (rc == KVRT_OK)
        kvrt_error_report(KVRT_OK, NULL);
    else
        kvrt_error_report(rc, "%s", why);
    return rc;
}
