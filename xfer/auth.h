/*
 * Proving knowledge of a pre-shared key, and nothing else: the key file,
 * fresh nonces, HMAC-SHA-256 (OpenSSL libcrypto) over the handshake and over signed
 * metadata, the session token both sides derive, constant-time compares.
 * Every construction is written once here (docs/xfer.md, "The handshake").
 *
 * Layer 1 of libkvrt-xfer: libcrypto and libkvrt's messages only.
 */
#ifndef KVRT_XFER_AUTH_H
#define KVRT_XFER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limits.h"
#include "metadata.h"

enum { XFER_TOKEN_BYTES = 16, XFER_KEY_MIN = 16, XFER_KEY_MAX = 4096 };

/* A loaded key; no key (bytes NULL) means the agent proves nothing, and its
 * MACs use an all-zero key so that one code path serves both. */
struct xfer_key {
    uint8_t *bytes;
    size_t len;
    char path[256]; /* for messages */
};

/*
 * The key in `path` (`source` says where the path came from, e.g.
 * "KVRT_XFER_KEY_FILE" or "key_file", for messages).  Refused, naming the
 * file: not a regular file, owned by another user (not root), readable or
 * writable by group or others, shorter than XFER_KEY_MIN or longer than
 * XFER_KEY_MAX bytes (one trailing newline is not part of the key).
 */
int xfer_key_load(const char *path, const char *source, struct xfer_key *key);
void xfer_key_free(struct xfer_key *key);
static inline bool xfer_key_set(const struct xfer_key *key)
{
    return key && key->bytes;
}

/* libcrypto's HMAC, fetched once per process; KVRT_ERR_INTERNAL if it
 * cannot be. */
int xfer_auth_init(void);
void xfer_random(void *buf, size_t n);
/* Constant time. */
bool xfer_same(const void *a, const void *b, size_t n);

/* What the two sides of a handshake hash: both nonces and both messages'
 * data (the client's HELLO data, the server's REPLY data). */
struct xfer_transcript {
    const uint8_t *client_nonce, *server_nonce;
    const void *hello;
    size_t hello_len;
    const void *reply;
    size_t reply_len;
};

/* The server's proof (in REPLY), the client's (in PROOF), and the session
 * token (never sent when a key is set). */
void xfer_prove_server(const struct xfer_key *k, const struct xfer_transcript *t, uint8_t mac[XFER_MAC_BYTES]);
void xfer_prove_client(const struct xfer_key *k, const struct xfer_transcript *t, uint8_t mac[XFER_MAC_BYTES]);
void xfer_session_token(const struct xfer_key *k, const struct xfer_transcript *t, uint8_t token[XFER_TOKEN_BYTES]);

/* The cookie an agent keeps in its memory for a session, at an address it
 * tells the peer (CMA): only the two sides of the session can compute it,
 * so a process that holds it at that address is the peer (the agent id
 * tells the two sides' cookies apart). */
void xfer_cma_cookie(const uint8_t token[XFER_TOKEN_BYTES], uint64_t agent_id, uint8_t cookie[XFER_MAC_BYTES]);
/* The name of the socket the side of `agent_id` listens on while it offers
 * to be read (cma.h): only the session's two sides can compute it, so no
 * other process listens there. */
void xfer_cma_socket_name(const uint8_t token[XFER_TOKEN_BYTES], uint64_t agent_id, uint8_t name[XFER_MAC_BYTES]);
/* What a reader sends in CMA_OK: a MAC of the challenge it read in the
 * offering side's memory, proof that it really reads that process. */
void xfer_cma_proof(const uint8_t token[XFER_TOKEN_BYTES], const uint8_t challenge[XFER_MAC_BYTES],
                    uint8_t proof[XFER_MAC_BYTES]);

/* Metadata: the MAC of a signed blob's first `len` bytes. */
void xfer_sign_blob(const struct xfer_key *k, const void *blob, size_t len, uint8_t mac[XFER_MAC_BYTES]);
/* The token of two agents that loaded each other's blobs (no handshake):
 * from both agents' ids and nonces, in an order both sides see alike. */
void xfer_pair_token(const struct xfer_key *k, uint64_t id_a, const uint8_t nonce_a[XFER_NONCE_BYTES], uint64_t id_b,
                     const uint8_t nonce_b[XFER_NONCE_BYTES], uint8_t token[XFER_TOKEN_BYTES]);

#endif
