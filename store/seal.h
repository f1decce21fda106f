/* The tenant secret of a store: keyed chunk keys and sealed entries
 * (docs/store.md "Tenants", docs/security.md "The store").
 *
 * Engines that may share entries hold one secret (a key file of 32 bytes
 * or more).  From it two keys are derived with HKDF-SHA256: one keys the
 * chunk-key chain (HMAC-SHA256 instead of SHA-256), so a store without the
 * secret can neither compute nor probe an entry's name; the other seals
 * every entry that leaves the process (disk slot, shared-tier value) with
 * AES-256-GCM, its header as associated data, so that an entry changed,
 * forged without the secret, or copied under another key fails its tag.
 *
 * Layer 1 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_SEAL_H
#define KVRT_STORE_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvrt/store.h>

/* The secret's file: at least 32 bytes, at most 4096 (a trailing newline is
 * not part of it). */
#define STORE_SECRET_MIN 32u
#define STORE_SECRET_MAX 4096u
/* The AES-GCM nonce and tag. */
#define STORE_SEAL_NONCE_BYTES 12u
#define STORE_SEAL_TAG_BYTES 16u

struct store_secret {
    uint8_t chain_key[32]; /* HMAC-SHA256 key of the chunk-key chain */
    uint8_t seal_key[32];  /* AES-256-GCM key of sealed entries */
    uint8_t id[8];         /* names the secret in messages, reveals nothing of it */
};

/* Read and check the key file (a regular file of this user or root, no
 * group or other access, STORE_SECRET_MIN..MAX bytes), then derive the
 * keys.  source says where the path came from ("key_file",
 * "KVRT_STORE_KEY_FILE") for the messages. */
int store_secret_load(const char *path, const char *source, struct store_secret *out);
/* Derive from bytes already read (tests; the loader ends here). */
int store_secret_derive(const uint8_t *bytes, size_t len, struct store_secret *out);
void store_secret_wipe(struct store_secret *s);

/* A chunk key keyed by the secret: HMAC-SHA256(chain_key, msg). */
int store_secret_mac(const struct store_secret *s, const void *const *parts, const size_t *lens, size_t n,
                     uint8_t out[KVRT_STORE_KEY_BYTES]);

/* Seal: header (STORE_HEADER_BYTES, its fields written, the nonce and tag
 * fields filled here) is authenticated as it is; payload (n bytes) is
 * encrypted into out (may equal payload).  Returns KVRT_OK or an error with
 * a message. */
int store_seal(const struct store_secret *s, uint8_t *header, const uint8_t *payload, uint64_t n, uint8_t *out);
/* Open in place: authenticate header and payload, decrypt the payload.
 * NULL when good; else why (static text): the payload is then garbage and
 * must not be used. */
const char *store_unseal(const struct store_secret *s, const uint8_t *header, uint8_t *payload, uint64_t n);

#endif
