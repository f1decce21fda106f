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
    uint64_t entry_offset;           /* where this layer starts in its group's entry payload */
};

struct store_secret;

struct store_model {
    char *model_id;
    uint64_t chunk_tokens;
    uint64_t num_heads; /* the model's KV heads (every layer has them) */
    size_t num_layers;
    struct store_layer *layers;
    uint64_t cell_bytes; /* sum of the layers' C */
    /* Layer groups (docs/store.md "Pipeline parallelism"): the layers in
     * canonical order cut into consecutive groups of group_layers (the last
     * may be shorter); an entry holds one chunk of one head of one group.
     * layers_per_entry is the store parameter as recorded: 0 when there is
     * one group (every layer: the format of a store without groups). */
    uint64_t layers_per_entry;
    uint64_t group_layers; /* layers of a full group (num_layers with one group) */
    uint64_t num_groups;
    /* the bytes of every entry's payload: the largest group's chunk_tokens
     * x its cells; a smaller group's payload is padded with zeros */
    uint64_t payload_bytes;
    uint8_t fingerprint[KVRT_STORE_KEY_BYTES];
    /* the tenant secret (seal.h), NULL without a key: keys the chunk-key
     * chain and seals every entry that leaves the process */
    const struct store_secret *secret;
};

/* Build the model from the groups (checks and refusals) and its
 * fingerprint; layers_per_entry 0: one layer group. */
int store_model_build(const struct kvrt_group *groups, size_t num_groups, const char *model_id, uint64_t chunk_tokens,
                      uint64_t layers_per_entry, struct store_model *out);

/* Layer group g: its first layer and number of layers, and the bytes of
 * its layers in an entry's payload (the rest is zero padding). */
static inline uint64_t store_group_first(const struct store_model *m, uint64_t g)
{
    return g * m->group_layers;
}
static inline uint64_t store_group_count(const struct store_model *m, uint64_t g)
{
    uint64_t first = g * m->group_layers;
    return m->num_layers - first < m->group_layers ? m->num_layers - first : m->group_layers;
}
static inline uint64_t store_group_bytes(const struct store_model *m, uint64_t g)
{
    const struct store_layer *last = &m->layers[store_group_first(m, g) + store_group_count(m, g) - 1];
    return last->entry_offset + last->content * m->chunk_tokens;
}
void store_model_free(struct store_model *m);

#endif
