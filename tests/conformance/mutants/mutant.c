/*
 * Broken backends, to prove the suite fails them.  Each is the template
 * backend with one fault injected around one operation (selected by
 * MUTANT at compile time); tests/conformance/sanity.sh runs the suite on
 * each and expects the named points to fail.
 */
#include <stdlib.h>
#include <string.h>

#include "template.h"

enum {
    STRAY_BYTE = 1,    /* write also changes a byte nobody asked for */
    SKIP_IGNORED,      /* write treats a negative slot as slot 0 */
    K_OFFSET_IGNORED,  /* write reads K from offset 0 */
    READ_CLOBBERS,     /* read zeroes the rows of skipped slots */
    COPY_REVERSED,     /* copy_blocks copies destination to source */
    COPY_PARALLEL,     /* copy_blocks reads every source before writing */
    GATHER_REORDERED,  /* gather packs the blocks in reverse order */
    SCATTER_NO_SPLIT,  /* scatter ignores kernel-block splitting */
    DECODE_SCALE,      /* decode scales scores by 1.01 x scale */
    DECODE_LAST_TOKEN, /* decode drops each sequence's last token */
    DECODE_GQA,        /* decode reads KV head 0 for every query head */
    COPY_SKIPS_STATE,  /* copy_blocks forgets state (Mamba-like) layers */
};

static int m_write(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                   uint32_t layer, uint64_t n, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
                   kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err)
{
    int64_t *fixed = malloc((n ? n : 1) * sizeof(*fixed));
    if (!fixed)
        return tpl_fail(err, KVRT_ERR_NOMEM, "out of memory");
    for (uint64_t t = 0; t < n; t++)
        fixed[t] = MUTANT == SKIP_IGNORED && slots[t] < 0 ? 0 : slots[t];
    if (MUTANT == K_OFFSET_IGNORED)
        k_offset = 0;
    int status = tpl_write(dev, cache, cache_buf, layer, n, fixed, k, k_offset, v, v_offset, err);
    free(fixed);
    if (MUTANT == STRAY_BYTE)
        cache_buf->data[cache_buf->bytes - 1] ^= 0x40;
    return status;
}

static int m_read(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                  uint32_t layer, uint64_t n, const int64_t *slots, kvrt_plugin_buffer *k, uint64_t k_offset,
                  kvrt_plugin_buffer *v, uint64_t v_offset, kvrt_plugin_error *err)
{
    int status = tpl_read(dev, cache, cache_buf, layer, n, slots, k, k_offset, v, v_offset, err);
    if (MUTANT == READ_CLOBBERS) {
        const struct kvrt_plugin_layer *L = &cache->layers[layer];
        uint64_t row = L->head_slots * L->head_size * L->elem_size;
        for (uint64_t t = 0; t < n; t++)
            if (slots[t] < 0)
                memset(k->data + k_offset + t * row, 0, (size_t)row);
    }
    return status;
}

static int m_copy(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                  uint64_t n, const int64_t *pairs, kvrt_plugin_error *err)
{
    int64_t *p = malloc(2 * n * sizeof(*p));
    if (!p)
        return tpl_fail(err, KVRT_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        p[2 * i] = pairs[2 * i + (MUTANT == COPY_REVERSED)];
        p[2 * i + 1] = pairs[2 * i + (MUTANT != COPY_REVERSED)];
    }
    int status = KVRT_OK;
    if (MUTANT == COPY_PARALLEL) {
        /* Snapshot, then copy from the snapshot: what a one-kernel-per-call
         * GPU implementation does when pairs chain. */
        unsigned char *saved = malloc((size_t)cache_buf->bytes);
        if (!saved) {
            free(p);
            return tpl_fail(err, KVRT_ERR_NOMEM, "out of memory");
        }
        memcpy(saved, cache_buf->data, (size_t)cache_buf->bytes);
        struct kvrt_plugin_buffer from = {cache_buf->bytes, saved, 0};
        for (uint64_t i = 0; i < n && status == KVRT_OK; i++)
            for (uint64_t l = 0; l < cache->num_layers; l++) {
                const struct kvrt_plugin_layer *L = &cache->layers[l];
                for (uint64_t h = 0; h < L->head_slots; h++)
                    for (uint64_t s = 0; s < L->states * L->blocks_per_block; s++)
                        memcpy(cache_buf->data + tpl_cell(L, (uint64_t)p[2 * i + 1], s, h),
                               from.data + tpl_cell(L, (uint64_t)p[2 * i], s, h), (size_t)L->content_bytes);
            }
        free(saved);
    } else if (MUTANT == COPY_SKIPS_STATE) {
        struct kvrt_plugin_layer *layers = malloc(cache->num_layers * sizeof(*layers));
        struct kvrt_plugin_cache c = *cache;
        c.num_layers = 0;
        for (uint64_t l = 0; layers && l < cache->num_layers; l++)
            if (cache->layers[l].kind != KVRT_SPEC_STATE)
                layers[c.num_layers++] = cache->layers[l];
        c.layers = layers;
        status =
            layers ? tpl_copy_blocks(dev, &c, cache_buf, n, p, err) : tpl_fail(err, KVRT_ERR_NOMEM, "out of memory");
        free(layers);
    } else {
        status = tpl_copy_blocks(dev, cache, cache_buf, n, p, err);
    }
    free(p);
    return status;
}

static int m_gather(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                    uint64_t n, const int64_t *ids, kvrt_plugin_buffer *staging, uint64_t offset,
                    kvrt_plugin_error *err)
{
    int64_t *order = malloc(n * sizeof(*order));
    if (!order)
        return tpl_fail(err, KVRT_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < n; i++)
        order[i] = ids[MUTANT == GATHER_REORDERED ? n - 1 - i : i];
    int status = tpl_gather(dev, cache, cache_buf, n, order, staging, offset, err);
    free(order);
    return status;
}

static int m_scatter(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                     uint64_t n, const int64_t *ids, kvrt_plugin_buffer *staging, uint64_t offset,
                     kvrt_plugin_error *err)
{
    if (MUTANT != SCATTER_NO_SPLIT)
        return tpl_scatter(dev, cache, cache_buf, n, ids, staging, offset, err);
    /* As if the author had assumed one view block per manager block. */
    struct kvrt_plugin_layer *layers = malloc(cache->num_layers * sizeof(*layers));
    if (!layers)
        return tpl_fail(err, KVRT_ERR_NOMEM, "out of memory");
    struct kvrt_plugin_cache c = *cache;
    for (uint64_t l = 0; l < cache->num_layers; l++) {
        layers[l] = cache->layers[l];
        layers[l].states *= layers[l].blocks_per_block;
        layers[l].blocks_per_block = 1;
    }
    c.layers = layers;
    int status = tpl_scatter(dev, &c, cache_buf, n, ids, staging, offset, err);
    free(layers);
    return status;
}

static int m_decode(kvrt_plugin_device *dev, const struct kvrt_plugin_cache *cache, kvrt_plugin_buffer *cache_buf,
                    uint32_t layer, const struct kvrt_plugin_decode_args *args, kvrt_plugin_error *err)
{
    struct kvrt_plugin_decode_args a = *args;
    int32_t *lens = malloc(a.num_seqs * sizeof(*lens));
    if (!lens)
        return tpl_fail(err, KVRT_ERR_NOMEM, "out of memory");
    for (uint32_t s = 0; s < a.num_seqs; s++)
        lens[s] = args->seq_lens[s] - (MUTANT == DECODE_LAST_TOKEN && args->seq_lens[s] > 1);
    a.seq_lens = lens;
    if (MUTANT == DECODE_SCALE)
        a.scale *= 1.01f;
    int status;
    if (MUTANT == DECODE_GQA) {
        /* Every query head its own KV head, all at head stride 0: each
         * query head reads KV head 0. */
        struct kvrt_plugin_layer *layers = malloc(cache->num_layers * sizeof(*layers));
        if (!layers) {
            free(lens);
            return tpl_fail(err, KVRT_ERR_NOMEM, "out of memory");
        }
        struct kvrt_plugin_cache c = *cache;
        memcpy(layers, cache->layers, cache->num_layers * sizeof(*layers));
        layers[layer].head_slots = a.num_q_heads;
        layers[layer].stride_head = 0;
        c.layers = layers;
        status = tpl_decode(dev, &c, cache_buf, layer, &a, err);
        free(layers);
    } else {
        status = tpl_decode(dev, cache, cache_buf, layer, &a, err);
    }
    free(lens);
    return status;
}

/* The template's own entry, renamed when it is built for the mutants. */
const struct kvrt_plugin_descriptor *kvrt_template_entry(void);

static struct kvrt_plugin_descriptor mutant_descriptor;

KVRT_PLUGIN_EXPORT const struct kvrt_plugin_descriptor *kvrt_plugin_entry(void);
KVRT_PLUGIN_EXPORT const struct kvrt_plugin_descriptor *kvrt_plugin_entry(void)
{
    mutant_descriptor = *kvrt_template_entry();
    mutant_descriptor.name = "mutant-" MUTANT_NAME;
    mutant_descriptor.write = m_write;
    mutant_descriptor.read = m_read;
    mutant_descriptor.copy_blocks = m_copy;
    mutant_descriptor.gather = m_gather;
    mutant_descriptor.scatter = m_scatter;
    mutant_descriptor.decode = m_decode;
    return &mutant_descriptor;
}
