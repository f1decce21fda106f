/*
 * Token operations: K [T, H, D] and V [T, H, Dv] rows to and from the cells
 * of their slots.  Inside a cell K comes first, then V (the content
 * convention every backend shares, so caches move between backends).
 */
#include <string.h>

#include "template.h"

enum direction { TO_CACHE, FROM_CACHE };

static void move_tokens(enum direction dir, const struct kvrt_plugin_cache *cache, unsigned char *base,
                        uint32_t layer_index, uint64_t num_tokens, const int64_t *slots, unsigned char *k,
                        unsigned char *v)
{
    const struct kvrt_plugin_layer *layer = &cache->layers[layer_index];
    const uint64_t heads = layer->head_slots;
    const size_t k_row = (size_t)(layer->head_size * layer->elem_size);
    const size_t v_row = (size_t)(layer->head_size_v * layer->elem_size);

    for (uint64_t t = 0; t < num_tokens; t++) {
        /* A negative slot is a padding token: its cells and its rows are
         * both left alone. */
        if (slots[t] < 0)
            continue;
        for (uint64_t h = 0; h < heads; h++) {
            unsigned char *cell = base + tpl_slot_cell(cache, layer, slots[t], h);
            unsigned char *k_row_ptr = k + (t * heads + h) * k_row;
            if (dir == TO_CACHE)
                memcpy(cell, k_row_ptr, k_row);
            else
                memcpy(k_row_ptr, cell, k_row);
            if (v_row == 0)
                continue;
            unsigned char *v_row_ptr = v + (t * heads + h) * v_row;
            if (dir == TO_CACHE)
                memcpy(cell + k_row, v_row_ptr, v_row);
            else
                memcpy(v_row_ptr, cell + k_row, v_row);
        }
    }
}

int tpl_write(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
              uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
              kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err)
{
    (void)dev;
    (void)err;
    move_tokens(TO_CACHE, cache, cache_buf->data, layer, num_tokens, slots, k->data + k_offset,
                v ? v->data + v_offset : NULL);
    return KVRT_OK;
}

int tpl_read(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
             uint32_t layer, uint64_t num_tokens, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
             kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err)
{
    (void)dev;
    (void)err;
    move_tokens(FROM_CACHE, cache, cache_buf->data, layer, num_tokens, slots, k->data + k_offset,
                v ? v->data + v_offset : NULL);
    return KVRT_OK;
}
