/*
 * Connections over a socket address: the listener and kvrt_xfer_accept on
 * one side, kvrt_xfer_connect on the other, each waiting (the agent's
 * progress, a deadline) for the handshake handshake.c runs.
 *
 * Layer 6 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "agent.h"
#include "inet.h"

/* The family UCX 1.13 can carry a connection of: this agent's tcp
 * interfaces' (address.h), IPv4 when it has any. */
static int prefer(const kvrt_xfer_agent *a)
{
    unsigned f = xt_tcp_families(a->t);
    return (f & XFER_ADDR_INET6) && !(f & XFER_ADDR_INET) ? AF_INET6 : AF_INET;
}

/*
 * An IPv6 connection only where every tcp interface of this agent is
 * IPv6: UCX 1.13 writes the peer's IPv6 socket address into an IPv4
 * interface's endpoint past its end (uct_tcp_ep_set_dest_addr, seen under
 * valgrind) when the two meet, so kvrt never lets them (docs/xfer.md,
 * "Connections").
 */
static int check_family(const kvrt_xfer_agent *a, const struct sockaddr *sa, const char *fn)
{
    unsigned f = xt_tcp_families(a->t);
    int rc = xfer_check_families(a, NULL, fn);
    if (rc != KVRT_OK)
        return rc;
    if (sa->sa_family != AF_INET6 || ((f & XFER_ADDR_INET6) && !(f & XFER_ADDR_INET)))
        return KVRT_OK;
    char host[128];
    xfer_inet_name(sa, false, host, sizeof(host));
    return BASE_FAIL(KVRT_ERR_UNSUPPORTED,
                     "%s: %s is an IPv6 address, and this agent's UCX tcp interfaces are %s; UCX 1.13 carries an "
                     "IPv6 connection only on IPv6 interfaces: set UCX_TCP_AF_PRIO=inet6 and UCX_NET_DEVICES to "
                     "NICs with IPv6 addresses (loopback has no IPv6 tcp interface in UCX 1.13), or use an IPv4 "
                     "address",
                     fn, host, f ? "IPv4" : "none");
}

/* Beyond loopback, a key or the caller's explicit choice. */
static int check_exposure(const kvrt_xfer_agent *a, const struct sockaddr *sa, const char *fn, const char *what)
{
    if (xfer_inet_loopback(sa) || xfer_key_set(&a->key) || (a->flags & KVRT_XFER_INSECURE))
        return KVRT_OK;
    char host[128];
    xfer_inet_name(sa, false, host, sizeof(host));
    return BASE_FAIL(KVRT_ERR_REFUSED,
                     "%s: refusing to %s %s without a key: any host that reaches it could read and write this "
                     "cache; give every agent the same key file (key_file in kvrt_xfer_agent_options or "
                     "KVRT_XFER_KEY_FILE; e.g. head -c 32 /dev/urandom > KEY; chmod 600 KEY), or set "
                     "KVRT_XFER_INSECURE in the options' flags to accept that risk",
                     fn, what, host);
}

int kvrt_xfer_listen(kvrt_xfer_agent *a, const char *addr, uint16_t port, uint16_t *bound_port)
{
    if (!a)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_listen: agent is NULL");
    struct sockaddr_storage sa;
    socklen_t len;
    /* Outside the lock: a host name may wait on the resolver (the tcp
     * families are fixed when the agent is made). */
    int rc = xfer_inet_parse(addr, port, prefer(a), &sa, &len, "kvrt_xfer_listen");
    if (rc == KVRT_OK)
        rc = check_family(a, (const struct sockaddr *)&sa, "kvrt_xfer_listen");
    if (rc != KVRT_OK)
        return rc;
    base_lock(&a->lock);
    if (xt_listening(a->t))
        rc = BASE_FAIL(KVRT_ERR_STATE, "kvrt_xfer_listen: the agent already listens");
    if (rc == KVRT_OK)
        rc = check_exposure(a, (const struct sockaddr *)&sa, "kvrt_xfer_listen", "listen on");
    if (rc == KVRT_OK)
        rc = xt_listen(a->t, (const struct sockaddr *)&sa, len, bound_port);
    base_unlock(&a->lock);
    if (rc == KVRT_OK)
        kvrt_error_report(KVRT_OK, NULL);
    return rc;
}

/* ---- the calls ------------------------------------------------------------------ */

/* Progress (the lock released between rounds, so other threads go on)
 * until `done` says so or the deadline.  The lock is held on entry and on
 * return. */
static void wait_until(kvrt_xfer_agent *a, bool (*done)(kvrt_xfer_agent *, void *), void *ctx, double deadline)
{
    for (;;) {
        xfer_progress_round(a);
        if (done(a, ctx) || base_now() > deadline)
            return;
        base_unlock(&a->lock);
        xfer_idle(a, deadline);
        base_lock(&a->lock);
    }
}

static kvrt_xfer_peer *finished_handshake(kvrt_xfer_agent *a)
{
    kvrt_xfer_peer *found = NULL;
    for (kvrt_xfer_peer *p = a->peers; p; p = p->next)
        if (!p->handed_out && (p->hs == XFER_HS_DONE || p->hs == XFER_HS_FAILED))
            found = p; /* the oldest: the list is newest first */
    return found;
}

static bool accept_done(kvrt_xfer_agent *a, void *ctx)
{
    (void)ctx;
    return finished_handshake(a) != NULL;
}

int kvrt_xfer_accept(kvrt_xfer_agent *a, double timeout_s, kvrt_xfer_peer **out)
{
    if (!a || !out)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_accept: NULL argument");
    *out = NULL;
    if (!(timeout_s >= 0) || timeout_s > 1e6)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_accept: timeout %g; valid are 0 (the agent's) to 1e6 seconds",
                         timeout_s);
    base_lock(&a->lock);
    if (!xt_listening(a->t)) {
        base_unlock(&a->lock);
        return BASE_FAIL(KVRT_ERR_STATE, "kvrt_xfer_accept: call kvrt_xfer_listen first");
    }
    wait_until(a, accept_done, NULL, base_now() + (timeout_s > 0 ? timeout_s : a->timeout_s));
    kvrt_xfer_peer *p = finished_handshake(a);
    if (!p) {
        base_unlock(&a->lock);
        kvrt_error_report(KVRT_OK, NULL);
        return KVRT_XFER_PENDING;
    }
    p->handed_out = true;
    if (p->hs == XFER_HS_FAILED) {
        int rc = p->hs_status;
        char why[sizeof(p->hs_why)];
        snprintf(why, sizeof(why), "%s", p->hs_why);
        /* A refusal is read by the peer before the connection goes; a
         * peer that stalled or vanished is owed nothing. */
        xfer_peer_drop(a, p, p->told);
        base_unlock(&a->lock);
        return kvrt_error_report(rc, "%s", why);
    }
    p->hs = XFER_HS_NONE;
    base_unlock(&a->lock);
    *out = p;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

static bool connect_done(kvrt_xfer_agent *a, void *ctx)
{
    (void)a;
    const kvrt_xfer_peer *p = ctx;
    return p->hs == XFER_HS_DONE || p->hs == XFER_HS_FAILED;
}

int kvrt_xfer_connect(kvrt_xfer_agent *a, const char *addr, uint16_t port, kvrt_xfer_peer **out)
{
    if (!a || !out)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_connect: NULL argument");
    *out = NULL;
    struct sockaddr_storage sa;
    socklen_t sa_len;
    int rc = xfer_inet_parse(addr, port, prefer(a), &sa, &sa_len, "kvrt_xfer_connect");
    if (rc == KVRT_OK)
        rc = check_family(a, (const struct sockaddr *)&sa, "kvrt_xfer_connect");
    if (rc != KVRT_OK)
        return rc;
    base_lock(&a->lock);
    rc = check_exposure(a, (const struct sockaddr *)&sa, "kvrt_xfer_connect", "connect to");
    kvrt_xfer_peer *p = NULL;
    if (rc == KVRT_OK)
        rc = xfer_peer_new(a, &p);
    if (rc != KVRT_OK) {
        base_unlock(&a->lock);
        return rc;
    }
    p->handed_out = true; /* this call reports it */
    xfer_inet_name((const struct sockaddr *)&sa, true, p->link.name, sizeof(p->link.name));
    p->hs = XFER_HS_WAIT_REPLY;
    p->hs_deadline = base_now() + a->timeout_s;
    rc = xt_ep_connect(a->t, (const struct sockaddr *)&sa, sa_len, p, &p->conn_ep);
    if (rc != KVRT_OK) {
        p->conn_ep = NULL;
        rc = BASE_FAIL(KVRT_ERR_DEVICE, "kvrt_xfer_connect: cannot connect to %s: %s", p->link.name,
                       kvrt_error_message());
    }
    if (rc == KVRT_OK) {
        uint8_t *mine = NULL;
        size_t len = 0;
        rc = xfer_agent_blob(a, &mine, &len);
        if (rc == KVRT_OK) {
            struct wire_hello h;
            memset(&h, 0, sizeof(h));
            h.magic = WIRE_MAGIC;
            h.protocol = WIRE_PROTOCOL;
            h.flags = xfer_key_set(&a->key) ? WIRE_KEYED : 0;
            xfer_random(p->nonce_mine, XFER_NONCE_BYTES);
            memcpy(h.nonce, p->nonce_mine, XFER_NONCE_BYTES);
            p->hello = mine;
            p->hello_len = len;
            rc = xt_send(p->conn_ep, WIRE_HELLO, &h, sizeof(h), mine, len, XT_EAGER | XT_REPLY | XT_COPY, NULL, NULL,
                         NULL);
        }
    }
    if (rc == KVRT_OK) {
        wait_until(a, connect_done, p, p->hs_deadline + 1.0);
        if (p->hs != XFER_HS_DONE) {
            if (p->hs != XFER_HS_FAILED)
                xfer_hs_fail(p, KVRT_ERR_DEVICE, "kvrt_xfer_connect: no answer from %s within %g s", p->link.name,
                             a->timeout_s);
            if (p->hs_status == KVRT_ERR_DEVICE && !p->reply)
                snprintf(p->hs_why, sizeof(p->hs_why), "kvrt_xfer_connect: cannot reach %s (%s)", p->link.name,
                         p->link.why[0] ? p->link.why : "no answer");
            rc = kvrt_error_report(p->hs_status, "%s", p->hs_why);
        }
    }
    if (rc != KVRT_OK) {
        char why[2048];
        snprintf(why, sizeof(why), "%s", kvrt_error_message());
        xfer_peer_drop(a, p, false);
        base_unlock(&a->lock);
        return kvrt_error_report(rc, "%s", why);
    }
    p->hs = XFER_HS_NONE;
    base_unlock(&a->lock);
    *out = p;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}
