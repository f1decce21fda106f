/* Caches in canonical order: where each (layer, head, token) cell of a
 * cache is, from libkvrt's placement and views, and the copies between a
 * cache and an entry's payload (docs/store.md "Canonical form").  A token
 * t sits in manager block table[t / bs], slot t % bs; that is kernel block
 * block * r + slot / k, state slot % k.  Cells of one head that follow each
 * other in a kernel block are one run when the layout keeps tokens
 * innermost (state stride == C), so HND-like layouts copy block-long runs
 * and NHD-like ones cell by cell; either way each byte is copied once, and
 * all the heads of a chunk are copied together (walk).
 *
 * Layer 2 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdlib.h>
#include <string.h>

#include <kvrt/spec.h>

#include "canon.h"
#include "copy.h"

void canon_map_free(struct canon_map *map)
{
    free(map->layers);
    memset(map, 0, sizeof(*map));
}

static int layer_mismatch(const struct store_layer *L, const char *what, unsigned long long cache_value,
                          unsigned long long model_value)
{
    return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-store: the cache's layer \"%s\" has %s %llu, the model's %llu", L->name,
                     what, cache_value, model_value);
}

static int map_layer(const struct store_model *m, size_t l, const kvrt_placement *p, uint64_t heads,
                     struct canon_map *out)
{
    const struct store_layer *L = &m->layers[out->first_layer + l];
    size_t set;
    uint64_t index;
    if (kvrt_placement_find_layer(p, L->name, &set, &index) != KVRT_OK)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-store: the cache has no layer \"%s\" of the model; a cache must hold every layer "
                         "of the span's layers [%zu, %zu) (entries keep a layer group's layers together), named as "
                         "in the model",
                         L->name, out->first_layer, out->first_layer + out->num_layers);
    struct kvrt_placement_set ps;
    struct kvrt_view v;
    int rc = kvrt_placement_get_set(p, set, &ps);
    if (rc == KVRT_OK)
        rc = kvrt_placement_layer_view(p, set, index, &v);
    if (rc != KVRT_OK)
        return rc;
    const struct kvrt_spec_info *in = &ps.geometry.info;
    if (ps.spec->kind != L->kind)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-store: the cache's layer \"%s\" is of kind %s, the model's %s",
                         L->name, kvrt_spec_kind_name(ps.spec->kind), kvrt_spec_kind_name(L->kind));
    if (ps.spec->dtype != L->dtype)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-store: the cache's layer \"%s\" holds %s, the model's %s", L->name,
                         kvrt_dtype_name(ps.spec->dtype), kvrt_dtype_name(L->dtype));
    if (in->head_size != L->head_size)
        return layer_mismatch(L, "head size", in->head_size, L->head_size);
    if (in->head_size_v != L->head_size_v)
        return layer_mismatch(L, "V head size", in->head_size_v, L->head_size_v);
    if (in->content_bytes != L->content)
        return layer_mismatch(L, "cell bytes", in->content_bytes, L->content);
    if (ps.spec->tokens_per_state_num != ps.spec->tokens_per_state_den)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-store: the cache's layer \"%s\" stores one state per %llu/%llu tokens; the store "
                         "needs one per token",
                         L->name, ULL(ps.spec->tokens_per_state_num), ULL(ps.spec->tokens_per_state_den));
    if (in->head_slots != heads || ps.spec->num_kv_heads != heads)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-store: the cache's layer \"%s\" holds %llu KV heads (%llu head slots), but the span "
                         "names %llu heads; give heads=(start, count) of the model's heads this cache holds",
                         L->name, ULL(ps.spec->num_kv_heads), ULL(in->head_slots), ULL(heads));
    if (l == 0) {
        out->block_size = ps.spec->block_size;
        out->kernel_size = in->kernel_block_size;
        out->kernel_blocks = in->kernel_blocks_per_block;
    } else if (ps.spec->block_size != out->block_size || in->kernel_block_size != out->kernel_size) {
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-store: the cache's layer \"%s\" has blocks of %llu tokens (kernel blocks %llu), "
                         "layer \"%s\" %llu (%llu); one block table needs one block size",
                         L->name, ULL(ps.spec->block_size), ULL(in->kernel_block_size),
                         m->layers[out->first_layer].name, ULL(out->block_size), ULL(out->kernel_size));
    }
    struct canon_layer *C = &out->layers[l];
    C->offset = v.offset_bytes;
    C->kblock_stride = v.strides_bytes[0];
    C->head_stride = v.strides_bytes[1];
    C->state_stride = v.strides_bytes[2];
    C->content = L->content;
    return KVRT_OK;
}

int canon_map_build(const struct store_model *m, kvrt_cache *cache, uint64_t heads, size_t first, size_t count,
                    struct canon_map *out)
{
    memset(out, 0, sizeof(*out));
    const kvrt_placement *p = kvrt_cache_placement(cache);
    if (!p)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-store: the cache has no placement (NULL or destroyed cache)");
    out->layers = calloc(count ? count : 1, sizeof(*out->layers));
    if (!out->layers)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    out->cache = cache;
    out->placement = p;
    out->first_layer = first;
    out->num_layers = count;
    out->heads = heads;
    out->num_blocks = kvrt_placement_num_blocks(p);
    for (size_t l = 0; l < count; l++) {
        int rc = map_layer(m, l, p, heads, out);
        if (rc != KVRT_OK) {
            canon_map_free(out);
            return rc;
        }
    }
    void *addr = NULL;
    enum kvrt_memory_kind kind = KVRT_MEMORY_OPAQUE;
    if (kvrt_buffer_address(kvrt_cache_buffer(cache), &addr, &kind) == KVRT_OK && kind == KVRT_MEMORY_HOST)
        out->host = addr;
    /* a failed address query leaves its message; it is not an error here */
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

/* ---- the cells of one request -------------------------------------------- */

int canon_io_begin(struct canon_io *io, const struct canon_map *map, const int64_t *table, uint64_t table_len)
{
    memset(io, 0, sizeof(*io));
    io->map = map;
    io->table = table;
    if (map->host)
        return KVRT_OK;
    io->staged = true;
    uint64_t *ids = malloc((table_len ? table_len : 1) * sizeof(*ids));
    if (!ids)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    for (uint64_t i = 0; i < table_len; i++)
        ids[i] = (uint64_t)table[i];
    int rc = kvrt_transfer_regions(map->placement, ids, table_len, &io->regions, &io->num_regions);
    free(ids);
    if (rc != KVRT_OK)
        return rc;
    io->at = malloc((io->num_regions ? io->num_regions : 1) * sizeof(*io->at));
    uint64_t total = 0;
    for (size_t i = 0; io->at && i < io->num_regions; i++) {
        io->at[i] = total;
        total += io->regions[i].length;
    }
    io->copy = io->at ? malloc(total ? total : 1) : NULL;
    if (!io->copy) {
        canon_io_end(io);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory for a %llu-byte host copy of the blocks",
                         ULL(total));
    }
    kvrt_buffer *buf = kvrt_cache_buffer(map->cache);
    for (size_t i = 0; i < io->num_regions; i++)
        if ((rc = kvrt_buffer_download(buf, io->regions[i].offset, io->copy + io->at[i], io->regions[i].length)) !=
            KVRT_OK) {
            canon_io_end(io);
            return rc;
        }
    return KVRT_OK;
}

int canon_io_commit(struct canon_io *io)
{
    if (!io->staged)
        return KVRT_OK;
    kvrt_buffer *buf = kvrt_cache_buffer(io->map->cache);
    for (size_t i = 0; i < io->num_regions; i++) {
        int rc = kvrt_buffer_upload(buf, io->regions[i].offset, io->copy + io->at[i], io->regions[i].length);
        if (rc != KVRT_OK)
            return rc;
    }
    return KVRT_OK;
}

void canon_io_end(struct canon_io *io)
{
    kvrt_free(io->regions);
    free(io->at);
    free(io->copy);
    io->regions = NULL;
    io->at = NULL;
    io->copy = NULL;
}

/* The host address of cache byte `off`: in the cache, or in the copy of the
 * region holding it (every page of the request's blocks is in one). */
static uint8_t *resolve(const struct canon_io *io, uint64_t off)
{
    if (!io->staged)
        return io->map->host + off;
    size_t lo = 0, hi = io->num_regions;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (io->regions[mid].offset <= off)
            lo = mid;
        else
            hi = mid;
    }
    return io->copy + io->at[lo] + (off - io->regions[lo].offset);
}

/* Each run of the chunk's cells, layer by layer, every head of the chunk
 * together: the cache is read in the order it is laid out (a kernel
 * block's cells of all the heads one after the other, whether heads or
 * tokens are innermost) while each head's payload is written in payload
 * order, one stream per head.  Going head by head instead reads each
 * block once per head, 0.5-8 KiB at a time, and runs at a fraction of the
 * speed (docs/store.md "Speed"). */
static void walk(const struct canon_io *io, const struct store_model *m, const struct canon_chunk *ch, bool to_payload)
{
    const struct canon_map *mp = io->map;
    const uint64_t bs = mp->block_size, k = mp->kernel_size, r = mp->kernel_blocks;
    const uint64_t end = ch->first + m->chunk_tokens;
    const size_t from = store_group_first(m, ch->group), to = from + store_group_count(m, ch->group);
    for (size_t l = from; l < to; l++) {
        const struct canon_layer *L = &mp->layers[l - mp->first_layer];
        const uint64_t c = L->content, at = m->layers[l].entry_offset;
        for (uint64_t t = ch->first, done = 0; t < end;) {
            uint64_t pos = t % bs, n = pos % k;
            uint64_t kb = (uint64_t)io->table[t / bs] * r + pos / k;
            uint64_t run = k - n;
            if (run > end - t)
                run = end - t;
            uint64_t base = L->offset + kb * L->kblock_stride + n * L->state_stride;
            if (L->state_stride == c) {
                /* a head's tokens are neighbours: one run per head */
                for (uint64_t j = 0; j < ch->n; j++) {
                    uint8_t *cell = resolve(io, base + ch->slots[j] * L->head_stride);
                    uint8_t *pay = ch->payloads[j] + at + done * c;
                    if (!to_payload) {
                        store_copy_stream(cell, pay, run * c);
                        continue;
                    }
                    if (ch->sums)
                        STORE_SUM_UPDATE(&ch->sums[j], cell, run * c);
                    store_copy_stream(pay, cell, run * c);
                }
            } else {
                /* heads innermost: token by token, each head's cell */
                for (uint64_t i = 0; i < run; i++)
                    for (uint64_t j = 0; j < ch->n; j++) {
                        uint8_t *cell = resolve(io, base + i * L->state_stride + ch->slots[j] * L->head_stride);
                        uint8_t *pay = ch->payloads[j] + at + (done + i) * c;
                        if (!to_payload) {
                            store_copy_stream(cell, pay, c);
                            continue;
                        }
                        if (ch->sums)
                            STORE_SUM_UPDATE(&ch->sums[j], cell, c);
                        store_copy_stream(pay, cell, c);
                    }
            }
            done += run;
            t += run;
        }
    }
    store_copy_fence();
}

void canon_pack(const struct canon_io *io, const struct store_model *m, const struct canon_chunk *ch)
{
    walk(io, m, ch, true);
}

void canon_unpack(const struct canon_io *io, const struct store_model *m, const struct canon_chunk *ch)
{
    walk(io, m, ch, false);
}
