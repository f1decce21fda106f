/*
 * Progress: one round advances everything the agent has -- UCX, received
 * chunks waiting to be scattered, chunks waiting for a slot, streams with
 * more to send, streams that are complete, peers that failed, stalls -- and
 * reaps what is finished.  Idle waits sleep on UCX's event fd.  The
 * notification queue is here too.
 */
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_internal.h"

/* A transfer that makes no progress for the agent's timeout fails, and so
 * does its peer: closing the peer's endpoints is the only way UCX 1.13 gives
 * to take back the buffers its requests hold. */
static void check_stalls(kvrt_xfer_agent *a, double now)
{
    /* The agent itself may not have been progressed for a while (a busy
     * engine): that is no stall of the peers. */
    if (now - a->last_progress > a->timeout_s / 2) {
        for (struct xfer_out *o = a->outs; o; o = o->next)
            o->last_activity = now;
        for (struct xfer_in *in = a->ins; in; in = in->next)
            in->last_activity = now;
    }
    a->last_progress = now;
    for (struct xfer_out *o = a->outs; o; o = o->next)
        if (!o->finished && o->peer && now - o->last_activity > a->timeout_s)
            xfer_peer_fail(o->peer, "no progress for %g s on a transfer", a->timeout_s);
    for (struct xfer_in *in = a->ins; in; in = in->next)
        if (!in->finished && in->peer && now - in->last_activity > a->timeout_s)
            xfer_peer_fail(in->peer, "no progress for %g s on a transfer", a->timeout_s);
}

static void reap(kvrt_xfer_agent *a)
{
    for (struct xfer_out **o = &a->outs; *o;) {
        struct xfer_out *x = *o;
        if (x->finished && x->inflight == 0) {
            *o = x->next;
            xfer_out_free(x);
        } else {
            o = &x->next;
        }
    }
    for (struct xfer_in **i = &a->ins; *i;) {
        struct xfer_in *x = *i;
        /* A peer's failed push stays until its sender's last word, so that
         * its late messages are refused rather than start a new stream. */
        if (x->finished && x->inflight == 0 && x->deferred == 0 && (x->pull || x->ended || !x->peer)) {
            *i = x->next;
            xfer_in_free(x);
        } else {
            i = &x->next;
        }
    }
}

void xfer_progress_round(kvrt_xfer_agent *a)
{
    while (ucp_worker_progress(a->worker) != 0) {
    }
    xfer_in_start_deferred(a);
    xfer_in_scatter_ready(a);
    for (struct xfer_out *o = a->outs; o; o = o->next)
        xfer_out_issue(o);
    xfer_in_finish(a);
    check_stalls(a, xfer_now());
    for (kvrt_xfer_peer *p = a->peers; p; p = p->next) {
        if (p->state != KVRT_XFER_PEER_CONNECTED)
            xfer_peer_cleanup(p);
        else if (p->wire_req)
            xfer_peer_check_wired(p);
    }
    reap(a);
}

/* Work the agent can do now without UCX: then a wait must not sleep. */
static bool busy(kvrt_xfer_agent *a)
{
    if (a->ready)
        return true;
    if (a->deferred && a->pool.nfree_recv > 0)
        return true;
    for (struct xfer_out *o = a->outs; o; o = o->next)
        if (!o->finished && o->staged && o->next_chunk < o->nchunks && a->pool.nfree_send > 0)
            return true;
    return false;
}

void xfer_idle(kvrt_xfer_agent *a, double deadline)
{
    /* Spin briefly (yielding the core: the peer may be on it), then sleep
     * on the event fd for at most 2 ms so that deadlines are seen. */
    static const double spin = 50e-6, nap = 2e-3;
    double now = xfer_now(), until = now + spin;
    while ((now = xfer_now()) < until && now < deadline) {
        sched_yield();
        xfer_lock(a);
        unsigned n = ucp_worker_progress(a->worker);
        bool work = busy(a);
        xfer_unlock(a);
        if (n || work)
            return;
    }
    if (now >= deadline)
        return;
    xfer_lock(a);
    ucs_status_t st = busy(a) ? UCS_ERR_BUSY : ucp_worker_arm(a->worker);
    xfer_unlock(a);
    if (st != UCS_OK)
        return;
    double left = deadline - now;
    struct pollfd pfd = {a->efd, POLLIN, 0};
    poll(&pfd, 1, (int)((left < nap ? left : nap) * 1e3) + 1);
}

int xfer_wait_request(kvrt_xfer_agent *a, kvrt_xfer_peer *p, void *req, double deadline, const char *what)
{
    if (req == NULL)
        return KVRT_OK;
    if (UCS_PTR_IS_ERR(req))
        return xfer_ucx_fail(UCS_PTR_STATUS(req), what);
    while (ucp_request_check_status(req) == UCS_INPROGRESS && p->state == KVRT_XFER_PEER_CONNECTED &&
           xfer_now() < deadline) {
        xfer_progress_round(a);
        if (ucp_request_check_status(req) != UCS_INPROGRESS)
            break;
        xfer_unlock(a);
        xfer_idle(a, deadline);
        xfer_lock(a);
    }
    ucs_status_t st = ucp_request_check_status(req);
    /* Freed either way: a request left behind completes (with an error)
     * when the endpoint closes. */
    ucp_request_free(req);
    if (st == UCS_OK)
        return KVRT_OK;
    if (p->state != KVRT_XFER_PEER_CONNECTED)
        return xfer_peer_ok(p, what);
    if (st == UCS_INPROGRESS)
        return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s: no answer from %s within %g s", what, p->name, a->timeout_s);
    return xfer_ucx_fail(st, what);
}

int kvrt_xfer_progress(kvrt_xfer_agent *a)
{
    if (!a)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_progress: agent is NULL");
    xfer_lock(a);
    xfer_progress_round(a);
    int rc = a->served_error;
    char why[sizeof(a->served_why)];
    snprintf(why, sizeof(why), "%s", a->served_why);
    a->served_error = KVRT_OK;
    xfer_unlock(a);
    if (rc != KVRT_OK)
        return kvrt_error_report(rc, "%s", why);
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

int kvrt_xfer_event_fd(kvrt_xfer_agent *a, int *fd)
{
    if (!a || !fd)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_event_fd: NULL argument");
    *fd = a->efd;
    return KVRT_OK;
}

int kvrt_xfer_arm(kvrt_xfer_agent *a)
{
    if (!a)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_arm: agent is NULL");
    xfer_lock(a);
    xfer_progress_round(a);
    ucs_status_t st = busy(a) ? UCS_ERR_BUSY : ucp_worker_arm(a->worker);
    xfer_unlock(a);
    if (st == UCS_OK)
        return KVRT_OK;
    if (st == UCS_ERR_BUSY)
        return KVRT_XFER_PENDING;
    return xfer_ucx_fail(st, "ucp_worker_arm");
}

int xfer_note_push(kvrt_xfer_agent *a, kvrt_xfer_peer *p, uint8_t *data, size_t len)
{
    struct xfer_note *n = calloc(1, sizeof(*n));
    if (!n) {
        free(data);
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a notification");
    }
    n->peer = p;
    n->data = data;
    n->len = len;
    *a->notes_tail = n;
    a->notes_tail = &n->next;
    return KVRT_OK;
}

int kvrt_xfer_notification(kvrt_xfer_agent *a, kvrt_xfer_peer **from, char **msg, size_t *len)
{
    if (!a || !msg || !len)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_notification: NULL argument");
    *msg = NULL;
    *len = 0;
    if (from)
        *from = NULL;
    xfer_lock(a);
    struct xfer_note *n = a->notes;
    if (n) {
        a->notes = n->next;
        if (!a->notes)
            a->notes_tail = &a->notes;
    }
    xfer_unlock(a);
    if (n) {
        *msg = (char *)n->data;
        *len = n->len;
        if (from)
            *from = n->peer;
        free(n);
    }
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}
