/*
 * A link on one host: the two sides read each other's memory
 * (process_vm_readv, cma.h) instead of passing chunks through UCX, which
 * saves the receiver its staging slot and its scatter.
 *
 * A peer says which process it is and where its cookie for this session
 * lies (CMA); this side reads the cookie there.  Only the session's two
 * sides can compute it, and no other process holds it, so a peer that
 * names another process is found out before any of its chunks is read:
 * its session fails.  A peer on another host, in another pid namespace,
 * or one this process may not read (ptrace rules) is simply not read; its
 * chunks come through UCX as before.
 *
 * Layer 3 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "cma.h"
#include "link.h"

void xfer_link_cma_offer(struct xfer_link *l)
{
    if (!l->cma_allowed || l->cma_offered || l->state != KVRT_XFER_PEER_CONNECTED)
        return;
    xfer_cma_cookie(l->me.token, l->me.from, l->cookie);
    struct wire_cma m;
    memset(&m, 0, sizeof(m));
    m.h = wire_hdr_make(&l->me, 0);
    m.cookie = (uint64_t)(uintptr_t)l->cookie;
    m.pid = (uint32_t)getpid();
    xfer_cma_host(m.host);
    l->cma_offered = true;
    xfer_link_send(l, WIRE_CMA, &m, sizeof(m), NULL, 0);
}

static void answer(struct xfer_link *l, int status, const char *why)
{
    struct wire_status m = {wire_hdr_make(&l->me, 0), status, 0};
    xfer_link_send(l, WIRE_CMA_OK, &m, sizeof(m), why, strlen(why));
}

void xfer_link_on_cma(struct xfer_link *l, const struct wire_msg *m)
{
    if (l->cma_heard) {
        xfer_link_violation(l, "sent CMA twice");
        return;
    }
    l->cma_heard = true;
    const struct wire_cma *c = &m->u.cma;
    uint8_t host[XFER_HOST_BYTES];
    xfer_cma_host(host);
    char why[200];
    if (!l->cma_allowed) {
        answer(l, KVRT_ERR_UNSUPPORTED, "this agent does not read its peers' memory");
        return;
    }
    if (!xfer_same(host, c->host, XFER_HOST_BYTES)) {
        answer(l, KVRT_ERR_UNSUPPORTED, "another host or pid namespace");
        return;
    }
    uint8_t want[XFER_MAC_BYTES], got[XFER_MAC_BYTES];
    xfer_cma_cookie(l->me.token, l->peer_id, want);
    struct iovec iov = {got, sizeof(got)};
    int e = xfer_cma_read(c->pid, c->cookie, &iov, 1, sizeof(got));
    if (e == EPERM || e == ENOSYS) {
        snprintf(why, sizeof(why), "reading process %u: %s", (unsigned)c->pid, strerror(e));
        answer(l, KVRT_ERR_UNSUPPORTED, why);
        return;
    }
    if (e || !xfer_same(got, want, sizeof(got))) {
        /* It named a process or an address that is not its own. */
        snprintf(why, sizeof(why), "named process %u, which does not hold its session cookie at 0x%llx%s%s",
                 (unsigned)c->pid, ULL(c->cookie), e ? ": " : "", e ? strerror(e) : "");
        xfer_link_violation(l, why);
        return;
    }
    l->peer_pid = c->pid;
    l->reads_peer = true;
    answer(l, KVRT_OK, "");
}

void xfer_link_on_cma_ok(struct xfer_link *l, const struct wire_msg *m)
{
    if (!l->cma_offered || l->cma_answered) {
        xfer_link_violation(l, l->cma_answered ? "answered CMA twice" : "answered a CMA this side never sent");
        return;
    }
    l->cma_answered = true;
    l->read_by_peer = m->u.status.status == KVRT_OK;
    if (!l->read_by_peer) {
        int n = m->len > XFER_MAX_REASON ? (int)XFER_MAX_REASON : (int)m->len;
        base_log(l->log, "kvrt-xfer", KVRT_LOG_DEBUG, "peer %s does not read this process: %.*s", l->name, n,
                 (const char *)m->payload);
    }
}

static bool seal_holds(const struct xfer_link *l, const struct wire_ref *ref, int *err)
{
    if (!ref->seal_addr)
        return true;
    uint64_t v = 0;
    struct iovec iov = {&v, sizeof(v)};
    *err = xfer_cma_read(l->peer_pid, ref->seal_addr, &iov, 1, sizeof(v));
    return *err == 0 && v == ref->seal;
}

int xfer_link_read(struct xfer_link *l, const struct wire_ref *ref, const struct iovec *local, size_t n, bool *reused)
{
    *reused = false;
    int e = 0;
    if (seal_holds(l, ref, &e) && (e = xfer_cma_read(l->peer_pid, ref->addr, local, n, ref->len)) == 0 &&
        seal_holds(l, ref, &e))
        return KVRT_OK;
    char why[200];
    if (e == ESRCH) {
        xfer_link_fail(l, "its process %u is gone", (unsigned)l->peer_pid);
        return KVRT_ERR_DEVICE;
    }
    if (e == 0) {
        *reused = true; /* the seal moved: the peer took the slot back */
        return KVRT_ERR_STATE;
    }
    snprintf(why, sizeof(why), "gave a chunk of %llu bytes at 0x%llx, which its process %u cannot give (%s)",
             ULL(ref->len), ULL(ref->addr), (unsigned)l->peer_pid, strerror(e));
    xfer_link_violation(l, why);
    return KVRT_ERR_INVALID;
}
