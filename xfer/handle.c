/*
 * Handles: a transfer posted here, from kvrt_xfer_post to kvrt_xfer_release.
 * A push is an outgoing stream; a pull an incoming stream whose BEGIN makes
 * the peer serve it.  The handle outlives its stream (and the agent): it
 * keeps the outcome and the plan.
 *
 * Layer 6 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "agent.h"

void xfer_handle_end(void *handle, int status, const char *why)
{
    kvrt_xfer_handle *h = handle;
    h->out = NULL;
    h->in = NULL;
    if (h->status != KVRT_XFER_PENDING)
        return;
    h->status = status;
    snprintf(h->why, sizeof(h->why), "%s", why ? why : "");
    h->plan.seconds = base_now() - h->t_post;
}

void kvrt_xfer_request_default(struct kvrt_xfer_request *req)
{
    if (!req)
        return;
    memset(req, 0, sizeof(*req));
    req->size = sizeof(*req);
}

/* The request's peer, usable by this agent.  Lock held. */
static int usable(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
{
    if (p->agent != a || !p->loaded || p->hs != XFER_HS_NONE)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer request: the peer does not belong to this agent");
    return xfer_link_ok(&p->link, "kvrt-xfer request");
}

/* Whether the destination reads the request's chunks in the source's
 * memory: the peer reads this side (a push), or this side reads the peer
 * (a pull).  Lock held. */
static bool in_place(const kvrt_xfer_peer *p, const struct kvrt_xfer_request *req)
{
    return req->direction == KVRT_XFER_PUSH ? p->link.read_by_peer : p->link.reads_peer;
}

int kvrt_xfer_plan(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *req,
                   struct kvrt_xfer_plan *plan)
{
    if (!a || !p || !req || !plan)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_plan: NULL argument");
    struct xfer_planned ps;
    memset(&ps, 0, sizeof(ps));
    base_lock(&a->lock);
    int rc = usable(a, p);
    if (rc == KVRT_OK)
        rc = xfer_plan_make(&a->local, a->pool.chunk, &p->md, in_place(p, req), req, &ps, plan);
    base_unlock(&a->lock);
    xfer_planned_free(&ps);
    if (rc == KVRT_OK)
        kvrt_error_report(KVRT_OK, NULL);
    return rc;
}

int kvrt_xfer_post(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *req, kvrt_xfer_handle **out)
{
    if (!a || !p || !req || !out)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_post: NULL argument");
    *out = NULL;
    kvrt_xfer_handle *h = calloc(1, sizeof(*h));
    if (!h)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_post: out of memory");
    base_lock(&a->lock);
    struct xfer_planned ps;
    memset(&ps, 0, sizeof(ps));
    int rc = usable(a, p);
    if (rc == KVRT_OK)
        rc = xfer_plan_make(&a->local, a->pool.chunk, &p->md, in_place(p, req), req, &ps, &h->plan);
    if (rc == KVRT_OK) {
        h->agent = a;
        h->status = KVRT_XFER_PENDING;
        h->t_post = base_now();
        /* A NULL notification is none; an empty one is delivered. */
        const void *note = req->notification ? req->notification : NULL;
        if (ps.push) {
            rc = xfer_push_post(&a->streams, &p->link, &ps.local, ps.remote_ids, ps.remote_n, &ps.remote_sel, note,
                                req->notification_len, xfer_handle_end, h, &h->out);
            ps.remote_ids = NULL;
        } else {
            rc = xfer_pull_post(&a->streams, &p->link, &ps.local, ps.remote_ids, ps.remote_n, ps.pull_refs,
                                &ps.remote_sel, note, req->notification_len, xfer_handle_end, h, &h->in);
        }
    }
    xfer_planned_free(&ps);
    if (rc != KVRT_OK) {
        base_unlock(&a->lock);
        free(h);
        return rc;
    }
    h->next = a->handles;
    a->handles = h;
    base_unlock(&a->lock);
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
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_test: handle is NULL");
    kvrt_xfer_agent *a = h->agent;
    if (!a)
        return state(h);
    base_lock(&a->lock);
    if (h->status == KVRT_XFER_PENDING)
        xfer_progress_round(a);
    int rc = state(h);
    base_unlock(&a->lock);
    return rc;
}

int kvrt_xfer_wait(kvrt_xfer_handle *h, double timeout_s)
{
    if (!h)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_wait: handle is NULL");
    if (timeout_s != timeout_s)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_wait: timeout is not a number");
    kvrt_xfer_agent *a = h->agent;
    if (!a)
        return state(h);
    /* A negative timeout waits for the end, which the transfer's own
     * inactivity timeout bounds. */
    double deadline = timeout_s < 0 ? 1e300 : base_now() + timeout_s;
    base_lock(&a->lock);
    for (;;) {
        xfer_progress_round(a);
        if (h->status != KVRT_XFER_PENDING || base_now() >= deadline)
            break;
        base_unlock(&a->lock);
        xfer_idle(a, deadline);
        base_lock(&a->lock);
    }
    int rc = state(h);
    base_unlock(&a->lock);
    return rc;
}

int kvrt_xfer_handle_plan(kvrt_xfer_handle *h, struct kvrt_xfer_plan *plan)
{
    if (!h || !plan)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_handle_plan: NULL argument");
    kvrt_xfer_agent *a = h->agent;
    if (a)
        base_lock(&a->lock);
    *plan = h->plan;
    if (a)
        base_unlock(&a->lock);
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

void kvrt_xfer_release(kvrt_xfer_handle *h)
{
    if (!h)
        return;
    kvrt_xfer_agent *a = h->agent;
    if (a) {
        base_lock(&a->lock);
        if (h->out)
            xfer_out_abandon(h->out);
        if (h->in)
            xfer_in_abandon(h->in);
        for (kvrt_xfer_handle **hp = &a->handles; *hp; hp = &(*hp)->next)
            if (*hp == h) {
                *hp = h->next;
                break;
            }
        base_unlock(&a->lock);
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
