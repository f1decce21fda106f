/*
 * Waiting and active messages: every blocking call progresses the worker
 * until its request completes, the peer fails or the agent's timeout
 * passes; incoming messages are answered (handshake, acknowledgements) or
 * queued for kvrt_xfer_progress and kvrt_xfer_notification.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xfer_internal.h"

double xfer_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int xfer_ucx_fail(ucs_status_t st, const char *what)
{
    return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s failed: %s", what, ucs_status_string(st));
}

int xfer_peer_ok(const kvrt_xfer_peer *p, const char *what)
{
    if (p->state == KVRT_XFER_PEER_FAILED)
        return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s: the connection to the peer failed (%s)", what, p->why);
    if (p->state == KVRT_XFER_PEER_CLOSED)
        return XFER_FAIL(KVRT_ERR_STATE, "kvrt-xfer: %s: the peer has closed the connection", what);
    return KVRT_OK;
}

static kvrt_xfer_peer *peer_of_ep(kvrt_xfer_agent *a, ucp_ep_h ep)
{
    for (kvrt_xfer_peer *p = a->peers; p; p = p->next)
        if (p->ep == ep || p->data_ep == ep)
            return p;
    return NULL;
}

/* ---- waiting ---------------------------------------------------------------- */

/* Progress until `req` completes, the peer fails or the timeout passes.  A
 * request left behind is cancelled and completed before returning, so no
 * buffer is touched after the caller reuses it. */
int xfer_wait(kvrt_xfer_agent *a, kvrt_xfer_peer *p, void *req, const char *what)
{
    if (req == NULL)
        return KVRT_OK;
    if (UCS_PTR_IS_ERR(req))
        return xfer_ucx_fail(UCS_PTR_STATUS(req), what);
    double deadline = xfer_now() + a->timeout_s;
    ucs_status_t st;
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
        ucp_worker_progress(a->worker);
        if (xfer_now() > deadline || (p && p->state == KVRT_XFER_PEER_FAILED))
            break;
    }
    if (st == UCS_INPROGRESS) {
        ucp_request_cancel(a->worker, req);
        double grace = xfer_now() + 1.0;
        while (ucp_request_check_status(req) == UCS_INPROGRESS && xfer_now() < grace)
            ucp_worker_progress(a->worker);
        ucp_request_free(req);
        if (p && p->state == KVRT_XFER_PEER_FAILED)
            return xfer_peer_ok(p, what);
        return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s timed out after %g s", what, a->timeout_s);
    }
    ucp_request_free(req);
    if (st != UCS_OK) {
        if (p && p->state == KVRT_XFER_PEER_FAILED)
            return xfer_peer_ok(p, what);
        return xfer_ucx_fail(st, what);
    }
    return KVRT_OK;
}

int xfer_am_send(kvrt_xfer_agent *a, kvrt_xfer_peer *p, unsigned id, const void *hdr, size_t hlen, const void *data,
                 size_t dlen, const char *what)
{
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    /* Eager: the receiver gets the whole message in its callback and never
     * has to post a rendezvous receive. */
    prm.flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER;
    void *req = ucp_am_send_nbx(xfer_data_ep(p), id, hdr, hlen, data, dlen, &prm);
    return xfer_wait(a, p, req, what);
}

/* ---- active messages ------------------------------------------------------ */

static kvrt_xfer_peer *anonymous_peer(kvrt_xfer_agent *a, ucp_ep_h reply)
{
    kvrt_xfer_peer *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->agent = a;
    p->state = KVRT_XFER_PEER_CONNECTED;
    p->data_ep = reply; /* the worker's own: never closed here */
    p->next = a->peers;
    a->peers = p;
    return p;
}

static void enqueue(struct xfer_queued ***tail, struct xfer_queued *q)
{
    **tail = q;
    *tail = &q->next;
}

static ucs_status_t am_cb(kvrt_xfer_agent *a, uint32_t kind, const void *header, size_t hlen, void *data, size_t len,
                          const ucp_am_recv_param_t *param)
{
    ucp_ep_h reply = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : NULL;
    if (!reply || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV))
        return UCS_OK; /* no way to answer, or not eager: dropped */
    kvrt_xfer_peer *p = peer_of_ep(a, reply);
    if (kind == XFER_AM_BIND) {
        uint64_t token;
        if (hlen != sizeof(token))
            return UCS_OK;
        memcpy(&token, header, sizeof(token));
        for (kvrt_xfer_peer *q = a->peers; q; q = q->next)
            if (q->token == token && !q->data_ep)
                q->data_ep = reply;
        return UCS_OK;
    }
    if (!p && kind != XFER_AM_HELLO && kind != XFER_AM_REPLY) {
        /* A peer that loaded our metadata and connected to the worker
         * address: served without a handshake of its own. */
        p = anonymous_peer(a, reply);
    }
    if (!p)
        return UCS_OK;
    if (kind == XFER_AM_BYE) {
        if (p->state == KVRT_XFER_PEER_CONNECTED)
            p->state = KVRT_XFER_PEER_CLOSED;
        return UCS_OK;
    }
    if (kind == XFER_AM_ACK) {
        uint64_t xid;
        int32_t status;
        if (hlen != sizeof(xid) + sizeof(status))
            return UCS_OK;
        memcpy(&xid, header, sizeof(xid));
        memcpy(&status, (const uint8_t *)header + sizeof(xid), sizeof(status));
        p->ack_seen = true;
        p->ack_xid = xid;
        p->ack_status = status;
        size_t n = len < sizeof(p->ack_msg) - 1 ? len : sizeof(p->ack_msg) - 1;
        memcpy(p->ack_msg, data, n);
        p->ack_msg[n] = '\0';
        return UCS_OK;
    }
    struct xfer_queued *q = calloc(1, sizeof(*q));
    uint8_t *copy = malloc(hlen + len + 1);
    if (!q || !copy) {
        free(q);
        free(copy);
        return UCS_OK;
    }
    if (hlen)
        memcpy(copy, header, hlen);
    if (len)
        memcpy(copy + hlen, data, len);
    copy[hlen + len] = '\0';
    q->peer = p;
    q->kind = kind;
    q->data = copy;
    q->len = hlen + len;
    if (kind == XFER_AM_HELLO || kind == XFER_AM_REPLY) {
        /* The handshake: header is a struct xfer_reply (REPLY), data the
         * metadata or the refusal.  Kept on the peer. */
        free(p->blob);
        p->blob = copy;
        free(q);
        if (kind == XFER_AM_HELLO) {
            p->hello_seen = true;
            memmove(p->blob, p->blob + hlen, len + 1);
        } else {
            struct xfer_reply rep = {KVRT_ERR_INTERNAL, 0, 0};
            if (hlen == sizeof(rep))
                memcpy(&rep, header, sizeof(rep));
            memmove(p->blob, p->blob + hlen, len + 1);
            p->reply_seen = true;
            p->reply_status = rep.status;
            p->token = rep.token;
        }
        p->blob_len = len;
        return UCS_OK;
    }
    enqueue(kind == XFER_AM_NOTIFY ? &a->notes_tail : &a->inbox_tail, q);
    return UCS_OK;
}

#define AM_HANDLER(name, kind)                                                                                         \
    static ucs_status_t name(void *arg, const void *header, size_t hlen, void *data, size_t len,                       \
                             const ucp_am_recv_param_t *param)                                                         \
    {                                                                                                                  \
        return am_cb(arg, (kind), header, hlen, data, len, param);                                                     \
    }
AM_HANDLER(am_hello, XFER_AM_HELLO)
AM_HANDLER(am_reply, XFER_AM_REPLY)
AM_HANDLER(am_commit, XFER_AM_COMMIT)
AM_HANDLER(am_prepare, XFER_AM_PREPARE)
AM_HANDLER(am_ack, XFER_AM_ACK)
AM_HANDLER(am_notify, XFER_AM_NOTIFY)
AM_HANDLER(am_bye, XFER_AM_BYE)
AM_HANDLER(am_bind, XFER_AM_BIND)

int xfer_set_am_handlers(kvrt_xfer_agent *a)
{
    static const struct {
        unsigned id;
        ucp_am_recv_callback_t cb;
    } table[] = {
        {XFER_AM_HELLO, am_hello},     {XFER_AM_REPLY, am_reply}, {XFER_AM_COMMIT, am_commit},
        {XFER_AM_PREPARE, am_prepare}, {XFER_AM_ACK, am_ack},     {XFER_AM_NOTIFY, am_notify},
        {XFER_AM_BYE, am_bye},         {XFER_AM_BIND, am_bind},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        ucp_am_handler_param_t hp;
        memset(&hp, 0, sizeof(hp));
        hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                        UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
        hp.id = table[i].id;
        hp.flags = UCP_AM_FLAG_WHOLE_MSG;
        hp.cb = table[i].cb;
        hp.arg = a;
        ucs_status_t st = ucp_worker_set_am_recv_handler(a->worker, &hp);
        if (st != UCS_OK)
            return xfer_ucx_fail(st, "ucp_worker_set_am_recv_handler");
    }
    return KVRT_OK;
}

int kvrt_xfer_progress(kvrt_xfer_agent *a)
{
    if (!a)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_progress: agent is NULL");
    while (ucp_worker_progress(a->worker) != 0) {
    }
    return xfer_serve_inbox(a);
}

int kvrt_xfer_notification(kvrt_xfer_agent *a, kvrt_xfer_peer **from, char **msg, size_t *len)
{
    if (!a || !msg || !len)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_notification: NULL argument");
    *msg = NULL;
    *len = 0;
    if (from)
        *from = NULL;
    struct xfer_queued *q = a->notes;
    if (!q)
        return KVRT_OK;
    a->notes = q->next;
    if (!a->notes)
        a->notes_tail = &a->notes;
    *msg = (char *)q->data;
    *len = q->len;
    if (from)
        *from = q->peer;
    free(q);
    return KVRT_OK;
}
