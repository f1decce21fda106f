/*
 * The operation entry points of every GPU plugin's descriptor, written once.
 *
 * Each entry has the ABI's signature (plugin.h), runs the backend's enter
 * hook, the shared operation (gpu_ops.c) and the leave hook.  A plugin
 * defines `kvrt_gpu_plugin_backend` and puts KVRT_GPU_ENTRY_OPS into its
 * descriptor; a new operation is then one edit here and one in gpu_ops.c,
 * whatever the number of device APIs.
 */
#ifndef KVRT_GPU_ENTRY_H
#define KVRT_GPU_ENTRY_H

#include <kvrt/plugin.h>

#include "gpu_backend.h"

/* Defined by the plugin that links this code (one per shared module). */
extern const struct kvrt_gpu_backend kvrt_gpu_plugin_backend;

int kvrt_gpu_entry_write(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                         uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k,
                         uint64_t k_offset, kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err);
int kvrt_gpu_entry_read(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                        uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k,
                        uint64_t k_offset, kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err);
int kvrt_gpu_entry_copy_blocks(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                               kvrt_plugin_buffer *cache_buf, uint64_t num_pairs, const int64_t *pairs,
                               kvrt_plugin_error *err);
int kvrt_gpu_entry_gather(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                          uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging,
                          uint64_t staging_offset, kvrt_plugin_error *err);
int kvrt_gpu_entry_scatter(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                           kvrt_plugin_buffer *cache_buf, uint64_t num_blocks, const int64_t *block_ids,
                           kvrt_plugin_buffer *staging, uint64_t staging_offset, kvrt_plugin_error *err);
int kvrt_gpu_entry_decode(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                          uint32_t layer, const struct kvrt_plugin_decode_args *args, kvrt_plugin_error *err);

/* The descriptor's operation fields. */
#define KVRT_GPU_ENTRY_OPS                                                                                             \
    .write = kvrt_gpu_entry_write, .read = kvrt_gpu_entry_read, .copy_blocks = kvrt_gpu_entry_copy_blocks,             \
    .gather = kvrt_gpu_entry_gather, .scatter = kvrt_gpu_entry_scatter, .decode = kvrt_gpu_entry_decode

#endif
