/*
 * The model a store is for: its layers in canonical order, their cell
 * sizes, the entry size and the fingerprint (model.c).
 *
 * Layer 1 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_MODEL_H
#define KVRT_STORE_MODEL_H

#include <stdint.h>

#include <kvrt/placement.h>
#include <kvrt/store.h>

#include "warn.h"

/* One stored layer, in canonical order. */
struct store_layer {
    char *name;
    enum kvrt_spec_kind kind; /* attention or MLA */
    enum kvrt_dtype dtype;
    uint64_t head_size, head_size_v; /* elements; V 0 for MLA */
    uint64_t content;                /* C: bytes of one (head, token) cell */
    uint64_t entry_offset;           /* where this layer starts in an entry's payload */
};

struct store_secret;

struct store_model {
    char *model_id;
    uint64_t chunk_tokens;
    uint64_t num_heads; /* the model's KV heads (every layer has them) */
    size_t num_layers;
    struct store_layer *layers;
    uint64_t cell_bytes;    /* sum of the layers' C */
    uint64_t payload_bytes; /* chunk_tokens x cell_bytes */
    uint8_t fingerprint[KVRT_STORE_KEY_BYTES];
    /* the tenant secret (seal.h), NULL without a key: keys the chunk-key
     * chain and seals every entry that leaves the process */
    const struct store_secret *secret;
};

/* Build the model from the groups (checks and refusals) and its
 * fingerprint. */
int store_model_build(const struct kvrt_group *groups, size_t num_groups, const char *model_id, uint64_t chunk_tokens,
                      struct store_model *out);
void store_model_free(struct store_model *m);

#endif
