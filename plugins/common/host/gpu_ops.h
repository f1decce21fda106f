/*
 * The plugin operations (write, read, copy_blocks, gather, scatter, decode)
 * implemented once over a kvrt_gpu_backend.  Signatures mirror the
 * descriptor's function table with the backend in front; arguments are
 * already validated by the core (plugin.h).
 */
#ifndef KVRT_GPU_OPS_H
#define KVRT_GPU_OPS_H

#include <kvrt/plugin.h>

#include "gpu_backend.h"

int kvrt_gpu_write(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                   kvrt_plugin_buffer *cache_buf, uint32_t layer, uint64_t num_tokens, const int64_t *slots,
                   kvrt_plugin_buffer *k, uint64_t k_offset, kvrt_plugin_buffer *v, uint64_t v_offset,
                   kvrt_plugin_error *err);
int kvrt_gpu_read(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                  kvrt_plugin_buffer *cache_buf, uint32_t layer, uint64_t num_tokens, const int64_t *slots,
                  kvrt_plugin_buffer *k, uint64_t k_offset, kvrt_plugin_buffer *v, uint64_t v_offset,
                  kvrt_plugin_error *err);
int kvrt_gpu_copy_blocks(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev,
                         const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf, uint64_t num_pairs,
                         const int64_t *pairs, kvrt_plugin_error *err);
int kvrt_gpu_gather(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                    kvrt_plugin_buffer *cache_buf, uint64_t num_blocks, const int64_t *block_ids,
                    kvrt_plugin_buffer *staging, uint64_t staging_offset, kvrt_plugin_error *err);
int kvrt_gpu_scatter(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                     kvrt_plugin_buffer *cache_buf, uint64_t num_blocks, const int64_t *block_ids,
                     kvrt_plugin_buffer *staging, uint64_t staging_offset, kvrt_plugin_error *err);
int kvrt_gpu_decode(const struct kvrt_gpu_backend *be, kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                    kvrt_plugin_buffer *cache_buf, uint32_t layer, const struct kvrt_plugin_decode_args *args,
                    kvrt_plugin_error *err);

#endif
