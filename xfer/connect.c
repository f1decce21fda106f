/*
 * Connections over a socket address: the listener and kvrt_xfer_accept on
 * one side, kvrt_xfer_connect on the other, exchanging metadata (HELLO,
 * REPLY) and then binding a data endpoint to the peer's worker address.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_internal.h"

static void conn_handler(ucp_conn_request_h req, void *arg)
{
    kvrt_xfer_agent *a = arg;
    if (a->num_pending_conn < sizeof(a->pending_conn) / sizeof(a->pending_conn[0]))
        a->pending_conn[a->num_pending_conn++] = req;
    else
        ucp_listener_reject(a->listener, req);
}

static int make_sockaddr(const char *addr, uint16_t port, struct sockaddr_in *sa, const char *fn)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons(port);
    if (inet_pton(AF_INET, addr ? addr : "127.0.0.1", &sa->sin_addr) != 1)
        return XFER_FAIL(KVRT_ERR_INVALID, "%s: address \"%s\" is not an IPv4 address (e.g. 127.0.0.1)", fn, addr);
    return KVRT_OK;
}

int kvrt_xfer_listen(kvrt_xfer_agent *a, const char *addr, uint16_t port, uint16_t *bound_port)
{
    if (!a)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_listen: agent is NULL");
    if (a->listener)
        return XFER_FAIL(KVRT_ERR_STATE, "kvrt_xfer_listen: the agent already listens");
    struct sockaddr_in sa;
    int rc = make_sockaddr(addr, port, &sa, "kvrt_xfer_listen");
    if (rc != KVRT_OK)
        return rc;
    ucp_listener_params_t lp;
    memset(&lp, 0, sizeof(lp));
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = (const struct sockaddr *)&sa;
    lp.sockaddr.addrlen = sizeof(sa);
    lp.conn_handler.cb = conn_handler;
    lp.conn_handler.arg = a;
    ucs_status_t st = ucp_listener_create(a->worker, &lp, &a->listener);
    if (st != UCS_OK)
        return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt_xfer_listen: cannot listen on %s:%u: %s", addr ? addr : "127.0.0.1",
                         port, ucs_status_string(st));
    if (bound_port) {
        ucp_listener_attr_t la;
        la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
        if ((st = ucp_listener_query(a->listener, &la)) != UCS_OK)
            return xfer_ucx_fail(st, "ucp_listener_query");
        *bound_port = ntohs(((const struct sockaddr_in *)&la.sockaddr)->sin_port);
    }
    return KVRT_OK;
}

/* Progress until `flag` turns true, the peer fails, or the deadline. */
static int wait_flag(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const bool *flag, double timeout, const char *what)
{
    double deadline = xfer_now() + timeout;
    while (!*flag) {
        ucp_worker_progress(a->worker);
        if (p && p->state != KVRT_XFER_PEER_CONNECTED && !*flag)
            return xfer_peer_ok(p, what);
        if (xfer_now() > deadline)
            return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s timed out after %g s", what, timeout);
    }
    return KVRT_OK;
}

int kvrt_xfer_accept(kvrt_xfer_agent *a, double timeout_s, kvrt_xfer_peer **out)
{
    if (!a || !out)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_accept: NULL argument");
    *out = NULL;
    if (!a->listener)
        return XFER_FAIL(KVRT_ERR_STATE, "kvrt_xfer_accept: call kvrt_xfer_listen first");
    if (!(timeout_s >= 0))
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_accept: timeout %g; valid are >= 0 seconds", timeout_s);
    double timeout = timeout_s > 0 ? timeout_s : a->timeout_s;
    double deadline = xfer_now() + timeout;
    while (a->num_pending_conn == 0) {
        ucp_worker_progress(a->worker);
        if (xfer_now() > deadline)
            return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt_xfer_accept: no peer connected within %g s", timeout);
    }
    ucp_conn_request_h creq = a->pending_conn[0];
    /* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of handles (pointers) */
    memmove(a->pending_conn, a->pending_conn + 1, --a->num_pending_conn * sizeof(a->pending_conn[0]));
    kvrt_xfer_peer *p = NULL;
    int rc = xfer_peer_new(a, &p);
    if (rc != KVRT_OK) {
        ucp_listener_reject(a->listener, creq);
        return rc;
    }
    ucp_ep_params_t ep;
    xfer_peer_ep_params(&ep, p);
    ep.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
    ep.conn_request = creq;
    ucs_status_t st = ucp_ep_create(a->worker, &ep, &p->ep);
    if (st != UCS_OK) {
        xfer_peer_drop(a, p);
        return xfer_ucx_fail(st, "ucp_ep_create for an incoming connection");
    }
    rc = wait_flag(a, p, &p->hello_seen, deadline - xfer_now() > 1 ? deadline - xfer_now() : 1,
                   "kvrt_xfer_accept: waiting for the peer's metadata");
    if (rc == KVRT_OK) {
        rc = xfer_peer_load_blob(a, p, p->blob_len);
        struct xfer_reply rep = {rc, 0, a->next_token++};
        p->token = rep.token;
        if (rc != KVRT_OK) {
            /* Tell the peer why, then give up on it. */
            char why[2048];
            snprintf(why, sizeof(why), "%s", kvrt_error_message());
            xfer_am_send(a, p, XFER_AM_REPLY, &rep, sizeof(rep), why, strlen(why), "refusal");
            /* A flushing close, so that the refusal arrives before the
             * connection goes. */
            xfer_peer_unlink(a, p);
            xfer_peer_free(p, true);
            return kvrt_error_report(rc, "refused a peer: %s", why);
        }
        uint8_t *mine;
        size_t len;
        rc = xfer_md_export(a, &mine, &len);
        if (rc == KVRT_OK) {
            rc = xfer_am_send(a, p, XFER_AM_REPLY, &rep, sizeof(rep), mine, len, "sending metadata");
            free(mine);
        }
    }
    if (rc != KVRT_OK) {
        xfer_peer_drop(a, p);
        return rc;
    }
    *out = p;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

/* The data ep to the worker address the peer sent, announced with BIND
 * (same ep, so it reaches the server before any request). */
static int open_data_ep(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
{
    struct xfer_md md;
    int rc = xfer_md_parse(p->blob, p->blob_len, &md);
    if (rc != KVRT_OK)
        return rc;
    xfer_desc_free(&md.cache, true);
    ucp_ep_params_t ep;
    xfer_peer_ep_params(&ep, p);
    /* Shared-memory transports cannot report a failed peer, and UCX leaves
     * out what cannot honour the error mode: this ep asks for none, the
     * connection ep keeps watching the peer. */
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    ep.field_mask |= UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = (const ucp_address_t *)md.worker_addr; /* points into p->blob */
    ucs_status_t st = ucp_ep_create(a->worker, &ep, &p->data_ep);
    if (st != UCS_OK) {
        p->data_ep = NULL;
        return xfer_ucx_fail(st, "ucp_ep_create to the peer's worker address");
    }
    p->own_data_ep = true;
    return xfer_am_send(a, p, XFER_AM_BIND, &p->token, sizeof(p->token), NULL, 0, "kvrt_xfer_connect: binding");
}

int kvrt_xfer_connect(kvrt_xfer_agent *a, const char *addr, uint16_t port, kvrt_xfer_peer **out)
{
    if (!a || !out)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_connect: NULL argument");
    *out = NULL;
    struct sockaddr_in sa;
    int rc = make_sockaddr(addr, port, &sa, "kvrt_xfer_connect");
    if (rc != KVRT_OK)
        return rc;
    kvrt_xfer_peer *p = NULL;
    if ((rc = xfer_peer_new(a, &p)) != KVRT_OK)
        return rc;
    ucp_ep_params_t ep;
    xfer_peer_ep_params(&ep, p);
    ep.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.sockaddr.addr = (const struct sockaddr *)&sa;
    ep.sockaddr.addrlen = sizeof(sa);
    ucs_status_t st = ucp_ep_create(a->worker, &ep, &p->ep);
    if (st != UCS_OK) {
        xfer_peer_drop(a, p);
        return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt_xfer_connect: cannot connect to %s:%u: %s", addr ? addr : "127.0.0.1",
                         port, ucs_status_string(st));
    }
    uint8_t *mine;
    size_t len;
    rc = xfer_md_export(a, &mine, &len);
    if (rc == KVRT_OK) {
        rc = xfer_am_send(a, p, XFER_AM_HELLO, NULL, 0, mine, len, "kvrt_xfer_connect: sending metadata");
        free(mine);
    }
    if (rc == KVRT_OK)
        rc = wait_flag(a, p, &p->reply_seen, a->timeout_s, "kvrt_xfer_connect: waiting for the peer's metadata");
    if (rc == KVRT_OK && p->reply_status != KVRT_OK)
        rc = kvrt_error_report(p->reply_status, "the peer refused: %s", (const char *)p->blob);
    if (rc == KVRT_OK)
        rc = open_data_ep(a, p);
    if (rc == KVRT_OK)
        rc = xfer_peer_load_blob(a, p, p->blob_len);
    if (rc != KVRT_OK) {
        if (p->state == KVRT_XFER_PEER_FAILED && !p->reply_seen)
            kvrt_error_report(rc, "kvrt_xfer_connect: cannot reach %s:%u (%s)", addr ? addr : "127.0.0.1", port,
                              p->why);
        xfer_peer_drop(a, p);
        return rc;
    }
    *out = p;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}
