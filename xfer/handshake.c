/*
 * The handshake of a connection (docs/xfer.md, "The handshake"), both
 * sides, driven by the agent's progress (connect.c makes the calls that
 * wait for it).  It runs on the client-server endpoint (tcp in UCX 1.13):
 *
 *   client -> HELLO   nonce, its metadata
 *   server -> REPLY   nonce, its proof of the key, its metadata (or why not)
 *   client -> PROOF   its proof of the key
 *   server -> ACCEPT  (or why not); the server opens its data endpoint
 *   client -> READY   on its own data endpoint, once wired up
 *
 * Both proofs are HMACs over both nonces and both metadata blobs, and the
 * session token both sides then write in every header is derived the same
 * way, so it never crosses the wire.  Nobody's worker address reaches UCX
 * before its owner proved the key (with a key set).  A server runs every
 * pending handshake at once, each with its own deadline, so a peer that
 * stalls or vanishes holds only itself up.
 *
 * Layer 6 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "agent.h"

/* This agent's metadata as it goes to a peer (signed with its key, when it
 * has one). */
int xfer_agent_blob(kvrt_xfer_agent *a, uint8_t **blob, size_t *len)
{
    struct xfer_md_fields f;
    memset(&f, 0, sizeof(f));
    f.addressable = a->local.addr != NULL;
    f.agent_id = a->id;
    f.chunk_bytes = a->pool.chunk;
    memcpy(f.nonce, a->nonce, sizeof(f.nonce));
    size_t alen;
    xt_worker_address(a->t, &f.worker_addr, &alen);
    f.worker_addr_len = (uint32_t)alen;
    bool sign = xfer_key_set(&a->key);
    size_t at = 0;
    int rc = xfer_md_write(&a->local.desc, &f, sign, blob, len, &at);
    if (rc == KVRT_OK && sign)
        xfer_sign_blob(&a->key, *blob, at, *blob + at);
    return rc;
}

/* Handshakes under way at once, in all and from one address. */
enum { MAX_HANDSHAKES = 32, MAX_FROM_ONE = 8 };

/* ---- the server's side -------------------------------------------------------- */

static bool in_handshake(const kvrt_xfer_peer *p)
{
    return p->hs >= XFER_HS_WAIT_HELLO && p->hs <= XFER_HS_WAIT_READY;
}

static bool allowed(const kvrt_xfer_agent *a, const struct xfer_inet *from)
{
    if (!a->num_allow)
        return true;
    for (size_t i = 0; i < a->num_allow; i++)
        if (xfer_inet_in(from, &a->allow[i]))
            return true;
    return false;
}

void xfer_hs_on_conn(kvrt_xfer_agent *a, xt_conn *c)
{
    struct sockaddr_storage sa;
    struct xfer_inet from;
    bool known = xt_conn_client(c, &sa) && xfer_inet_of((const struct sockaddr *)&sa, &from);
    char name[96] = "an unknown address";
    if (known)
        xfer_inet_name((const struct sockaddr *)&sa, true, name, sizeof(name));
    unsigned all = 0, same = 0;
    for (const kvrt_xfer_peer *p = a->peers; p; p = p->next)
        if (in_handshake(p) || (p->hs == XFER_HS_FAILED && !p->handed_out)) {
            all++;
            same += known && p->from_known && memcmp(&p->from, &from, sizeof(from)) == 0;
        }
    const char *why = NULL;
    uint64_t *reason = &a->stats.refused_allow;
    if (!known && a->num_allow)
        why = "its address is unknown and an allow list is set";
    else if (known && !allowed(a, &from))
        why = "it is not in the allow list";
    else if (all >= MAX_HANDSHAKES || same >= MAX_FROM_ONE) {
        why = "too many handshakes are under way";
        reason = &a->stats.refused_busy;
    } else if (known && sa.ss_family == AF_INET6 && (xt_tcp_families(a->t) & XFER_ADDR_INET)) {
        /* UCX 1.13 would write its IPv6 address past the end of an IPv4
         * interface's endpoint (connect.c, check_family). */
        why = "it connects over IPv6 and this agent's UCX tcp interfaces include IPv4 ones (UCX 1.13 carries an "
              "IPv6 connection only on IPv6 interfaces: UCX_TCP_AF_PRIO=inet6)";
        reason = &a->stats.refused_other;
    }
    if (why) {
        a->stats.refused++;
        (*reason)++;
        base_log(&a->log, "kvrt-xfer", KVRT_LOG_WARNING, "refused a connection from %s: %s", name, why);
        xt_conn_reject(a->t, c);
        return;
    }
    kvrt_xfer_peer *p = NULL;
    if (xfer_peer_new(a, &p) != KVRT_OK) {
        xt_conn_reject(a->t, c);
        return;
    }
    if (known) {
        snprintf(p->link.name, sizeof(p->link.name), "%s", name);
        p->from_known = true;
        p->from = from;
    }
    p->hs = XFER_HS_WAIT_HELLO;
    p->hs_deadline = base_now() + a->timeout_s;
    if (xt_ep_accept(a->t, c, p, &p->conn_ep) != KVRT_OK) {
        p->conn_ep = NULL;
        p->hs = XFER_HS_FAILED;
        p->hs_status = KVRT_ERR_DEVICE;
        snprintf(p->hs_why, sizeof(p->hs_why), "kvrt_xfer_accept: %s", kvrt_error_message());
    }
}

/*
 * The session's data endpoint.  With a key, one to the peer's worker
 * address, on which UCX may pick shared memory: the peer has proven the
 * key by now.  Without one, the connection endpoint carries everything, and
 * no address a peer sent ever reaches UCX: UCX 1.13 trusts what a worker
 * address says (an address that disagrees with what its worker then
 * announces aborts the process in UCX's wire-up, "endpoint reconfiguration
 * not supported yet"), so one from a peer that proved nothing is not used.
 */
static int xfer_hs_data_endpoint(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
{
    if (xfer_key_set(&a->key))
        return xfer_link_open(&p->link, p->md.f.worker_addr, p->md.f.worker_addr_len, p);
    p->link.ep = p->conn_ep;
    p->link.wired = true;
    return KVRT_OK;
}

void xfer_hs_fail(kvrt_xfer_peer *p, int status, const char *fmt, ...)
{
    if (p->hs == XFER_HS_FAILED || p->hs == XFER_HS_DONE)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->hs_why, sizeof(p->hs_why), fmt, ap);
    va_end(ap);
    p->hs_status = status;
    p->hs = XFER_HS_FAILED;
}

/* The server refuses, telling the client why, with `id` (REPLY or ACCEPT);
 * counted under `reason` (one of the agent's refused_* counts) too. */
static void refuse(kvrt_xfer_agent *a, kvrt_xfer_peer *p, unsigned id, int status, const char *why, uint64_t *reason)
{
    (*reason)++;
    size_t n = xfer_reason_len(why);
    if (p->conn_ep) {
        if (id == WIRE_REPLY) {
            struct wire_reply r;
            memset(&r, 0, sizeof(r));
            r.status = status;
            r.protocol = WIRE_PROTOCOL;
            xt_send(p->conn_ep, WIRE_REPLY, &r, sizeof(r), why, n, XT_EAGER | XT_REPLY | XT_COPY, NULL, NULL, NULL);
        } else {
            struct wire_accept r = {status, 0};
            xt_send(p->conn_ep, WIRE_ACCEPT, &r, sizeof(r), why, n, XT_EAGER | XT_REPLY | XT_COPY, NULL, NULL, NULL);
        }
    }
    a->stats.refused++;
    p->told = p->conn_ep != NULL;
    xfer_hs_fail(p, status, "kvrt_xfer_accept: refused %s: %s", p->link.name, why);
}

static void transcript(const kvrt_xfer_peer *p, bool server, struct xfer_transcript *t)
{
    t->client_nonce = server ? p->nonce_theirs : p->nonce_mine;
    t->server_nonce = server ? p->nonce_mine : p->nonce_theirs;
    t->hello = p->hello;
    t->hello_len = p->hello_len;
    t->reply = p->reply;
    t->reply_len = p->reply_len;
}

static uint8_t *copy_of(const void *data, size_t len)
{
    uint8_t *c = malloc(len ? len : 1);
    if (c && len)
        memcpy(c, data, len);
    return c;
}

static void on_hello(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct xt_msg *m)
{
    struct wire_hello h;
    char why[512];
    if (!wire_decode_hello(m->hdr, m->hlen, m->len, m->rndv, &h, why, sizeof(why))) {
        refuse(a, p, WIRE_REPLY, KVRT_ERR_INVALID, why, &a->stats.refused_malformed);
        return;
    }
    bool keyed = xfer_key_set(&a->key);
    if (keyed && !(h.flags & WIRE_KEYED)) {
        refuse(a, p, WIRE_REPLY, KVRT_ERR_REFUSED,
               "this agent requires a key and the peer has none (key_file in kvrt_xfer_agent_options or "
               "KVRT_XFER_KEY_FILE)",
               &a->stats.refused_auth);
        return;
    }
    if (!keyed && (h.flags & WIRE_KEYED)) {
        refuse(a, p, WIRE_REPLY, KVRT_ERR_REFUSED,
               "the peer holds a key and this agent has none; give both the same key file", &a->stats.refused_auth);
        return;
    }
    memcpy(p->nonce_theirs, h.nonce, XFER_NONCE_BYTES);
    p->hello = copy_of(m->data, m->len);
    p->blob = copy_of(m->data, m->len);
    if (!p->hello || !p->blob) {
        refuse(a, p, WIRE_REPLY, KVRT_ERR_NOMEM, "out of memory for the peer's metadata", &a->stats.refused_other);
        return;
    }
    p->hello_len = p->blob_len = m->len;
    int rc = xfer_peer_take_blob(a, p);
    if (rc != KVRT_OK) {
        snprintf(why, sizeof(why), "%s", kvrt_error_message());
        refuse(a, p, WIRE_REPLY, rc, why, rc == KVRT_ERR_REFUSED ? &a->stats.refused_auth : &a->stats.refused_metadata);
        return;
    }
    uint8_t *mine = NULL;
    size_t len = 0;
    if (xfer_agent_blob(a, &mine, &len) != KVRT_OK) {
        snprintf(why, sizeof(why), "%s", kvrt_error_message());
        refuse(a, p, WIRE_REPLY, KVRT_ERR_NOMEM, why, &a->stats.refused_other);
        return;
    }
    p->reply = mine;
    p->reply_len = len;
    xfer_random(p->nonce_mine, XFER_NONCE_BYTES);
    struct wire_reply r;
    memset(&r, 0, sizeof(r));
    r.status = KVRT_OK;
    r.protocol = WIRE_PROTOCOL;
    r.flags = keyed ? WIRE_KEYED : 0;
    memcpy(r.nonce, p->nonce_mine, XFER_NONCE_BYTES);
    struct xfer_transcript t;
    transcript(p, true, &t);
    xfer_prove_server(&a->key, &t, r.mac);
    if (xt_send(p->conn_ep, WIRE_REPLY, &r, sizeof(r), mine, len, XT_EAGER | XT_REPLY | XT_COPY, NULL, NULL, NULL) !=
        KVRT_OK) {
        xfer_hs_fail(p, KVRT_ERR_DEVICE, "kvrt_xfer_accept: answering %s: %s", p->link.name, kvrt_error_message());
        return;
    }
    p->hs = XFER_HS_WAIT_PROOF;
}

static void on_proof(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct xt_msg *m)
{
    struct wire_proof pr;
    char why[600];
    if (!wire_decode_proof(m->hdr, m->hlen, m->len, m->rndv, &pr, why, sizeof(why))) {
        refuse(a, p, WIRE_ACCEPT, KVRT_ERR_INVALID, why, &a->stats.refused_malformed);
        return;
    }
    struct xfer_transcript t;
    transcript(p, true, &t);
    uint8_t want[XFER_MAC_BYTES], token[XFER_TOKEN_BYTES];
    xfer_prove_client(&a->key, &t, want);
    if (!xfer_same(want, pr.mac, sizeof(want))) {
        refuse(a, p, WIRE_ACCEPT, KVRT_ERR_REFUSED,
               xfer_key_set(&a->key) ? "the peer did not prove it holds this agent's key"
                                     : "the peer's proof does not match the handshake",
               &a->stats.refused_auth);
        return;
    }
    xfer_session_token(&a->key, &t, token);
    if (xfer_hs_data_endpoint(a, p) != KVRT_OK || xfer_peer_session(a, p, token, true) != KVRT_OK) {
        snprintf(why, sizeof(why), "%s", kvrt_error_message());
        refuse(a, p, WIRE_ACCEPT, KVRT_ERR_INVALID, why, &a->stats.refused_other);
        return;
    }
    struct wire_accept ok = {KVRT_OK, 0};
    if (xt_send(p->conn_ep, WIRE_ACCEPT, &ok, sizeof(ok), NULL, 0, XT_EAGER | XT_REPLY, NULL, NULL, NULL) != KVRT_OK) {
        xfer_hs_fail(p, KVRT_ERR_DEVICE, "kvrt_xfer_accept: answering %s: %s", p->link.name, kvrt_error_message());
        return;
    }
    p->hs = XFER_HS_WAIT_READY;
}

void xfer_hs_on_ready(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
{
    (void)a;
    if (p->hs == XFER_HS_WAIT_READY)
        p->hs = XFER_HS_DONE;
    xfer_link_cma_offer(&p->link);
}

/* ---- the client's side -------------------------------------------------------- */

/* A server's answer (REPLY or ACCEPT) that failed to decode, or that says
 * the server refused: the handshake fails, with the server's reason
 * (bounded).  True when it did. */
static bool answer_failed(kvrt_xfer_peer *p, bool decoded, const char *why, int status, const struct xt_msg *m)
{
    if (!decoded) {
        xfer_hs_fail(p, KVRT_ERR_INVALID, "kvrt_xfer_connect: %s %s", p->link.name, why);
        return true;
    }
    if (status != KVRT_OK) {
        int n = m->len > XFER_MAX_REASON ? (int)XFER_MAX_REASON : (int)m->len;
        xfer_hs_fail(p, status, "kvrt_xfer_connect: %s refused: %.*s", p->link.name, n, (const char *)m->data);
        return true;
    }
    return false;
}

static void on_reply(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct xt_msg *m)
{
    struct wire_reply r;
    char why[600];
    bool decoded = wire_decode_reply(m->hdr, m->hlen, m->len, m->rndv, &r, why, sizeof(why));
    if (answer_failed(p, decoded, why, decoded ? r.status : KVRT_OK, m))
        return;
    bool keyed = xfer_key_set(&a->key);
    if (keyed != ((r.flags & WIRE_KEYED) != 0)) {
        xfer_hs_fail(p, KVRT_ERR_REFUSED, "kvrt_xfer_connect: %s %s", p->link.name,
                     keyed ? "holds no key and this agent does: refusing to trust it"
                           : "holds a key and this agent has none; give both the same key file");
        return;
    }
    memcpy(p->nonce_theirs, r.nonce, XFER_NONCE_BYTES);
    p->reply = copy_of(m->data, m->len);
    p->blob = copy_of(m->data, m->len);
    if (!p->reply || !p->blob) {
        xfer_hs_fail(p, KVRT_ERR_NOMEM, "kvrt_xfer_connect: out of memory");
        return;
    }
    p->reply_len = p->blob_len = m->len;
    struct xfer_transcript t;
    transcript(p, false, &t);
    uint8_t want[XFER_MAC_BYTES];
    xfer_prove_server(&a->key, &t, want);
    if (!xfer_same(want, r.mac, sizeof(want))) {
        xfer_hs_fail(p, KVRT_ERR_REFUSED, "kvrt_xfer_connect: %s did not prove it holds %s", p->link.name,
                     keyed ? "this agent's key" : "the handshake");
        return;
    }
    int rc = xfer_peer_take_blob(a, p);
    if (rc != KVRT_OK) {
        xfer_hs_fail(p, rc, "kvrt_xfer_connect: %s", kvrt_error_message());
        return;
    }
    struct wire_proof pr;
    xfer_prove_client(&a->key, &t, pr.mac);
    if (xt_send(p->conn_ep, WIRE_PROOF, &pr, sizeof(pr), NULL, 0, XT_EAGER | XT_REPLY, NULL, NULL, NULL) != KVRT_OK) {
        xfer_hs_fail(p, KVRT_ERR_DEVICE, "kvrt_xfer_connect: %s", kvrt_error_message());
        return;
    }
    p->hs = XFER_HS_WAIT_ACCEPT;
}

static void ready_sent(void *user, int status, size_t len, const char *why)
{
    kvrt_xfer_peer *p = user;
    (void)len;
    if (status == KVRT_OK)
        p->hs = XFER_HS_DONE;
    else
        xfer_hs_fail(p, KVRT_ERR_DEVICE, "kvrt_xfer_connect: announcing the data endpoint to %s: %s", p->link.name,
                     why);
}

static void on_accept(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct xt_msg *m)
{
    struct wire_accept r;
    char why[600];
    bool decoded = wire_decode_accept(m->hdr, m->hlen, m->len, m->rndv, &r, why, sizeof(why));
    if (answer_failed(p, decoded, why, decoded ? r.status : KVRT_OK, m))
        return;
    struct xfer_transcript t;
    transcript(p, false, &t);
    uint8_t token[XFER_TOKEN_BYTES];
    xfer_session_token(&a->key, &t, token);
    if (xfer_hs_data_endpoint(a, p) != KVRT_OK || xfer_peer_session(a, p, token, false) != KVRT_OK) {
        xfer_hs_fail(p, KVRT_ERR_INVALID, "kvrt_xfer_connect: %s", kvrt_error_message());
        return;
    }
    p->hs = XFER_HS_WAIT_SENT;
}

void xfer_hs_on_message(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct xt_msg *m)
{
    static const enum xfer_hs expect[WIRE_ACCEPT + 1] = {
        [WIRE_HELLO] = XFER_HS_WAIT_HELLO,
        [WIRE_REPLY] = XFER_HS_WAIT_REPLY,
        [WIRE_PROOF] = XFER_HS_WAIT_PROOF,
        [WIRE_ACCEPT] = XFER_HS_WAIT_ACCEPT,
    };
    if (p->hs != expect[m->id]) {
        /* Out of turn: a peer that is done with its handshake, or one that
         * skips a step, is not to be trusted with the rest. */
        char why[200];
        snprintf(why, sizeof(why), "sent %s out of turn in its handshake", wire_name(m->id));
        if (p->hs == XFER_HS_DONE || p->hs == XFER_HS_NONE)
            xfer_link_violation(&p->link, why);
        else if (p->hs == XFER_HS_WAIT_HELLO || p->hs == XFER_HS_WAIT_PROOF)
            refuse(a, p, p->hs == XFER_HS_WAIT_HELLO ? WIRE_REPLY : WIRE_ACCEPT, KVRT_ERR_INVALID, why,
                   &a->stats.refused_malformed);
        else
            xfer_hs_fail(p, KVRT_ERR_INVALID, "kvrt-xfer: %s %s", p->link.name, why);
        return;
    }
    switch (m->id) {
    case WIRE_HELLO: on_hello(a, p, m); break;
    case WIRE_REPLY: on_reply(a, p, m); break;
    case WIRE_PROOF: on_proof(a, p, m); break;
    default: on_accept(a, p, m); break;
    }
}

void xfer_hs_check(kvrt_xfer_agent *a, double now)
{
    for (kvrt_xfer_peer *p = a->peers; p; p = p->next) {
        if (p->hs == XFER_HS_NONE || p->hs == XFER_HS_DONE || p->hs == XFER_HS_FAILED)
            continue;
        if (p->link.state != KVRT_XFER_PEER_CONNECTED) {
            xfer_hs_fail(p, KVRT_ERR_DEVICE, "kvrt-xfer: %s went away during the handshake (%s)", p->link.name,
                         p->link.why[0] ? p->link.why : "it closed");
        } else if (now > p->hs_deadline) {
            xfer_hs_fail(p, KVRT_ERR_DEVICE, "kvrt-xfer: %s did not complete the handshake within %g s", p->link.name,
                         a->timeout_s);
        } else if (p->hs == XFER_HS_WAIT_SENT && p->link.wired && !p->ready_posted) {
            /* Sent, not queued: the server waits for it even if this agent
             * is not progressed again for a while. */
            struct wire_hdr h = wire_hdr_make(&p->link.me, 0);
            p->ready_posted = true;
            if (xt_send(p->link.ep, WIRE_READY, &h, sizeof(h), NULL, 0, XT_EAGER, NULL, ready_sent, p) != KVRT_OK)
                xfer_hs_fail(p, KVRT_ERR_DEVICE, "kvrt_xfer_connect: %s", kvrt_error_message());
            else
                xfer_link_cma_offer(&p->link); /* after READY, on the same endpoint */
        }
    }
}
