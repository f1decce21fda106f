/*
 * Every UCP call of libkvrt-xfer.  Requests carry a context of ours (the
 * caller's completion and the header, which UCX reads until the request
 * completes); the list of them lets the end give up what UCX never
 * completed.
 *
 * Layer 1 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>

#include "base/clock.h"
#include "address.h"
#include "inet.h"
#include "transport.h"

enum { MAX_HEADER = 128, NUM_AM_IDS = 65536 };

struct xt_mem {
    ucp_mem_h h;
};

struct xt_ep {
    xt *t;
    ucp_ep_h ep;
    void *user;
    xt_ep *next;
    void *close_req; /* closing: UCX's request, until it completes */
    bool closing;
    double linger_until; /* lingering: closed then, or when the peer closes */
};

struct xt_conn {
    ucp_conn_request_h req;
};

struct xt_req {
    struct xt_req *prev, *next;
    xt *t;
    xt_done done;
    void *user;
    uint8_t hdr[MAX_HEADER];
    uint8_t *copy;
};

struct id_arg {
    xt *t;
    unsigned id;
};

struct xt {
    struct xt_callbacks cb;
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_listener_h listener;
    ucp_address_t *addr;
    size_t addr_len;
    struct xfer_addr_shape shape;
    int efd;
    struct id_arg *ids;
    unsigned num_ids;
    xt_ep *eps;
    struct xt_req *reqs;
    uint64_t nreqs;
    unsigned lingering;
    double handler_s;
    uint64_t handler_bytes;
};

static int ucx_fail(ucs_status_t st, const char *what)
{
    return BASE_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s failed: %s", what, ucs_status_string(st));
}

/* ---- requests ------------------------------------------------------------------ */

static struct xt_req *req_new(xt *t, xt_done done, void *user)
{
    struct xt_req *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->t = t;
    r->done = done;
    r->user = user;
    r->next = t->reqs;
    if (t->reqs)
        t->reqs->prev = r;
    t->reqs = r;
    t->nreqs++;
    return r;
}

static void req_free(struct xt_req *r)
{
    xt *t = r->t;
    if (r->prev)
        r->prev->next = r->next;
    else
        t->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    t->nreqs--;
    free(r->copy);
    free(r);
}

/* The caller's completion runs after the request is gone, so that it may
 * start new ones freely. */
static void req_end(struct xt_req *r, ucs_status_t st, size_t len)
{
    xt_done done = r->done;
    void *user = r->user;
    req_free(r);
    if (done)
        done(user, st == UCS_OK ? KVRT_OK : KVRT_ERR_DEVICE, len, st == UCS_OK ? "" : ucs_status_string(st));
}

static void sent(void *request, ucs_status_t st, void *user)
{
    req_end(user, st, 0);
    if (request)
        ucp_request_free(request);
}

static void received(void *request, ucs_status_t st, size_t len, void *user)
{
    req_end(user, st, len);
    if (request)
        ucp_request_free(request);
}

static void flushed(void *request, ucs_status_t st, void *user)
{
    sent(request, st, user);
}

/* ---- handlers ------------------------------------------------------------------ */

static xt_ep *find_ep(xt *t, ucp_ep_h ep)
{
    for (xt_ep *e = t->eps; e; e = e->next)
        if (e->ep == ep && !e->closing && !e->linger_until)
            return e;
    return NULL;
}

static ucs_status_t on_message(void *arg, const void *header, size_t hlen, void *data, size_t len,
                               const ucp_am_recv_param_t *param)
{
    struct id_arg *ia = arg;
    xt *t = ia->t;
    struct xt_msg m = {ia->id, header, hlen, data, len, (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0, NULL};
    if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
        m.reply = find_ep(t, param->reply_ep);
    switch (t->cb.message(t->cb.arg, &m)) {
    case XT_KEEP: return UCS_INPROGRESS;
    case XT_REFUSE: return m.rndv ? UCS_ERR_REJECTED : UCS_OK;
    default: return UCS_OK;
    }
}

static ucs_status_t on_stray(void *arg, const void *header, size_t hlen, void *data, size_t len,
                             const ucp_am_recv_param_t *param)
{
    struct id_arg *ia = arg;
    bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    (void)header;
    (void)hlen;
    (void)data;
    (void)len;
    ia->t->cb.stray(ia->t->cb.arg, ia->id, rndv);
    return rndv ? UCS_ERR_REJECTED : UCS_OK;
}

static int set_handler(xt *t, unsigned id, ucp_am_recv_callback_t cb, void *arg)
{
    ucp_am_handler_param_t hp;
    memset(&hp, 0, sizeof(hp));
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = id;
    /* Eager messages arrive whole, however many fragments they took. */
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    hp.cb = cb;
    hp.arg = arg;
    ucs_status_t st = ucp_worker_set_am_recv_handler(t->worker, &hp);
    return st == UCS_OK ? KVRT_OK : ucx_fail(st, "ucp_worker_set_am_recv_handler");
}

/* The highest id first: UCX grows its table once.  Each id has its own
 * argument so that a stray one can be named. */
static int set_handlers(xt *t)
{
    double t0 = base_now();
    t->ids = calloc(NUM_AM_IDS, sizeof(*t->ids));
    if (!t->ids)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for the message handlers");
    int rc = KVRT_OK;
    for (unsigned id = NUM_AM_IDS; id-- > 0 && rc == KVRT_OK;) {
        t->ids[id] = (struct id_arg){t, id};
        bool known = id > 0 && id < t->num_ids;
        rc = set_handler(t, id, known ? on_message : on_stray, &t->ids[id]);
    }
    t->handler_s = base_now() - t0;
    /* Ours, and UCX 1.13's table entry: a callback, its argument, flags. */
    t->handler_bytes = (uint64_t)NUM_AM_IDS * (sizeof(struct id_arg) + 2 * sizeof(void *) + sizeof(uint64_t));
    return rc;
}

/* ---- the worker --------------------------------------------------------------- */

/* UCX 1.13 gives endpoints with peer error handling zero-copy shared memory
 * (cma) only when the cma memory domain claims memory invalidation, which
 * it reads from the environment alone (a ucp_config_modify of it is
 * ignored).  Its tcp put-zcopy protocol asserts
 * (UCT_TCP_EP_FLAG_PUT_TX_WAITING_ACK) in a survivor's peers when senders
 * die mid-transfer, and moving rendezvous data without it measured the
 * same (docs/xfer.md, "Faults").  Both are set once, before the first
 * context, only where the user has not chosen. */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void set_ucx_defaults(void)
{
    if (!getenv("UCX_CMA_MEMORY_INVALIDATE"))
        setenv("UCX_CMA_MEMORY_INVALIDATE", "y", 0);
    if (!getenv("UCX_TCP_PUT_ENABLE"))
        setenv("UCX_TCP_PUT_ENABLE", "n", 0);
}

int xt_create(const struct xt_callbacks *callbacks, unsigned num_ids, xt **out)
{
    *out = NULL;
    xt *t = calloc(1, sizeof(*t));
    if (!t)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory");
    t->cb = *callbacks;
    t->num_ids = num_ids;
    t->efd = -1;
    pthread_once(&env_once, set_ucx_defaults);
    int rc = KVRT_OK;
    ucp_config_t *config = NULL;
    ucs_status_t st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK) {
        rc = ucx_fail(st, "ucp_config_read");
        goto fail;
    }
    ucp_params_t pp;
    memset(&pp, 0, sizeof(pp));
    pp.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
    pp.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    pp.name = "kvrt-xfer";
    st = ucp_init(&pp, config, &t->ctx);
    ucp_config_release(config);
    if (st != UCS_OK) {
        t->ctx = NULL;
        rc = ucx_fail(st, "ucp_init");
        goto fail;
    }
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof(wp));
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    /* The agent's lock serialises every call into the worker. */
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    if ((st = ucp_worker_create(t->ctx, &wp, &t->worker)) != UCS_OK) {
        t->worker = NULL;
        rc = ucx_fail(st, "ucp_worker_create");
        goto fail;
    }
    if ((st = ucp_worker_get_address(t->worker, &t->addr, &t->addr_len)) != UCS_OK) {
        t->addr = NULL;
        rc = ucx_fail(st, "ucp_worker_get_address");
        goto fail;
    }
    char why[256];
    if (xfer_addr_parse((const uint8_t *)t->addr, t->addr_len, &t->shape, why, sizeof(why)) != 0) {
        rc = BASE_FAIL(KVRT_ERR_UNSUPPORTED,
                       "kvrt-xfer: this UCX packs worker addresses kvrt-xfer cannot check (%s); it knows UCX 1.13's "
                       "formats without UCX_UNIFIED_MODE",
                       why);
        goto fail;
    }
    if ((st = ucp_worker_get_efd(t->worker, &t->efd)) != UCS_OK) {
        rc = ucx_fail(st, "ucp_worker_get_efd");
        goto fail;
    }
    if ((rc = set_handlers(t)) != KVRT_OK)
        goto fail;
    *out = t;
    return KVRT_OK;
fail:;
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", kvrt_error_message());
    xt_destroy(t);
    return kvrt_error_report(rc, "%s", msg);
}

static void ep_close_now(xt_ep *e)
{
    if (e->linger_until)
        e->t->lingering--;
    e->linger_until = 0;
    e->closing = true;
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void *req = ucp_ep_close_nbx(e->ep, &prm);
    e->close_req = UCS_PTR_IS_PTR(req) ? req : NULL;
}

/* Lingering endpoints whose time is up close. */
static void end_lingering(xt *t)
{
    if (!t->lingering)
        return;
    double tnow = base_now();
    for (xt_ep *e = t->eps; e; e = e->next)
        if (e->linger_until && !e->closing && tnow >= e->linger_until)
            ep_close_now(e);
}

static bool ep_closed(xt_ep *e)
{
    if (e->close_req && ucp_request_check_status(e->close_req) == UCS_INPROGRESS)
        return false;
    if (e->close_req)
        ucp_request_free(e->close_req);
    e->close_req = NULL;
    return true;
}

/* Endpoints whose close completed go. */
static void reap_eps(xt *t)
{
    for (xt_ep **pe = &t->eps; *pe;) {
        xt_ep *e = *pe;
        if (e->closing && ep_closed(e)) {
            *pe = e->next;
            free(e);
        } else {
            pe = &e->next;
        }
    }
}

void xt_quiesce(xt *t)
{
    if (!t->worker)
        return;
    /* Lingering endpoints keep their time: what was said on them is read
     * before the process goes. */
    for (xt_ep *e = t->eps; e; e = e->next)
        if (!e->closing && !e->linger_until)
            ep_close_now(e);
    while (t->lingering) {
        ucp_worker_progress(t->worker);
        end_lingering(t);
    }
    /* Bounded: a peer that stopped progressing completes nothing. */
    double deadline = base_now() + 2.0;
    while ((t->nreqs > 0 || t->eps) && base_now() < deadline) {
        ucp_worker_progress(t->worker);
        reap_eps(t);
    }
    /* Requests UCX never completed: no callback may run any more. */
    for (struct xt_req *r = t->reqs; r; r = r->next)
        r->done = NULL;
}

void xt_destroy(xt *t)
{
    if (!t)
        return;
    xt_quiesce(t);
    if (t->listener)
        ucp_listener_destroy(t->listener);
    if (t->addr)
        ucp_worker_release_address(t->worker, t->addr);
    for (xt_ep *e = t->eps; e; e = e->next)
        if (e->close_req) {
            ucp_request_free(e->close_req);
            e->close_req = NULL;
        }
    if (t->worker)
        ucp_worker_destroy(t->worker);
    if (t->ctx)
        ucp_cleanup(t->ctx);
    for (struct xt_req *r = t->reqs, *next; r; r = next) {
        next = r->next;
        free(r->copy);
        free(r);
    }
    t->reqs = NULL;
    while (t->eps) {
        xt_ep *e = t->eps;
        t->eps = e->next;
        free(e);
    }
    free(t->ids);
    free(t);
}

void xt_worker_address(const xt *t, const uint8_t **addr, size_t *len)
{
    *addr = (const uint8_t *)t->addr;
    *len = t->addr_len;
}

unsigned xt_progress(xt *t)
{
    /* UCX's events until there are none, but for a bounded time: under a
     * steady stream there is always one more, and an engine that calls
     * kvrt_xfer_progress between its own steps must get its core back. */
    unsigned n = 0, k;
    double until = base_now() + XT_PROGRESS_BUDGET_S;
    while ((k = ucp_worker_progress(t->worker)) != 0) {
        n += k;
        if (base_now() > until)
            break;
    }
    end_lingering(t);
    reap_eps(t);
    return n;
}

int xt_event_fd(const xt *t)
{
    return t->efd;
}

int xt_arm(xt *t)
{
    ucs_status_t st = ucp_worker_arm(t->worker);
    if (st == UCS_OK)
        return KVRT_OK;
    if (st == UCS_ERR_BUSY)
        return KVRT_XFER_PENDING;
    return ucx_fail(st, "ucp_worker_arm");
}

uint64_t xt_in_flight(const xt *t)
{
    uint64_t n = t->nreqs;
    for (const xt_ep *e = t->eps; e; e = e->next)
        n += e->closing;
    return n;
}

void xt_handler_cost(const xt *t, double *seconds, uint64_t *bytes)
{
    *seconds = t->handler_s;
    *bytes = t->handler_bytes;
}

/* ---- memory ------------------------------------------------------------------- */

int xt_mem_map(xt *t, void *addr, size_t len, xt_mem **out)
{
    xt_mem *m = calloc(1, sizeof(*m));
    if (!m)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory");
    ucp_mem_map_params_t mp;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = addr;
    mp.length = len;
    ucs_status_t st = ucp_mem_map(t->ctx, &mp, &m->h);
    if (st != UCS_OK) {
        free(m);
        return ucx_fail(st, "ucp_mem_map");
    }
    *out = m;
    return KVRT_OK;
}

void xt_mem_unmap(xt *t, xt_mem *m)
{
    if (!m)
        return;
    ucp_mem_unmap(t->ctx, m->h);
    free(m);
}

/* ---- listener ----------------------------------------------------------------- */

static void conn_handler(ucp_conn_request_h req, void *arg)
{
    xt *t = arg;
    xt_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        ucp_listener_reject(t->listener, req);
        return;
    }
    c->req = req;
    t->cb.conn(t->cb.arg, c);
}

int xt_listen(xt *t, const struct sockaddr *sa, socklen_t len, uint16_t *bound_port)
{
    ucp_listener_params_t lp;
    memset(&lp, 0, sizeof(lp));
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = sa;
    lp.sockaddr.addrlen = len;
    lp.conn_handler.cb = conn_handler;
    lp.conn_handler.arg = t;
    ucs_status_t st = ucp_listener_create(t->worker, &lp, &t->listener);
    if (st != UCS_OK) {
        t->listener = NULL;
        char name[128];
        xfer_inet_name(sa, true, name, sizeof(name));
        return BASE_FAIL(KVRT_ERR_DEVICE, "kvrt_xfer_listen: cannot listen on %s: %s", name, ucs_status_string(st));
    }
    if (bound_port) {
        ucp_listener_attr_t la;
        la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
        if ((st = ucp_listener_query(t->listener, &la)) != UCS_OK)
            return ucx_fail(st, "ucp_listener_query");
        const struct sockaddr *b = (const struct sockaddr *)&la.sockaddr;
        *bound_port = b->sa_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)(const void *)b)->sin6_port)
                                               : ntohs(((const struct sockaddr_in *)(const void *)b)->sin_port);
    }
    return KVRT_OK;
}

unsigned xt_tcp_families(const xt *t)
{
    return xfer_addr_tcp_families(&t->shape, (const uint8_t *)t->addr);
}

unsigned xt_peer_tcp_families(const xt *t, const void *worker_addr)
{
    return xfer_addr_tcp_families(&t->shape, worker_addr);
}

bool xt_listening(const xt *t)
{
    return t->listener != NULL;
}

bool xt_conn_client(const xt_conn *c, struct sockaddr_storage *out)
{
    ucp_conn_request_attr_t attr;
    attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (ucp_conn_request_query(c->req, &attr) != UCS_OK ||
        (attr.client_address.ss_family != AF_INET && attr.client_address.ss_family != AF_INET6))
        return false;
    memcpy(out, &attr.client_address, sizeof(*out));
    return true;
}

void xt_conn_reject(xt *t, xt_conn *c)
{
    if (t->listener)
        ucp_listener_reject(t->listener, c->req);
    free(c);
}

/* ---- endpoints ---------------------------------------------------------------- */

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    xt_ep *e = arg;
    (void)ep;
    if (e->linger_until && !e->closing)
        ep_close_now(e); /* the peer closed: what we sent was read */
    else if (!e->closing)
        e->t->cb.ep_error(e->t->cb.arg, e, e->user, ucs_status_string(status));
}

static xt_ep *ep_new(xt *t, void *user, ucp_ep_params_t *ep)
{
    xt_ep *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->t = t;
    e->user = user;
    memset(ep, 0, sizeof(*ep));
    ep->field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep->err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep->err_handler.cb = ep_error;
    ep->err_handler.arg = e;
    return e;
}

static int ep_finish(xt *t, xt_ep *e, ucs_status_t st, const char *what, xt_ep **out)
{
    if (st != UCS_OK) {
        free(e);
        return BASE_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s: %s", what, ucs_status_string(st));
    }
    e->next = t->eps;
    t->eps = e;
    *out = e;
    return KVRT_OK;
}

int xt_ep_accept(xt *t, xt_conn *c, void *user, xt_ep **out)
{
    ucp_ep_params_t ep;
    xt_ep *e = ep_new(t, user, &ep);
    if (!e) {
        xt_conn_reject(t, c);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for an endpoint");
    }
    ep.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
    ep.conn_request = c->req;
    free(c);
    ucs_status_t st = ucp_ep_create(t->worker, &ep, &e->ep);
    return ep_finish(t, e, st, "accepting a connection", out);
}

int xt_ep_connect(xt *t, const struct sockaddr *sa, socklen_t len, void *user, xt_ep **out)
{
    ucp_ep_params_t ep;
    xt_ep *e = ep_new(t, user, &ep);
    if (!e)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for an endpoint");
    ep.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.sockaddr.addr = sa;
    ep.sockaddr.addrlen = len;
    ucs_status_t st = ucp_ep_create(t->worker, &ep, &e->ep);
    return ep_finish(t, e, st, "connecting", out);
}

int xt_ep_to_address(xt *t, const uint8_t *addr, size_t len, void *user, xt_ep **out)
{
    char why[256];
    if (len == 0 || len > (1u << 20) || xfer_addr_check(&t->shape, addr, len, why, sizeof(why)) != 0) {
        if (len == 0 || len > (1u << 20))
            snprintf(why, sizeof(why), "%zu bytes long", len);
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: the peer's worker address is malformed: %s", why);
    }
    uint8_t *copy = calloc(1, len + XFER_ADDR_PAD);
    if (!copy)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for an address");
    memcpy(copy, addr, len);
    ucp_ep_params_t ep;
    xt_ep *e = ep_new(t, user, &ep);
    if (!e) {
        free(copy);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for an endpoint");
    }
    ep.field_mask |= UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = (const ucp_address_t *)copy;
    ucs_status_t st = ucp_ep_create(t->worker, &ep, &e->ep);
    free(copy);
    if (st != UCS_OK) {
        free(e);
        return BASE_FAIL(KVRT_ERR_DEVICE,
                         "kvrt-xfer: cannot reach the peer at its worker address: %s (peer error handling over "
                         "shared memory needs tcp too: UCX_TLS=sm,tcp)",
                         ucs_status_string(st));
    }
    return ep_finish(t, e, UCS_OK, "", out);
}

void xt_ep_set_user(xt_ep *ep, void *user)
{
    ep->user = user;
}

void xt_ep_close(xt *t, xt_ep *e)
{
    (void)t;
    if (!e || e->closing || e->linger_until)
        return;
    ep_close_now(e);
}

void xt_ep_linger(xt *t, xt_ep *e, double seconds)
{
    if (!e || e->closing || e->linger_until)
        return;
    e->user = NULL;
    e->linger_until = base_now() + (seconds > 0 ? seconds : 1e-9);
    t->lingering++;
}

/* ---- operations ---------------------------------------------------------------- */

static void op_params(ucp_request_param_t *prm, struct xt_req *r, xt_mem *mem)
{
    memset(prm, 0, sizeof(*prm));
    prm->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    prm->user_data = r;
    if (mem) {
        prm->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        prm->memh = mem->h;
    }
}

int xt_send(xt_ep *ep, unsigned id, const void *hdr, size_t hlen, const void *data, size_t len, unsigned flags,
            xt_mem *mem, xt_done done, void *user)
{
    xt *t = ep->t;
    if (ep->closing)
        return BASE_FAIL(KVRT_ERR_STATE, "kvrt-xfer: sending on a closed endpoint");
    if (hlen > MAX_HEADER)
        return BASE_FAIL(KVRT_ERR_INTERNAL, "kvrt-xfer: a %zu-byte message header (at most %d)", hlen, MAX_HEADER);
    struct xt_req *r = req_new(t, done, user);
    if (!r)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a message");
    if (hlen)
        memcpy(r->hdr, hdr, hlen);
    if ((flags & XT_COPY) && len) {
        if (!(r->copy = malloc(len))) {
            req_free(r);
            return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a %zu-byte message", len);
        }
        memcpy(r->copy, data, len);
        data = r->copy;
    }
    ucp_request_param_t prm;
    op_params(&prm, r, (flags & XT_COPY) ? NULL : mem);
    prm.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
    prm.cb.send = sent;
    prm.flags = ((flags & XT_RNDV) ? UCP_AM_SEND_FLAG_RNDV : 0) | ((flags & XT_EAGER) ? UCP_AM_SEND_FLAG_EAGER : 0) |
                ((flags & XT_REPLY) ? UCP_AM_SEND_FLAG_REPLY : 0);
    void *req = ucp_am_send_nbx(ep->ep, id, r->hdr, hlen, len ? data : NULL, len, &prm);
    if (UCS_PTR_IS_ERR(req)) {
        req_free(r);
        return ucx_fail(UCS_PTR_STATUS(req), "ucp_am_send_nbx");
    }
    if (req == NULL)
        sent(NULL, UCS_OK, r);
    return KVRT_OK;
}

int xt_flush(xt_ep *ep, xt_done done, void *user)
{
    struct xt_req *r = req_new(ep->t, done, user);
    if (!r)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory");
    ucp_request_param_t prm;
    op_params(&prm, r, NULL);
    prm.cb.send = flushed;
    void *req = ucp_ep_flush_nbx(ep->ep, &prm);
    if (UCS_PTR_IS_ERR(req)) {
        req_free(r);
        return ucx_fail(UCS_PTR_STATUS(req), "ucp_ep_flush_nbx");
    }
    if (req == NULL)
        flushed(NULL, UCS_OK, r);
    return KVRT_OK;
}

int xt_recv(xt *t, void *desc, void *dst, size_t len, xt_mem *mem, xt_done done, void *user)
{
    struct xt_req *r = req_new(t, done, user);
    if (!r)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a receive");
    ucp_request_param_t prm;
    op_params(&prm, r, mem);
    prm.cb.recv_am = received;
    void *req = ucp_am_recv_data_nbx(t->worker, desc, dst, len, &prm);
    if (UCS_PTR_IS_ERR(req)) {
        req_free(r);
        return ucx_fail(UCS_PTR_STATUS(req), "ucp_am_recv_data_nbx");
    }
    if (req == NULL)
        received(NULL, UCS_OK, len, r);
    return KVRT_OK;
}

void xt_release(xt *t, void *desc)
{
    ucp_am_data_release(t->worker, desc);
}

void xt_forget(xt *t, const void *user)
{
    for (struct xt_req *r = t->reqs; r; r = r->next)
        if (r->user == user)
            r->done = NULL;
}
