/*
 * The agent, its peers and handles: what the public API holds.
 *
 * Layer 6 of libkvrt-xfer (the top): plan, streams, links, the wire, auth
 * and the transport below it; nothing below includes this.
 */
#ifndef KVRT_XFER_AGENT_H
#define KVRT_XFER_AGENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "address.h"
#include "auth.h"
#include "base/lock.h"
#include "base/log.h"
#include "inet.h"
#include "metadata.h"
#include "plan.h"
#include "stream.h"
#include "transport.h"
#include "wire.h"

/* Where a peer is in its handshake (docs/xfer.md, "The handshake"). */
enum xfer_hs {
    XFER_HS_NONE,        /* loaded from metadata: no handshake */
    XFER_HS_WAIT_HELLO,  /* server: connection accepted */
    XFER_HS_WAIT_PROOF,  /* server: REPLY sent */
    XFER_HS_WAIT_READY,  /* server: ACCEPT sent, data endpoint opened */
    XFER_HS_WAIT_REPLY,  /* client: HELLO sent */
    XFER_HS_WAIT_ACCEPT, /* client: PROOF sent */
    XFER_HS_WAIT_SENT,   /* client: READY on its way */
    XFER_HS_DONE,
    XFER_HS_FAILED,
};

/* Grants: which of this cache's blocks the peer may write and read. */
struct xfer_grants {
    uint8_t *write, *read; /* a bit per block, allocated on first grant */
};

struct kvrt_xfer_peer {
    kvrt_xfer_agent *agent;
    kvrt_xfer_peer *next;
    struct xfer_link link;
    xt_ep *conn_ep; /* the connection (handshake); NULL for a loaded peer */
    bool loaded;    /* md holds the peer's checked metadata */
    struct xfer_md md;
    uint8_t *blob; /* the peer's metadata (md points into it) */
    size_t blob_len;
    bool in_session; /* registered with the wire */
    /* The handshake. */
    enum xfer_hs hs;
    bool handed_out; /* accept returned it (or its failure) */
    double hs_deadline;
    uint8_t nonce_mine[XFER_NONCE_BYTES], nonce_theirs[XFER_NONCE_BYTES];
    uint8_t *hello, *reply; /* the transcript's data */
    size_t hello_len, reply_len;
    bool ready_posted; /* client: READY is on its way */
    bool told;         /* server: the client was sent why it is refused */
    bool from_known;   /* server: the client's address */
    struct xfer_inet from;
    int hs_status;
    char hs_why[700];
    bool closed_here;
    bool cleaned;
    struct xfer_grants grants;
    uint64_t notes_queued;
};

struct xfer_note {
    struct xfer_note *next;
    kvrt_xfer_peer *peer;
    uint8_t *data;
    size_t len;
};

struct kvrt_xfer_handle {
    kvrt_xfer_handle *next;
    kvrt_xfer_agent *agent; /* NULL once the agent is destroyed */
    struct xfer_out *out;   /* push */
    struct xfer_in *in;     /* pull */
    int status;             /* KVRT_XFER_PENDING, KVRT_OK or the failure */
    char why[640];
    struct kvrt_xfer_plan plan;
    double t_post;
};

struct kvrt_xfer_agent {
    pthread_mutex_t lock;
    xt *t;
    struct xfer_local local;
    struct xfer_pool pool;
    struct xfer_streams streams;
    struct wire_sessions sessions;
    struct base_log log;
    struct xfer_key key;
    uint32_t flags;              /* KVRT_XFER_INSECURE, KVRT_XFER_REQUIRE_GRANTS */
    struct xfer_inet_net *allow; /* networks a peer may connect from (inet.h) */
    size_t num_allow;
    struct xfer_grants grants; /* every peer's (kvrt_xfer_agent_grant) */
    double timeout_s;
    bool cma_allowed; /* reads peers' memory on one host (cma.h) */
    uint64_t id;
    uint8_t nonce[XFER_NONCE_BYTES];
    double registration_s;
    uint64_t registered_bytes;

    kvrt_xfer_peer *peers;
    uint64_t peer_count; /* names "peer N" */
    kvrt_xfer_handle *handles;
    struct xfer_note *notes, **notes_tail;
    uint64_t notes_queued;
    double last_progress;
    double last_stranger_log;
    struct kvrt_xfer_stats stats;
};

/* peer.c */
int xfer_peer_new(kvrt_xfer_agent *a, kvrt_xfer_peer **out);
/* Parse and check the peer's metadata (p->blob; kept: md points into it). */
int xfer_peer_take_blob(kvrt_xfer_agent *a, kvrt_xfer_peer *p);
/* Refused where UCX 1.13 would abort on tcp interfaces of both families
 * (peer.c); peer_worker_addr NULL: a peer not yet known. */
int xfer_check_families(const kvrt_xfer_agent *a, const void *peer_worker_addr, const char *fn);
/* Register the session: messages naming `theirs` go to this peer. */
int xfer_peer_session(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const uint8_t token[XFER_TOKEN_BYTES], bool await_ready);
/* A failed or closed peer: its streams fail, its endpoints close. */
void xfer_peer_cleanup(kvrt_xfer_peer *p);
void xfer_peer_drop(kvrt_xfer_agent *a, kvrt_xfer_peer *p, bool polite);
kvrt_xfer_peer *xfer_peer_of_conn(kvrt_xfer_agent *a, const xt_ep *ep);

/* handshake.c: the handshake's messages and deadlines, and what it sends. */
/* This agent's metadata (signed with its key, when it has one). */
int xfer_agent_blob(kvrt_xfer_agent *a, uint8_t **blob, size_t *len);
/* The peer's handshake failed (the first reason is kept). */
void xfer_hs_fail(kvrt_xfer_peer *p, int status, const char *fmt, ...) KVRT_PRINTF(3, 4);
void xfer_hs_on_message(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct xt_msg *m);
void xfer_hs_on_conn(kvrt_xfer_agent *a, xt_conn *c);
void xfer_hs_on_ready(kvrt_xfer_agent *a, kvrt_xfer_peer *p);
void xfer_hs_check(kvrt_xfer_agent *a, double now);

/* grant.c */
bool xfer_granted(void *peer, int64_t id, bool write);
void xfer_grants_free(struct xfer_grants *g);

/* dispatch.c: the transport's callbacks (every message it hands up). */
void xfer_dispatch_callbacks(kvrt_xfer_agent *a, struct xt_callbacks *out);

/* progress.c */
void xfer_progress_round(kvrt_xfer_agent *a);
void xfer_idle(kvrt_xfer_agent *a, double deadline);
int xfer_note_push(void *agent, struct xfer_link *from, uint8_t *data, size_t len);

/* handle.c */
void xfer_handle_end(void *handle, int status, const char *why);

#endif
