/* The entry format (docs/store.md "Entry"): a 128-byte header that names
 * the model fingerprint, the chunk key and the head (with layer groups, the
 * index group x heads + head: with the fingerprint, which covers G, it
 * names the entry's layers), and ends in an XXH3-128
 * checksum of itself and the payload, then the payload in canonical order.
 * The same bytes go to the disk and to the shared tier.
 *
 * Layer 1 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdio.h>
#include <string.h>

#include "base/bytes.h"
#include "entry.h"
#include "seal.h"

static const uint8_t entry_magic[8] = {'K', 'V', 'R', 'T', 'S', 'E', 'N', 'T'};
/* A sealed entry (a store with a key, seal.h): its payload encrypted, its
 * nonce in the two fields a plain entry keeps zero, its tag where a plain
 * entry keeps its checksum. */
static const uint8_t sealed_magic[8] = {'K', 'V', 'R', 'T', 'S', 'E', 'A', 'L'};

static XXH128_hash_t checksum(const uint8_t *buf, uint64_t payload_bytes)
{
    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    STORE_SUM_UPDATE(&st, buf, STORE_CHECKSUM_OFFSET);
    STORE_SUM_UPDATE(&st, buf + STORE_HEADER_BYTES, payload_bytes);
    return XXH3_128bits_digest(&st);
}

static void header_fields(const struct store_model *m, const struct store_id *id, uint8_t *buf)
{
    base_put_le32(buf + 8, KVRT_STORE_FORMAT_VERSION);
    base_put_le32(buf + 12, STORE_HEADER_BYTES);
    memcpy(buf + 16, m->fingerprint, KVRT_STORE_KEY_BYTES);
    memcpy(buf + 48, id->key, KVRT_STORE_KEY_BYTES);
    base_put_le32(buf + 80, id->head);
    base_put_le64(buf + 88, m->chunk_tokens);
    base_put_le64(buf + 96, m->payload_bytes);
}

static void header(const struct store_model *m, const struct store_id *id, uint8_t *buf)
{
    memset(buf, 0, STORE_HEADER_BYTES);
    memcpy(buf, entry_magic, sizeof(entry_magic));
    header_fields(m, id, buf);
}

int store_entry_seal_out(const struct store_model *m, const struct store_id *id, const uint8_t *plain, uint8_t *out)
{
    memset(out, 0, STORE_HEADER_BYTES);
    memcpy(out, sealed_magic, sizeof(sealed_magic));
    header_fields(m, id, out);
    return store_seal(m->secret, out, plain + STORE_HEADER_BYTES, m->payload_bytes, out + STORE_HEADER_BYTES);
}

static void put_checksum(uint8_t *buf, XXH128_hash_t h)
{
    base_put_le64(buf + STORE_CHECKSUM_OFFSET, h.low64);
    base_put_le64(buf + STORE_CHECKSUM_OFFSET + 8, h.high64);
}

void store_entry_seal(const struct store_model *m, const struct store_id *id, uint8_t *buf)
{
    header(m, id, buf);
    put_checksum(buf, checksum(buf, m->payload_bytes));
}

void store_entry_seal_begin(const struct store_model *m, const struct store_id *id, uint8_t *buf, XXH3_state_t *st)
{
    header(m, id, buf);
    XXH3_128bits_reset(st);
    STORE_SUM_UPDATE(st, buf, STORE_CHECKSUM_OFFSET);
}

void store_entry_seal_end(uint8_t *buf, XXH3_state_t *st)
{
    put_checksum(buf, XXH3_128bits_digest(st));
}

static _Thread_local char why[256];

static bool zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

bool store_entry_peek(const uint8_t *buf, uint64_t len, struct store_id *id, uint64_t *payload_bytes)
{
    if (len < STORE_HEADER_BYTES ||
        (memcmp(buf, entry_magic, sizeof(entry_magic)) != 0 && memcmp(buf, sealed_magic, sizeof(sealed_magic)) != 0))
        return false;
    memcpy(id->key, buf + 48, KVRT_STORE_KEY_BYTES);
    id->head = base_get_le32(buf + 80);
    *payload_bytes = base_get_le64(buf + 96);
    return true;
}

bool store_entry_sealed(const uint8_t *buf, uint64_t len)
{
    return len >= STORE_HEADER_BYTES && memcmp(buf, sealed_magic, sizeof(sealed_magic)) == 0;
}

const char *store_entry_check(const struct store_model *m, const struct store_id *id, uint8_t *buf, uint64_t len)
{
    uint64_t want = STORE_HEADER_BYTES + m->payload_bytes;
    if (len != want) {
        snprintf(why, sizeof(why), "it is %llu bytes; an entry of this store is %llu", ULL(len), ULL(want));
        return why;
    }
    bool sealed = memcmp(buf, sealed_magic, sizeof(sealed_magic)) == 0;
    if (!sealed && memcmp(buf, entry_magic, sizeof(entry_magic)) != 0)
        return "its header does not start with an entry magic (KVRTSENT, or KVRTSEAL when sealed)";
    if (sealed != (m->secret != NULL))
        return sealed ? "it is sealed with a key and this store has none"
                      : "it is not sealed: written by a store without this store's key";
    if (base_get_le32(buf + 8) != KVRT_STORE_FORMAT_VERSION || base_get_le32(buf + 12) != STORE_HEADER_BYTES) {
        snprintf(why, sizeof(why), "its format version is %u with a %u-byte header; this store reads version %u",
                 base_get_le32(buf + 8), base_get_le32(buf + 12), KVRT_STORE_FORMAT_VERSION);
        return why;
    }
    if (memcmp(buf + 16, m->fingerprint, KVRT_STORE_KEY_BYTES) != 0) {
        char a[65], b[65];
        kvrt_store_hex(buf + 16, a);
        kvrt_store_hex(m->fingerprint, b);
        snprintf(why, sizeof(why), "it was written for model fingerprint %.16s..., this store's is %.16s...", a, b);
        return why;
    }
    if (memcmp(buf + 48, id->key, KVRT_STORE_KEY_BYTES) != 0 || base_get_le32(buf + 80) != id->head)
        return "its header names another chunk or head than the key it is stored under";
    if (base_get_le64(buf + 88) != m->chunk_tokens || base_get_le64(buf + 96) != m->payload_bytes) {
        snprintf(why, sizeof(why), "its header says %llu tokens, %llu payload bytes; this store has %llu, %llu",
                 ULL(base_get_le64(buf + 88)), ULL(base_get_le64(buf + 96)), ULL(m->chunk_tokens),
                 ULL(m->payload_bytes));
        return why;
    }
    if (sealed) {
        /* last: the payload is decrypted in place only once the header
         * names what was asked for */
        return store_unseal(m->secret, buf, buf + STORE_HEADER_BYTES, m->payload_bytes);
    }
    if (!zero(buf + 84, 4) || !zero(buf + 104, 8))
        return "reserved header bytes are not zero";
    XXH128_hash_t h = checksum(buf, m->payload_bytes);
    uint64_t lo = base_get_le64(buf + STORE_CHECKSUM_OFFSET), hi = base_get_le64(buf + STORE_CHECKSUM_OFFSET + 8);
    if (h.low64 != lo || h.high64 != hi) {
        snprintf(why, sizeof(why), "checksum mismatch: stored %016llx%016llx, computed %016llx%016llx", ULL(hi),
                 ULL(lo), ULL(h.high64), ULL(h.low64));
        return why;
    }
    return NULL;
}
