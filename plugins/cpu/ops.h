/*
 * kvrt CPU backend — the functions of the descriptor's table, one group per
 * file (plugin.c, buffer.c, token.c, blocks.c, decode.c).
 */
#ifndef KVRT_CPU_OPS_H
#define KVRT_CPU_OPS_H

#include "device.h"

int cpu_probe(kvrt_plugin_error *why);
int cpu_describe(struct kvrt_plugin_device_info *info, kvrt_plugin_error *err);
int cpu_buffer_address(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, void **address, kvrt_plugin_error *err);
int cpu_bind(const struct kvrt_plugin_bind_info *info, kvrt_plugin_device **out, kvrt_plugin_error *err);
void cpu_unbind(kvrt_plugin_device *dev);

int cpu_buffer_alloc(kvrt_plugin_device *dev, uint64_t bytes, kvrt_plugin_buffer **out, kvrt_plugin_error *err);
int cpu_buffer_import(kvrt_plugin_device *dev, const struct kvrt_plugin_import *memory, kvrt_plugin_buffer **out,
                      kvrt_plugin_error *err);
void cpu_buffer_free(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf);
int cpu_buffer_zero(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, uint64_t bytes,
                    kvrt_plugin_error *err);
int cpu_buffer_upload(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, const void *src,
                      uint64_t bytes, kvrt_plugin_error *err);
int cpu_buffer_download(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t offset, void *dst, uint64_t bytes,
                        kvrt_plugin_error *err);

int cpu_write(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
              uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
              kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err);
int cpu_read(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
             uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
             kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err);
int cpu_copy_blocks(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                    uint64_t num_pairs, const int64_t *pairs, kvrt_plugin_error *err);
int cpu_gather(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
               uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging, uint64_t staging_offset,
               kvrt_plugin_error *err);
int cpu_scatter(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging, uint64_t staging_offset,
                kvrt_plugin_error *err);
int cpu_decode(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
               uint32_t layer, const struct kvrt_plugin_decode_args *args, kvrt_plugin_error *err);

#endif
