/*
 * kvrt — the operations on a cache: write and read tokens, copy, gather
 * and scatter blocks, and paged decode.
 */
#ifndef KVRT_OPS_H
#define KVRT_OPS_H

#include <stdint.h>
#include <kvrt/common.h>
#include <kvrt/buffer.h>
#include <kvrt/cache.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Write K [T, H, D] and V [T, H, Dv] of layer `layer` (v NULL when Dv is 0);
 *  slots[t] < 0 skips token t.  Nothing is written when an argument is bad. */
KVRT_API int kvrt_cache_write(kvrt_cache *c, uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_buffer *k,
                              uint64_t k_offset, kvrt_buffer *v, uint64_t v_offset);
/** Read K and V of the given slots back (rows of negative slots untouched). */
KVRT_API int kvrt_cache_read(kvrt_cache *c, uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_buffer *k,
                             uint64_t k_offset, kvrt_buffer *v, uint64_t v_offset);
/** pairs[2i] -> pairs[2i+1], every layer. */
KVRT_API int kvrt_cache_copy_blocks(kvrt_cache *c, uint64_t num_pairs, const int64_t *pairs);
KVRT_API int kvrt_cache_gather(kvrt_cache *c, uint64_t num_blocks, const int64_t *block_ids, kvrt_buffer *staging,
                               uint64_t staging_offset);
KVRT_API int kvrt_cache_scatter(kvrt_cache *c, uint64_t num_blocks, const int64_t *block_ids, kvrt_buffer *staging,
                                uint64_t staging_offset);

struct kvrt_decode_params {
    uint32_t num_seqs;
    uint32_t num_q_heads; /* a multiple of the layer's KV heads */
    kvrt_buffer *q;       /* [S, Hq, D] in the layer's dtype */
    uint64_t q_offset;
    kvrt_buffer *out; /* [S, Hq, Dv] */
    uint64_t out_offset;
    const int32_t *block_tables; /* host [S, max_blocks_per_seq] */
    uint32_t max_blocks_per_seq;
    const int32_t *seq_lens; /* host [S], 1 .. max_blocks_per_seq * block_size */
    float scale;
    uint8_t reserved[32];
};

/** Defaults: zeroes, scale 1. */
KVRT_API void kvrt_decode_params_default(struct kvrt_decode_params *params);
/** Single-query paged attention decode on one layer (tokens_per_state 1). */
KVRT_API int kvrt_cache_decode(kvrt_cache *c, uint32_t layer, const struct kvrt_decode_params *params);

#ifdef __cplusplus
}
#endif
#endif
