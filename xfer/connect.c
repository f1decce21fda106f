/*
 * Connections over a socket address: the listener and kvrt_xfer_accept on
 * one side, kvrt_xfer_connect on the other.  The handshake runs on the
 * client-server endpoint (tcp in UCX 1.13): HELLO carries the client's
 * metadata, REPLY the server's (or why it refused).  Each side then opens
 * its own data endpoint to the other's worker address, on which UCX may pick
 * shared memory, and the client says READY on it, so that the server never
 * sends before the client knows it.
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
    struct sockaddr_in sa;
    int rc = make_sockaddr(addr, port, &sa, "kvrt_xfer_listen");
    if (rc != KVRT_OK)
        return rc;
    xfer_lock(a);
    if (a->listener) {
        xfer_unlock(a);
        return XFER_FAIL(KVRT_ERR_STATE, "kvrt_xfer_listen: the agent already listens");
    }
    ucp_listener_params_t lp;
    memset(&lp, 0, sizeof(lp));
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = (const struct sockaddr *)&sa;
    lp.sockaddr.addrlen = sizeof(sa);
    lp.conn_handler.cb = conn_handler;
    lp.conn_handler.arg = a;
    ucs_status_t st = ucp_listener_create(a->worker, &lp, &a->listener);
    if (st != UCS_OK) {
        a->listener = NULL;
        xfer_unlock(a);
        return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt_xfer_listen: cannot listen on %s:%u: %s", addr ? addr : "127.0.0.1",
                         port, ucs_status_string(st));
    }
    if (bound_port) {
        ucp_listener_attr_t la;
        la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
        if ((st = ucp_listener_query(a->listener, &la)) != UCS_OK) {
            xfer_unlock(a);
            return xfer_ucx_fail(st, "ucp_listener_query");
        }
        *bound_port = ntohs(((const struct sockaddr_in *)&la.sockaddr)->sin_port);
    }
    xfer_unlock(a);
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

/* Progress (the lock released between rounds, so other threads go on)
 * until `flag` turns true, the peer fails, or the deadline.  The lock is
 * held on entry and on return. */
static int wait_flag(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const bool *flag, double deadline, const char *what)
{
    for (;;) {
        xfer_progress_round(a);
        if (*flag)
            return KVRT_OK;
        if (p->state != KVRT_XFER_PEER_CONNECTED)
            return xfer_peer_ok(p, what);
        if (xfer_now() > deadline)
            return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s: no answer from %s within %g s", what, p->name,
                             a->timeout_s);
        xfer_unlock(a);
        xfer_idle(a, deadline);
        xfer_lock(a);
    }
}

static void name_from_request(kvrt_xfer_peer *p, ucp_conn_request_h creq)
{
    ucp_conn_request_attr_t attr;
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (ucp_conn_request_query(creq, &attr) != UCS_OK || attr.client_address.ss_family != AF_INET)
        return;
    const struct sockaddr_in *sin = (const struct sockaddr_in *)&attr.client_address;
    char host[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host)))
        snprintf(p->name, sizeof(p->name), "%s:%u", host, ntohs(sin->sin_port));
}

/* Server side, the peer's HELLO arrived: check it, answer. */
static int answer(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
{
    struct xfer_reply_msg rep = {KVRT_OK, 0};
    int rc = xfer_peer_take_blob(a, p);
    if (rc == KVRT_OK)
        rc = xfer_peer_open_data_ep(a, p);
    if (rc != KVRT_OK) {
        /* Tell the peer why; a polite close delivers it before the
         * connection goes. */
        char why[2048];
        snprintf(why, sizeof(why), "%s", kvrt_error_message());
        rep.status = rc;
        xfer_ctl_send_wait(a, p, p->conn_ep, XFER_AM_REPLY, &rep, sizeof(rep), why, strlen(why), "refusing");
        return kvrt_error_report(rc, "kvrt_xfer_accept: refused %s: %s", p->name, why);
    }
    uint8_t *mine;
    size_t len;
    rc = xfer_md_export(a, &mine, &len);
    if (rc == KVRT_OK) {
        rc = xfer_ctl_send_wait(a, p, p->conn_ep, XFER_AM_REPLY, &rep, sizeof(rep), mine, len,
                                "kvrt_xfer_accept: sending metadata");
        free(mine);
    }
    return rc;
}

int kvrt_xfer_accept(kvrt_xfer_agent *a, double timeout_s, kvrt_xfer_peer **out)
{
    if (!a || !out)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_accept: NULL argument");
    *out = NULL;
    if (!(timeout_s >= 0) || timeout_s > 1e6)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_accept: timeout %g; valid are 0 (the agent's) to 1e6 seconds",
                         timeout_s);
    xfer_lock(a);
    if (!a->listener) {
        xfer_unlock(a);
        return XFER_FAIL(KVRT_ERR_STATE, "kvrt_xfer_accept: call kvrt_xfer_listen first");
    }
    double deadline = xfer_now() + (timeout_s > 0 ? timeout_s : a->timeout_s);
    for (;;) {
        xfer_progress_round(a);
        if (a->num_pending_conn > 0)
            break;
        if (xfer_now() > deadline) {
            xfer_unlock(a);
            kvrt_error_report(KVRT_OK, NULL);
            return KVRT_XFER_PENDING;
        }
        xfer_unlock(a);
        xfer_idle(a, deadline);
        xfer_lock(a);
    }
    ucp_conn_request_h creq = a->pending_conn[0];
    /* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of handles (pointers) */
    memmove(a->pending_conn, a->pending_conn + 1, --a->num_pending_conn * sizeof(a->pending_conn[0]));
    kvrt_xfer_peer *p = NULL;
    int rc = xfer_peer_new(a, &p);
    if (rc != KVRT_OK) {
        ucp_listener_reject(a->listener, creq);
        xfer_unlock(a);
        return rc;
    }
    name_from_request(p, creq);
    ucp_ep_params_t ep;
    xfer_peer_ep_params(&ep, p);
    ep.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
    ep.conn_request = creq;
    ucs_status_t st = ucp_ep_create(a->worker, &ep, &p->conn_ep);
    if (st != UCS_OK) {
        p->conn_ep = NULL;
        rc = xfer_ucx_fail(st, "ucp_ep_create for an incoming connection");
    }
    /* The handshake has a deadline of its own: a peer that connected has
     * the agent's timeout to complete it. */
    deadline = xfer_now() + a->timeout_s;
    if (rc == KVRT_OK)
        rc = wait_flag(a, p, &p->hello_seen, deadline, "kvrt_xfer_accept: waiting for the peer's metadata");
    bool refused = false;
    if (rc == KVRT_OK)
        refused = (rc = answer(a, p)) != KVRT_OK;
    if (rc == KVRT_OK)
        rc = wait_flag(a, p, &p->ready_seen, deadline, "kvrt_xfer_accept: waiting for the peer's data endpoint");

    if (rc != KVRT_OK) {
        char why[2048];
        snprintf(why, sizeof(why), "%s", kvrt_error_message());
        /* A refusal is flushed to the peer before the connection goes. */
        xfer_peer_drop(a, p, refused);
        xfer_unlock(a);
        return kvrt_error_report(rc, "%s", why);
    }
    xfer_unlock(a);
    *out = p;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
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
    xfer_lock(a);
    kvrt_xfer_peer *p = NULL;
    if ((rc = xfer_peer_new(a, &p)) != KVRT_OK) {
        xfer_unlock(a);
        return rc;
    }
    snprintf(p->name, sizeof(p->name), "%s:%u", addr ? addr : "127.0.0.1", port);
    ucp_ep_params_t ep;
    xfer_peer_ep_params(&ep, p);
    ep.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.sockaddr.addr = (const struct sockaddr *)&sa;
    ep.sockaddr.addrlen = sizeof(sa);
    ucs_status_t st = ucp_ep_create(a->worker, &ep, &p->conn_ep);
    if (st != UCS_OK) {
        p->conn_ep = NULL;
        rc = XFER_FAIL(KVRT_ERR_DEVICE, "kvrt_xfer_connect: cannot connect to %s: %s", p->name, ucs_status_string(st));
    }
    double deadline = xfer_now() + a->timeout_s;
    if (rc == KVRT_OK) {
        uint8_t *mine;
        size_t len;
        rc = xfer_md_export(a, &mine, &len);
        if (rc == KVRT_OK) {
            rc = xfer_ctl_send_wait(a, p, p->conn_ep, XFER_AM_HELLO, NULL, 0, mine, len,
                                    "kvrt_xfer_connect: sending metadata");
            free(mine);
        }
    }
    if (rc == KVRT_OK)
        rc = wait_flag(a, p, &p->reply_seen, deadline, "kvrt_xfer_connect: waiting for the peer's metadata");
    if (rc == KVRT_OK && p->reply_status != KVRT_OK)
        rc = kvrt_error_report(p->reply_status, "kvrt_xfer_connect: %s refused: %s", p->name, (const char *)p->blob);
    if (rc == KVRT_OK)
        rc = xfer_peer_take_blob(a, p);
    if (rc == KVRT_OK)
        rc = xfer_peer_open_data_ep(a, p);

    if (rc == KVRT_OK) {
        /* Sent, not queued: the server waits for it even if this agent
         * is not progressed again for a while. */
        struct xfer_hdr h = xfer_hdr_for(p, 0);
        rc = xfer_ctl_send_wait(a, p, p->data_ep, XFER_AM_READY, &h, sizeof(h), NULL, 0,
                                "kvrt_xfer_connect: announcing the data endpoint");
    }
    if (rc != KVRT_OK) {
        if (p->state == KVRT_XFER_PEER_FAILED && !p->reply_seen)
            kvrt_error_report(rc, "kvrt_xfer_connect: cannot reach %s (%s)", p->name, p->why);
        char why[2048];
        snprintf(why, sizeof(why), "%s", kvrt_error_message());
        xfer_peer_drop(a, p, false);
        xfer_unlock(a);
        return kvrt_error_report(rc, "%s", why);
    }
    xfer_unlock(a);
    *out = p;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}
