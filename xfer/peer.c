/*
 * Peers: one per remote engine, from loaded metadata or a connection; its
 * endpoints, unpacked remote keys and state (connected, closed, failed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_internal.h"

static void peer_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    kvrt_xfer_peer *p = arg;
    (void)ep;
    if (p->state == KVRT_XFER_PEER_CONNECTED) {
        p->state = KVRT_XFER_PEER_FAILED;
        snprintf(p->why, sizeof(p->why), "%s", ucs_status_string(status));
    }
}

void xfer_peer_free(kvrt_xfer_peer *p, bool polite)
{
    kvrt_xfer_agent *a = p->agent;
    if (p->cache_rkey)
        ucp_rkey_destroy(p->cache_rkey);
    if (p->area_rkey)
        ucp_rkey_destroy(p->area_rkey);
    /* A polite close flushes first (what was sent, a goodbye or a refusal,
     * is delivered), then every close is forced: it completes locally, so
     * no request is left to a peer that has stopped progressing. */
    ucp_ep_h eps[2] = {p->own_data_ep ? p->data_ep : NULL, p->ep};
    for (int i = 0; i < 2; i++) {
        if (!eps[i])
            continue;
        ucp_request_param_t prm;
        memset(&prm, 0, sizeof(prm));
        void *req = NULL;
        if (polite && p->state == KVRT_XFER_PEER_CONNECTED)
            req = ucp_ep_flush_nbx(eps[i], &prm);
        double deadline = xfer_now() + 2.0;
        while (req && !UCS_PTR_IS_ERR(req) && ucp_request_check_status(req) == UCS_INPROGRESS && xfer_now() < deadline)
            ucp_worker_progress(a->worker);
        if (req && !UCS_PTR_IS_ERR(req))
            ucp_request_free(req);
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
        req = ucp_ep_close_nbx(eps[i], &prm);
        deadline = xfer_now() + 2.0;
        while (req && !UCS_PTR_IS_ERR(req) && ucp_request_check_status(req) == UCS_INPROGRESS && xfer_now() < deadline)
            ucp_worker_progress(a->worker);
        if (req && !UCS_PTR_IS_ERR(req))
            ucp_request_free(req);
    }
    if (p->loaded)
        xfer_desc_free(&p->md.cache, true);
    free(p->blob);
    free(p);
}

void xfer_peer_unlink(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
{
    for (kvrt_xfer_peer **pp = &a->peers; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    /* Queued messages from this peer lose their sender. */
    for (struct xfer_queued *q = a->inbox; q; q = q->next)
        if (q->peer == p)
            q->peer = NULL;
    for (struct xfer_queued *q = a->notes; q; q = q->next)
        if (q->peer == p)
            q->peer = NULL;
}

int xfer_peer_new(kvrt_xfer_agent *a, kvrt_xfer_peer **out)
{
    kvrt_xfer_peer *p = calloc(1, sizeof(*p));
    if (!p)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a peer");
    p->agent = a;
    p->state = KVRT_XFER_PEER_CONNECTED;
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

/* Take ownership of the peer's metadata (p->blob): parse, check, unpack keys. */
int xfer_peer_load_blob(kvrt_xfer_agent *a, kvrt_xfer_peer *p, size_t len)
{
    int rc = xfer_md_parse(p->blob, len, &p->md);
    if (rc != KVRT_OK)
        return rc;
    p->loaded = true;
    rc = xfer_md_compatible(&a->local, &p->md.cache);
    if (rc != KVRT_OK)
        return rc;
    ucs_status_t st;
    ucp_ep_h ep = xfer_data_ep(p);
    if (p->md.registered && (st = ucp_ep_rkey_unpack(ep, p->md.cache_rkey, &p->cache_rkey)) != UCS_OK)
        return xfer_ucx_fail(st, "ucp_ep_rkey_unpack of the peer's cache key");
    if ((st = ucp_ep_rkey_unpack(ep, p->md.area_rkey, &p->area_rkey)) != UCS_OK)
        return xfer_ucx_fail(st, "ucp_ep_rkey_unpack of the peer's staging key");
    return KVRT_OK;
}

void xfer_peer_drop(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
{
    xfer_peer_unlink(a, p);
    xfer_peer_free(p, false);
}

int kvrt_xfer_peer_load(kvrt_xfer_agent *a, const void *blob, size_t len, kvrt_xfer_peer **out)
{
    if (!a || !blob || !out)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_peer_load: NULL argument");
    *out = NULL;
    struct xfer_md md;
    int rc = xfer_md_parse(blob, len, &md);
    if (rc != KVRT_OK)
        return rc;
    rc = xfer_md_compatible(&a->local, &md.cache);
    xfer_desc_free(&md.cache, true);
    if (rc != KVRT_OK)
        return rc;
    kvrt_xfer_peer *p = NULL;
    if ((rc = xfer_peer_new(a, &p)) != KVRT_OK)
        return rc;
    p->blob = malloc(len ? len : 1);
    if (!p->blob) {
        xfer_peer_drop(a, p);
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_peer_load: out of memory");
    }
    memcpy(p->blob, blob, len);
    ucp_ep_params_t ep;
    xfer_peer_ep_params(&ep, p);
    ep.field_mask |= UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    /* The address points into our copy, which lives as long as the peer. */
    xfer_md_parse(p->blob, len, &p->md);
    p->loaded = true;
    ep.address = (const ucp_address_t *)p->md.worker_addr;
    ucs_status_t st = ucp_ep_create(a->worker, &ep, &p->ep);
    if (st != UCS_OK) {
        xfer_peer_drop(a, p);
        return xfer_ucx_fail(st, "ucp_ep_create to the peer's worker address");
    }
    if ((p->md.registered && (st = ucp_ep_rkey_unpack(p->ep, p->md.cache_rkey, &p->cache_rkey)) != UCS_OK) ||
        (st = ucp_ep_rkey_unpack(p->ep, p->md.area_rkey, &p->area_rkey)) != UCS_OK) {
        xfer_peer_drop(a, p);
        return xfer_ucx_fail(st, "ucp_ep_rkey_unpack");
    }
    *out = p;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

void kvrt_xfer_peer_close(kvrt_xfer_peer *p)
{
    if (!p)
        return;
    kvrt_xfer_agent *a = p->agent;
    if (p->state == KVRT_XFER_PEER_CONNECTED)
        xfer_am_send(a, p, XFER_AM_BYE, NULL, 0, NULL, 0, "goodbye");
    xfer_peer_unlink(a, p);
    xfer_peer_free(p, true);
}

enum kvrt_xfer_peer_state kvrt_xfer_peer_state(const kvrt_xfer_peer *p, const char **why)
{
    if (why)
        *why = p && p->state == KVRT_XFER_PEER_FAILED ? p->why : "";
    return p ? p->state : KVRT_XFER_PEER_FAILED;
}
