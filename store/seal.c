/* The tenant secret: its file, the keys derived from it, keyed chunk keys
 * and sealed entries (seal.h).  OpenSSL's libcrypto: HKDF-SHA256 to derive,
 * HMAC-SHA256 for the chain, AES-256-GCM to seal (AES-NI and carry-less
 * multiply make it run at memory-copy rates on a core; docs/store.md
 * "Tenants" has the figures).
 *
 * Layer 1 of libkvrt-store (docs/store.md, "Layers").
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include "base/fail.h"
#include "base/secret_file.h"
#include "entry.h"
#include "seal.h"

/* Where a sealed header keeps its nonce (the two fields a plain entry keeps
 * zero) and its tag (where a plain entry keeps its checksum); everything
 * before the tag is authenticated. */
#define NONCE_A 84u  /* 4 bytes */
#define NONCE_B 104u /* 8 bytes */
#define TAG_AT STORE_CHECKSUM_OFFSET
#define AAD_BYTES STORE_CHECKSUM_OFFSET
/* EVP takes int lengths: feed at most this much per call. */
#define STEP (1u << 30)

static EVP_CIPHER *gcm;
static EVP_MAC *hmac;
static pthread_once_t fetched = PTHREAD_ONCE_INIT;

static void fetch(void)
{
    gcm = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
    hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

static int crypto_ready(void)
{
    pthread_once(&fetched, fetch);
    if (!gcm || !hmac)
        return BASE_FAIL(KVRT_ERR_INTERNAL, "kvrt-store: OpenSSL offers no %s", gcm ? "HMAC" : "AES-256-GCM");
    return KVRT_OK;
}

static int hkdf(const uint8_t *ikm, size_t len, const char *info, uint8_t *out, size_t out_len)
{
    EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
    EVP_KDF_CTX *ctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
    EVP_KDF_free(kdf);
    if (!ctx)
        return BASE_FAIL(KVRT_ERR_INTERNAL, "kvrt-store: OpenSSL offers no HKDF");
    static const char salt[] = "kvrt-store/secret/v1";
    OSSL_PARAM p[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, len),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, sizeof(salt) - 1),
        OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, strlen(info)),
        OSSL_PARAM_construct_end(),
    };
    int ok = EVP_KDF_derive(ctx, out, out_len, p) == 1;
    EVP_KDF_CTX_free(ctx);
    return ok ? KVRT_OK : BASE_FAIL(KVRT_ERR_INTERNAL, "kvrt-store: OpenSSL's HKDF failed");
}

int store_secret_derive(const uint8_t *bytes, size_t len, struct store_secret *out)
{
    memset(out, 0, sizeof(*out));
    int rc = crypto_ready();
    if (rc == KVRT_OK)
        rc = hkdf(bytes, len, "kvrt-store chunk-key chain", out->chain_key, sizeof(out->chain_key));
    if (rc == KVRT_OK)
        rc = hkdf(bytes, len, "kvrt-store entry seal", out->seal_key, sizeof(out->seal_key));
    if (rc == KVRT_OK)
        rc = hkdf(bytes, len, "kvrt-store secret id", out->id, sizeof(out->id));
    if (rc != KVRT_OK)
        store_secret_wipe(out);
    return rc;
}

void store_secret_wipe(struct store_secret *s)
{
    OPENSSL_cleanse(s, sizeof(*s));
}

int store_secret_load(const char *path, const char *source, struct store_secret *out)
{
    memset(out, 0, sizeof(*out));
    if (!path || !*path)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: %s names no file", source);
    /* O_NOFOLLOW is not used: a key in a symlinked secrets folder is
     * normal; what is checked is the file the link names. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: cannot open the key file \"%s\" (from %s): %s", path,
                         source, strerror(errno));
    char why[160];
    const char *bad = base_secret_refusal(fd, "a key", STORE_SECRET_MIN, STORE_SECRET_MAX, why, sizeof(why));
    if (bad) {
        close(fd);
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: refusing the key file \"%s\" (from %s): it %s", path,
                         source, bad);
    }
    uint8_t buf[STORE_SECRET_MAX + 2];
    size_t n = base_secret_read(fd, buf, sizeof(buf));
    close(fd);
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    int rc;
    if (n < STORE_SECRET_MIN || n > STORE_SECRET_MAX)
        rc = BASE_FAIL(KVRT_ERR_INVALID,
                       "kvrt_store_open: the key file \"%s\" (from %s) holds a %zu-byte key; a key is %u to %u "
                       "bytes (e.g. head -c 32 /dev/urandom > FILE; chmod 600 FILE)",
                       path, source, n, STORE_SECRET_MIN, STORE_SECRET_MAX);
    else
        rc = store_secret_derive(buf, n, out);
    OPENSSL_cleanse(buf, sizeof(buf));
    return rc;
}

int store_secret_mac(const struct store_secret *s, const void *const *parts, const size_t *lens, size_t n,
                     uint8_t out[KVRT_STORE_KEY_BYTES])
{
    int rc = crypto_ready();
    if (rc != KVRT_OK)
        return rc;
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(hmac);
    OSSL_PARAM p[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
                      OSSL_PARAM_construct_end()};
    int ok = ctx && EVP_MAC_init(ctx, s->chain_key, sizeof(s->chain_key), p) == 1;
    for (size_t i = 0; ok && i < n; i++)
        ok = EVP_MAC_update(ctx, parts[i], lens[i]) == 1;
    size_t got = 0;
    ok = ok && EVP_MAC_final(ctx, out, &got, KVRT_STORE_KEY_BYTES) == 1 && got == KVRT_STORE_KEY_BYTES;
    EVP_MAC_CTX_free(ctx);
    return ok ? KVRT_OK : BASE_FAIL(KVRT_ERR_INTERNAL, "kvrt-store: OpenSSL's HMAC-SHA256 failed");
}

static void nonce_of(const uint8_t *header, uint8_t iv[STORE_SEAL_NONCE_BYTES])
{
    memcpy(iv, header + NONCE_A, 4);
    memcpy(iv + 4, header + NONCE_B, 8);
}

/* Run the payload through ctx, STEP bytes at a time. */
static bool crypt_steps(EVP_CIPHER_CTX *ctx, bool enc, const uint8_t *in, uint8_t *out, uint64_t n)
{
    for (uint64_t at = 0; at < n;) {
        int step = (int)(n - at < STEP ? n - at : STEP), got = 0;
        int ok = enc ? EVP_EncryptUpdate(ctx, out + at, &got, in + at, step)
                     : EVP_DecryptUpdate(ctx, out + at, &got, in + at, step);
        if (ok != 1 || got != step)
            return false;
        at += (uint64_t)step;
    }
    return true;
}

int store_seal(const struct store_secret *s, uint8_t *header, const uint8_t *payload, uint64_t n, uint8_t *out)
{
    int rc = crypto_ready();
    if (rc != KVRT_OK)
        return rc;
    uint8_t iv[STORE_SEAL_NONCE_BYTES];
    /* A random 96-bit nonce per entry: the same chunk may be sealed by
     * many engines with the same key, with bytes that differ in their last
     * bits, so a nonce derived from the entry's name would repeat. */
    if (RAND_bytes(iv, sizeof(iv)) != 1)
        return BASE_FAIL(KVRT_ERR_INTERNAL, "kvrt-store: OpenSSL's random generator failed");
    memcpy(header + NONCE_A, iv, 4);
    memcpy(header + NONCE_B, iv + 4, 8);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int got = 0;
    int ok = ctx && EVP_EncryptInit_ex2(ctx, gcm, s->seal_key, iv, NULL) == 1 &&
             EVP_EncryptUpdate(ctx, NULL, &got, header, (int)AAD_BYTES) == 1 &&
             crypt_steps(ctx, true, payload, out, n) && EVP_EncryptFinal_ex(ctx, out + n, &got) == 1 && got == 0 &&
             EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, STORE_SEAL_TAG_BYTES, header + TAG_AT) == 1;
    EVP_CIPHER_CTX_free(ctx);
    return ok ? KVRT_OK : BASE_FAIL(KVRT_ERR_INTERNAL, "kvrt-store: OpenSSL's AES-256-GCM failed to seal an entry");
}

const char *store_unseal(const struct store_secret *s, const uint8_t *header, uint8_t *payload, uint64_t n)
{
    if (crypto_ready() != KVRT_OK)
        return "OpenSSL offers no AES-256-GCM";
    uint8_t iv[STORE_SEAL_NONCE_BYTES], tag[STORE_SEAL_TAG_BYTES];
    nonce_of(header, iv);
    memcpy(tag, header + TAG_AT, sizeof(tag));
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int got = 0;
    uint8_t end[16];
    int ok = ctx && EVP_DecryptInit_ex2(ctx, gcm, s->seal_key, iv, NULL) == 1 &&
             EVP_DecryptUpdate(ctx, NULL, &got, header, (int)AAD_BYTES) == 1 &&
             crypt_steps(ctx, false, payload, payload, n) &&
             EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, sizeof(tag), tag) == 1;
    bool setup = ok;
    ok = ok && EVP_DecryptFinal_ex(ctx, end, &got) == 1;
    EVP_CIPHER_CTX_free(ctx);
    if (ok)
        return NULL;
    return setup ? "its seal does not verify: written without this store's key, changed, or moved from another key"
                 : "OpenSSL's AES-256-GCM failed to open it";
}
