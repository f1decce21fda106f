/*
 * kvrt — a cache: one device allocation of a bound backend laid out by a
 * placement, its layers and its lifetime.  The operations on it are
 * kvrt/ops.h.
 */
#ifndef KVRT_CACHE_H
#define KVRT_CACHE_H

#include <stdint.h>
#include <kvrt/common.h>
#include <kvrt/backend.h>
#include <kvrt/buffer.h>
#include <kvrt/placement.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kvrt_cache kvrt_cache;

/**
 * Create a cache laid out by `p` (whose layout must be the backend's):
 * one device allocation of kvrt_placement_size(p) bytes, zeroed.  The
 * placement is copied; layers are numbered in placement order (sets in
 * order, layers within each set).
 */
KVRT_API int kvrt_cache_create(kvrt_backend *b, const kvrt_placement *p, kvrt_cache **out);
/** Destroy the cache.  With references alive (exported DLPack tensors,
 *  kvrt_cache_retain) its memory lives on until the last goes. */
KVRT_API void kvrt_cache_destroy(kvrt_cache *c);
/**
 * Take a reference that keeps the cache's memory, backend and plugin alive
 * past kvrt_cache_destroy and kvrt_runtime_close, as an exported tensor
 * does: for a consumer that registers the memory elsewhere (a transfer
 * engine registering it with its network).  Match each with one
 * kvrt_cache_release.  Until then the holder may go on using the cache
 * and the buffers it made on its backend (a closing runtime keeps them);
 * to the one who destroyed or closed, the handles are gone.
 * @return KVRT_ERR_STATE once the cache was destroyed or its runtime closed.
 */
KVRT_API int kvrt_cache_retain(kvrt_cache *c);
/** Drop a reference: the last one of a destroyed cache frees it (and hands
 *  caller memory back, kvrt/wrap.h), of a closed runtime finishes the close. */
KVRT_API void kvrt_cache_release(kvrt_cache *c);
KVRT_API kvrt_buffer *kvrt_cache_buffer(kvrt_cache *c);
KVRT_API const kvrt_placement *kvrt_cache_placement(const kvrt_cache *c);
KVRT_API uint64_t kvrt_cache_num_layers(const kvrt_cache *c);
/** Global layer index of a named layer. */
KVRT_API int kvrt_cache_layer_index(const kvrt_cache *c, const char *name, uint32_t *layer);
/** Bytes of the staging buffer for `num_blocks` blocks (all layers). */
KVRT_API int kvrt_cache_staging_bytes(const kvrt_cache *c, uint64_t num_blocks, uint64_t *bytes);

#ifdef __cplusplus
}
#endif
#endif
