/*
 * Progress: one round advances everything the agent has -- UCX, the
 * handshakes, the streams, stalls, peers that failed -- and reaps what is
 * finished.  Idle waits sleep on UCX's event fd.  The notification queue
 * is here too.
 *
 * Layer 6 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "agent.h"

/* Notifications waiting to be taken, at most: a peer that fills the queue
 * has its transfers refused until the engine takes some. */
#define MAX_NOTES 65536u

void xfer_progress_round(kvrt_xfer_agent *a)
{
    xt_progress(a->t);
    double now = base_now();
    xfer_hs_check(a, now);
    xfer_streams_progress(&a->streams);
    /* A transfer that makes no progress for the agent's timeout fails,
     * and so does its peer: closing the peer's endpoints is the only way
     * UCX 1.13 gives to take back the buffers its requests hold. */
    xfer_streams_check_stalls(&a->streams, now, a->timeout_s, now - a->last_progress > a->timeout_s / 2);
    a->last_progress = now;
    for (kvrt_xfer_peer *p = a->peers; p; p = p->next)
        if (p->link.state != KVRT_XFER_PEER_CONNECTED)
            xfer_peer_cleanup(p);
    xfer_streams_reap(&a->streams);
}

void xfer_idle(kvrt_xfer_agent *a, double deadline)
{
    /* Spin briefly (yielding the core: the peer may be on it), then sleep
     * on the event fd for at most 2 ms so that deadlines are seen. */
    static const double spin = 50e-6, nap = 2e-3;
    double now = base_now(), until = now + spin;
    while ((now = base_now()) < until && now < deadline) {
        sched_yield();
        base_lock(&a->lock);
        unsigned n = xt_progress(a->t);
        bool work = xfer_streams_busy(&a->streams);
        base_unlock(&a->lock);
        if (n || work)
            return;
    }
    if (now >= deadline)
        return;
    base_lock(&a->lock);
    int st = xfer_streams_busy(&a->streams) ? KVRT_XFER_PENDING : xt_arm(a->t);
    base_unlock(&a->lock);
    if (st != KVRT_OK)
        return;
    double left = deadline - now;
    struct pollfd pfd = {xt_event_fd(a->t), POLLIN, 0};
    poll(&pfd, 1, (int)((left < nap ? left : nap) * 1e3) + 1);
}

int kvrt_xfer_progress(kvrt_xfer_agent *a)
{
    if (!a)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_progress: agent is NULL");
    base_lock(&a->lock);
    xfer_progress_round(a);
    int rc = a->streams.served_error;
    char why[sizeof(a->streams.served_why)];
    snprintf(why, sizeof(why), "%s", a->streams.served_why);
    a->streams.served_error = KVRT_OK;
    base_unlock(&a->lock);
    if (rc != KVRT_OK)
        return kvrt_error_report(rc, "%s", why);
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

int kvrt_xfer_event_fd(kvrt_xfer_agent *a, int *fd)
{
    if (!a || !fd)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_event_fd: NULL argument");
    *fd = xt_event_fd(a->t);
    return KVRT_OK;
}

int kvrt_xfer_arm(kvrt_xfer_agent *a)
{
    if (!a)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_arm: agent is NULL");
    base_lock(&a->lock);
    xfer_progress_round(a);
    int st = xfer_streams_busy(&a->streams) ? KVRT_XFER_PENDING : xt_arm(a->t);
    base_unlock(&a->lock);
    return st;
}

int xfer_note_push(void *agent, struct xfer_link *from, uint8_t *data, size_t len)
{
    kvrt_xfer_agent *a = agent;
    if (a->notes_queued >= MAX_NOTES) {
        free(data);
        a->stats.refused_limit++;
        return BASE_FAIL(KVRT_ERR_REFUSED,
                         "kvrt-xfer: %u notifications wait to be taken (kvrt_xfer_notification); the transfer "
                         "from %s is refused",
                         MAX_NOTES, from ? from->name : "a peer");
    }
    if (!data && !(data = calloc(1, 1)))
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a notification");
    struct xfer_note *n = calloc(1, sizeof(*n));
    if (!n) {
        free(data);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a notification");
    }
    kvrt_xfer_peer *p = NULL;
    for (kvrt_xfer_peer *q = a->peers; q && from; q = q->next)
        if (&q->link == from)
            p = q;
    n->peer = p;
    n->data = data;
    n->len = len;
    *a->notes_tail = n;
    a->notes_tail = &n->next;
    a->notes_queued++;
    return KVRT_OK;
}

int kvrt_xfer_notification(kvrt_xfer_agent *a, kvrt_xfer_peer **from, char **msg, size_t *len)
{
    if (!a || !msg || !len)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_notification: NULL argument");
    *msg = NULL;
    *len = 0;
    if (from)
        *from = NULL;
    base_lock(&a->lock);
    struct xfer_note *n = a->notes;
    if (n) {
        a->notes = n->next;
        if (!a->notes)
            a->notes_tail = &a->notes;
        a->notes_queued--;
    }
    base_unlock(&a->lock);
    if (n) {
        *msg = (char *)n->data;
        *len = n->len;
        if (from)
            *from = n->peer;
        free(n);
    }
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}
