/*
 * Operations: a span checked before anything moves (steps.c), then put
 * (put.c) and get (get.c) as two paths over the same steps; lookup
 * (lookup.c) asks the tiers what is stored.
 *
 * Layer 5 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_OP_H
#define KVRT_STORE_OP_H

#include "canon.h"
#include "handle.h"

/* A checked span: the cache map, the keys of its whole chunks and the block
 * table (its own copy for a posted request). */
struct store_op {
    /* the path a posted request runs: store_put_run or store_get_run */
    int (*run)(struct store_op *op, uint64_t *tokens);
    kvrt_store *store;
    struct canon_map map;
    const int64_t *table;
    int64_t *table_copy;
    uint64_t table_len;
    uint8_t *keys; /* num_chunks keys */
    uint64_t first_chunk, num_chunks;
    uint64_t head_start, num_heads;
    /* the layer groups of its layers; its entries per chunk ("units"):
     * num_groups x num_heads, group by group, unit u being group
     * group_start + u / num_heads, head head_start + u % num_heads */
    uint64_t group_start, num_groups, units;
    uint64_t replica;
    /* with events on: the range's tokens (from its first chunk) and the
     * key before it, which BlockStored names */
    const int32_t *tokens;
    int32_t *tokens_copy;
    bool has_parent;
    uint8_t parent[KVRT_STORE_KEY_BYTES];
};

/* steps.c */
/* Check a span for fn (kvrt_store_put, kvrt_store_get: the name its
 * refusals give); with copy, the op keeps its own block table. */
int store_op_prepare(kvrt_store *s, const struct kvrt_store_span *span, const char *fn, bool copy, struct store_op *op);
void store_op_free(struct store_op *op);
/* The heads a span names, as [start, start + n) of the model's. */
int store_span_heads(const kvrt_store *s, const char *fn, uint64_t start, uint64_t n, uint64_t *out_n);
/* The layer groups of the layers [start, start + n) (n 0: all), refused
 * unless they are whole groups. */
int store_span_layers(const kvrt_store *s, const char *fn, uint64_t start, uint64_t n, uint64_t *group_start,
                      uint64_t *num_groups);
/* Token ids are >= 0. */
int store_check_tokens(const char *fn, const int32_t *tokens, uint64_t n);
/* The id of chunk c's unit u (of the op's). */
void store_op_id(const struct store_op *op, uint64_t c, uint64_t u, struct store_id *id);
/* With events on, give e, chunk c's entry, its chunk's parent and tokens
 * (store_event_attach; BlockStored names them). */
void store_op_attach(const struct store_op *op, struct mem_entry *e, uint64_t c);
/* Which of the op's entries memory or the disk holds: present[c * units + u]. */
int store_find_present(struct store_op *op, bool *present);

/* put.c, get.c: run a prepared op; *tokens (required): the tokens stored,
 * or loaded. */
int store_put_run(struct store_op *op, uint64_t *tokens);
int store_get_run(struct store_op *op, uint64_t *tokens);

#endif
