/*
 * HMAC-SHA-256 from OpenSSL's libcrypto (EVP_MAC "HMAC"); every input is
 * length-prefixed so that no two transcripts hash alike, and every MAC has
 * its own label so that no proof can stand in for another.  libcrypto is
 * the tree's one crypto library (the store needs it for TLS and AES-GCM;
 * docs/security.md, "Crypto").
 *
 * Layer 1 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/random.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "auth.h"
#include "base/secret_file.h"

/* HMAC fetched once: every MAC then only allocates its context. */
static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;
static EVP_MAC *hmac;

static void start_crypto(void)
{
    hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

int xfer_auth_init(void)
{
    pthread_once(&crypto_once, start_crypto);
    if (!hmac)
        return BASE_FAIL(KVRT_ERR_INTERNAL,
                         "kvrt-xfer: OpenSSL's libcrypto offers no HMAC (EVP_MAC_fetch(\"HMAC\") failed)");
    return KVRT_OK;
}

/* Nonces and ids that are not random are worse than stopping: this does
 * not return without random bytes.
 * libcrypto's DRBG first, the kernel's getrandom(2) if it cannot seed. */
void xfer_random(void *buf, size_t n)
{
    if (n <= (size_t)INT32_MAX && RAND_bytes(buf, (int)n) == 1)
        return;
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            fprintf(stderr, "kvrt-xfer: no random bytes from libcrypto or getrandom(2): %s\n", strerror(errno));
            abort();
        }
        p += got;
        n -= (size_t)got;
    }
}

bool xfer_same(const void *a, const void *b, size_t n)
{
    return CRYPTO_memcmp(a, b, n) == 0;
}

int xfer_key_load(const char *path, const char *source, struct xfer_key *key)
{
    memset(key, 0, sizeof(*key));
    int rc = xfer_auth_init();
    if (rc != KVRT_OK)
        return rc;
    if (!path || !*path)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: %s names no file", source);
    if (strlen(path) >= sizeof(key->path))
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: key file path from %s is %zu bytes long; at most %zu", source,
                         strlen(path), sizeof(key->path) - 1);
    snprintf(key->path, sizeof(key->path), "%s", path);
    /* O_NOFOLLOW is not used: a key in a symlinked secrets folder is
     * normal; what is checked is the file the link names. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: cannot open the key file \"%s\" (from %s): %s", path, source,
                         strerror(errno));
    char why[160];
    const char *bad = base_secret_refusal(fd, "a key", XFER_KEY_MIN, XFER_KEY_MAX, why, sizeof(why));
    if (bad) {
        close(fd);
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: refusing the key file \"%s\" (from %s): it %s", path, source,
                         bad);
    }
    /* Cleared on every free (OPENSSL_clear_free), so no key outlives its
     * agent in the heap. */
    uint8_t *buf = OPENSSL_zalloc(XFER_KEY_MAX + 2);
    if (!buf) {
        close(fd);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a key");
    }
    size_t n = base_secret_read(fd, buf, XFER_KEY_MAX + 2);
    close(fd);
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    if (n < XFER_KEY_MIN || n > XFER_KEY_MAX) {
        OPENSSL_clear_free(buf, XFER_KEY_MAX + 2);
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-xfer: the key file \"%s\" (from %s) holds a %zu-byte key; a key is %d to %d bytes "
                         "(e.g. head -c 32 /dev/urandom > FILE; chmod 600 FILE)",
                         path, source, n, XFER_KEY_MIN, XFER_KEY_MAX);
    }
    key->bytes = buf;
    key->len = n;
    return KVRT_OK;
}

void xfer_key_free(struct xfer_key *key)
{
    if (key->bytes)
        OPENSSL_clear_free(key->bytes, XFER_KEY_MAX + 2);
    key->bytes = NULL;
    key->len = 0;
}

/* ---- MACs -------------------------------------------------------------------- */

/* One HMAC-SHA-256 in progress.  A step libcrypto refuses (it can only run
 * out of memory) marks it failed, and a failed MAC ends in random bytes: a
 * proof nobody can match and a token nobody shares, so a failure refuses
 * the peer, never admits it. */
struct mac {
    EVP_MAC_CTX *ctx;
    bool failed;
};

static void mac_init(struct mac *m, const uint8_t *key, size_t len)
{
    m->failed = true;
    m->ctx = NULL;
    if (xfer_auth_init() != KVRT_OK || !(m->ctx = EVP_MAC_CTX_new(hmac)))
        return;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_END};
    m->failed = EVP_MAC_init(m->ctx, key, len, params) != 1;
}

static void mac_update(struct mac *m, const void *p, size_t n)
{
    if (!m->failed && EVP_MAC_update(m->ctx, p, n) != 1)
        m->failed = true;
}

static void mac_final(struct mac *m, uint8_t out[XFER_MAC_BYTES])
{
    size_t got = 0;
    if (!m->failed && (EVP_MAC_final(m->ctx, out, &got, XFER_MAC_BYTES) != 1 || got != XFER_MAC_BYTES))
        m->failed = true;
    if (m->failed)
        xfer_random(out, XFER_MAC_BYTES);
    EVP_MAC_CTX_free(m->ctx);
    m->ctx = NULL;
}

static void mac_start(struct mac *m, const struct xfer_key *k, const char *label)
{
    static const uint8_t zero[32];
    if (xfer_key_set(k))
        mac_init(m, k->bytes, k->len);
    else
        mac_init(m, zero, sizeof(zero));
    mac_update(m, (const uint8_t *)label, strlen(label) + 1);
}

static void mac_part(struct mac *m, const void *p, size_t n)
{
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)((uint64_t)n >> (8 * i));
    mac_update(m, len, sizeof(len));
    if (n)
        mac_update(m, p, n);
}

static void mac_transcript(const struct xfer_key *k, const char *label, const struct xfer_transcript *t,
                           uint8_t out[XFER_MAC_BYTES])
{
    struct mac m;
    mac_start(&m, k, label);
    mac_part(&m, t->client_nonce, XFER_NONCE_BYTES);
    mac_part(&m, t->server_nonce, XFER_NONCE_BYTES);
    mac_part(&m, t->hello, t->hello_len);
    mac_part(&m, t->reply, t->reply_len);
    mac_final(&m, out);
}

/* The protocol's version is in every label: a proof of one version is
 * never one of another. */
void xfer_prove_server(const struct xfer_key *k, const struct xfer_transcript *t, uint8_t mac[XFER_MAC_BYTES])
{
    mac_transcript(k, "kvrt-xfer 5 server proof", t, mac);
}

void xfer_prove_client(const struct xfer_key *k, const struct xfer_transcript *t, uint8_t mac[XFER_MAC_BYTES])
{
    mac_transcript(k, "kvrt-xfer 5 client proof", t, mac);
}

void xfer_session_token(const struct xfer_key *k, const struct xfer_transcript *t, uint8_t token[XFER_TOKEN_BYTES])
{
    uint8_t full[XFER_MAC_BYTES];
    mac_transcript(k, "kvrt-xfer 5 session token", t, full);
    memcpy(token, full, XFER_TOKEN_BYTES);
    OPENSSL_cleanse(full, sizeof(full));
}

void xfer_sign_blob(const struct xfer_key *k, const void *blob, size_t len, uint8_t mac[XFER_MAC_BYTES])
{
    struct mac m;
    mac_start(&m, k, "kvrt-xfer 3 metadata");
    mac_part(&m, blob, len);
    mac_final(&m, mac);
}

void xfer_pair_token(const struct xfer_key *k, uint64_t id_a, const uint8_t nonce_a[XFER_NONCE_BYTES], uint64_t id_b,
                     const uint8_t nonce_b[XFER_NONCE_BYTES], uint8_t token[XFER_TOKEN_BYTES])
{
    if (id_a > id_b) {
        uint64_t id = id_a;
        id_a = id_b;
        id_b = id;
        const uint8_t *n = nonce_a;
        nonce_a = nonce_b;
        nonce_b = n;
    }
    uint8_t ids[16], full[XFER_MAC_BYTES];
    for (int i = 0; i < 8; i++) {
        ids[i] = (uint8_t)(id_a >> (8 * i));
        ids[8 + i] = (uint8_t)(id_b >> (8 * i));
    }
    struct mac m;
    mac_start(&m, k, "kvrt-xfer 5 pair token");
    mac_part(&m, ids, sizeof(ids));
    mac_part(&m, nonce_a, XFER_NONCE_BYTES);
    mac_part(&m, nonce_b, XFER_NONCE_BYTES);
    mac_final(&m, full);
    memcpy(token, full, XFER_TOKEN_BYTES);
    OPENSSL_cleanse(full, sizeof(full));
}

void xfer_cma_cookie(const uint8_t token[XFER_TOKEN_BYTES], uint64_t agent_id, uint8_t cookie[XFER_MAC_BYTES])
{
    struct mac m;
    mac_init(&m, token, XFER_TOKEN_BYTES);
    static const char label[] = "kvrt-xfer 5 cma cookie";
    mac_update(&m, (const uint8_t *)label, sizeof(label));
    uint8_t id[8];
    for (int i = 0; i < 8; i++)
        id[i] = (uint8_t)(agent_id >> (8 * i));
    mac_part(&m, id, sizeof(id));
    mac_final(&m, cookie);
}

/* A MAC under the session token of a label and one 64-bit value or one
 * MAC-sized value (both length-prefixed). */
static void token_mac(const uint8_t token[XFER_TOKEN_BYTES], const char *label, const void *p, size_t n,
                      uint8_t out[XFER_MAC_BYTES])
{
    struct mac m;
    mac_init(&m, token, XFER_TOKEN_BYTES);
    mac_part(&m, label, strlen(label) + 1);
    mac_part(&m, p, n);
    mac_final(&m, out);
}

void xfer_cma_socket_name(const uint8_t token[XFER_TOKEN_BYTES], uint64_t agent_id, uint8_t name[XFER_MAC_BYTES])
{
    uint8_t id[8];
    for (int i = 0; i < 8; i++)
        id[i] = (uint8_t)(agent_id >> (8 * i));
    token_mac(token, "kvrt-xfer 5 cma socket", id, sizeof(id), name);
}

void xfer_cma_proof(const uint8_t token[XFER_TOKEN_BYTES], const uint8_t challenge[XFER_MAC_BYTES],
                    uint8_t proof[XFER_MAC_BYTES])
{
    token_mac(token, "kvrt-xfer 5 cma read", challenge, XFER_MAC_BYTES, proof);
}
