/*
 * The wire: the protocol's messages, their encoding, and the complete check
 * of each one before anything above sees it (docs/xfer.md, "The protocol").
 *
 * After the handshake every message starts with the sender's agent id, a
 * stream id and the session's token.  wire_decode finds the session by id
 * and token together (a known id with a wrong token is a stranger, never the
 * peer it names, so a forgery cannot fail or speak for a real peer), holds a
 * session to READY before anything else, and checks every field of the
 * message alone: sizes, ids, flags, statuses, counts, reserved bytes.  What
 * a message means within its stream (which chunk, which bytes) is the
 * stream's check (stream.h).
 *
 * Layer 2 of libkvrt-xfer: the key's constant-time compare (auth.h) only.
 */
#ifndef KVRT_XFER_WIRE_H
#define KVRT_XFER_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "limits.h"

enum wire_id {
    /* The handshake, on the connection endpoint. */
    WIRE_HELLO = 1,
    WIRE_REPLY = 2,
    WIRE_PROOF = 3,
    WIRE_ACCEPT = 4,
    /* A session, on the data endpoints. */
    WIRE_READY = 5,
    WIRE_BEGIN = 6,
    WIRE_DATA = 7,
    WIRE_ACK = 8,
    WIRE_END = 9,
    WIRE_ABORT = 10,
    WIRE_NOTIFY = 11,
    WIRE_BYE = 12,
    /* Reading a peer on the same host (docs/xfer.md, "One host"). */
    WIRE_CMA = 13,     /* where this side's session cookie lies: read it */
    WIRE_CMA_OK = 14,  /* whether this side read it (and a MAC of the challenge it read) */
    WIRE_RELEASE = 15, /* a chunk given by reference was read */
    WIRE_NUM_IDS = 16,
};

/* "HELLO", "DATA", ...; "an unknown message" past the table. */
const char *wire_name(unsigned id);

#define WIRE_MAGIC 0x4b565848u /* "HXVK" little-endian: kvrt-xfer's handshake */
#define WIRE_PROTOCOL 6u       /* 6: the CMA cookie is followed by the ranges read by reference */
enum { WIRE_KEYED = 1u };      /* the sender holds a key and proves it */
/* Metadata in a handshake is at most this long. */
#define WIRE_MAX_BLOB (16u << 20)

struct wire_hello {
    uint32_t magic;
    uint16_t protocol;
    uint16_t flags;
    uint8_t nonce[XFER_NONCE_BYTES];
}; /* data: the client's metadata */

struct wire_reply {
    int32_t status;
    uint16_t protocol;
    uint16_t flags;
    uint8_t nonce[XFER_NONCE_BYTES];
    uint8_t mac[XFER_MAC_BYTES]; /* the server's proof */
};                               /* data: the server's metadata, or why it refused */

struct wire_proof {
    uint8_t mac[XFER_MAC_BYTES]; /* the client's proof */
};

struct wire_accept {
    int32_t status;
    uint32_t reserved;
}; /* data: why the server refused */

struct wire_hdr {
    uint64_t from; /* the sender's agent id */
    uint64_t xid;  /* the stream, chosen by its initiator; 0 for none */
    uint8_t token[XFER_TOKEN_BYTES];
};

enum { WIRE_PUSH = 1, WIRE_PULL = 2 };
/* The order of a stream's bytes: a layout's nesting (0..5, enum
 * kvrt_layout) or kvrt's staging order (block, layer, [H, N, C]). */
enum { WIRE_ORDER_STAGING = 6 };

enum {
    WIRE_BEGIN_NOTE = 1u, /* a push with a notification (maybe empty) */
    WIRE_BEGIN_REFS = 2u, /* a pull whose chunks its sender reads by reference */
};

struct wire_begin {
    struct wire_hdr h;
    uint16_t kind; /* WIRE_PUSH: data = the receiver's ids, then the notification;
                    * WIRE_PULL: data = the server's (source) ids */
    uint16_t flags;
    uint32_t order;
    uint64_t count; /* blocks */
    /* The selection on the side that receives this BEGIN. */
    uint64_t layer_start, num_layers, head_start, num_heads;
    uint64_t chunk_bytes; /* every chunk but the last */
    uint64_t total_bytes;
    uint64_t note_len;
    /* A token range (protocol 4; count 0: whole blocks): the ids are then
     * the receiving side's table from the block of token_first on, and
     * the order walks segments of token_seg tokens. */
    uint64_t token_first, token_count, token_seg;
};

enum {
    WIRE_DATA_REPLY = 1u, /* a chunk of the receiver's own pull */
    WIRE_DATA_REF = 2u,   /* not the bytes: where they lie in the sender (a wire_ref) */
};

struct wire_data {
    struct wire_hdr h;
    uint64_t chunk;
    uint32_t flags;
    uint32_t reserved;
}; /* data: the chunk's bytes, or with WIRE_DATA_REF a wire_ref */

/* A chunk by reference: its bytes at `addr` in the sender's process, to be
 * read by the receiver (which proved it can) and then RELEASEd.  A staging
 * slot's seal (its address, 0 for none, and value) must read the same
 * before and after: the slot was not reused meanwhile. */
struct wire_ref {
    uint64_t addr, len;
    uint64_t seal_addr, seal;
};

/* CMA: the sender's process and the address of its cookie for this
 * session (HMAC of the session token and its agent id), followed there by
 * a fresh 32-byte challenge; the host it runs on (boot and pid-namespace
 * identity), so another host never reads.  The reader believes the pid
 * only as the kernel confirms it (link_cma.c); its CMA_OK 0 carries a MAC
 * of the challenge. */
struct wire_cma {
    struct wire_hdr h;
    uint64_t cookie;
    uint32_t pid;
    uint32_t reserved;
    uint8_t host[16];
};

/* RELEASE: chunk `chunk` of the receiver's stream was read; flags
 * WIRE_RELEASE_PULL: a pull the receiver serves, else its push. */
enum { WIRE_RELEASE_PULL = 1u };
struct wire_release {
    struct wire_hdr h;
    uint64_t chunk;
    uint32_t flags;
    uint32_t reserved;
};

/* ACK (the receiver of a push: all in place, or why not) and END (the
 * server of a pull: why it stopped). */
struct wire_status {
    struct wire_hdr h;
    int32_t status;
    uint32_t reserved;
}; /* data: the reason */

enum { WIRE_ABORT_PULL = 1u }; /* the sender's pull; else its push */

struct wire_abort {
    struct wire_hdr h;
    uint32_t flags;
    uint32_t reserved;
};

/* A session's identity as its sender writes it. */
struct wire_ident {
    uint64_t from;
    uint8_t token[XFER_TOKEN_BYTES];
};

struct wire_hdr wire_hdr_make(const struct wire_ident *me, uint64_t xid);

/* ---- sessions ------------------------------------------------------------ */

struct wire_session {
    struct wire_ident peer; /* what the peer writes */
    void *owner;
    bool await_ready;
};

struct wire_sessions {
    struct wire_session *v;
    size_t n, cap;
};

/* A peer's session: messages naming `peer` go to `owner`.  With
 * `await_ready`, READY must come first. */
int wire_session_add(struct wire_sessions *s, const struct wire_ident *peer, void *owner, bool await_ready);
void wire_session_remove(struct wire_sessions *s, void *owner);
void wire_sessions_free(struct wire_sessions *s);
/* A session of another owner already names that agent id. */
void *wire_session_owner(const struct wire_sessions *s, uint64_t from);

/* ---- decoding ------------------------------------------------------------ */

struct wire_msg {
    unsigned id;
    void *owner; /* the session's */
    uint64_t xid;
    union {
        struct wire_hdr plain; /* READY, NOTIFY, BYE */
        struct wire_begin begin;
        struct wire_data data;
        struct wire_status status; /* ACK, END, CMA_OK */
        struct wire_abort abort;
        struct wire_cma cma;
        struct wire_release release;
    } u;
    const uint8_t *payload; /* eager data; a rendezvous descriptor for DATA */
    size_t len;
    bool rndv;
};

enum wire_result {
    WIRE_OK,
    WIRE_STRANGER,  /* no session has that id and token: dropped */
    WIRE_VIOLATION, /* from a session, but malformed: *why says how; that peer fails */
};

/* A message after the handshake (ids WIRE_READY and up). */
enum wire_result wire_decode(struct wire_sessions *s, unsigned id, const void *hdr, size_t hlen, const void *data,
                             size_t len, bool rndv, struct wire_msg *out, char *why, size_t n);

/* The handshake's messages (their sender is known by its endpoint): false
 * with *why when malformed. */
bool wire_decode_hello(const void *hdr, size_t hlen, size_t len, bool rndv, struct wire_hello *out, char *why,
                       size_t n);
bool wire_decode_reply(const void *hdr, size_t hlen, size_t len, bool rndv, struct wire_reply *out, char *why,
                       size_t n);
bool wire_decode_proof(const void *hdr, size_t hlen, size_t len, bool rndv, struct wire_proof *out, char *why,
                       size_t n);
bool wire_decode_accept(const void *hdr, size_t hlen, size_t len, bool rndv, struct wire_accept *out, char *why,
                        size_t n);

/* A status a peer may send as a transfer's outcome: KVRT_OK or a kvrt
 * error. */
bool wire_status_valid(int32_t status);

#endif
