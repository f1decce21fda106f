/*
 * A link: a peer's data endpoint as the streams see it -- its state and
 * name, what this side writes in every header, and the control messages
 * that wait until the endpoint's wire-up completes (nothing goes out on an
 * endpoint before that, so a session's first message is always its first).
 * A link that fails keeps the first reason.
 *
 * Layer 3 of libkvrt-xfer: transport, wire and the log.
 */
#ifndef KVRT_XFER_LINK_H
#define KVRT_XFER_LINK_H

#include <stdbool.h>
#include <stdint.h>

#include <sys/uio.h>

#include "base/log.h"
#include "transport.h"
#include "wire.h"

struct xfer_link_msg;

/*
 * What a peer may give by reference: the ranges of its own memory it
 * announced (its cache's host bytes, its send slots and their seals),
 * placed after its cookie and challenge where its CMA says, so that only a
 * reader that proved it reads that process learns them.  A reference is
 * read only inside one of them, of its kind.
 */
enum { XFER_REF_RANGES = 8 };
enum xfer_range_kind {
    XFER_RANGE_CACHE = 1,   /* chunks that are one piece of the cache: no seal */
    XFER_RANGE_STAGING = 2, /* send slots: a chunk with a seal */
    XFER_RANGE_SEALS = 3,   /* the send slots' seals */
};
struct xfer_range {
    uint64_t addr, len;
    uint32_t kind, reserved;
};
/* The bytes an offering side keeps at the address its CMA names. */
struct xfer_offer {
    uint8_t cookie[XFER_MAC_BYTES];
    uint8_t challenge[XFER_MAC_BYTES];
    uint32_t nranges, reserved;
    struct xfer_range ranges[XFER_REF_RANGES];
};

/* Why a link failed, for the agent's counts of failed transfers. */
enum xfer_fail_cause {
    XFER_CAUSE_NONE = 0,
    XFER_CAUSE_CONNECTION, /* the endpoint broke, the process died, a send failed */
    XFER_CAUSE_TIMEOUT,    /* no progress for the agent's timeout */
    XFER_CAUSE_VIOLATION,  /* a message broke the protocol */
    XFER_CAUSE_CLOSED,     /* either side closed it */
};

struct xfer_link {
    xt *t;
    xt_ep *ep;  /* NULL until opened, and once closed */
    bool wired; /* its wire-up completed: messages go out */
    bool wiring;
    enum kvrt_xfer_peer_state state;
    char why[512];
    enum xfer_fail_cause cause; /* why it failed (with the first reason) */
    char name[96];
    struct wire_ident me; /* what this side writes in every header */
    struct xfer_link_msg *queue, **queue_tail;
    uint64_t last_begun; /* the highest stream id the peer began here */
    uint64_t id_bytes;   /* block ids its live streams hold here */
    const struct base_log *log;
    uint64_t *violations; /* the agent's count */
    /* Reading each other's memory on one host (link_cma.c, cma.h). */
    bool cma_allowed; /* this side reads and is read (the agent's choice) */
    uint64_t peer_id; /* the peer's agent id, which its cookie names */
    /* This side's cookie, a fresh challenge and the ranges it gives by
     * reference, where its CMA says: a reader proves it read them by a MAC
     * of the challenge.  The ranges are filled by the agent (peer.c). */
    struct xfer_offer offer;
    /* The ranges the peer announced, read in its process with its cookie. */
    struct xfer_range peer_ranges[XFER_REF_RANGES];
    uint32_t npeer_ranges;
    int cma_listener; /* the socket the kernel names this process by; -1 */
    bool cma_offered, cma_heard, cma_answered;
    uint32_t peer_pid;
    bool reads_peer;   /* the kernel named the peer's process: this side reads it */
    bool read_by_peer; /* the peer proved it read this side: chunks go by reference */
};

/* The peer's name for messages ("(closed)" without a link). */
const char *xfer_link_name(const struct xfer_link *l);
void xfer_link_init(struct xfer_link *l, xt *t, const struct base_log *log, uint64_t *violations);
/* Open the data endpoint to the peer's worker address and start its
 * wire-up; `user` goes with the endpoint's errors. */
int xfer_link_open(struct xfer_link *l, const uint8_t *addr, size_t len, void *user);
/* Send a control message (header and data copied), or queue it until the
 * wire-up completes. */
int xfer_link_send(struct xfer_link *l, unsigned id, const void *hdr, size_t hlen, const void *data, size_t len);
/* Connected and wired: data may go. */
bool xfer_link_ready(const struct xfer_link *l);
/* KVRT_OK while connected; otherwise the error naming the peer, for `what`. */
int xfer_link_ok(const struct xfer_link *l, const char *what);
/* The link fails with this reason (the first one stays); its cause is
 * XFER_CAUSE_CONNECTION unless one was set (xfer_link_fail_as). */
void xfer_link_fail(struct xfer_link *l, const char *fmt, ...) KVRT_PRINTF(2, 3);
void xfer_link_fail_as(struct xfer_link *l, enum xfer_fail_cause cause, const char *fmt, ...) KVRT_PRINTF(3, 4);
/* A message from the peer failed a check: counted, logged in one line that
 * names the peer, and the link fails. */
void xfer_link_violation(struct xfer_link *l, const char *why);
/* Close the endpoint by force and drop what waits. */
void xfer_link_close(struct xfer_link *l);

/* ---- one host (link_cma.c) ---------------------------------------------------- */

/* Once the session is open: tell the peer where this side's cookie lies
 * (when the agent reads and is read on one host). */
void xfer_link_cma_offer(struct xfer_link *l);
/* The peer's CMA: read its cookie in its process; answer CMA_OK. */
void xfer_link_on_cma(struct xfer_link *l, const struct wire_msg *m);
/* The peer's answer to this side's CMA. */
void xfer_link_on_cma_ok(struct xfer_link *l, const struct wire_msg *m);
/*
 * Whether a reference lies inside one range the peer announced, of the
 * kind it needs (a sealed chunk in its send slots, its seal among their
 * seals; an unsealed one in its cache), all sums overflow-checked.  false:
 * a violation naming the address, the length and the ranges.
 */
bool xfer_link_ref_inside(struct xfer_link *l, const struct wire_ref *ref);
/*
 * Read a chunk the peer gave by reference into `local` (n pieces, len
 * bytes), its seal checked before and after.  KVRT_OK; otherwise the link
 * failed (the peer's process gone, or a reference to memory it does not
 * have: a violation) or, *reused, the slot was reused meanwhile (its
 * stream fails).
 */
int xfer_link_read(struct xfer_link *l, const struct wire_ref *ref, const struct iovec *local, size_t n, bool *reused);

#endif
