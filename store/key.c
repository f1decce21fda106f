/* Fingerprints and chunk keys: SHA-256 (OpenSSL's libcrypto) over the bytes
 * docs/store.md lists, so that any engine of the same model, at any tensor
 * parallelism, layout or block size, computes the same keys.
 *
 * Layer 1 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/bytes.h"
#include "key.h"
#include "seal.h"

static const char fingerprint_tag[16] = {'k', 'v', 'r', 't', '-', 's', 't', 'o',
                                         'r', 'e', '/', 'f', 'p', '/', 'v', '1'};
static const char groups_tag[16] = {'l', 'a', 'y', 'e', 'r', 's', '_', 'p', 'e', 'r', '_', 'e', 'n', 't', 'r', 'y'};
static const char chunk_tag[16] = {'k', 'v', 'r', 't', '-', 's', 't', 'o', 'r', 'e', '/', 'c', 'k', '/', 'v', '1'};

static int digest_fail(EVP_MD_CTX *ctx, EVP_MD *md)
{
    EVP_MD_CTX_free(ctx);
    EVP_MD_free(md);
    return BASE_FAIL(KVRT_ERR_INTERNAL, "kvrt-store: OpenSSL's SHA-256 failed");
}

int store_fingerprint(struct store_model *m)
{
    EVP_MD *md = EVP_MD_fetch(NULL, "SHA256", NULL);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!md || !ctx || !EVP_DigestInit_ex(ctx, md, NULL))
        return digest_fail(ctx, md);
    uint8_t b[40];
    size_t idlen = strlen(m->model_id);
    int ok = EVP_DigestUpdate(ctx, fingerprint_tag, sizeof(fingerprint_tag));
    base_put_le32(b, KVRT_STORE_FORMAT_VERSION);
    base_put_le64(b + 4, m->chunk_tokens);
    base_put_le32(b + 12, (uint32_t)idlen);
    ok = ok && EVP_DigestUpdate(ctx, b, 16) && EVP_DigestUpdate(ctx, m->model_id, idlen);
    base_put_le32(b, (uint32_t)m->num_layers);
    ok = ok && EVP_DigestUpdate(ctx, b, 4);
    for (size_t l = 0; ok && l < m->num_layers; l++) {
        const struct store_layer *L = &m->layers[l];
        base_put_le32(b, (uint32_t)L->kind);
        base_put_le32(b + 4, (uint32_t)L->dtype);
        base_put_le64(b + 8, m->num_heads);
        base_put_le64(b + 16, L->head_size);
        base_put_le64(b + 24, L->head_size_v);
        ok = EVP_DigestUpdate(ctx, b, 32);
    }
    /* a store of layer groups: its G, so that stores cut differently never
     * share a key (one group adds nothing: the fingerprint without groups) */
    if (ok && m->num_groups > 1) {
        memcpy(b, groups_tag, sizeof(groups_tag));
        base_put_le64(b + 16, m->layers_per_entry);
        ok = EVP_DigestUpdate(ctx, b, 24);
    }
    unsigned int n = 0;
    if (!ok || !EVP_DigestFinal_ex(ctx, m->fingerprint, &n) || n != KVRT_STORE_KEY_BYTES)
        return digest_fail(ctx, md);
    EVP_MD_CTX_free(ctx);
    EVP_MD_free(md);
    return KVRT_OK;
}

int store_chunk_keys(const struct store_model *m, const int32_t *tokens, uint64_t num_chunks, uint8_t *keys)
{
    if (num_chunks == 0)
        return KVRT_OK;
    EVP_MD *md = EVP_MD_fetch(NULL, "SHA256", NULL);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!md || !ctx)
        return digest_fail(ctx, md);
    static const uint8_t zero[KVRT_STORE_KEY_BYTES];
    uint64_t T = m->chunk_tokens;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const bool native = true;
#else
    const bool native = false;
#endif
    uint8_t *le = native ? NULL : malloc(T * 4);
    if (!native && !le) {
        EVP_MD_CTX_free(ctx);
        EVP_MD_free(md);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory for a chunk of %llu tokens", ULL(T));
    }
    for (uint64_t c = 0; c < num_chunks; c++) {
        const int32_t *t = tokens + c * T;
        const void *bytes = t;
        if (!native) {
            for (uint64_t i = 0; i < T; i++)
                base_put_le32(le + 4 * i, (uint32_t)t[i]);
            bytes = le;
        }
        const uint8_t *parent = c ? keys + (c - 1) * KVRT_STORE_KEY_BYTES : zero;
        if (m->secret) {
            /* keyed: without the secret, no one computes or probes a name */
            const void *parts[] = {chunk_tag, m->fingerprint, parent, bytes};
            const size_t lens[] = {sizeof(chunk_tag), KVRT_STORE_KEY_BYTES, KVRT_STORE_KEY_BYTES, T * 4};
            int rc = store_secret_mac(m->secret, parts, lens, 4, keys + c * KVRT_STORE_KEY_BYTES);
            if (rc != KVRT_OK) {
                free(le);
                EVP_MD_CTX_free(ctx);
                EVP_MD_free(md);
                return rc;
            }
            continue;
        }
        unsigned int n = 0;
        int ok = EVP_DigestInit_ex(ctx, md, NULL) && EVP_DigestUpdate(ctx, chunk_tag, sizeof(chunk_tag)) &&
                 EVP_DigestUpdate(ctx, m->fingerprint, KVRT_STORE_KEY_BYTES) &&
                 EVP_DigestUpdate(ctx, parent, KVRT_STORE_KEY_BYTES) && EVP_DigestUpdate(ctx, bytes, T * 4) &&
                 EVP_DigestFinal_ex(ctx, keys + c * KVRT_STORE_KEY_BYTES, &n);
        if (!ok || n != KVRT_STORE_KEY_BYTES) {
            free(le);
            return digest_fail(ctx, md);
        }
    }
    free(le);
    EVP_MD_CTX_free(ctx);
    EVP_MD_free(md);
    return KVRT_OK;
}

void store_dbkey(const struct store_id *id, uint8_t out[STORE_DBKEY_BYTES])
{
    memcpy(out, id->key, KVRT_STORE_KEY_BYTES);
    for (int i = 0; i < 4; i++)
        out[KVRT_STORE_KEY_BYTES + i] = (uint8_t)(id->head >> (24 - 8 * i));
}

void store_id_from_dbkey(const uint8_t in[STORE_DBKEY_BYTES], struct store_id *id)
{
    memcpy(id->key, in, KVRT_STORE_KEY_BYTES);
    id->head = 0;
    for (int i = 0; i < 4; i++)
        id->head = (id->head << 8) | in[KVRT_STORE_KEY_BYTES + i];
}

void kvrt_store_hex(const uint8_t key[KVRT_STORE_KEY_BYTES], char buf[2 * KVRT_STORE_KEY_BYTES + 1])
{
    static const char digits[] = "0123456789abcdef";
    if (!buf)
        return;
    const size_t n = KVRT_STORE_KEY_BYTES;
    for (size_t i = 0; i < n; i++) {
        unsigned v = key ? key[i] : 0u;
        buf[2 * i] = digits[v >> 4];
        buf[2 * i + 1] = digits[v & 15u];
    }
    buf[2 * n] = '\0';
}
