/*
 * A link on one host: the two sides read each other's memory
 * (process_vm_readv, cma.h) instead of passing chunks through UCX, which
 * saves the receiver its staging slot and its scatter.
 *
 * The rule (docs/security.md, "Peers on the same host"): this side reads
 * only a process the kernel names as the peer's, never this process, and
 * gives the peer addresses only once it proved it reads this one.
 *   - An offering side listens on an abstract unix socket whose name only
 *     the session's two sides can compute (auth.h) and sends CMA: its pid
 *     and where its cookie and a fresh challenge lie.  The reader connects
 *     and asks the kernel who listens (SO_PEERCRED): a process cannot
 *     listen in another's name, nor make another listen on a name it
 *     chooses, so that pid is the peer's, not one it merely names.  A
 *     claim naming another pid is a violation; one naming this process is
 *     declined.  Then the cookie is read there, in the peer's memory.
 *   - The reader answers CMA_OK with a MAC of the challenge: a bare "OK"
 *     proves nothing, and without the proof the offering side never gives
 *     a chunk by reference (which would tell the peer its addresses).
 *   - After the challenge lie the ranges the offering side gives by
 *     reference (its cache, its send slots and their seals), read with the
 *     cookie: a reference outside them, or of the wrong kind, is a
 *     violation, so a peer names chunks of its own cache and slots only.
 * A peer on another host, in another pid or network namespace, or one
 * this process may not read (ptrace rules) is simply not read; its chunks
 * come through UCX as before.
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

/* No more reading by this side's peer is offered: its socket closes. */
static void cma_close(struct xfer_link *l)
{
    if (l->cma_listener >= 0)
        close(l->cma_listener);
    l->cma_listener = -1;
}

void xfer_link_cma_offer(struct xfer_link *l)
{
    if (!l->cma_allowed || l->cma_offered || l->state != KVRT_XFER_PEER_CONNECTED)
        return;
    l->cma_offered = true;
    uint8_t name[XFER_MAC_BYTES];
    xfer_cma_socket_name(l->me.token, l->me.from, name);
    int e = xfer_cma_listen(name, &l->cma_listener);
    if (e) {
        /* Nothing to prove this process by: the peer is not offered to
         * read it, and its chunks come through UCX. */
        base_log(l->log, "kvrt-xfer", KVRT_LOG_DEBUG, "peer %s is not offered to read this process: listening: %s",
                 l->name, strerror(e));
        return;
    }
    xfer_cma_cookie(l->me.token, l->me.from, l->offer.cookie);
    xfer_random(l->offer.challenge, XFER_MAC_BYTES);
    struct wire_cma m;
    memset(&m, 0, sizeof(m));
    m.h = wire_hdr_make(&l->me, 0);
    m.cookie = (uint64_t)(uintptr_t)&l->offer;
    m.pid = (uint32_t)getpid();
    xfer_cma_host(m.host);
    xfer_link_send(l, WIRE_CMA, &m, sizeof(m), NULL, 0);
}

static void answer(struct xfer_link *l, int status, const char *why)
{
    struct wire_status m = {wire_hdr_make(&l->me, 0), status, 0};
    xfer_link_send(l, WIRE_CMA_OK, &m, sizeof(m), why, strlen(why));
}

static const char *range_kind(uint32_t kind)
{
    switch (kind) {
    case XFER_RANGE_CACHE: return "cache";
    case XFER_RANGE_STAGING: return "staging";
    case XFER_RANGE_SEALS: return "seals";
    default: return "?";
    }
}

/* The ranges as a message lists them: "cache 0x1000+4096, staging ...". */
static void describe_ranges(const struct xfer_range *r, uint32_t n, char *out, size_t size)
{
    size_t at = 0;
    out[0] = 0;
    for (uint32_t i = 0; i < n && at < size; i++) {
        int w = snprintf(out + at, size - at, "%s%s 0x%llx+%llu", i ? ", " : "", range_kind(r[i].kind), ULL(r[i].addr),
                         ULL(r[i].len));
        if (w < 0)
            break;
        at += (size_t)w;
    }
    if (n == 0)
        snprintf(out, size, "none");
}

/* The ranges the peer placed after its challenge: at most XFER_REF_RANGES,
 * each of a known kind, not empty, not wrapping, reserved fields zero. */
static bool take_ranges(struct xfer_link *l, const struct xfer_offer *o, char *why, size_t n)
{
    if (o->nranges > XFER_REF_RANGES || o->reserved) {
        snprintf(why, n, "announced %u ranges to read by reference (valid: 0 to %d, reserved 0; it gave %u)",
                 (unsigned)o->nranges, XFER_REF_RANGES, (unsigned)o->reserved);
        return false;
    }
    for (uint32_t i = 0; i < o->nranges; i++) {
        const struct xfer_range *r = &o->ranges[i];
        uint64_t end;
        if (r->kind < XFER_RANGE_CACHE || r->kind > XFER_RANGE_SEALS || r->reserved || r->len == 0 ||
            __builtin_add_overflow(r->addr, r->len, &end)) {
            snprintf(why, n,
                     "announced range %u of kind %u at 0x%llx of %llu bytes (valid: kind 1 cache, 2 staging, 3 "
                     "seals; 1 byte or more, ending below 2^64)",
                     (unsigned)i, (unsigned)r->kind, ULL(r->addr), ULL(r->len));
            return false;
        }
    }
    memcpy(l->peer_ranges, o->ranges, sizeof(l->peer_ranges));
    l->npeer_ranges = o->nranges;
    return true;
}

/* [addr, addr + len) inside a range of `kind`; the end overflow-checked. */
static bool inside(const struct xfer_link *l, uint32_t kind, uint64_t addr, uint64_t len)
{
    uint64_t end;
    if (len == 0 || __builtin_add_overflow(addr, len, &end))
        return false;
    for (uint32_t i = 0; i < l->npeer_ranges; i++) {
        const struct xfer_range *r = &l->peer_ranges[i];
        if (r->kind == kind && addr >= r->addr && end <= r->addr + r->len)
            return true;
    }
    return false;
}

bool xfer_link_ref_inside(struct xfer_link *l, const struct wire_ref *ref)
{
    bool sealed = ref->seal_addr != 0;
    if (sealed ? inside(l, XFER_RANGE_STAGING, ref->addr, ref->len) &&
                     inside(l, XFER_RANGE_SEALS, ref->seal_addr, sizeof(uint64_t))
               : inside(l, XFER_RANGE_CACHE, ref->addr, ref->len))
        return true;
    char ranges[400], why[640];
    describe_ranges(l->peer_ranges, l->npeer_ranges, ranges, sizeof(ranges));
    if (sealed)
        snprintf(why, sizeof(why),
                 "gave a chunk by reference at 0x%llx of %llu bytes sealed at 0x%llx, outside the staging and seal "
                 "ranges it announced (%s)",
                 ULL(ref->addr), ULL(ref->len), ULL(ref->seal_addr), ranges);
    else
        snprintf(why, sizeof(why),
                 "gave a chunk by reference at 0x%llx of %llu bytes, outside the cache ranges it announced (%s)",
                 ULL(ref->addr), ULL(ref->len), ranges);
    xfer_link_violation(l, why);
    return false;
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
    char why[240];
    if (!l->cma_allowed) {
        answer(l, KVRT_ERR_UNSUPPORTED, "this agent does not read its peers' memory");
        return;
    }
    if (!xfer_same(host, c->host, XFER_HOST_BYTES)) {
        answer(l, KVRT_ERR_UNSUPPORTED, "another host or pid namespace");
        return;
    }
    /* This process is never read as a peer's: what it holds is what the
     * peer may only reach through its grants. */
    if (c->pid == (uint32_t)getpid()) {
        answer(l, KVRT_ERR_UNSUPPORTED, "it named this process, which is never read as a peer");
        return;
    }
    uint8_t name[XFER_MAC_BYTES];
    uint32_t pid = 0;
    xfer_cma_socket_name(l->me.token, l->peer_id, name);
    int e = xfer_cma_listener(name, &pid);
    if (e) {
        /* Another network namespace sees no abstract socket of ours: not
         * a lie, only a peer this side cannot tell by its process. */
        snprintf(why, sizeof(why), "no process of the session's listens where this side can see it (%s)", strerror(e));
        answer(l, KVRT_ERR_UNSUPPORTED, why);
        return;
    }
    if (pid != c->pid || pid == (uint32_t)getpid()) {
        snprintf(why, sizeof(why), "named process %u, but the kernel says its session's socket is process %u's",
                 (unsigned)c->pid, (unsigned)pid);
        xfer_link_violation(l, why);
        return;
    }
    struct xfer_offer got;
    uint8_t want[XFER_MAC_BYTES];
    xfer_cma_cookie(l->me.token, l->peer_id, want);
    struct iovec iov = {&got, sizeof(got)};
    e = xfer_cma_read(pid, c->cookie, &iov, 1, sizeof(got));
    if (e == EPERM || e == ENOSYS) {
        snprintf(why, sizeof(why), "reading process %u: %s", (unsigned)pid, strerror(e));
        answer(l, KVRT_ERR_UNSUPPORTED, why);
        return;
    }
    if (e || !xfer_same(got.cookie, want, sizeof(want))) {
        snprintf(why, sizeof(why), "does not hold its session cookie at 0x%llx in its process %u%s%s", ULL(c->cookie),
                 (unsigned)pid, e ? ": " : "", e ? strerror(e) : "");
        xfer_link_violation(l, why);
        return;
    }
    if (!take_ranges(l, &got, why, sizeof(why))) {
        xfer_link_violation(l, why);
        return;
    }
    uint8_t proof[XFER_MAC_BYTES];
    xfer_cma_proof(l->me.token, got.challenge, proof);
    l->peer_pid = pid;
    l->reads_peer = true;
    struct wire_status ok = {wire_hdr_make(&l->me, 0), KVRT_OK, 0};
    xfer_link_send(l, WIRE_CMA_OK, &ok, sizeof(ok), proof, sizeof(proof));
}

void xfer_link_on_cma_ok(struct xfer_link *l, const struct wire_msg *m)
{
    if (!l->cma_offered || l->cma_answered || l->cma_listener < 0) {
        xfer_link_violation(l, l->cma_answered ? "answered CMA twice" : "answered a CMA this side never sent");
        return;
    }
    l->cma_answered = true;
    cma_close(l);
    if (m->u.status.status != KVRT_OK) {
        int n = m->len > XFER_MAX_REASON ? (int)XFER_MAX_REASON : (int)m->len;
        base_log(l->log, "kvrt-xfer", KVRT_LOG_DEBUG, "peer %s does not read this process: %.*s", l->name, n,
                 (const char *)m->payload);
        return;
    }
    /* Only a reader that read the challenge can MAC it. */
    uint8_t want[XFER_MAC_BYTES];
    xfer_cma_proof(l->me.token, l->offer.challenge, want);
    if (m->len != sizeof(want) || !xfer_same(m->payload, want, sizeof(want))) {
        xfer_link_violation(l, "answered CMA_OK without proof that it read this process");
        return;
    }
    l->read_by_peer = true;
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
