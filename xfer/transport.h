/*
 * The transport: every UCP call of libkvrt-xfer, and nothing about what
 * the messages mean.  A context and worker with active messages only (no
 * RMA: docs/xfer.md, "Choosing the data path"), endpoints with peer error
 * handling, a listener, registered memory, sends and rendezvous receives.
 *
 * Every active-message id a peer can send has a handler: the ids the
 * protocol uses go to `message`, every other id (0, and num_ids..65535) to
 * a refusing handler, because UCX 1.13 reads past its handler table (and
 * crashes) on an id nobody registered.  An address from a peer goes to UCX
 * only after address.h has checked it, and as a zero-padded copy.
 *
 * Layer 1 of libkvrt-xfer.
 */
#ifndef KVRT_XFER_TRANSPORT_H
#define KVRT_XFER_TRANSPORT_H

#include <netinet/in.h>
#include <sys/socket.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limits.h"

typedef struct xt xt;
typedef struct xt_ep xt_ep;
typedef struct xt_conn xt_conn;
typedef struct xt_mem xt_mem;

/* A received active message. */
struct xt_msg {
    unsigned id;
    const void *hdr;
    size_t hlen;
    void *data; /* eager: the bytes (valid during the call); rendezvous: a descriptor */
    size_t len;
    bool rndv;
    xt_ep *reply; /* the endpoint it came on, when the sender asked (NULL otherwise) */
};

/* What becomes of a received message: consumed; a rendezvous descriptor
 * kept (to be received with xt_recv or given back with xt_release); or a
 * rendezvous refused (the sender's send fails). */
enum xt_verdict { XT_DONE, XT_KEEP, XT_REFUSE };

struct xt_callbacks {
    void *arg;
    enum xt_verdict (*message)(void *arg, const struct xt_msg *m);
    /* An id the protocol does not use: nothing is known of its sender. */
    void (*stray)(void *arg, unsigned id, bool rndv);
    /* A connection request at the listener: answer with xt_ep_accept or
     * xt_conn_reject (each frees it). */
    void (*conn)(void *arg, xt_conn *c);
    /* An endpoint failed (the peer died, the network broke). */
    void (*ep_error)(void *arg, xt_ep *ep, void *ep_user, const char *why);
};

/* Ids 1..num_ids-1 go to callbacks->message. */
int xt_create(const struct xt_callbacks *callbacks, unsigned num_ids, xt **out);
/* Every endpoint is closed by force and what UCX completes within a
 * couple of seconds completes (callbacks run); then no callback runs any
 * more.  Memory may be unmapped after this. */
void xt_quiesce(xt *t);
/* Quiesce (if not done), then the listener, worker and context go. */
void xt_destroy(xt *t);

/* This worker's address (valid until xt_destroy). */
void xt_worker_address(const xt *t, const uint8_t **addr, size_t *len);
/* The worker's events until none is left or XT_PROGRESS_BUDGET_S (1 ms)
 * has passed; the number it handled. */
#define XT_PROGRESS_BUDGET_S 1e-3
unsigned xt_progress(xt *t);
int xt_event_fd(const xt *t);
/* KVRT_OK: armed, the event fd signals the next event; KVRT_XFER_PENDING:
 * events are waiting, progress again. */
int xt_arm(xt *t);
/* Requests handed to UCX and not yet complete, and endpoints still
 * closing. */
uint64_t xt_in_flight(const xt *t);
/* Seconds the handlers' registration took, and their table's bytes. */
void xt_handler_cost(const xt *t, double *seconds, uint64_t *bytes);

int xt_mem_map(xt *t, void *addr, size_t len, xt_mem **out);
void xt_mem_unmap(xt *t, xt_mem *m);

/* The families of this worker's tcp interfaces (address.h). */
unsigned xt_tcp_families(const xt *t);
/* The same of a peer's worker address, one this side has checked. */
unsigned xt_peer_tcp_families(const xt *t, const void *worker_addr);
/* On an IPv4 or IPv6 socket address (inet.h). */
int xt_listen(xt *t, const struct sockaddr *sa, socklen_t len, uint16_t *bound_port);
bool xt_listening(const xt *t);
/* The connecting side's address (false when UCX does not say). */
bool xt_conn_client(const xt_conn *c, struct sockaddr_storage *out);
void xt_conn_reject(xt *t, xt_conn *c);

/* Endpoints carry a user pointer (given to ep_error). */
int xt_ep_accept(xt *t, xt_conn *c, void *user, xt_ep **out);
int xt_ep_connect(xt *t, const struct sockaddr *sa, socklen_t len, void *user, xt_ep **out);
/* To a peer's worker address: KVRT_ERR_INVALID naming what is wrong when
 * address.h refuses it; UCX never sees such an address. */
int xt_ep_to_address(xt *t, const uint8_t *addr, size_t len, void *user, xt_ep **out);
void xt_ep_set_user(xt_ep *ep, void *user);
/* Close by force: its requests complete with errors; the endpoint is
 * freed once UCX is done with it (the pointer is dead at once). */
void xt_ep_close(xt *t, xt_ep *ep);
/* Close ep once the peer has closed its side, or after `seconds`, whichever
 * comes first; until then nothing that arrives on it reaches the callbacks
 * and xt_ep_close leaves it alone.  A lingering close stands in for a
 * flush before closing: UCX 1.13's tcp flush is a zero-length put whose
 * acknowledgement, once two workers' connections to each other have been
 * merged, can reach an endpoint that never put and abort the process in
 * uct_tcp_ep_handle_put_ack (docs/xfer.md, "Faults"). */
void xt_ep_linger(xt *t, xt_ep *ep, double seconds);

/* Completion of a send, a receive or a flush: status KVRT_OK, or
 * KVRT_ERR_DEVICE with UCX's reason in `why`; `len` the bytes received. */
typedef void (*xt_done)(void *user, int status, size_t len, const char *why);

enum {
    XT_EAGER = 1u << 0, /* copied through UCX's buffers: control and short data */
    XT_RNDV = 1u << 1,  /* the receiver fetches the bytes (zero-copy) */
    XT_REPLY = 1u << 2, /* the receiver learns the endpoint (handshake) */
    XT_COPY = 1u << 3,  /* the data is copied here first: the caller's buffer is free at once */
};

/*
 * Send an active message.  KVRT_OK: `done` runs exactly once, possibly
 * before xt_send returns; otherwise the error, and `done` never runs.  The
 * header is always copied; the data too with XT_COPY, else it must stay
 * valid until `done`.  `mem` (may be NULL) is the data's registration.
 */
int xt_send(xt_ep *ep, unsigned id, const void *hdr, size_t hlen, const void *data, size_t len, unsigned flags,
            xt_mem *mem, xt_done done, void *user);
/* Complete what was sent on `ep` (the wire-up, before first use). */
int xt_flush(xt_ep *ep, xt_done done, void *user);
/* Receive a kept rendezvous descriptor into dst (as xt_send for `done`);
 * after a failure the descriptor is UCX's (its sender's send fails when
 * the endpoint closes). */
int xt_recv(xt *t, void *desc, void *dst, size_t len, xt_mem *mem, xt_done done, void *user);
void xt_release(xt *t, void *desc);
/* Requests still under way whose completion names `user` complete
 * without calling it (its owner is going away). */
void xt_forget(xt *t, const void *user);

#endif
