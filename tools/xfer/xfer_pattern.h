/*
 * The content two sides of a transfer agree on, and its check: a cache is
 * filled with a deterministic pattern of logical coordinates (seed, layer,
 * block, global head, state, byte), so every layout holds the same values;
 * each completed transfer's notification is a record of what it moved; the
 * receiver applies the records it was notified of to its expected contents
 * and compares every byte.  Shared by the C tests of libkvrt-xfer and the
 * `kvrt xfer` demo.
 */
#ifndef KVRT_TESTS_XFER_PATTERN_H
#define KVRT_TESTS_XFER_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvrt/placement.h>
#include <kvrt/runtime.h>

/* A cache and what it should hold, in staging order (docs/design.md §9). */
struct xpat {
    kvrt_backend *backend;
    kvrt_cache *cache;
    uint64_t num_blocks, num_layers, staging_per_block;
    uint64_t *layer_offset; /* staging offset of each layer in a block */
    uint64_t *layer_heads, *layer_states, *layer_content;
    uint8_t *expected;
};

/* One transfer as its notification carries it. */
struct xpat_record {
    int64_t *src_ids, *dst_ids;
    uint64_t num_blocks;
    uint64_t layer_start, num_layers;                   /* num_layers 0: all from layer_start */
    uint64_t src_head_start, dst_head_start, num_heads; /* num_heads 0: all */
    uint64_t seed, head_offset;                         /* the source's pattern */
    uint64_t index;
    bool last;
    bool pull; /* the peer read: nothing written at the notified side */
    /* A token range (token_count > 0): src_ids and dst_ids are the two
     * block tables from token 0, num_src_blocks and num_blocks long, of
     * src_bs- and dst_bs-token blocks. */
    uint64_t num_src_blocks;
    uint64_t token_first, token_count, src_bs, dst_bs;
};

/* Describe the cache, fill `expected` with the pattern of `seed` (this
 * side's head 0 is global head `head_offset`) and write it into the cache.
 * KVRT_OK or the failing status (message set). */
int xpat_init(struct xpat *x, kvrt_backend *b, kvrt_cache *c, uint64_t seed, uint64_t head_offset);
/* The same for a cache left as created (zero), nothing written: what a
 * receiver that checks only the blocks it is notified of needs. */
int xpat_init_zero(struct xpat *x, kvrt_backend *b, kvrt_cache *c);
void xpat_free(struct xpat *x);

/* The source's pattern where the record says, into `expected`. */
void xpat_apply(struct xpat *x, const struct xpat_record *r);

/* Mismatching bytes between the cache and `expected` (0: all equal), the
 * first one's place in `where`; UINT64_MAX when the cache cannot be read. */
uint64_t xpat_verify(struct xpat *x, char *where, size_t size);

/* Whether a block holds exactly what `expected` says. */
bool xpat_block_ok(struct xpat *x, int64_t block);

/* A record as text (malloc'd), and back: false when `text` is not one. */
char *xpat_record_text(const struct xpat_record *r);
bool xpat_record_parse(const char *text, struct xpat_record *r);
void xpat_record_free(struct xpat_record *r);

#endif
