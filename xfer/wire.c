/*
 * The wire: the active-message handlers (each finds the peer, then hands
 * the message to the stream it belongs to), and control messages, which
 * are small and sent eager; the data messages are in out.c and in.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_internal.h"

struct xfer_req *xfer_req_new(kvrt_xfer_agent *a, size_t payload)
{
    struct xfer_req *r = calloc(1, sizeof(*r) + payload);
    if (!r)
        return NULL;
    r->agent = a;
    r->slot = -1;
    r->len = payload;
    return r;
}

void xfer_req_free(struct xfer_req *r)
{
    free(r);
}

void xfer_req_start(struct xfer_req *r)
{
    kvrt_xfer_agent *a = r->agent;
    r->prev = NULL;
    r->next = a->reqs;
    if (a->reqs)
        a->reqs->prev = r;
    a->reqs = r;
    a->ucx_requests++;
}

void xfer_req_done(struct xfer_req *r)
{
    kvrt_xfer_agent *a = r->agent;
    if (r->prev)
        r->prev->next = r->next;
    else
        a->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    a->ucx_requests--;
}

struct xfer_hdr xfer_hdr_for(const kvrt_xfer_peer *p, uint64_t xid)
{
    struct xfer_hdr h = {p->agent->id, xid};
    return h;
}

static void ctl_sent(void *req, ucs_status_t st, void *user)
{
    struct xfer_req *r = user;
    (void)st; /* a lost control message shows as a failed peer or a timeout */
    xfer_req_done(r);
    xfer_req_free(r);
    if (req)
        ucp_request_free(req);
}

int xfer_ctl_send(kvrt_xfer_peer *p, unsigned id, struct xfer_req *r, size_t hlen)
{
    if (p->state != KVRT_XFER_PEER_CONNECTED || !p->data_ep) {
        xfer_req_free(r);
        return xfer_peer_ok(p, "sending a message");
    }
    if (!p->wired) {
        struct xfer_queued_req *q = calloc(1, sizeof(*q));
        if (!q) {
            xfer_req_free(r);
            return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a message");
        }
        *q = (struct xfer_queued_req){NULL, id, hlen, r};
        *p->queue_tail = q;
        p->queue_tail = &q->next;
        return KVRT_OK;
    }
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    prm.flags = UCP_AM_SEND_FLAG_EAGER;
    prm.cb.send = ctl_sent;
    prm.user_data = r;
    xfer_req_start(r);
    void *req = ucp_am_send_nbx(p->data_ep, id, &r->hdr, hlen, r->len ? r->payload : NULL, r->len, &prm);
    if (UCS_PTR_IS_ERR(req)) {
        ucs_status_t st = UCS_PTR_STATUS(req);
        ctl_sent(NULL, st, r);
        return xfer_ucx_fail(st, "ucp_am_send_nbx of a control message");
    }
    if (req == NULL)
        ctl_sent(NULL, UCS_OK, r);
    return KVRT_OK;
}

int xfer_ctl_send_copy(kvrt_xfer_peer *p, unsigned id, const void *hdr, size_t hlen, const void *data, size_t dlen)
{
    struct xfer_req *r = xfer_req_new(p->agent, dlen);
    if (!r)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a message");
    if (hlen > sizeof(r->hdr)) {
        xfer_req_free(r);
        return XFER_FAIL(KVRT_ERR_INTERNAL, "kvrt-xfer: a %zu-byte message header", hlen);
    }
    memcpy(&r->hdr, hdr, hlen);
    if (dlen)
        memcpy(r->payload, data, dlen);
    return xfer_ctl_send(p, id, r, hlen);
}

int xfer_ctl_send_wait(kvrt_xfer_agent *a, kvrt_xfer_peer *p, ucp_ep_h ep, unsigned id, const void *hdr, size_t hlen,
                       const void *data, size_t dlen, const char *what)
{
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    /* REPLY: the handshake's receiver finds the peer by its endpoint. */
    prm.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;
    void *req = ucp_am_send_nbx(ep, id, hdr, hlen, data, dlen, &prm);
    if (req == NULL)
        return KVRT_OK;
    if (UCS_PTR_IS_ERR(req))
        return xfer_ucx_fail(UCS_PTR_STATUS(req), what);
    double deadline = xfer_now() + a->timeout_s;
    ucs_status_t st;
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS && xfer_now() < deadline &&
           p->state == KVRT_XFER_PEER_CONNECTED)
        ucp_worker_progress(a->worker);
    if (st == UCS_INPROGRESS) {
        /* Give up on it: closing the endpoint completes it. */
        ucp_request_free(req);
        if (p->state != KVRT_XFER_PEER_CONNECTED)
            return xfer_peer_ok(p, what);
        return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s: %s did not take the message within %g s", what, p->name,
                         a->timeout_s);
    }
    ucp_request_free(req);
    if (st != UCS_OK)
        return p->state != KVRT_XFER_PEER_CONNECTED ? xfer_peer_ok(p, what) : xfer_ucx_fail(st, what);
    return KVRT_OK;
}

/* ---- handlers ---------------------------------------------------------------- */

static kvrt_xfer_peer *peer_of_conn(kvrt_xfer_agent *a, const ucp_am_recv_param_t *param)
{
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP))
        return NULL;
    for (kvrt_xfer_peer *p = a->peers; p; p = p->next)
        if (p->conn_ep && p->conn_ep == param->reply_ep)
            return p;
    return NULL;
}

static ucs_status_t on_handshake(void *arg, const void *header, size_t hlen, void *data, size_t len,
                                 const ucp_am_recv_param_t *param, bool reply)
{
    kvrt_xfer_agent *a = arg;
    kvrt_xfer_peer *p = peer_of_conn(a, param);
    if (!p || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || p->blob)
        return UCS_OK;
    uint8_t *copy = malloc(len + 1);
    if (!copy) {
        xfer_peer_fail(p, "out of memory for its metadata");
        return UCS_OK;
    }
    memcpy(copy, data, len);
    copy[len] = '\0';
    p->blob = copy;
    p->blob_len = len;
    if (!reply) {
        p->hello_seen = true;
        return UCS_OK;
    }
    struct xfer_reply_msg rep = {KVRT_ERR_INTERNAL, 0};
    if (hlen == sizeof(rep))
        memcpy(&rep, header, sizeof(rep));
    p->reply_status = rep.status;
    p->reply_seen = true;
    return UCS_OK;
}

static ucs_status_t am_hello(void *arg, const void *header, size_t hlen, void *data, size_t len,
                             const ucp_am_recv_param_t *param)
{
    return on_handshake(arg, header, hlen, data, len, param, false);
}

static ucs_status_t am_reply(void *arg, const void *header, size_t hlen, void *data, size_t len,
                             const ucp_am_recv_param_t *param)
{
    return on_handshake(arg, header, hlen, data, len, param, true);
}

/* The sender of a message after the handshake, from its header. */
static kvrt_xfer_peer *sender(kvrt_xfer_agent *a, const void *header, size_t hlen, size_t want)
{
    struct xfer_hdr h;
    if (hlen != want || hlen < sizeof(h))
        return NULL;
    memcpy(&h, header, sizeof(h));
    return xfer_peer_by_id(a, h.from);
}

static ucs_status_t am_begin(void *arg, const void *header, size_t hlen, void *data, size_t len,
                             const ucp_am_recv_param_t *param)
{
    struct xfer_begin_msg m;
    kvrt_xfer_peer *p = sender(arg, header, hlen, sizeof(m));
    if (!p || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV))
        return UCS_OK;
    memcpy(&m, header, sizeof(m));
    if (m.kind == XFER_BEGIN_PUSH_STAGED)
        xfer_in_on_begin(p, &m, data, len);
    else
        xfer_out_on_begin(p, &m, data, len);
    return UCS_OK;
}

static ucs_status_t am_data(void *arg, const void *header, size_t hlen, void *data, size_t len,
                            const ucp_am_recv_param_t *param)
{
    struct xfer_data_msg m;
    bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    kvrt_xfer_peer *p = sender(arg, header, hlen, sizeof(m));
    if (!p)
        /* Not a peer of this agent (never loaded, or closed): the sender's
         * rendezvous fails instead of completing. */
        return rndv ? UCS_ERR_REJECTED : UCS_OK;
    memcpy(&m, header, sizeof(m));
    return xfer_in_on_data(p, &m, data, len, rndv);
}

static ucs_status_t am_done(void *arg, const void *header, size_t hlen, void *data, size_t len,
                            const ucp_am_recv_param_t *param)
{
    struct xfer_done_msg m;
    kvrt_xfer_peer *p = sender(arg, header, hlen, sizeof(m));
    if (!p || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV))
        return UCS_OK;
    memcpy(&m, header, sizeof(m));
    xfer_in_on_done(p, &m, data, len);
    return UCS_OK;
}

static ucs_status_t am_ack(void *arg, const void *header, size_t hlen, void *data, size_t len,
                           const ucp_am_recv_param_t *param)
{
    struct xfer_ack_msg m;
    kvrt_xfer_peer *p = sender(arg, header, hlen, sizeof(m));
    if (!p || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV))
        return UCS_OK;
    memcpy(&m, header, sizeof(m));
    xfer_out_on_ack(p, &m, data, len);
    return UCS_OK;
}

static ucs_status_t am_abort(void *arg, const void *header, size_t hlen, void *data, size_t len,
                             const ucp_am_recv_param_t *param)
{
    struct xfer_abort_msg m;
    kvrt_xfer_peer *p = sender(arg, header, hlen, sizeof(m));
    (void)data;
    (void)len;
    (void)param;
    if (!p)
        return UCS_OK;
    memcpy(&m, header, sizeof(m));
    if (m.flags & XFER_ABORT_PULL)
        xfer_out_on_abort(p, m.h.xid);
    else
        xfer_in_on_abort(p, m.h.xid);
    return UCS_OK;
}

static ucs_status_t am_notify(void *arg, const void *header, size_t hlen, void *data, size_t len,
                              const ucp_am_recv_param_t *param)
{
    kvrt_xfer_peer *p = sender(arg, header, hlen, sizeof(struct xfer_hdr));
    if (!p || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV))
        return UCS_OK;
    uint8_t *copy = malloc(len + 1);
    if (copy) {
        memcpy(copy, data, len);
        copy[len] = '\0';
        xfer_note_push(p->agent, p, copy, len);
    }
    return UCS_OK;
}

static ucs_status_t am_bye(void *arg, const void *header, size_t hlen, void *data, size_t len,
                           const ucp_am_recv_param_t *param)
{
    kvrt_xfer_peer *p = sender(arg, header, hlen, sizeof(struct xfer_hdr));
    (void)data;
    (void)len;
    (void)param;
    if (p && p->state == KVRT_XFER_PEER_CONNECTED)
        p->state = KVRT_XFER_PEER_CLOSED;
    return UCS_OK;
}

static ucs_status_t am_ready(void *arg, const void *header, size_t hlen, void *data, size_t len,
                             const ucp_am_recv_param_t *param)
{
    kvrt_xfer_peer *p = sender(arg, header, hlen, sizeof(struct xfer_hdr));
    (void)data;
    (void)len;
    (void)param;
    if (p)
        p->ready_seen = true;
    return UCS_OK;
}

int xfer_set_am_handlers(kvrt_xfer_agent *a)
{
    static const struct {
        unsigned id;
        ucp_am_recv_callback_t cb;
    } table[] = {
        {XFER_AM_HELLO, am_hello}, {XFER_AM_REPLY, am_reply}, {XFER_AM_BEGIN, am_begin}, {XFER_AM_DATA, am_data},
        {XFER_AM_DONE, am_done},   {XFER_AM_ACK, am_ack},     {XFER_AM_ABORT, am_abort}, {XFER_AM_NOTIFY, am_notify},
        {XFER_AM_BYE, am_bye},     {XFER_AM_READY, am_ready},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        ucp_am_handler_param_t hp;
        memset(&hp, 0, sizeof(hp));
        hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                        UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
        hp.id = table[i].id;
        /* Eager messages arrive whole, however many fragments they took. */
        hp.flags = UCP_AM_FLAG_WHOLE_MSG;
        hp.cb = table[i].cb;
        hp.arg = a;
        ucs_status_t st = ucp_worker_set_am_recv_handler(a->worker, &hp);
        if (st != UCS_OK)
            return xfer_ucx_fail(st, "ucp_worker_set_am_recv_handler");
    }
    return KVRT_OK;
}
