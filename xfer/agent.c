/*
 * The agent: UCP context and worker, registration of the cache and of the
 * staging area, connections (listener, client, worker address), active
 * messages, and the waits that bound every blocking call by the timeout.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xfer_internal.h"

enum { DEFAULT_AREA_MAX = 64 << 20 };

double xfer_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int ucx_fail(ucs_status_t st, const char *what)
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

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    kvrt_xfer_peer *p = arg;
    (void)ep;
    if (p->state == KVRT_XFER_PEER_CONNECTED) {
        p->state = KVRT_XFER_PEER_FAILED;
        snprintf(p->why, sizeof(p->why), "%s", ucs_status_string(status));
    }
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
        return ucx_fail(UCS_PTR_STATUS(req), what);
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
        return ucx_fail(st, what);
    }
    return KVRT_OK;
}

int xfer_am_send(kvrt_xfer_agent *a, kvrt_xfer_peer *p, unsigned id, const void *hdr, size_t hlen,
                 const void *data, size_t dlen, const char *what)
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

static ucs_status_t am_cb(kvrt_xfer_agent *a, uint32_t kind, const void *header, size_t hlen, void *data,
                          size_t len, const ucp_am_recv_param_t *param)
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

#define AM_HANDLER(name, kind)                                                                            \
    static ucs_status_t name(void *arg, const void *header, size_t hlen, void *data, size_t len,          \
                             const ucp_am_recv_param_t *param)                                            \
    {                                                                                                     \
        return am_cb(arg, (kind), header, hlen, data, len, param);                                        \
    }
AM_HANDLER(am_hello, XFER_AM_HELLO)
AM_HANDLER(am_reply, XFER_AM_REPLY)
AM_HANDLER(am_commit, XFER_AM_COMMIT)
AM_HANDLER(am_prepare, XFER_AM_PREPARE)
AM_HANDLER(am_ack, XFER_AM_ACK)
AM_HANDLER(am_notify, XFER_AM_NOTIFY)
AM_HANDLER(am_bye, XFER_AM_BYE)
AM_HANDLER(am_bind, XFER_AM_BIND)

static int set_handlers(kvrt_xfer_agent *a)
{
    static const struct {
        unsigned id;
        ucp_am_recv_callback_t cb;
    } table[] = {
        {XFER_AM_HELLO, am_hello},   {XFER_AM_REPLY, am_reply}, {XFER_AM_COMMIT, am_commit},
        {XFER_AM_PREPARE, am_prepare}, {XFER_AM_ACK, am_ack},   {XFER_AM_NOTIFY, am_notify},
        {XFER_AM_BYE, am_bye},       {XFER_AM_BIND, am_bind},
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
            return ucx_fail(st, "ucp_worker_set_am_recv_handler");
    }
    return KVRT_OK;
}

/* ---- agent ---------------------------------------------------------------- */

void kvrt_xfer_agent_options_default(struct kvrt_xfer_agent_options *o)
{
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
}

static int register_mem(kvrt_xfer_agent *a, void *addr, uint64_t len, ucp_mem_h *memh, void **rkey,
                        size_t *rkey_len, const char *what)
{
    ucp_mem_map_params_t mp;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = addr;
    mp.length = len;
    ucs_status_t st = ucp_mem_map(a->ctx, &mp, memh);
    if (st != UCS_OK)
        return ucx_fail(st, what);
    void *packed;
    st = ucp_rkey_pack(a->ctx, *memh, &packed, rkey_len);
    if (st != UCS_OK)
        return ucx_fail(st, "ucp_rkey_pack");
    *rkey = malloc(*rkey_len);
    if (*rkey)
        memcpy(*rkey, packed, *rkey_len);
    ucp_rkey_buffer_release(packed);
    if (!*rkey)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a remote key");
    return KVRT_OK;
}

/* The staging area is allocated by UCX (UCP_MEM_MAP_ALLOCATE): over shared
 * memory such memory is mapped by the peer, so a put is one memcpy that
 * completes without the target's help; memory registered after the fact
 * goes through UCX's active-message emulation of RMA instead.  The backend
 * buffer beside it is what gather and scatter address. */
static int make_area(kvrt_xfer_agent *a, uint64_t want)
{
    uint64_t all;
    if (want == 0) {
        if (__builtin_mul_overflow(a->local.staging_per_block, a->local.num_blocks, &all))
            all = UINT64_MAX;
        want = all < DEFAULT_AREA_MAX ? all : DEFAULT_AREA_MAX;
    }
    if (want < a->local.staging_per_block)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_agent_create: staging_bytes %llu is smaller than one "
                         "block's staging bytes (%llu)", ULL(want), ULL(a->local.staging_per_block));
    a->area_bytes = want;
    int rc = kvrt_buffer_create(a->backend, want, &a->area_buf);
    if (rc != KVRT_OK)
        return rc;
    ucp_mem_map_params_t mp;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = NULL;
    mp.length = want;
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    ucs_status_t st = ucp_mem_map(a->ctx, &mp, &a->area_memh);
    if (st != UCS_OK)
        return ucx_fail(st, "ucp_mem_map (allocate) of the staging area");
    ucp_mem_attr_t attr;
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    if ((st = ucp_mem_query(a->area_memh, &attr)) != UCS_OK)
        return ucx_fail(st, "ucp_mem_query of the staging area");
    a->area_host = attr.address;
    a->area_shared = false;
    void *packed;
    if ((st = ucp_rkey_pack(a->ctx, a->area_memh, &packed, &a->area_rkey_len)) != UCS_OK)
        return ucx_fail(st, "ucp_rkey_pack");
    a->area_rkey = malloc(a->area_rkey_len);
    if (a->area_rkey)
        memcpy(a->area_rkey, packed, a->area_rkey_len);
    ucp_rkey_buffer_release(packed);
    if (!a->area_rkey)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a remote key");
    return KVRT_OK;
}

int kvrt_xfer_agent_create(kvrt_backend *b, kvrt_cache *cache, const struct kvrt_xfer_agent_options *o,
                           kvrt_xfer_agent **out)
{
    if (!b || !cache || !out)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_agent_create: NULL argument");
    *out = NULL;
    struct kvrt_xfer_agent_options def;
    kvrt_xfer_agent_options_default(&def);
    if (!o)
        o = &def;
    if (o->size < sizeof(*o))
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_agent_create: options size %zu; expected %zu (call "
                         "kvrt_xfer_agent_options_default)", o->size, sizeof(*o));
    if (!(o->timeout_s >= 0) || o->timeout_s > 1e6)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_agent_create: timeout_s %g; valid are 0 (default 30) "
                         "to 1e6 seconds", o->timeout_s);
    kvrt_xfer_agent *a = calloc(1, sizeof(*a));
    if (!a)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_agent_create: out of memory");
    a->backend = b;
    a->cache = cache;
    a->timeout_s = o->timeout_s > 0 ? o->timeout_s : 30.0;
    a->inbox_tail = &a->inbox;
    a->notes_tail = &a->notes;
    a->next_xid = 1;
    int rc = xfer_desc_local(cache, &a->local);

    ucp_config_t *config = NULL;
    ucs_status_t st = UCS_OK;
    if (rc == KVRT_OK && (st = ucp_config_read(NULL, NULL, &config)) != UCS_OK)
        rc = ucx_fail(st, "ucp_config_read");
    if (rc == KVRT_OK) {
        ucp_params_t pp;
        memset(&pp, 0, sizeof(pp));
        pp.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
        pp.features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
        pp.name = "kvrt-xfer";
        st = ucp_init(&pp, config, &a->ctx);
        ucp_config_release(config);
        if (st != UCS_OK)
            rc = ucx_fail(st, "ucp_init");
    }
    if (rc == KVRT_OK) {
        ucp_worker_params_t wp;
        memset(&wp, 0, sizeof(wp));
        wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wp.thread_mode = UCS_THREAD_MODE_SINGLE;
        if ((st = ucp_worker_create(a->ctx, &wp, &a->worker)) != UCS_OK)
            rc = ucx_fail(st, "ucp_worker_create");
    }
    if (rc == KVRT_OK && (st = ucp_worker_get_address(a->worker, &a->worker_addr, &a->worker_addr_len)) != UCS_OK)
        rc = ucx_fail(st, "ucp_worker_get_address");
    if (rc == KVRT_OK)
        rc = set_handlers(a);
    if (rc == KVRT_OK) {
        /* Registered once for the whole allocation, never per block. */
        a->cache_addr = xfer_buffer_host_address(kvrt_cache_buffer(cache));
        if (a->cache_addr) {
            rc = register_mem(a, a->cache_addr, a->local.bytes, &a->cache_memh, &a->cache_rkey,
                              &a->cache_rkey_len, "ucp_mem_map of the cache");
            a->cache_registered = rc == KVRT_OK;
        }
    }
    if (rc == KVRT_OK)
        rc = make_area(a, o->staging_bytes);
    if (rc != KVRT_OK) {
        kvrt_xfer_agent_destroy(a);
        return rc;
    }
    *out = a;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

static void peer_free(kvrt_xfer_peer *p, bool polite)
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
        while (req && !UCS_PTR_IS_ERR(req) && ucp_request_check_status(req) == UCS_INPROGRESS &&
               xfer_now() < deadline)
            ucp_worker_progress(a->worker);
        if (req && !UCS_PTR_IS_ERR(req))
            ucp_request_free(req);
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
        req = ucp_ep_close_nbx(eps[i], &prm);
        deadline = xfer_now() + 2.0;
        while (req && !UCS_PTR_IS_ERR(req) && ucp_request_check_status(req) == UCS_INPROGRESS &&
               xfer_now() < deadline)
            ucp_worker_progress(a->worker);
        if (req && !UCS_PTR_IS_ERR(req))
            ucp_request_free(req);
    }
    if (p->loaded)
        xfer_desc_free(&p->md.cache, true);
    free(p->blob);
    free(p);
}

static void unlink_peer(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
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

static void free_queue(struct xfer_queued *q)
{
    while (q) {
        struct xfer_queued *n = q->next;
        free(q->data);
        free(q);
        q = n;
    }
}

void kvrt_xfer_agent_destroy(kvrt_xfer_agent *a)
{
    if (!a)
        return;
    while (a->peers) {
        kvrt_xfer_peer *p = a->peers;
        unlink_peer(a, p);
        peer_free(p, false);
    }
    for (size_t i = 0; i < a->num_pending_conn; i++)
        ucp_listener_reject(a->listener, a->pending_conn[i]);
    if (a->listener)
        ucp_listener_destroy(a->listener);
    free_queue(a->inbox);
    free_queue(a->notes);
    if (a->cache_memh)
        ucp_mem_unmap(a->ctx, a->cache_memh);
    if (a->area_memh)
        ucp_mem_unmap(a->ctx, a->area_memh);
    free(a->cache_rkey);
    free(a->area_rkey);
    if (a->worker_addr)
        ucp_worker_release_address(a->worker, a->worker_addr);
    if (a->worker)
        ucp_worker_destroy(a->worker);
    if (a->ctx)
        ucp_cleanup(a->ctx);
    kvrt_buffer_destroy(a->area_buf);
    xfer_desc_free(&a->local, false);
    free(a);
}

int kvrt_xfer_metadata_export(kvrt_xfer_agent *a, void **blob, size_t *len)
{
    if (!a || !blob || !len)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_metadata_export: NULL argument");
    uint8_t *b;
    int rc = xfer_md_export(a, &b, len);
    if (rc == KVRT_OK)
        *blob = b;
    return rc;
}

/* ---- peers ---------------------------------------------------------------- */

static int new_peer(kvrt_xfer_agent *a, kvrt_xfer_peer **out)
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

static void fill_ep_params(ucp_ep_params_t *ep, kvrt_xfer_peer *p)
{
    memset(ep, 0, sizeof(*ep));
    ep->field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep->err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep->err_handler.cb = ep_error;
    ep->err_handler.arg = p;
}

/* Take ownership of the peer's metadata (p->blob): parse, check, unpack keys. */
static int load_blob(kvrt_xfer_agent *a, kvrt_xfer_peer *p, size_t len)
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
        return ucx_fail(st, "ucp_ep_rkey_unpack of the peer's cache key");
    if ((st = ucp_ep_rkey_unpack(ep, p->md.area_rkey, &p->area_rkey)) != UCS_OK)
        return ucx_fail(st, "ucp_ep_rkey_unpack of the peer's staging key");
    return KVRT_OK;
}

static void drop_peer(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
{
    unlink_peer(a, p);
    peer_free(p, false);
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
    if ((rc = new_peer(a, &p)) != KVRT_OK)
        return rc;
    p->blob = malloc(len ? len : 1);
    if (!p->blob) {
        drop_peer(a, p);
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_peer_load: out of memory");
    }
    memcpy(p->blob, blob, len);
    ucp_ep_params_t ep;
    fill_ep_params(&ep, p);
    ep.field_mask |= UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    /* The address points into our copy, which lives as long as the peer. */
    xfer_md_parse(p->blob, len, &p->md);
    p->loaded = true;
    ep.address = (const ucp_address_t *)p->md.worker_addr;
    ucs_status_t st = ucp_ep_create(a->worker, &ep, &p->ep);
    if (st != UCS_OK) {
        drop_peer(a, p);
        return ucx_fail(st, "ucp_ep_create to the peer's worker address");
    }
    if ((p->md.registered && (st = ucp_ep_rkey_unpack(p->ep, p->md.cache_rkey, &p->cache_rkey)) != UCS_OK) ||
        (st = ucp_ep_rkey_unpack(p->ep, p->md.area_rkey, &p->area_rkey)) != UCS_OK) {
        drop_peer(a, p);
        return ucx_fail(st, "ucp_ep_rkey_unpack");
    }
    *out = p;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

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
        return XFER_FAIL(KVRT_ERR_INVALID, "%s: address \"%s\" is not an IPv4 address (e.g. 127.0.0.1)", fn,
                         addr);
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
        return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt_xfer_listen: cannot listen on %s:%u: %s",
                         addr ? addr : "127.0.0.1", port, ucs_status_string(st));
    if (bound_port) {
        ucp_listener_attr_t la;
        la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
        if ((st = ucp_listener_query(a->listener, &la)) != UCS_OK)
            return ucx_fail(st, "ucp_listener_query");
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
    int rc = new_peer(a, &p);
    if (rc != KVRT_OK) {
        ucp_listener_reject(a->listener, creq);
        return rc;
    }
    ucp_ep_params_t ep;
    fill_ep_params(&ep, p);
    ep.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
    ep.conn_request = creq;
    ucs_status_t st = ucp_ep_create(a->worker, &ep, &p->ep);
    if (st != UCS_OK) {
        drop_peer(a, p);
        return ucx_fail(st, "ucp_ep_create for an incoming connection");
    }
    rc = wait_flag(a, p, &p->hello_seen, deadline - xfer_now() > 1 ? deadline - xfer_now() : 1,
                   "kvrt_xfer_accept: waiting for the peer's metadata");
    if (rc == KVRT_OK) {
        rc = load_blob(a, p, p->blob_len);
        struct xfer_reply rep = {rc, 0, a->next_token++};
        p->token = rep.token;
        if (rc != KVRT_OK) {
            /* Tell the peer why, then give up on it. */
            char why[2048];
            snprintf(why, sizeof(why), "%s", kvrt_error_message());
            xfer_am_send(a, p, XFER_AM_REPLY, &rep, sizeof(rep), why, strlen(why), "refusal");
            /* A flushing close, so that the refusal arrives before the
             * connection goes. */
            unlink_peer(a, p);
            peer_free(p, true);
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
        drop_peer(a, p);
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
    fill_ep_params(&ep, p);
    /* Shared-memory transports cannot report a failed peer, and UCX leaves
     * out what cannot honour the error mode: this ep asks for none, the
     * connection ep keeps watching the peer. */
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    ep.field_mask |= UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = (const ucp_address_t *)md.worker_addr; /* points into p->blob */
    ucs_status_t st = ucp_ep_create(a->worker, &ep, &p->data_ep);
    if (st != UCS_OK) {
        p->data_ep = NULL;
        return ucx_fail(st, "ucp_ep_create to the peer's worker address");
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
    if ((rc = new_peer(a, &p)) != KVRT_OK)
        return rc;
    ucp_ep_params_t ep;
    fill_ep_params(&ep, p);
    ep.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.sockaddr.addr = (const struct sockaddr *)&sa;
    ep.sockaddr.addrlen = sizeof(sa);
    ucs_status_t st = ucp_ep_create(a->worker, &ep, &p->ep);
    if (st != UCS_OK) {
        drop_peer(a, p);
        return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt_xfer_connect: cannot connect to %s:%u: %s",
                         addr ? addr : "127.0.0.1", port, ucs_status_string(st));
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
        rc = load_blob(a, p, p->blob_len);
    if (rc != KVRT_OK) {
        if (p->state == KVRT_XFER_PEER_FAILED && !p->reply_seen)
            kvrt_error_report(rc, "kvrt_xfer_connect: cannot reach %s:%u (%s)", addr ? addr : "127.0.0.1", port,
                              p->why);
        drop_peer(a, p);
        return rc;
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
    unlink_peer(a, p);
    peer_free(p, true);
}

enum kvrt_xfer_peer_state kvrt_xfer_peer_state(const kvrt_xfer_peer *p, const char **why)
{
    if (why)
        *why = p && p->state == KVRT_XFER_PEER_FAILED ? p->why : "";
    return p ? p->state : KVRT_XFER_PEER_FAILED;
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
