/*
 * Single-query paged attention decode, straight from the definition:
 * query head h reads KV head h / (Hq / H); sequence s attends to its tokens
 * 0 .. seq_lens[s]-1, found through its block table; softmax and
 * accumulation in fp32.  A GPU backend runs one work-group per (sequence,
 * query head) and reads the same cells.
 */
#include <math.h>
#include <stdlib.h>

#include "template.h"

int tpl_decode(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
               uint32_t layer_index, const struct kvrt_plugin_decode_args *args, kvrt_plugin_error *err)
{
    (void)dev;
    const struct kvrt_plugin_layer *layer = &cache->layers[layer_index];
    const unsigned char *base = cache_buf->data;
    const unsigned char *q = args->q->data + args->q_offset;
    unsigned char *out = args->out->data + args->out_offset;
    const uint64_t d = layer->head_size, dv = layer->head_size_v, elem = layer->elem_size;
    const uint64_t group = args->num_q_heads / layer->head_slots; /* query heads per KV head */

    uint64_t longest = 0;
    for (uint32_t s = 0; s < args->num_seqs; s++)
        if ((uint64_t)args->seq_lens[s] > longest)
            longest = (uint64_t)args->seq_lens[s];
    float *scores = malloc(longest * sizeof(*scores));
    float *acc = malloc(dv * sizeof(*acc));
    if (!scores || !acc) {
        free(scores);
        free(acc);
        return tpl_fail(err, KVRT_ERR_NOMEM, "out of memory for %llu scores", (unsigned long long)longest);
    }

    for (uint32_t s = 0; s < args->num_seqs; s++) {
        const uint64_t len = (uint64_t)args->seq_lens[s];
        const int32_t *table = args->block_tables + (uint64_t)s * args->max_blocks_per_seq;
        for (uint64_t qh = 0; qh < args->num_q_heads; qh++) {
            const uint64_t kvh = qh / group;
            const uint64_t q_row = (uint64_t)s * args->num_q_heads + qh;
            float max = -INFINITY;
            for (uint64_t t = 0; t < len; t++) {
                int64_t slot = (int64_t)table[t / cache->block_size] * (int64_t)cache->block_size +
                               (int64_t)(t % cache->block_size);
                const unsigned char *k = base + tpl_slot_cell(cache, layer, slot, kvh);
                float dot = 0.0f;
                for (uint64_t i = 0; i < d; i++)
                    dot += tpl_load(layer->dtype, q, q_row * d + i) * tpl_load(layer->dtype, k, i);
                scores[t] = dot * args->scale;
                if (scores[t] > max)
                    max = scores[t];
            }
            float sum = 0.0f;
            for (uint64_t i = 0; i < dv; i++)
                acc[i] = 0.0f;
            for (uint64_t t = 0; t < len; t++) {
                int64_t slot = (int64_t)table[t / cache->block_size] * (int64_t)cache->block_size +
                               (int64_t)(t % cache->block_size);
                /* V follows K inside the cell. */
                const unsigned char *v = base + tpl_slot_cell(cache, layer, slot, kvh) + d * elem;
                float p = expf(scores[t] - max);
                sum += p;
                for (uint64_t i = 0; i < dv; i++)
                    acc[i] += p * tpl_load(layer->dtype, v, i);
            }
            for (uint64_t i = 0; i < dv; i++)
                tpl_store(layer->dtype, out, q_row * dv + i, acc[i] / sum);
        }
    }
    free(scores);
    free(acc);
    return KVRT_OK;
}
