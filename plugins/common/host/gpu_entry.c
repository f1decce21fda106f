#include "gpu_entry.h"
#include "gpu_ops.h"

#define BE (&kvrt_gpu_plugin_backend)

/*
 * RUN(dev, err, op) returns op's status, bracketed by the backend's hooks:
 * the op runs only when enter succeeded, and leave always follows it.
 */
#define RUN(dev, err, op)                                                                                              \
    do {                                                                                                               \
        struct kvrt_gpu_scope scope_ = {0};                                                                            \
        int status_ = BE->enter ? BE->enter((dev), &scope_, (err)) : KVRT_OK;                                          \
        if (status_ == KVRT_OK) {                                                                                      \
            status_ = (op);                                                                                            \
            if (BE->leave)                                                                                             \
                BE->leave(&scope_);                                                                                    \
        }                                                                                                              \
        return status_;                                                                                                \
    } while (0)

int kvrt_gpu_entry_write(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                         uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k,
                         uint64_t k_offset, kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err)
{
    RUN(dev, err, kvrt_gpu_write(BE, dev, cache, cache_buf, layer, num_tokens, slots, k, k_offset, v, v_offset, err));
}

int kvrt_gpu_entry_read(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                        uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k,
                        uint64_t k_offset, kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err)
{
    RUN(dev, err, kvrt_gpu_read(BE, dev, cache, cache_buf, layer, num_tokens, slots, k, k_offset, v, v_offset, err));
}

int kvrt_gpu_entry_copy_blocks(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                               kvrt_plugin_buffer *cache_buf, uint64_t num_pairs, const int64_t *pairs,
                               kvrt_plugin_error *err)
{
    RUN(dev, err, kvrt_gpu_copy_blocks(BE, dev, cache, cache_buf, num_pairs, pairs, err));
}

int kvrt_gpu_entry_gather(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                          uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging,
                          uint64_t staging_offset, kvrt_plugin_error *err)
{
    RUN(dev, err, kvrt_gpu_gather(BE, dev, cache, cache_buf, num_blocks, block_ids, staging, staging_offset, err));
}

int kvrt_gpu_entry_scatter(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache,
                           kvrt_plugin_buffer *cache_buf, uint64_t num_blocks, const int64_t *block_ids,
                           kvrt_plugin_buffer *staging, uint64_t staging_offset, kvrt_plugin_error *err)
{
    RUN(dev, err, kvrt_gpu_scatter(BE, dev, cache, cache_buf, num_blocks, block_ids, staging, staging_offset, err));
}

int kvrt_gpu_entry_decode(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                          uint32_t layer, const struct kvrt_plugin_decode_args *args, kvrt_plugin_error *err)
{
    RUN(dev, err, kvrt_gpu_decode(BE, dev, cache, cache_buf, layer, args, err));
}
