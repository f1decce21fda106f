/*
 * A peer's data endpoint: control messages, the wire-up, failure.
 *
 * Layer 3 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "link.h"

struct xfer_link_msg {
    struct xfer_link_msg *next;
    unsigned id;
    size_t hlen, len;
    uint8_t hdr[128];
    uint8_t data[];
};

void xfer_link_init(struct xfer_link *l, xt *t, const struct base_log *log, uint64_t *violations)
{
    memset(l, 0, sizeof(*l));
    l->t = t;
    l->state = KVRT_XFER_PEER_CONNECTED;
    l->queue_tail = &l->queue;
    l->log = log;
    l->violations = violations;
    l->cma_listener = -1;
}

static void fail_v(struct xfer_link *l, enum xfer_fail_cause cause, const char *fmt, va_list ap)
{
    if (l->state != KVRT_XFER_PEER_CONNECTED)
        return;
    vsnprintf(l->why, sizeof(l->why), fmt, ap);
    l->cause = cause;
    l->state = KVRT_XFER_PEER_FAILED;
}

void xfer_link_fail(struct xfer_link *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(l, XFER_CAUSE_CONNECTION, fmt, ap);
    va_end(ap);
}

void xfer_link_fail_as(struct xfer_link *l, enum xfer_fail_cause cause, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(l, cause, fmt, ap);
    va_end(ap);
}

void xfer_link_violation(struct xfer_link *l, const char *why)
{
    if (l->state != KVRT_XFER_PEER_CONNECTED)
        return;
    (*l->violations)++;
    base_log(l->log, "kvrt-xfer", KVRT_LOG_WARNING, "peer %s %s; its session is closed", l->name, why);
    xfer_link_fail_as(l, XFER_CAUSE_VIOLATION, "the peer %s", why);
}

int xfer_link_ok(const struct xfer_link *l, const char *what)
{
    if (l->state == KVRT_XFER_PEER_FAILED)
        return BASE_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s: peer %s failed: %s", what, l->name, l->why);
    if (l->state == KVRT_XFER_PEER_CLOSED)
        return BASE_FAIL(KVRT_ERR_STATE, "kvrt-xfer: %s: peer %s has closed the connection", what, l->name);
    return KVRT_OK;
}

bool xfer_link_ready(const struct xfer_link *l)
{
    return l->state == KVRT_XFER_PEER_CONNECTED && l->ep && l->wired;
}

static void wired(void *user, int status, size_t len, const char *why)
{
    struct xfer_link *l = user;
    (void)len;
    l->wiring = false;
    if (status != KVRT_OK) {
        xfer_link_fail(l, "its data endpoint could not be set up (%s)", why);
        return;
    }
    l->wired = true;
    /* What waited goes now, in order. */
    while (l->queue && l->state == KVRT_XFER_PEER_CONNECTED && l->ep) {
        struct xfer_link_msg *q = l->queue;
        l->queue = q->next;
        int rc = xt_send(l->ep, q->id, q->hdr, q->hlen, q->data, q->len, XT_EAGER | XT_COPY, NULL, NULL, NULL);
        if (rc != KVRT_OK)
            xfer_link_fail(l, "sending %s failed: %s", wire_name(q->id), kvrt_error_message());
        free(q);
    }
    if (!l->queue)
        l->queue_tail = &l->queue;
}

int xfer_link_open(struct xfer_link *l, const uint8_t *addr, size_t len, void *user)
{
    int rc = xt_ep_to_address(l->t, addr, len, user, &l->ep);
    if (rc != KVRT_OK) {
        l->ep = NULL;
        return rc;
    }
    l->wiring = true;
    rc = xt_flush(l->ep, wired, l);
    if (rc != KVRT_OK)
        l->wiring = false;
    return rc;
}

int xfer_link_send(struct xfer_link *l, unsigned id, const void *hdr, size_t hlen, const void *data, size_t len)
{
    int rc = xfer_link_ok(l, "sending a message");
    if (rc != KVRT_OK)
        return rc;
    if (!l->ep)
        return BASE_FAIL(KVRT_ERR_STATE, "kvrt-xfer: peer %s has no data endpoint", l->name);
    if (l->wired)
        return xt_send(l->ep, id, hdr, hlen, data, len, XT_EAGER | XT_COPY, NULL, NULL, NULL);
    if (hlen > sizeof(((struct xfer_link_msg *)0)->hdr))
        return BASE_FAIL(KVRT_ERR_INTERNAL, "kvrt-xfer: a %zu-byte message header", hlen);
    struct xfer_link_msg *q = calloc(1, sizeof(*q) + len);
    if (!q)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a message");
    q->id = id;
    q->hlen = hlen;
    q->len = len;
    memcpy(q->hdr, hdr, hlen);
    if (len)
        memcpy(q->data, data, len);
    *l->queue_tail = q;
    l->queue_tail = &q->next;
    return KVRT_OK;
}

void xfer_link_close(struct xfer_link *l)
{
    xt_forget(l->t, l);
    if (l->ep)
        xt_ep_close(l->t, l->ep);
    l->ep = NULL;
    l->wired = false;
    /* the same-host listener (link_cma.c) closes here too, inline: link_cma.c
     * sits beside this file and calls it, so a call back would close a
     * circle */
    if (l->cma_listener >= 0)
        close(l->cma_listener);
    l->cma_listener = -1;
    while (l->queue) {
        struct xfer_link_msg *q = l->queue;
        l->queue = q->next;
        free(q);
    }
    l->queue_tail = &l->queue;
}

const char *xfer_link_name(const struct xfer_link *l)
{
    return l ? l->name : "(closed)";
}
