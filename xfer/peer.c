/*
 * Peers: one per remote agent, from loaded metadata or a connection; its
 * endpoints (every one with UCX's peer error handling), its name, its state
 * (connected, closed, failed) and what a failure does: every transfer with
 * it fails, naming it, and its endpoints are closed by force so that no
 * UCX request keeps a buffer busy.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_internal.h"

void xfer_peer_fail(kvrt_xfer_peer *p, const char *fmt, ...)
{
    if (p->state != KVRT_XFER_PEER_CONNECTED)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why, sizeof(p->why), fmt, ap);
    va_end(ap);
    p->state = KVRT_XFER_PEER_FAILED;
}

static void peer_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    kvrt_xfer_peer *p = arg;
    xfer_peer_fail(p, "the connection broke (%s on its %s endpoint)", ucs_status_string(status),
                   ep == p->conn_ep ? "connection" : "data");
}

int xfer_peer_ok(const kvrt_xfer_peer *p, const char *what)
{
    if (p->state == KVRT_XFER_PEER_FAILED)
        return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s: peer %s failed: %s", what, p->name, p->why);
    if (p->state == KVRT_XFER_PEER_CLOSED)
        return XFER_FAIL(KVRT_ERR_STATE, "kvrt-xfer: %s: peer %s has closed the connection", what, p->name);
    return KVRT_OK;
}

int xfer_peer_new(kvrt_xfer_agent *a, kvrt_xfer_peer **out)
{
    kvrt_xfer_peer *p = calloc(1, sizeof(*p));
    if (!p)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a peer");
    p->agent = a;
    p->state = KVRT_XFER_PEER_CONNECTED;
    p->queue_tail = &p->queue;
    snprintf(p->name, sizeof(p->name), "peer %llu", ULL(++a->peer_count));
    p->next = a->peers;
    a->peers = p;
    *out = p;
    return KVRT_OK;
}

void xfer_peer_ep_params(ucp_ep_params_t *ep, kvrt_xfer_peer *p)
{
    memset(ep, 0, sizeof(*ep));
    ep->field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep->err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep->err_handler.cb = peer_ep_error;
    ep->err_handler.arg = p;
}

kvrt_xfer_peer *xfer_peer_by_id(kvrt_xfer_agent *a, uint64_t id)
{
    for (kvrt_xfer_peer *p = a->peers; p; p = p->next)
        if (p->loaded && p->md.agent_id == id && p->state == KVRT_XFER_PEER_CONNECTED)
            return p;
    return NULL;
}

/* Parse and check the peer's metadata (p->blob, kept: md points into it). */
int xfer_peer_take_blob(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
{
    struct xfer_md md;
    int rc = xfer_md_parse(p->blob, p->blob_len, &md);
    if (rc != KVRT_OK)
        return rc;
    rc = xfer_md_compatible(&a->local, &md.cache);
    if (rc == KVRT_OK && md.agent_id == a->id)
        rc = XFER_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: the peer's metadata is this agent's own");
    if (rc == KVRT_OK) {
        kvrt_xfer_peer *twin = xfer_peer_by_id(a, md.agent_id);
        if (twin && twin != p)
            rc = XFER_FAIL(KVRT_ERR_STATE,
                           "kvrt-xfer: that agent is already %s here; one peer per remote agent (close it first)",
                           twin->name);
    }
    if (rc != KVRT_OK) {
        xfer_desc_free(&md.cache, true);
        return rc;
    }
    p->md = md;
    p->loaded = true;
    return KVRT_OK;
}

int xfer_peer_open_data_ep(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
{
    ucp_ep_params_t ep;
    xfer_peer_ep_params(&ep, p);
    ep.field_mask |= UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = (const ucp_address_t *)p->md.worker_addr; /* points into p->blob */
    ucs_status_t st = ucp_ep_create(a->worker, &ep, &p->data_ep);
    if (st != UCS_OK) {
        p->data_ep = NULL;
        return XFER_FAIL(KVRT_ERR_DEVICE,
                         "kvrt-xfer: cannot reach %s at its worker address: %s (peer error handling over shared "
                         "memory needs tcp too: UCX_TLS=sm,tcp)",
                         p->name, ucs_status_string(st));
    }
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm));
    void *req = ucp_ep_flush_nbx(p->data_ep, &prm);
    if (UCS_PTR_IS_ERR(req))
        return xfer_ucx_fail(UCS_PTR_STATUS(req), "ucp_ep_flush_nbx of the data endpoint");
    p->wire_req = req;
    p->wired = req == NULL;
    return KVRT_OK;
}

void xfer_peer_check_wired(kvrt_xfer_peer *p)
{
    ucs_status_t st = ucp_request_check_status(p->wire_req);
    if (st == UCS_INPROGRESS)
        return;
    ucp_request_free(p->wire_req);
    p->wire_req = NULL;
    if (st != UCS_OK) {
        xfer_peer_fail(p, "its data endpoint could not be set up (%s)", ucs_status_string(st));
        return;
    }
    p->wired = true;
    /* What waited goes now, in order. */
    while (p->queue && p->state == KVRT_XFER_PEER_CONNECTED) {
        struct xfer_queued_req *q = p->queue;
        p->queue = q->next;
        xfer_ctl_send(p, q->id, q->req, q->hlen);
        free(q);
    }
    p->queue_tail = &p->queue;
}

static void start_close(kvrt_xfer_peer *p, int i, ucp_ep_h *ep)
{
    if (!*ep)
        return;
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void *req = ucp_ep_close_nbx(*ep, &prm);
    p->close_req[i] = UCS_PTR_IS_PTR(req) ? req : NULL;
    *ep = NULL;
}

static bool closed(kvrt_xfer_peer *p)
{
    for (int i = 0; i < 2; i++) {
        if (p->close_req[i] && ucp_request_check_status(p->close_req[i]) == UCS_INPROGRESS)
            return false;
        if (p->close_req[i]) {
            ucp_request_free(p->close_req[i]);
            p->close_req[i] = NULL;
        }
    }
    return true;
}

/* Fail the peer's streams, naming why; its waiting chunks go back to UCX. */
static void fail_streams(kvrt_xfer_peer *p)
{
    kvrt_xfer_agent *a = p->agent;
    char why[700];
    if (p->closed_here)
        snprintf(why, sizeof(why), "the connection to peer %s was closed here", p->name);
    else if (p->state == KVRT_XFER_PEER_FAILED)
        snprintf(why, sizeof(why), "peer %s failed: %s", p->name, p->why);
    else
        snprintf(why, sizeof(why), "peer %s closed the connection", p->name);
    int status = p->state == KVRT_XFER_PEER_FAILED && !p->closed_here ? KVRT_ERR_DEVICE : KVRT_ERR_STATE;
    for (struct xfer_out *o = a->outs; o; o = o->next)
        if (o->peer == p) {
            xfer_out_fail(o, status, "kvrt-xfer: %s before the transfer completed", why);
            o->peer = NULL;
        }
    for (struct xfer_in *in = a->ins; in; in = in->next)
        if (in->peer == p) {
            xfer_in_fail(in, status, "kvrt-xfer: %s before the transfer completed", why);
            in->peer = NULL;
        }
    for (struct xfer_deferred **d = &a->deferred; *d;) {
        if ((*d)->in->finished) {
            struct xfer_deferred *x = *d;
            *d = x->next;
            x->in->deferred--;
            ucp_am_data_release(a->worker, x->desc);
            free(x);
        } else {
            d = &(*d)->next;
        }
    }
    a->deferred_tail = &a->deferred;
    while (*a->deferred_tail)
        a->deferred_tail = &(*a->deferred_tail)->next;
    while (p->queue) {
        struct xfer_queued_req *q = p->queue;
        p->queue = q->next;
        xfer_req_free(q->req);
        free(q);
    }
    p->queue_tail = &p->queue;
}

/* A peer that failed or said goodbye: fail its streams, close its eps by
 * force (their UCX requests complete with errors, freeing what they hold). */
void xfer_peer_cleanup(kvrt_xfer_peer *p)
{
    if (!p->cleaned) {
        p->cleaned = true;
        fail_streams(p);
        start_close(p, 0, &p->data_ep);
        start_close(p, 1, &p->conn_ep);
    }
    closed(p);
}

static void unlink_peer(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
{
    for (kvrt_xfer_peer **pp = &a->peers; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    /* Queued notifications from this peer lose their sender. */
    for (struct xfer_note *n = a->notes; n; n = n->next)
        if (n->peer == p)
            n->peer = NULL;
}

/* Unlinked already.  A polite close flushes what was sent (a goodbye, a
 * refusal) first; every close is then forced, so it completes locally and
 * no request is left to a peer that has stopped progressing. */
void xfer_peer_destroy(kvrt_xfer_peer *p, bool polite)
{
    kvrt_xfer_agent *a = p->agent;
    if (!p->cleaned) {
        p->cleaned = true;
        p->closed_here = true;
        if (p->state == KVRT_XFER_PEER_CONNECTED)
            p->state = KVRT_XFER_PEER_CLOSED;
        fail_streams(p);
    }
    ucp_ep_h eps[2] = {p->data_ep, p->conn_ep};
    for (int i = 0; polite && i < 2; i++) {
        if (!eps[i])
            continue;
        ucp_request_param_t prm;
        memset(&prm, 0, sizeof(prm));
        void *req = ucp_ep_flush_nbx(eps[i], &prm);
        double deadline = xfer_now() + 2.0;
        while (UCS_PTR_IS_PTR(req) && ucp_request_check_status(req) == UCS_INPROGRESS && xfer_now() < deadline)
            ucp_worker_progress(a->worker);
        if (UCS_PTR_IS_PTR(req))
            ucp_request_free(req);
    }
    start_close(p, 0, &p->data_ep);
    start_close(p, 1, &p->conn_ep);
    double deadline = xfer_now() + 2.0;
    while (!closed(p) && xfer_now() < deadline)
        ucp_worker_progress(a->worker);
    for (int i = 0; i < 2; i++)
        if (p->close_req[i])
            ucp_request_free(p->close_req[i]);
    if (p->wire_req)
        ucp_request_free(p->wire_req);
    if (p->loaded)
        xfer_desc_free(&p->md.cache, true);
    free(p->blob);
    free(p);
}

void xfer_peer_drop(kvrt_xfer_agent *a, kvrt_xfer_peer *p, bool polite)
{
    unlink_peer(a, p);
    xfer_peer_destroy(p, polite);
}

int kvrt_xfer_peer_load(kvrt_xfer_agent *a, const void *blob, size_t len, kvrt_xfer_peer **out)
{
    if (!a || !blob || !out)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_peer_load: NULL argument");
    *out = NULL;
    xfer_lock(a);
    kvrt_xfer_peer *p = NULL;
    int rc = xfer_peer_new(a, &p);
    if (rc == KVRT_OK && !(p->blob = malloc(len ? len : 1)))
        rc = XFER_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_peer_load: out of memory");
    if (rc == KVRT_OK) {
        memcpy(p->blob, blob, len);
        p->blob_len = len;
        rc = xfer_peer_take_blob(a, p);
    }
    if (rc == KVRT_OK)
        rc = xfer_peer_open_data_ep(a, p);
    if (rc != KVRT_OK && p) {
        char why[2048];
        snprintf(why, sizeof(why), "%s", kvrt_error_message());
        xfer_peer_drop(a, p, false);
        kvrt_error_report(rc, "%s", why);
    }
    xfer_unlock(a);
    if (rc != KVRT_OK)
        return rc;
    *out = p;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

void kvrt_xfer_peer_close(kvrt_xfer_peer *p)
{
    if (!p)
        return;
    kvrt_xfer_agent *a = p->agent;
    xfer_lock(a);
    bool polite = p->state == KVRT_XFER_PEER_CONNECTED;
    if (polite && p->loaded) {
        /* Goodbye on every endpoint, each ahead of its own disconnection:
         * whichever the peer notices first, it reads the goodbye first and
         * sees a close, not a failure. */
        struct xfer_hdr h = xfer_hdr_for(p, 0);
        if (p->conn_ep)
            xfer_ctl_send_wait(a, p, p->conn_ep, XFER_AM_BYE, &h, sizeof(h), NULL, 0, "saying goodbye");
        if (p->data_ep && p->wired)
            xfer_ctl_send_wait(a, p, p->data_ep, XFER_AM_BYE, &h, sizeof(h), NULL, 0, "saying goodbye");
    }
    unlink_peer(a, p);
    xfer_peer_destroy(p, polite);
    xfer_unlock(a);
}

enum kvrt_xfer_peer_state kvrt_xfer_peer_state(const kvrt_xfer_peer *p, const char **why)
{
    if (!p) {
        if (why)
            *why = "";
        return KVRT_XFER_PEER_FAILED;
    }
    xfer_lock(p->agent);
    enum kvrt_xfer_peer_state st = p->state;
    if (why)
        *why = st == KVRT_XFER_PEER_FAILED ? p->why : "";
    xfer_unlock(p->agent);
    return st;
}

const char *kvrt_xfer_peer_name(const kvrt_xfer_peer *p)
{
    return p ? p->name : NULL;
}
