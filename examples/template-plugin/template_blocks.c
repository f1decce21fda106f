/*
 * Block operations: copy whole blocks, and move blocks to and from a packed
 * staging buffer.  They work on pages, so they also serve state (Mamba-like)
 * layers and layers with several tokens per state.
 */
#include <string.h>

#include "template.h"

/* States of one layer in a whole manager block. */
static uint64_t block_states(const struct kvrt_plugin_layer *layer)
{
    return layer->states * layer->blocks_per_block;
}

int tpl_copy_blocks(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                    uint64_t num_pairs, const int64_t *pairs, kvrt_plugin_error *err)
{
    (void)dev;
    (void)err;
    unsigned char *base = cache_buf->data;
    /* Pairs in order, so that a chain (a -> b, b -> c) means what it says. */
    for (uint64_t i = 0; i < num_pairs; i++) {
        uint64_t src = (uint64_t)pairs[2 * i], dst = (uint64_t)pairs[2 * i + 1];
        if (src == dst)
            continue;
        for (uint64_t l = 0; l < cache->num_layers; l++) {
            const struct kvrt_plugin_layer *layer = &cache->layers[l];
            for (uint64_t h = 0; h < layer->head_slots; h++)
                for (uint64_t n = 0; n < block_states(layer); n++)
                    memcpy(base + tpl_cell(layer, dst, n, h), base + tpl_cell(layer, src, n, h),
                           (size_t)layer->content_bytes);
        }
    }
    return KVRT_OK;
}

enum direction { TO_STAGING, FROM_STAGING };

/*
 * The staging order is fixed and layout-independent: for each requested
 * block, for each layer, that layer's page as [H, N, C] with N counting the
 * states of the whole manager block.  Gathering under one layout and
 * scattering under another therefore converts between them.
 */
static void move_blocks(enum direction dir, const struct kvrt_plugin_cache *cache, unsigned char *base,
                        uint64_t num_blocks, const int64_t *block_ids, unsigned char *staging)
{
    unsigned char *packed = staging;
    for (uint64_t i = 0; i < num_blocks; i++) {
        uint64_t block = (uint64_t)block_ids[i];
        for (uint64_t l = 0; l < cache->num_layers; l++) {
            const struct kvrt_plugin_layer *layer = &cache->layers[l];
            const size_t cell = (size_t)layer->content_bytes;
            for (uint64_t h = 0; h < layer->head_slots; h++) {
                for (uint64_t n = 0; n < block_states(layer); n++) {
                    unsigned char *at = base + tpl_cell(layer, block, n, h);
                    if (dir == TO_STAGING)
                        memcpy(packed, at, cell);
                    else
                        memcpy(at, packed, cell);
                    packed += cell;
                }
            }
        }
    }
}

int tpl_gather(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
               uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging, uint64_t staging_offset,
               kvrt_plugin_error *err)
{
    (void)dev;
    (void)err;
    move_blocks(TO_STAGING, cache, cache_buf->data, num_blocks, block_ids, staging->data + staging_offset);
    return KVRT_OK;
}

int tpl_scatter(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                uint64_t num_blocks, const int64_t *block_ids, kvrt_plugin_buffer *staging, uint64_t staging_offset,
                kvrt_plugin_error *err)
{
    (void)dev;
    (void)err;
    move_blocks(FROM_STAGING, cache, cache_buf->data, num_blocks, block_ids, staging->data + staging_offset);
    return KVRT_OK;
}
