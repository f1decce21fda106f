/*
 * The template backend's private declarations.
 *
 * "Device" memory is plain host memory here; a real backend replaces the
 * buffer functions with its driver's calls and the loops in the operations
 * with kernels.  Everything else — how a cell is found, what each operation
 * means — stays exactly as written.
 */
#ifndef KVRT_TEMPLATE_H
#define KVRT_TEMPLATE_H

#include <stdarg.h>
#include <stdint.h>

#include <kvrt/plugin.h>

struct kvrt_plugin_device {
    int32_t layout; /* informational: the layer views already carry every stride */
    const struct kvrt_plugin_host *host;
};

struct kvrt_plugin_buffer {
    uint64_t bytes;
    unsigned char *data;
    int imported; /* the caller's memory (buffer_import): never freed here */
};

/*
 * Byte offset, inside the cache buffer, of the cell holding state `state`
 * (counted over the whole manager block) of head slot `head` in manager
 * block `block` of one layer.  A manager block spans `blocks_per_block`
 * consecutive view (kernel) blocks of `states` states each, so the state
 * index is split into a view block and a state within it.  This is the only
 * place where a layout enters the code.
 */
static inline uint64_t tpl_cell(const struct kvrt_plugin_layer *layer, uint64_t block, uint64_t state, uint64_t head)
{
    uint64_t view_block = block * layer->blocks_per_block + state / layer->states;
    return layer->offset + view_block * layer->stride_block + head * layer->stride_head +
           (state % layer->states) * layer->stride_state;
}

/* The cell of a token slot (token operations only run on layers with one
 * state per token, so a token's index in its block is its state index). */
static inline uint64_t tpl_slot_cell(const struct kvrt_plugin_cache *cache, const struct kvrt_plugin_layer *layer,
                                     int64_t slot, uint64_t head)
{
    uint64_t s = (uint64_t)slot;
    return tpl_cell(layer, s / cache->block_size, s % cache->block_size, head);
}

/* Element conversions for decode (template_dtype.c). */
float tpl_load(int32_t dtype, const unsigned char *src, uint64_t index);
void tpl_store(int32_t dtype, unsigned char *dst, uint64_t index, float value);

/* Fill err and return status (template_plugin.c). */
int tpl_fail(kvrt_plugin_error *err, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The operations (template_tokens.c, template_blocks.c, template_decode.c). */
int tpl_write(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
              uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
              kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err);
int tpl_read(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
             uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
             kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err);
int tpl_copy_blocks(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                    uint64_t num_pairs, const int64_t *pairs, kvrt_plugin_error *err);
int tpl_gather(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
               uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging, uint64_t staging_offset,
               kvrt_plugin_error *err);
int tpl_scatter(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging, uint64_t staging_offset,
                kvrt_plugin_error *err);
int tpl_decode(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
               uint32_t layer, const struct kvrt_plugin_decode_args *args, kvrt_plugin_error *err);

#endif
