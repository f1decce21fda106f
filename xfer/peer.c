/*
 * Peers: one per remote agent, from loaded metadata or a connection; its
 * link (the data endpoint), its metadata, its session with the wire, and
 * what its failure does: every transfer with it fails, naming it, and its
 * endpoints are closed by force so that no UCX request keeps a buffer busy.
 *
 * Layer 6 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "agent.h"

/* What this agent gives its peers by reference (docs/security.md, "Peers
 * on the same host"): its cache's host bytes, its send slots (the first
 * half of the pool) and their seals; nothing else of this process. */
static void ref_ranges(const kvrt_xfer_agent *a, struct xfer_offer *o)
{
    uint32_t n = 0;
    if (a->local.addr && a->local.desc.bytes)
        o->ranges[n++] =
            (struct xfer_range){(uint64_t)(uintptr_t)a->local.addr, a->local.desc.bytes, XFER_RANGE_CACHE, 0};
    if (a->pool.host && a->pool.half) {
        o->ranges[n++] = (struct xfer_range){(uint64_t)(uintptr_t)a->pool.host, (uint64_t)a->pool.half * a->pool.chunk,
                                             XFER_RANGE_STAGING, 0};
        o->ranges[n++] = (struct xfer_range){(uint64_t)(uintptr_t)a->pool.seals,
                                             (uint64_t)a->pool.half * sizeof(uint64_t), XFER_RANGE_SEALS, 0};
    }
    o->nranges = n;
}

int xfer_peer_new(kvrt_xfer_agent *a, kvrt_xfer_peer **out)
{
    kvrt_xfer_peer *p = calloc(1, sizeof(*p));
    if (!p)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a peer");
    p->agent = a;
    xfer_link_init(&p->link, a->t, &a->log, &a->stats.violations);
    p->link.cma_allowed = a->cma_allowed;
    ref_ranges(a, &p->link.offer);
    snprintf(p->link.name, sizeof(p->link.name), "peer %llu", ULL(++a->peer_count));
    p->next = a->peers;
    a->peers = p;
    *out = p;
    return KVRT_OK;
}

kvrt_xfer_peer *xfer_peer_of_conn(kvrt_xfer_agent *a, const xt_ep *ep)
{
    for (kvrt_xfer_peer *p = a->peers; p; p = p->next)
        if (p->conn_ep && p->conn_ep == ep)
            return p;
    return NULL;
}

/* Signed with this agent's key, or unsigned when it has none. */
static int check_signature(kvrt_xfer_agent *a, const struct xfer_md *md, const uint8_t *blob)
{
    bool keyed = xfer_key_set(&a->key);
    if (keyed && !md->is_signed)
        return BASE_FAIL(KVRT_ERR_REFUSED,
                         "kvrt-xfer: the peer's metadata is not signed; this agent holds a key (%s) and takes "
                         "metadata only from agents that hold it too",
                         a->key.path);
    if (!keyed && md->is_signed)
        return BASE_FAIL(KVRT_ERR_REFUSED,
                         "kvrt-xfer: the peer's metadata is signed with a key and this agent has none; give it the "
                         "same key file (key_file in kvrt_xfer_agent_options, or KVRT_XFER_KEY_FILE)");
    if (keyed) {
        uint8_t mac[XFER_MAC_BYTES];
        xfer_sign_blob(&a->key, blob, md->signed_len, mac);
        if (!xfer_same(mac, md->mac, sizeof(mac)))
            return BASE_FAIL(KVRT_ERR_REFUSED,
                             "kvrt-xfer: the peer's metadata is not signed with this agent's key (%s): another key, "
                             "or the blob was altered",
                             a->key.path);
    }
    return KVRT_OK;
}

int xfer_peer_take_blob(kvrt_xfer_agent *a, kvrt_xfer_peer *p)
{
    struct xfer_md md;
    int rc = xfer_md_parse(p->blob, p->blob_len, &md);
    if (rc != KVRT_OK)
        return rc;
    rc = check_signature(a, &md, p->blob);
    if (rc == KVRT_OK)
        rc = xfer_desc_compatible(&a->local.desc, &md.cache);
    if (rc == KVRT_OK && md.f.agent_id == a->id)
        rc = BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: the peer's metadata is this agent's own");
    if (rc == KVRT_OK) {
        for (kvrt_xfer_peer *q = a->peers; q; q = q->next)
            if (q != p && q->loaded && q->md.f.agent_id == md.f.agent_id && q->link.state == KVRT_XFER_PEER_CONNECTED) {
                rc = BASE_FAIL(KVRT_ERR_STATE,
                               "kvrt-xfer: that agent is already %s here; one peer per remote agent (close it first)",
                               q->link.name);
                break;
            }
    }
    if (rc != KVRT_OK) {
        xfer_md_free(&md);
        return rc;
    }
    p->md = md;
    p->loaded = true;
    return KVRT_OK;
}

int xfer_peer_session(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const uint8_t token[XFER_TOKEN_BYTES], bool await_ready)
{
    struct wire_ident theirs = {p->md.f.agent_id, {0}};
    memcpy(theirs.token, token, XFER_TOKEN_BYTES);
    p->link.me.from = a->id;
    memcpy(p->link.me.token, token, XFER_TOKEN_BYTES);
    p->link.peer_id = p->md.f.agent_id;
    int rc = wire_session_add(&a->sessions, &theirs, &p->link, await_ready);
    if (rc == KVRT_OK)
        p->in_session = true;
    return rc;
}

void xfer_peer_cleanup(kvrt_xfer_peer *p)
{
    if (p->cleaned)
        return;
    kvrt_xfer_agent *a = p->agent;
    p->cleaned = true;
    if (p->in_session)
        wire_session_remove(&a->sessions, &p->link);
    p->in_session = false;
    char why[700];
    if (p->closed_here)
        snprintf(why, sizeof(why), "the connection to peer %s was closed here", p->link.name);
    else if (p->link.state == KVRT_XFER_PEER_FAILED)
        snprintf(why, sizeof(why), "peer %s failed: %s", p->link.name, p->link.why);
    else
        snprintf(why, sizeof(why), "peer %s closed the connection", p->link.name);
    int status = p->link.state == KVRT_XFER_PEER_FAILED && !p->closed_here ? KVRT_ERR_DEVICE : KVRT_ERR_STATE;
    xfer_streams_fail_link(&a->streams, &p->link, status, why);
    if (p->link.ep == p->conn_ep)
        p->link.ep = NULL; /* one endpoint, closed once */
    xfer_link_close(&p->link);
    if (p->conn_ep)
        xt_ep_close(a->t, p->conn_ep);
    p->conn_ep = NULL;
}

static void bye_sent(void *user, int status, size_t len, const char *why)
{
    (void)status;
    (void)len;
    (void)why;
    *(bool *)user = true;
}

void xfer_peer_drop(kvrt_xfer_agent *a, kvrt_xfer_peer *p, bool polite)
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
    if (!p->cleaned) {
        p->closed_here = true;
        if (p->link.state == KVRT_XFER_PEER_CONNECTED)
            p->link.state = KVRT_XFER_PEER_CLOSED;
    }
    /* A polite close lets what was sent (a goodbye, a refusal) be read
     * first: the endpoints linger until the peer closes its side, bounded
     * (a flush would be the round trip, and is unsafe: xt_ep_linger). */
    if (polite) {
        xt_ep_linger(a->t, p->link.ep, XFER_LINGER_S);
        xt_ep_linger(a->t, p->conn_ep, XFER_LINGER_S);
    }
    xfer_peer_cleanup(p);
    xt_forget(a->t, p);
    xfer_grants_free(&p->grants);
    if (p->loaded)
        xfer_md_free(&p->md);
    free(p->blob);
    free(p->hello);
    free(p->reply);
    free(p);
}

/*
 * Interfaces of both families (UCX_TCP_AF_PRIO=inet6,inet and a NIC
 * without an IPv4 address): between two such agents UCX 1.13's wire-up
 * meets a lane of the other family after the connection's own and aborts
 * the process ("wireup.c: endpoint reconfiguration not supported yet"), so
 * no connection is begun.  A peer known by its worker address is refused
 * only when it mixes them too; one known by a socket address (NULL) could.
 */
int xfer_check_families(const kvrt_xfer_agent *a, const void *peer_worker_addr, const char *fn)
{
    const unsigned both = XFER_ADDR_INET | XFER_ADDR_INET6;
    if ((xt_tcp_families(a->t) & both) != both ||
        (peer_worker_addr && (xt_peer_tcp_families(a->t, peer_worker_addr) & both) != both))
        return KVRT_OK;
    return BASE_FAIL(KVRT_ERR_UNSUPPORTED,
                     "%s: the UCX tcp interfaces of this agent%s are both IPv4 and IPv6 (UCX_TCP_AF_PRIO lists "
                     "inet6 and a NIC has no IPv4 address); UCX 1.13 aborts a process whose connection meets an "
                     "interface of the other family: give UCX interfaces of one family (UCX_TCP_AF_PRIO=inet, "
                     "UCX's default, or UCX_NET_DEVICES naming NICs of one family)",
                     fn, peer_worker_addr ? " and of the peer" : "");
}

int kvrt_xfer_peer_load(kvrt_xfer_agent *a, const void *blob, size_t len, kvrt_xfer_peer **out)
{
    if (!a || !blob || !out)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_peer_load: NULL argument");
    *out = NULL;
    base_lock(&a->lock);
    kvrt_xfer_peer *p = NULL;
    int rc = xfer_peer_new(a, &p);
    if (rc == KVRT_OK && !(p->blob = malloc(len ? len : 1)))
        rc = BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_peer_load: out of memory");
    if (rc == KVRT_OK) {
        memcpy(p->blob, blob, len);
        p->blob_len = len;
        rc = xfer_peer_take_blob(a, p);
    }
    if (rc == KVRT_OK)
        rc = xfer_check_families(a, p->md.f.worker_addr, "kvrt_xfer_peer_load");
    if (rc == KVRT_OK)
        rc = xfer_link_open(&p->link, p->md.f.worker_addr, p->md.f.worker_addr_len, p);
    if (rc == KVRT_OK) {
        uint8_t token[XFER_TOKEN_BYTES];
        xfer_pair_token(&a->key, a->id, a->nonce, p->md.f.agent_id, p->md.f.nonce, token);
        rc = xfer_peer_session(a, p, token, false);
    }
    if (rc == KVRT_OK)
        xfer_link_cma_offer(&p->link);
    if (rc != KVRT_OK && p) {
        char why[2048];
        snprintf(why, sizeof(why), "%s", kvrt_error_message());
        xfer_peer_drop(a, p, false);
        kvrt_error_report(rc, "kvrt_xfer_peer_load: %s", why);
    }
    base_unlock(&a->lock);
    if (rc != KVRT_OK)
        return rc;
    *out = p;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

static void say_bye(kvrt_xfer_agent *a, kvrt_xfer_peer *p, xt_ep *ep)
{
    struct wire_hdr h = wire_hdr_make(&p->link.me, 0);
    bool done = false;
    if (xt_send(ep, WIRE_BYE, &h, sizeof(h), NULL, 0, XT_EAGER, NULL, bye_sent, &done) != KVRT_OK)
        return;
    double deadline = base_now() + a->timeout_s;
    while (!done && base_now() < deadline && p->link.state == KVRT_XFER_PEER_CONNECTED)
        xt_progress(a->t);
    if (!done)
        xt_forget(a->t, &done);
}

void kvrt_xfer_peer_close(kvrt_xfer_peer *p)
{
    if (!p)
        return;
    kvrt_xfer_agent *a = p->agent;
    base_lock(&a->lock);
    bool polite = p->link.state == KVRT_XFER_PEER_CONNECTED;
    /* Its transfers end first, as closed here, whatever the goodbye then
     * makes the peer do to them. */
    p->closed_here = true;
    if (p->link.cause == XFER_CAUSE_NONE)
        p->link.cause = XFER_CAUSE_CLOSED;
    char why[160];
    snprintf(why, sizeof(why), "the connection to peer %s was closed here", p->link.name);
    xfer_streams_fail_link(&a->streams, &p->link, KVRT_ERR_STATE, why);
    if (polite && p->in_session) {
        /* Goodbye on every endpoint, each ahead of its own disconnection:
         * whichever the peer notices first, it reads the goodbye first and
         * sees a close, not a failure. */
        if (p->conn_ep)
            say_bye(a, p, p->conn_ep);
        if (p->link.ep && p->link.wired && p->link.ep != p->conn_ep)
            say_bye(a, p, p->link.ep);
    }
    xfer_peer_drop(a, p, polite);
    base_unlock(&a->lock);
}

enum kvrt_xfer_peer_state kvrt_xfer_peer_state(const kvrt_xfer_peer *p, const char **why)
{
    if (!p) {
        if (why)
            *why = "";
        return KVRT_XFER_PEER_FAILED;
    }
    base_lock(&p->agent->lock);
    enum kvrt_xfer_peer_state st = p->link.state;
    if (why)
        *why = st == KVRT_XFER_PEER_FAILED ? p->link.why : "";
    base_unlock(&p->agent->lock);
    return st;
}

const char *kvrt_xfer_peer_name(const kvrt_xfer_peer *p)
{
    return p ? p->link.name : NULL;
}
