/*
 * Keys (key.c): a model's fingerprint, the keys of chunks of tokens, and
 * an entry's identity and database key.
 *
 * Layer 1 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_KEY_H
#define KVRT_STORE_KEY_H

#include "model.h"

/* An entry's identity: its chunk key and its index in the chunk, layer
 * group g's head h at g x num_heads + h (the head itself in a store of one
 * group), the same in every tier's key and in the header. */
struct store_id {
    uint8_t key[KVRT_STORE_KEY_BYTES];
    uint32_t head; /* the index */
};

/* The fingerprint of a model (docs/store.md "Fingerprint"). */
int store_fingerprint(struct store_model *m);

/* The keys of the first num_chunks whole chunks of tokens. */
int store_chunk_keys(const struct store_model *m, const int32_t *tokens, uint64_t num_chunks, uint8_t *keys);

/* The database key of an entry: the chunk key, then the index big-endian
 * (so a chunk's heads, group by group, are neighbours in key order). */
#define STORE_DBKEY_BYTES (KVRT_STORE_KEY_BYTES + 4)
void store_dbkey(const struct store_id *id, uint8_t out[STORE_DBKEY_BYTES]);
void store_id_from_dbkey(const uint8_t in[STORE_DBKEY_BYTES], struct store_id *id);

#endif
