/*
 * Every message the transport hands up: a handshake message goes to the
 * peer whose connection it came on; anything else goes through the wire's
 * checks, which name its session, and then to that peer's streams.  A
 * message without a session (a stranger, a forgery, an id nobody uses) is
 * dropped and counted, and never affects the peer it may claim to be.
 *
 * Layer 6 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "agent.h"

static kvrt_xfer_peer *peer_of_link(struct xfer_link *l)
{
    return (kvrt_xfer_peer *)(void *)((char *)l - offsetof(kvrt_xfer_peer, link));
}

/* Strangers are counted always and logged at most once a second: a flood
 * of them must not become a flood of log lines. */
static void stranger(kvrt_xfer_agent *a, const char *what, unsigned id)
{
    a->stats.strangers++;
    double now = base_now();
    if (now - a->last_stranger_log < 1.0)
        return;
    a->last_stranger_log = now;
    base_log(&a->log, "kvrt-xfer", KVRT_LOG_WARNING, "dropped %s (message id %u; %llu dropped so far)", what, id,
             ULL(a->stats.strangers));
}

static void on_notify(kvrt_xfer_agent *a, struct xfer_link *l, const struct wire_msg *m)
{
    if (m->xid > l->last_begun) {
        char why[160];
        snprintf(why, sizeof(why), "sent a notification for stream %llu, which it never began", ULL(m->xid));
        xfer_link_violation(l, why);
        return;
    }
    uint8_t *copy = malloc(m->len + 1);
    if (!copy)
        return;
    memcpy(copy, m->payload, m->len);
    copy[m->len] = '\0';
    xfer_note_push(a, l, copy, m->len);
}

static enum xt_verdict on_message(void *arg, const struct xt_msg *m)
{
    kvrt_xfer_agent *a = arg;
    if (m->id < WIRE_READY) {
        kvrt_xfer_peer *p = m->reply ? xfer_peer_of_conn(a, m->reply) : NULL;
        if (!p) {
            stranger(a, "a handshake message that came on no peer's connection", m->id);
            return XT_REFUSE;
        }
        xfer_hs_on_message(a, p, m);
        return XT_REFUSE;
    }
    struct wire_msg w;
    char why[600];
    enum wire_result r =
        wire_decode(&a->sessions, m->id, m->hdr, m->hlen, m->data, m->len, m->rndv, &w, why, sizeof(why));
    if (r == WIRE_STRANGER) {
        /* Two sides that close at once each get the other's goodbye after
         * their own, and the answers it had on the way (CMA and CMA_OK of
         * a short session, a RELEASE): counted, not worth a warning. */
        if (m->id == WIRE_BYE || m->id == WIRE_CMA || m->id == WIRE_CMA_OK || m->id == WIRE_RELEASE)
            a->stats.strangers++;
        else
            stranger(a, "a message whose sender has no session here", m->id);
        return XT_REFUSE;
    }
    struct xfer_link *l = w.owner;
    kvrt_xfer_peer *p = peer_of_link(l);
    if (l->state != KVRT_XFER_PEER_CONNECTED)
        return XT_REFUSE; /* what a failed or closed peer still had on the way */
    if (r == WIRE_VIOLATION) {
        xfer_link_violation(l, why);
        return XT_REFUSE;
    }
    bool denied = false;
    switch (m->id) {
    case WIRE_READY: xfer_hs_on_ready(a, p); break;
    case WIRE_BEGIN:
        xfer_streams_on_begin(&a->streams, l, &w, (a->flags & KVRT_XFER_REQUIRE_GRANTS) ? xfer_granted : NULL, p,
                              &denied);
        if (denied) {
            a->stats.denied++;
            base_log(&a->log, "kvrt-xfer", KVRT_LOG_WARNING, "refused a %s by peer %s: not granted",
                     w.u.begin.kind == WIRE_PUSH ? "push" : "pull", l->name);
        }
        break;
    case WIRE_DATA: return xfer_streams_on_data(&a->streams, l, &w);
    case WIRE_ACK: xfer_streams_on_ack(&a->streams, l, &w); break;
    case WIRE_END: xfer_streams_on_end(&a->streams, l, &w); break;
    case WIRE_ABORT: xfer_streams_on_abort(&a->streams, l, &w); break;
    case WIRE_NOTIFY: on_notify(a, l, &w); break;
    case WIRE_CMA: xfer_link_on_cma(l, &w); break;
    case WIRE_CMA_OK: xfer_link_on_cma_ok(l, &w); break;
    case WIRE_RELEASE: xfer_streams_on_release(&a->streams, l, &w); break;
    case WIRE_BYE:
        l->state = KVRT_XFER_PEER_CLOSED;
        l->cause = XFER_CAUSE_CLOSED;
        break;
    default: break;
    }
    return XT_DONE;
}

static void on_stray(void *arg, unsigned id, bool rndv)
{
    (void)rndv;
    stranger(arg, "a message of an id kvrt-xfer does not use", id);
}

static void on_conn(void *arg, xt_conn *c)
{
    xfer_hs_on_conn(arg, c);
}

static void on_ep_error(void *arg, xt_ep *ep, void *user, const char *why)
{
    (void)arg;
    kvrt_xfer_peer *p = user;
    if (p)
        xfer_link_fail(&p->link, "the connection broke (%s on its %s endpoint)", why,
                       ep == p->conn_ep ? "connection" : "data");
}

void xfer_dispatch_callbacks(kvrt_xfer_agent *a, struct xt_callbacks *out)
{
    *out = (struct xt_callbacks){a, on_message, on_stray, on_conn, on_ep_error};
}
