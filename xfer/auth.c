/*
 * HMAC-SHA-256 from libsodium (crypto_auth_hmacsha256); every input is
 * length-prefixed so that no two transcripts hash alike, and every MAC has
 * its own label so that no proof can stand in for another.
 *
 * Layer 1 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "auth.h"

static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;
static int sodium_status = -1;

static void start_sodium(void)
{
    sodium_status = sodium_init();
}

int xfer_auth_init(void)
{
    pthread_once(&sodium_once, start_sodium);
    if (sodium_status < 0)
        return BASE_FAIL(KVRT_ERR_INTERNAL, "kvrt-xfer: libsodium could not start (sodium_init failed)");
    return KVRT_OK;
}

void xfer_random(void *buf, size_t n)
{
    randombytes_buf(buf, n);
}

bool xfer_same(const void *a, const void *b, size_t n)
{
    return sodium_memcmp(a, b, n) == 0;
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
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: cannot stat the key file \"%s\": %s", path, strerror(e));
    }
    const char *bad = NULL;
    char why[160];
    if (!S_ISREG(st.st_mode))
        bad = "is not a regular file";
    else if (st.st_uid != geteuid() && st.st_uid != 0) {
        snprintf(why, sizeof(why), "is owned by uid %u, not by this user (uid %u) or root", (unsigned)st.st_uid,
                 (unsigned)geteuid());
        bad = why;
    } else if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(why, sizeof(why), "has mode %04o: group or others may read or write it (chmod 600 it)",
                 (unsigned)(st.st_mode & 07777));
        bad = why;
    } else if (st.st_size > XFER_KEY_MAX + 1) {
        snprintf(why, sizeof(why), "holds %lld bytes; a key is %d to %d bytes", (long long)st.st_size, XFER_KEY_MIN,
                 XFER_KEY_MAX);
        bad = why;
    }
    if (bad) {
        close(fd);
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-xfer: refusing the key file \"%s\" (from %s): it %s", path, source,
                         bad);
    }
    uint8_t *buf = sodium_malloc(XFER_KEY_MAX + 2);
    if (!buf) {
        close(fd);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a key");
    }
    size_t n = 0;
    for (;;) {
        ssize_t got = read(fd, buf + n, XFER_KEY_MAX + 2 - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
        if (n == XFER_KEY_MAX + 2)
            break;
    }
    close(fd);
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    if (n < XFER_KEY_MIN || n > XFER_KEY_MAX) {
        sodium_free(buf);
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
        sodium_free(key->bytes);
    key->bytes = NULL;
    key->len = 0;
}

/* ---- MACs -------------------------------------------------------------------- */

static void mac_start(crypto_auth_hmacsha256_state *st, const struct xfer_key *k, const char *label)
{
    static const uint8_t zero[32];
    if (xfer_key_set(k))
        crypto_auth_hmacsha256_init(st, k->bytes, k->len);
    else
        crypto_auth_hmacsha256_init(st, zero, sizeof(zero));
    crypto_auth_hmacsha256_update(st, (const uint8_t *)label, strlen(label) + 1);
}

static void mac_part(crypto_auth_hmacsha256_state *st, const void *p, size_t n)
{
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)((uint64_t)n >> (8 * i));
    crypto_auth_hmacsha256_update(st, len, sizeof(len));
    if (n)
        crypto_auth_hmacsha256_update(st, p, n);
}

static void mac_transcript(const struct xfer_key *k, const char *label, const struct xfer_transcript *t,
                           uint8_t out[crypto_auth_hmacsha256_BYTES])
{
    crypto_auth_hmacsha256_state st;
    mac_start(&st, k, label);
    mac_part(&st, t->client_nonce, XFER_NONCE_BYTES);
    mac_part(&st, t->server_nonce, XFER_NONCE_BYTES);
    mac_part(&st, t->hello, t->hello_len);
    mac_part(&st, t->reply, t->reply_len);
    crypto_auth_hmacsha256_final(&st, out);
}

/* The protocol's version is in every label: a proof of one version is
 * never one of another. */
void xfer_prove_server(const struct xfer_key *k, const struct xfer_transcript *t, uint8_t mac[XFER_MAC_BYTES])
{
    mac_transcript(k, "kvrt-xfer 4 server proof", t, mac);
}

void xfer_prove_client(const struct xfer_key *k, const struct xfer_transcript *t, uint8_t mac[XFER_MAC_BYTES])
{
    mac_transcript(k, "kvrt-xfer 4 client proof", t, mac);
}

void xfer_session_token(const struct xfer_key *k, const struct xfer_transcript *t, uint8_t token[XFER_TOKEN_BYTES])
{
    uint8_t full[crypto_auth_hmacsha256_BYTES];
    mac_transcript(k, "kvrt-xfer 4 session token", t, full);
    memcpy(token, full, XFER_TOKEN_BYTES);
    sodium_memzero(full, sizeof(full));
}

void xfer_sign_blob(const struct xfer_key *k, const void *blob, size_t len, uint8_t mac[XFER_MAC_BYTES])
{
    crypto_auth_hmacsha256_state st;
    mac_start(&st, k, "kvrt-xfer 3 metadata");
    mac_part(&st, blob, len);
    crypto_auth_hmacsha256_final(&st, mac);
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
    uint8_t ids[16], full[crypto_auth_hmacsha256_BYTES];
    for (int i = 0; i < 8; i++) {
        ids[i] = (uint8_t)(id_a >> (8 * i));
        ids[8 + i] = (uint8_t)(id_b >> (8 * i));
    }
    crypto_auth_hmacsha256_state st;
    mac_start(&st, k, "kvrt-xfer 4 pair token");
    mac_part(&st, ids, sizeof(ids));
    mac_part(&st, nonce_a, XFER_NONCE_BYTES);
    mac_part(&st, nonce_b, XFER_NONCE_BYTES);
    crypto_auth_hmacsha256_final(&st, full);
    memcpy(token, full, XFER_TOKEN_BYTES);
    sodium_memzero(full, sizeof(full));
}

void xfer_cma_cookie(const uint8_t token[XFER_TOKEN_BYTES], uint64_t agent_id, uint8_t cookie[XFER_MAC_BYTES])
{
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, token, XFER_TOKEN_BYTES);
    static const char label[] = "kvrt-xfer 4 cma cookie";
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)label, sizeof(label));
    uint8_t id[8];
    for (int i = 0; i < 8; i++)
        id[i] = (uint8_t)(agent_id >> (8 * i));
    mac_part(&st, id, sizeof(id));
    crypto_auth_hmacsha256_final(&st, cookie);
}
