/*
 * A peer written against UCP directly, for testing libkvrt-xfer as an
 * attacker would: it speaks the protocol's messages (xfer/wire.h) byte by
 * byte, can complete a real handshake (with the key or without) and then
 * send anything at all, well-formed or not, in its own name or another's.
 * Everything it receives is kept for the test to look at.
 *
 * It runs in the test's process next to the agents it attacks; raw_pump()
 * progresses its worker and the agents given to it.
 */
#ifndef KVRT_TESTS_XFER_RAW_PEER_H
#define KVRT_TESTS_XFER_RAW_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#include <kvrt/xfer.h>

#include "auth.h"
#include "metadata.h"
#include "wire.h"

enum { RAW_MAX_GOT = 4096 };

struct raw;
struct raw_id {
    struct raw *r;
    unsigned id;
};

/* A message the raw peer received. */
struct raw_got {
    unsigned id;
    uint8_t hdr[128];
    size_t hlen;
    uint8_t *data; /* eager data (owned) */
    size_t len;
    bool rndv;
    void *desc; /* a rendezvous kept (raw_take_data receives it) */
};

struct raw {
    ucp_context_h ctx;
    ucp_worker_h w;
    const uint8_t *addr; /* this worker's address */
    size_t addr_len;
    ucp_ep_h conn, data;
    bool conn_failed, data_failed;
    struct raw_got got[RAW_MAX_GOT];
    size_t ngot;
    /* What it says about itself. */
    struct xfer_desc desc; /* the model it claims (a real cache's) */
    uint64_t id;
    uint8_t nonce[XFER_NONCE_BYTES];
    struct xfer_key key; /* empty: no key */
    /* The handshake, when it runs one. */
    uint8_t *hello, *reply;
    size_t hello_len, reply_len;
    uint8_t server_nonce[XFER_NONCE_BYTES];
    struct xfer_md server; /* the victim's metadata */
    bool have_server;
    struct wire_ident me; /* after the handshake: id and token */
    uint64_t next_xid;
    /* Agents raw_pump progresses too. */
    kvrt_xfer_agent *agents[4];
    int nagents;
    struct raw_id ids[WIRE_NUM_IDS];
};

/* A UCP context and worker that claim the model of `model` (a placement
 * of a real cache).  false with a diagnostic. */
bool raw_open(struct raw *r, const kvrt_placement *model);
void raw_close(struct raw *r);
/* Drop what was received (and the endpoints: raw_drop_eps). */
void raw_forget(struct raw *r);
void raw_drop_eps(struct raw *r);

/* Progress the worker and the agents for `seconds`, or until `until`
 * returns true. */
void raw_pump(struct raw *r, double seconds, bool (*until)(struct raw *, void *), void *ctx);
/* The first message of `id` received since raw_forget, waiting up to
 * `seconds`; NULL when none came. */
struct raw_got *raw_wait(struct raw *r, unsigned id, double seconds);

/* A metadata blob in its name: its own worker address, or `addr` instead
 * (len bytes; garbage allowed), signed with its key when it has one. */
uint8_t *raw_blob(struct raw *r, const uint8_t *addr, size_t addr_len, size_t *len);

bool raw_connect(struct raw *r, uint16_t port);
/* An endpoint to an agent's worker address (from its metadata). */
bool raw_connect_data(struct raw *r, const uint8_t *addr, size_t len);
/* Send on an endpoint and progress until UCX took it (bounded); false
 * when it failed. */
bool raw_send(struct raw *r, ucp_ep_h ep, unsigned id, const void *hdr, size_t hlen, const void *data, size_t len,
              bool rndv);

/* A real handshake on a new connection to `port`, with this peer's key
 * (or none); its blob's worker address replaced when addr is given.
 * Returns the status it ended with: KVRT_OK (the session is open, READY
 * sent), or the server's refusal (*why gets its words). */
int raw_handshake(struct raw *r, uint16_t port, const uint8_t *addr, size_t addr_len, char *why, size_t n);
/* Steps of it, for tests that stop or cheat half-way. */
bool raw_hello(struct raw *r, uint16_t port, const uint8_t *addr, size_t addr_len);
int raw_read_reply(struct raw *r, char *why, size_t n);
bool raw_proof(struct raw *r);
int raw_read_accept(struct raw *r, char *why, size_t n);
bool raw_ready(struct raw *r);

/* A session message in this peer's name (its token) on its data endpoint. */
bool raw_session_send(struct raw *r, unsigned id, void *hdr, size_t hlen, const void *data, size_t len, bool rndv);
/* The header of a session message: this peer's id and token. */
struct wire_hdr raw_hdr(const struct raw *r, uint64_t xid);

/* Receive a kept rendezvous (a victim's chunk) into buf (len bytes). */
bool raw_take_data(struct raw *r, struct raw_got *g, void *buf, size_t len);

#endif
