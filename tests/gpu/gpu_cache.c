#include <string.h>

#include "gpu_cache.h"

static const int orders[KVRT_NUM_LAYOUTS][KVRT_NUM_AXES] = {
    {0, 1, 2, 3, 4}, /* LBHNC */
    {0, 1, 3, 2, 4}, /* LBNHC */
    {0, 2, 1, 3, 4}, /* LHBNC */
    {1, 0, 2, 3, 4}, /* BLHNC */
    {1, 0, 3, 2, 4}, /* BLNHC */
    {1, 2, 0, 3, 4}, /* BHLNC */
};

const int *gpu_stride_order(int layout)
{
    return orders[layout];
}

int gpu_block_compact(int layout)
{
    const int *o = orders[layout];
    return (o[0] == KVRT_AXIS_L || o[0] == KVRT_AXIS_B) && (o[1] == KVRT_AXIS_L || o[1] == KVRT_AXIS_B);
}

int gpu_split_legal(int layout)
{
    return orders[layout][0] == KVRT_AXIS_L && orders[layout][1] == KVRT_AXIS_B;
}

void gpu_cache_build(struct gpu_cache *c, const struct gpu_geom *g)
{
    memset(c, 0, sizeof(*c));
    c->g = *g;
    const uint64_t k = g->block_size / g->r;
    c->content = (g->d + g->dv) * g->elem;
    const uint64_t extent[KVRT_NUM_AXES] = {g->layers, g->blocks * g->r, g->heads, k, c->content};
    uint64_t stride[KVRT_NUM_AXES];
    uint64_t running = 1;
    int page_done = 0;
    /* Innermost to outermost; a padded page sets the stride of whichever
     * of L, B comes first (the page tail inside it is H, N, C). */
    for (int p = KVRT_NUM_AXES - 1; p >= 0; p--) {
        const int axis = orders[g->layout][p];
        if (g->pad && !page_done && (axis == KVRT_AXIS_L || axis == KVRT_AXIS_B)) {
            running += g->pad;
            page_done = 1;
        }
        stride[axis] = running;
        running *= extent[axis];
    }
    c->bytes = g->base + running;
    for (uint64_t l = 0; l < g->layers; l++) {
        struct kvrt_plugin_layer *ly = &c->layers[l];
        ly->size = sizeof(*ly);
        ly->kind = KVRT_SPEC_ATTENTION;
        ly->dtype = g->dtype;
        ly->elem_size = (uint32_t)g->elem;
        ly->offset = g->base + l * stride[KVRT_AXIS_L];
        ly->num_view_blocks = g->blocks * g->r;
        ly->blocks_per_block = g->r;
        ly->view_block_tokens = k;
        ly->head_slots = g->heads;
        ly->states = k;
        ly->content_bytes = c->content;
        ly->head_size = g->d;
        ly->head_size_v = g->dv;
        ly->stride_block = stride[KVRT_AXIS_B];
        ly->stride_head = stride[KVRT_AXIS_H];
        ly->stride_state = stride[KVRT_AXIS_N];
    }
    c->cache.size = sizeof(c->cache);
    c->cache.layout = g->layout;
    c->cache.bytes = c->bytes;
    c->cache.num_blocks = g->blocks;
    c->cache.block_size = g->block_size;
    c->cache.num_layers = g->layers;
    c->cache.layers = c->layers;
    c->stage = g->layers * g->heads * g->block_size * c->content;
}

uint64_t gpu_cell(const struct gpu_cache *c, uint64_t l, uint64_t vb, uint64_t h, uint64_t j)
{
    const struct kvrt_plugin_layer *ly = &c->layers[l];
    return ly->offset + vb * ly->stride_block + h * ly->stride_head + j * ly->stride_state;
}

/* Cell of slot s. */
static uint64_t slot_cell(const struct gpu_cache *c, uint64_t l, int64_t s, uint64_t h)
{
    const uint64_t k = c->layers[l].view_block_tokens;
    return gpu_cell(c, l, (uint64_t)s / k, h, (uint64_t)s % k);
}

void gpu_emulate_write(const struct gpu_cache *c, uint8_t *image, uint64_t layer, uint64_t tokens, const int64_t *slots,
                       const uint8_t *k, const uint8_t *v)
{
    const uint64_t kb = c->g.d * c->g.elem, vb = c->g.dv * c->g.elem;
    for (uint64_t t = 0; t < tokens; t++) {
        if (slots[t] < 0)
            continue;
        for (uint64_t h = 0; h < c->g.heads; h++) {
            const uint64_t cell = slot_cell(c, layer, slots[t], h);
            memcpy(image + cell, k + (t * c->g.heads + h) * kb, kb);
            memcpy(image + cell + kb, v + (t * c->g.heads + h) * vb, vb);
        }
    }
}

void gpu_emulate_read(const struct gpu_cache *c, const uint8_t *image, uint64_t layer, uint64_t tokens,
                      const int64_t *slots, uint8_t *k, uint8_t *v)
{
    const uint64_t kb = c->g.d * c->g.elem, vb = c->g.dv * c->g.elem;
    for (uint64_t t = 0; t < tokens; t++) {
        if (slots[t] < 0)
            continue;
        for (uint64_t h = 0; h < c->g.heads; h++) {
            const uint64_t cell = slot_cell(c, layer, slots[t], h);
            memcpy(k + (t * c->g.heads + h) * kb, image + cell, kb);
            memcpy(v + (t * c->g.heads + h) * vb, image + cell + kb, vb);
        }
    }
}

/* Cell of state n (across the manager block) of block b. */
static uint64_t block_cell(const struct gpu_cache *c, uint64_t l, uint64_t b, uint64_t h, uint64_t n)
{
    const uint64_t states = c->layers[l].states;
    return gpu_cell(c, l, b * c->g.r + n / states, h, n % states);
}

void gpu_emulate_copy(const struct gpu_cache *c, uint8_t *image, uint64_t pairs, const int64_t *ids)
{
    for (uint64_t p = 0; p < pairs; p++)
        for (uint64_t l = 0; l < c->g.layers; l++)
            for (uint64_t h = 0; h < c->g.heads; h++)
                for (uint64_t n = 0; n < c->g.block_size; n++)
                    memmove(image + block_cell(c, l, (uint64_t)ids[2 * p + 1], h, n),
                            image + block_cell(c, l, (uint64_t)ids[2 * p], h, n), c->content);
}

void gpu_emulate_gather(const struct gpu_cache *c, const uint8_t *image, uint64_t n, const int64_t *ids,
                        uint8_t *staging)
{
    uint8_t *out = staging;
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t l = 0; l < c->g.layers; l++)
            for (uint64_t h = 0; h < c->g.heads; h++)
                for (uint64_t s = 0; s < c->g.block_size; s++) {
                    memcpy(out, image + block_cell(c, l, (uint64_t)ids[i], h, s), c->content);
                    out += c->content;
                }
}

void gpu_emulate_scatter(const struct gpu_cache *c, uint8_t *image, uint64_t n, const int64_t *ids,
                         const uint8_t *staging)
{
    const uint8_t *in = staging;
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t l = 0; l < c->g.layers; l++)
            for (uint64_t h = 0; h < c->g.heads; h++)
                for (uint64_t s = 0; s < c->g.block_size; s++) {
                    memcpy(image + block_cell(c, l, (uint64_t)ids[i], h, s), in, c->content);
                    in += c->content;
                }
}
