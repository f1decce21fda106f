/*
 * The raw UCP peer: its own context and worker, handlers for every id the
 * protocol uses, and the handshake done by hand with libkvrt-xfer's own
 * encoders (xfer/wire.h) and proofs (xfer/auth.h).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "raw_peer.h"
#include "tap.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static ucs_status_t on_msg(void *arg, const void *header, size_t hlen, void *data, size_t len,
                           const ucp_am_recv_param_t *param)
{
    struct raw_id *ia = arg;
    struct raw *r = ia->r;
    if (r->ngot == RAW_MAX_GOT)
        return UCS_OK;
    struct raw_got *g = &r->got[r->ngot++];
    memset(g, 0, sizeof(*g));
    g->id = ia->id;
    g->hlen = hlen < sizeof(g->hdr) ? hlen : sizeof(g->hdr);
    memcpy(g->hdr, header, g->hlen);
    g->len = len;
    g->rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    if (g->rndv) {
        g->desc = data;
        return UCS_INPROGRESS;
    }
    g->data = malloc(len + 1);
    if (g->data) {
        memcpy(g->data, data, len);
        g->data[len] = '\0';
    }
    return UCS_OK;
}

static void ep_err(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    struct raw *r = arg;
    (void)st;
    if (ep == r->conn)
        r->conn_failed = true;
    else
        r->data_failed = true;
}

bool raw_open(struct raw *r, const kvrt_placement *model)
{
    memset(r, 0, sizeof(*r));
    r->next_xid = 1;
    ucp_config_t *cfg;
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
        return tap_diag("raw peer: ucp_config_read failed"), false;
    ucp_params_t pp;
    memset(&pp, 0, sizeof(pp));
    pp.field_mask = UCP_PARAM_FIELD_FEATURES;
    pp.features = UCP_FEATURE_AM;
    ucs_status_t st = ucp_init(&pp, cfg, &r->ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK)
        return tap_diag("raw peer: ucp_init: %s", ucs_status_string(st)), false;
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof(wp));
    if ((st = ucp_worker_create(r->ctx, &wp, &r->w)) != UCS_OK)
        return tap_diag("raw peer: ucp_worker_create: %s", ucs_status_string(st)), false;
    ucp_address_t *addr;
    if (ucp_worker_get_address(r->w, &addr, &r->addr_len) != UCS_OK)
        return false;
    r->addr = (const uint8_t *)addr;
    for (unsigned id = 1; id < WIRE_NUM_IDS; id++) {
        r->ids[id] = (struct raw_id){r, id};
        ucp_am_handler_param_t hp;
        memset(&hp, 0, sizeof(hp));
        hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                        UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
        hp.id = id;
        hp.flags = UCP_AM_FLAG_WHOLE_MSG;
        hp.cb = on_msg;
        hp.arg = &r->ids[id];
        if (ucp_worker_set_am_recv_handler(r->w, &hp) != UCS_OK)
            return false;
    }
    if (xfer_desc_init(&r->desc, (kvrt_placement *)model, false) != KVRT_OK)
        return tap_diag("raw peer: %s", kvrt_error_message()), false;
    xfer_random(&r->id, sizeof(r->id));
    r->id |= 1;
    xfer_random(r->nonce, sizeof(r->nonce));
    return true;
}

static void close_ep(struct raw *r, ucp_ep_h *ep)
{
    if (!*ep)
        return;
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void *req = ucp_ep_close_nbx(*ep, &prm);
    double deadline = now() + 2;
    while (UCS_PTR_IS_PTR(req) && ucp_request_check_status(req) == UCS_INPROGRESS && now() < deadline)
        ucp_worker_progress(r->w);
    if (UCS_PTR_IS_PTR(req))
        ucp_request_free(req);
    *ep = NULL;
}

void raw_drop_eps(struct raw *r)
{
    close_ep(r, &r->data);
    close_ep(r, &r->conn);
    r->conn_failed = r->data_failed = false;
}

void raw_forget(struct raw *r)
{
    for (size_t i = 0; i < r->ngot; i++) {
        if (r->got[i].desc)
            ucp_am_data_release(r->w, r->got[i].desc);
        free(r->got[i].data);
    }
    r->ngot = 0;
    free(r->hello);
    free(r->reply);
    r->hello = r->reply = NULL;
    if (r->have_server)
        xfer_md_free(&r->server);
    r->have_server = false;
}

void raw_close(struct raw *r)
{
    raw_drop_eps(r);
    raw_forget(r);
    xfer_desc_free(&r->desc);
    xfer_key_free(&r->key);
    if (r->addr)
        ucp_worker_release_address(r->w, (ucp_address_t *)r->addr);
    if (r->w)
        ucp_worker_destroy(r->w);
    if (r->ctx)
        ucp_cleanup(r->ctx);
    memset(r, 0, sizeof(*r));
}

void raw_pump(struct raw *r, double seconds, bool (*until)(struct raw *, void *), void *ctx)
{
    double deadline = now() + seconds;
    do {
        ucp_worker_progress(r->w);
        for (int i = 0; i < r->nagents; i++)
            kvrt_xfer_progress(r->agents[i]);
        if (until && until(r, ctx))
            return;
    } while (now() < deadline);
}

struct wanted {
    unsigned id;
    struct raw_got *found;
};

static bool have(struct raw *r, void *ctx)
{
    struct wanted *w = ctx;
    for (size_t i = 0; i < r->ngot; i++)
        if (r->got[i].id == w->id) {
            w->found = &r->got[i];
            return true;
        }
    return false;
}

struct raw_got *raw_wait(struct raw *r, unsigned id, double seconds)
{
    struct wanted w = {id, NULL};
    raw_pump(r, seconds, have, &w);
    return w.found;
}

uint8_t *raw_blob(struct raw *r, const uint8_t *addr, size_t addr_len, size_t *len)
{
    struct xfer_md_fields f;
    memset(&f, 0, sizeof(f));
    f.addressable = true;
    f.agent_id = r->id;
    f.chunk_bytes = 64 << 10;
    memcpy(f.nonce, r->nonce, sizeof(f.nonce));
    f.worker_addr = addr ? addr : r->addr;
    f.worker_addr_len = (uint32_t)(addr ? addr_len : r->addr_len);
    uint8_t *blob = NULL;
    size_t at = 0;
    bool sign = xfer_key_set(&r->key);
    if (xfer_md_write(&r->desc, &f, sign, &blob, len, &at) != KVRT_OK)
        return NULL;
    if (sign)
        xfer_sign_blob(&r->key, blob, at, blob + at);
    return blob;
}

bool raw_connect(struct raw *r, uint16_t port)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(0x7f000001);
    ucp_ep_params_t ep;
    memset(&ep, 0, sizeof(ep));
    ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep.sockaddr.addr = (const struct sockaddr *)&sa;
    ep.sockaddr.addrlen = sizeof(sa);
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = ep_err;
    ep.err_handler.arg = r;
    r->conn_failed = false;
    return ucp_ep_create(r->w, &ep, &r->conn) == UCS_OK;
}

bool raw_connect_data(struct raw *r, const uint8_t *addr, size_t len)
{
    uint8_t *copy = calloc(1, len + 256);
    if (!copy)
        return false;
    memcpy(copy, addr, len);
    ucp_ep_params_t ep;
    memset(&ep, 0, sizeof(ep));
    ep.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = (const ucp_address_t *)copy;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = ep_err;
    ep.err_handler.arg = r;
    r->data_failed = false;
    bool ok = ucp_ep_create(r->w, &ep, &r->data) == UCS_OK;
    free(copy);
    return ok;
}

bool raw_send(struct raw *r, ucp_ep_h ep, unsigned id, const void *hdr, size_t hlen, const void *data, size_t len,
              bool rndv)
{
    if (!ep)
        return false;
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = (rndv ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER) | UCP_AM_SEND_FLAG_REPLY;
    void *req = ucp_am_send_nbx(ep, id, hdr, hlen, data, len, &prm);
    if (UCS_PTR_IS_ERR(req))
        return false;
    double deadline = now() + 5;
    ucs_status_t st = UCS_OK;
    while (UCS_PTR_IS_PTR(req) && (st = ucp_request_check_status(req)) == UCS_INPROGRESS && now() < deadline) {
        ucp_worker_progress(r->w);
        for (int i = 0; i < r->nagents; i++)
            kvrt_xfer_progress(r->agents[i]);
    }
    if (UCS_PTR_IS_PTR(req)) {
        st = ucp_request_check_status(req);
        ucp_request_free(req);
    }
    return st == UCS_OK;
}

static void transcript(const struct raw *r, struct xfer_transcript *t)
{
    t->client_nonce = r->nonce;
    t->server_nonce = r->server_nonce;
    t->hello = r->hello;
    t->hello_len = r->hello_len;
    t->reply = r->reply;
    t->reply_len = r->reply_len;
}

bool raw_hello(struct raw *r, uint16_t port, const uint8_t *addr, size_t addr_len)
{
    raw_forget(r);
    if (!raw_connect(r, port))
        return false;
    xfer_random(r->nonce, sizeof(r->nonce));
    r->hello = raw_blob(r, addr, addr_len, &r->hello_len);
    if (!r->hello)
        return false;
    struct wire_hello h;
    memset(&h, 0, sizeof(h));
    h.magic = WIRE_MAGIC;
    h.protocol = WIRE_PROTOCOL;
    h.flags = xfer_key_set(&r->key) ? WIRE_KEYED : 0;
    memcpy(h.nonce, r->nonce, sizeof(h.nonce));
    return raw_send(r, r->conn, WIRE_HELLO, &h, sizeof(h), r->hello, r->hello_len, false);
}

int raw_read_reply(struct raw *r, char *why, size_t n)
{
    struct raw_got *g = raw_wait(r, WIRE_REPLY, 10);
    if (!g) {
        snprintf(why, n, "no REPLY");
        return KVRT_ERR_DEVICE;
    }
    struct wire_reply rep;
    memcpy(&rep, g->hdr, sizeof(rep));
    if (rep.status != KVRT_OK) {
        snprintf(why, n, "%.*s", (int)g->len, g->data ? (const char *)g->data : "");
        return rep.status;
    }
    memcpy(r->server_nonce, rep.nonce, sizeof(rep.nonce));
    r->reply = malloc(g->len);
    memcpy(r->reply, g->data, g->len);
    r->reply_len = g->len;
    if (xfer_md_parse(r->reply, r->reply_len, &r->server) != KVRT_OK) {
        snprintf(why, n, "the server's metadata: %s", kvrt_error_message());
        return KVRT_ERR_INVALID;
    }
    r->have_server = true;
    struct xfer_transcript t;
    transcript(r, &t);
    uint8_t want[XFER_MAC_BYTES];
    xfer_prove_server(&r->key, &t, want);
    if (memcmp(want, rep.mac, sizeof(want)) != 0) {
        snprintf(why, n, "the server's proof does not verify");
        return KVRT_ERR_REFUSED;
    }
    return KVRT_OK;
}

bool raw_proof(struct raw *r)
{
    struct xfer_transcript t;
    transcript(r, &t);
    struct wire_proof p;
    xfer_prove_client(&r->key, &t, p.mac);
    return raw_send(r, r->conn, WIRE_PROOF, &p, sizeof(p), NULL, 0, false);
}

int raw_read_accept(struct raw *r, char *why, size_t n)
{
    struct raw_got *g = raw_wait(r, WIRE_ACCEPT, 10);
    if (!g) {
        snprintf(why, n, "no ACCEPT");
        return KVRT_ERR_DEVICE;
    }
    struct wire_accept a;
    memcpy(&a, g->hdr, sizeof(a));
    if (a.status != KVRT_OK) {
        snprintf(why, n, "%.*s", (int)g->len, g->data ? (const char *)g->data : "");
        return a.status;
    }
    struct xfer_transcript t;
    transcript(r, &t);
    r->me.from = r->id;
    xfer_session_token(&r->key, &t, r->me.token);
    return KVRT_OK;
}

bool raw_ready(struct raw *r)
{
    if (!r->have_server || !raw_connect_data(r, r->server.f.worker_addr, r->server.f.worker_addr_len))
        return false;
    struct wire_hdr h = raw_hdr(r, 0);
    return raw_send(r, r->data, WIRE_READY, &h, sizeof(h), NULL, 0, false);
}

int raw_handshake(struct raw *r, uint16_t port, const uint8_t *addr, size_t addr_len, char *why, size_t n)
{
    snprintf(why, n, "%s", "");
    if (!raw_hello(r, port, addr, addr_len)) {
        snprintf(why, n, "HELLO could not be sent");
        return KVRT_ERR_DEVICE;
    }
    int rc = raw_read_reply(r, why, n);
    if (rc != KVRT_OK)
        return rc;
    if (!raw_proof(r)) {
        snprintf(why, n, "PROOF could not be sent");
        return KVRT_ERR_DEVICE;
    }
    rc = raw_read_accept(r, why, n);
    if (rc != KVRT_OK)
        return rc;
    if (!raw_ready(r)) {
        snprintf(why, n, "READY could not be sent");
        return KVRT_ERR_DEVICE;
    }
    r->next_xid = 1;
    return KVRT_OK;
}

struct wire_hdr raw_hdr(const struct raw *r, uint64_t xid)
{
    return wire_hdr_make(&r->me, xid);
}

bool raw_session_send(struct raw *r, unsigned id, void *hdr, size_t hlen, const void *data, size_t len, bool rndv)
{
    return raw_send(r, r->data, id, hdr, hlen, data, len, rndv);
}

static void taken(void *req, ucs_status_t st, size_t len, void *user)
{
    (void)req;
    (void)len;
    *(ucs_status_t *)user = st;
}

bool raw_take_data(struct raw *r, struct raw_got *g, void *buf, size_t len)
{
    if (!g->desc)
        return false;
    ucs_status_t done = UCS_INPROGRESS;
    ucp_request_param_t prm;
    memset(&prm, 0, sizeof(prm));
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    prm.cb.recv_am = taken;
    prm.user_data = &done;
    void *req = ucp_am_recv_data_nbx(r->w, g->desc, buf, len, &prm);
    g->desc = NULL;
    if (UCS_PTR_IS_ERR(req))
        return false;
    if (req == NULL)
        return true;
    double deadline = now() + 5;
    while (done == UCS_INPROGRESS && now() < deadline) {
        ucp_worker_progress(r->w);
        for (int i = 0; i < r->nagents; i++)
            kvrt_xfer_progress(r->agents[i]);
    }
    ucp_request_free(req);
    return done == UCS_OK;
}
