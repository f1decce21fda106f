/* The steps put, get and lookup share: a span checked completely before
 * anything moves (its heads, tokens, block table and keys), an entry's
 * id, and which of a span's entries the memory and disk tiers hold
 * (docs/store.md "Operations").
 *
 * Layer 5 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

static int check_reserved(const uint8_t *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "%s.reserved[%zu] is %u, but reserved bytes must be 0 (this libkvrt-store speaks API "
                             "%d.%d); fill it with its _default() function or a designated initialiser",
                             what, i, (unsigned)b[i], KVRT_STORE_API_VERSION_MAJOR, KVRT_STORE_API_VERSION_MINOR);
    return KVRT_OK;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The heads a span names, as [start, start + n) of the model's. */
int store_span_heads(const kvrt_store *s, const char *fn, uint64_t start, uint64_t n, uint64_t *out_n)
{
    uint64_t H = s->model.num_heads;
    if (n == 0) {
        if (start != 0)
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "%s: head_start %llu with num_heads 0 (all heads); give both, or neither", fn, ULL(start));
        n = H;
    }
    if (start >= H || n > H - start)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "%s: heads [%llu, %llu) are outside the model's %llu KV heads; give head_start and "
                         "num_heads with head_start + num_heads <= %llu",
                         fn, ULL(start), ULL(start + n), ULL(H), ULL(H));
    *out_n = n;
    return KVRT_OK;
}

int store_span_layers(const kvrt_store *s, const char *fn, uint64_t start, uint64_t n, uint64_t *group_start,
                      uint64_t *num_groups)
{
    const struct store_model *m = &s->model;
    const uint64_t L = m->num_layers, G = m->group_layers;
    if (n == 0) {
        if (start != 0)
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "%s: layer_start %llu with num_layers 0 (all layers); give both, or neither", fn,
                             ULL(start));
        n = L;
    }
    if (start >= L || n > L - start)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "%s: layers [%llu, %llu) are outside the model's %llu layers (attention and MLA, in "
                         "canonical order); give layer_start and num_layers with layer_start + num_layers <= %llu",
                         fn, ULL(start), ULL(start + n), ULL(L), ULL(L));
    uint64_t end = start + n;
    if (start % G || (end % G && end != L)) {
        /* the boundaries a range may start or end on */
        char bounds[256];
        size_t at = 0;
        for (uint64_t b = 0; b <= L && at < sizeof(bounds) - 24; b += G) {
            at += (size_t)snprintf(bounds + at, sizeof(bounds) - at, "%s%llu", b ? ", " : "", ULL(b));
            if (b + G > L && b != L)
                at += (size_t)snprintf(bounds + at, sizeof(bounds) - at, ", %llu", ULL(L));
        }
        if (at >= sizeof(bounds) - 24)
            snprintf(bounds + at, sizeof(bounds) - at, ", ...");
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "%s: layers [%llu, %llu) are not whole layer groups of this store (layers_per_entry %llu, "
                         "%llu layers); a range starts and ends on a group boundary: %s",
                         fn, ULL(start), ULL(end), ULL(G), ULL(L), bounds);
    }
    *group_start = start / G;
    *num_groups = (end - start + G - 1) / G;
    return KVRT_OK;
}

int store_check_tokens(const char *fn, const int32_t *tokens, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (tokens[i] < 0)
            return BASE_FAIL(KVRT_ERR_INVALID, "%s: tokens[%llu] is %d; token ids are >= 0", fn, ULL(i),
                             (int)tokens[i]);
    return KVRT_OK;
}

static int check_table(const char *fn, const struct canon_map *map, const int64_t *table, uint64_t from, uint64_t to)
{
    for (uint64_t i = from; i < to; i++)
        if (table[i] < 0 || (uint64_t)table[i] >= map->num_blocks)
            return BASE_FAIL(KVRT_ERR_INVALID, "%s: block_table[%llu] is %lld; the cache's blocks are 0 to %llu", fn,
                             ULL(i), (long long)table[i], ULL(map->num_blocks - 1));
    if (to - from < 2)
        return KVRT_OK;
    int64_t *sorted = malloc((to - from) * sizeof(*sorted));
    if (!sorted)
        return BASE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory", fn);
    memcpy(sorted, table + from, (to - from) * sizeof(*sorted));
    qsort(sorted, to - from, sizeof(*sorted), cmp_i64);
    int rc = KVRT_OK;
    for (uint64_t i = 1; i < to - from && rc == KVRT_OK; i++)
        if (sorted[i] == sorted[i - 1])
            rc = BASE_FAIL(KVRT_ERR_INVALID,
                           "%s: block_table names block %lld twice within the range; a sequence's blocks are "
                           "distinct",
                           fn, (long long)sorted[i]);
    free(sorted);
    return rc;
}

void store_op_free(struct store_op *op)
{
    canon_map_free(&op->map);
    free(op->table_copy);
    free(op->tokens_copy);
    free(op->keys);
    memset(op, 0, sizeof(*op));
}

int store_op_prepare(kvrt_store *s, const struct kvrt_store_span *span, const char *fn, bool copy, struct store_op *op)
{
    memset(op, 0, sizeof(*op));
    if (!s || !span)
        return BASE_FAIL(KVRT_ERR_INVALID, "%s: the store and the span are required", fn);
    if (s->inspect)
        return BASE_FAIL(KVRT_ERR_STATE,
                         "%s: the store was opened to inspect its directory (no model); open it with the model to "
                         "put and get",
                         fn);
    if (span->size != sizeof(*span))
        return BASE_FAIL(KVRT_ERR_INVALID, "%s: span size %zu; expected %zu (call kvrt_store_span_default)", fn,
                         span->size, sizeof(*span));
    int rc = check_reserved(span->reserved, sizeof(span->reserved), "kvrt_store_span");
    if (rc != KVRT_OK)
        return rc;
    if (!span->cache)
        return BASE_FAIL(KVRT_ERR_INVALID, "%s: the span has no cache", fn);
    const uint64_t T = s->model.chunk_tokens;
    uint64_t heads;
    if ((rc = store_span_heads(s, fn, span->head_start, span->num_heads, &heads)) != KVRT_OK)
        return rc;
    if (span->num_tokens && !span->tokens)
        return BASE_FAIL(KVRT_ERR_INVALID, "%s: num_tokens is %llu but tokens is NULL", fn, ULL(span->num_tokens));
    if (span->first > span->num_tokens)
        return BASE_FAIL(KVRT_ERR_INVALID, "%s: first %llu is past the %llu tokens given", fn, ULL(span->first),
                         ULL(span->num_tokens));
    uint64_t count = span->count == KVRT_UNSET ? span->num_tokens - span->first : span->count;
    if (count > span->num_tokens - span->first)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "%s: the range [%llu, %llu) needs %llu token ids, but tokens has %llu; give every token id "
                         "from the sequence's first up to the range's end",
                         fn, ULL(span->first), ULL(span->first + count), ULL(span->first + count),
                         ULL(span->num_tokens));
    if (span->first % T)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "%s: first %llu is not on a chunk boundary; give a multiple of chunk_tokens (%llu)", fn,
                         ULL(span->first), ULL(T));
    uint64_t group_start, num_groups;
    if ((rc = store_span_layers(s, fn, span->layer_start, span->num_layers, &group_start, &num_groups)) != KVRT_OK)
        return rc;
    const uint64_t first_layer = store_group_first(&s->model, group_start), last_group = group_start + num_groups - 1,
                   num_layers = store_group_first(&s->model, last_group) + store_group_count(&s->model, last_group) -
                                first_layer;
    if ((rc = canon_map_build(&s->model, span->cache, heads, first_layer, num_layers, &op->map)) != KVRT_OK)
        return rc;
    op->store = s;
    op->group_start = group_start;
    op->num_groups = num_groups;
    op->units = num_groups * heads;
    op->first_chunk = span->first / T;
    op->num_chunks = count / T;
    op->head_start = span->head_start;
    op->num_heads = heads;
    op->replica = span->replica;
    uint64_t end = (op->first_chunk + op->num_chunks) * T;
    const uint64_t bs = op->map.block_size;
    uint64_t need = op->num_chunks ? (end + bs - 1) / bs : 0;
    if (span->num_blocks < need || (need && !span->block_table)) {
        rc = BASE_FAIL(KVRT_ERR_INVALID,
                       "%s: block_table has %llu blocks, but tokens up to %llu need %llu blocks of %llu tokens; "
                       "give the sequence's whole block table",
                       fn, ULL(span->block_table ? span->num_blocks : 0), ULL(end), ULL(need), ULL(bs));
        store_op_free(op);
        return rc;
    }
    if ((rc = store_check_tokens(fn, span->tokens, end)) != KVRT_OK ||
        (rc = check_table(fn, &op->map, span->block_table, span->first / bs, need)) != KVRT_OK) {
        store_op_free(op);
        return rc;
    }
    uint64_t all = op->first_chunk + op->num_chunks;
    op->keys = malloc((all ? all : 1) * KVRT_STORE_KEY_BYTES);
    if (!op->keys) {
        store_op_free(op);
        return BASE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory for %llu keys", fn, ULL(all));
    }
    if ((rc = store_chunk_keys(&s->model, span->tokens, all, op->keys)) != KVRT_OK) {
        store_op_free(op);
        return rc;
    }
    if (s->events) {
        /* BlockStored names each chunk's tokens and the key before it */
        op->has_parent = op->first_chunk > 0;
        if (op->has_parent)
            memcpy(op->parent, op->keys + (op->first_chunk - 1) * KVRT_STORE_KEY_BYTES, KVRT_STORE_KEY_BYTES);
        op->tokens = span->tokens + op->first_chunk * T;
        if (copy && op->num_chunks) {
            op->tokens_copy = malloc(op->num_chunks * T * sizeof(int32_t));
            if (!op->tokens_copy) {
                store_op_free(op);
                return BASE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory", fn);
            }
            memcpy(op->tokens_copy, op->tokens, op->num_chunks * T * sizeof(int32_t));
            op->tokens = op->tokens_copy;
        }
    }
    /* only the range's keys are needed from here on */
    memmove(op->keys, op->keys + op->first_chunk * KVRT_STORE_KEY_BYTES, op->num_chunks * KVRT_STORE_KEY_BYTES);
    op->table_len = need;
    op->table = span->block_table;
    if (copy && need) {
        op->table_copy = malloc(need * sizeof(*op->table_copy));
        if (!op->table_copy) {
            store_op_free(op);
            return BASE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory", fn);
        }
        memcpy(op->table_copy, span->block_table, need * sizeof(*op->table_copy));
        op->table = op->table_copy;
    }
    return KVRT_OK;
}

void store_op_id(const struct store_op *op, uint64_t c, uint64_t u, struct store_id *id)
{
    memcpy(id->key, op->keys + c * KVRT_STORE_KEY_BYTES, KVRT_STORE_KEY_BYTES);
    const uint64_t H = op->num_heads, g = op->group_start + u / H;
    id->head = (uint32_t)(g * op->store->model.num_heads + op->head_start + u % H);
}

void store_op_attach(const struct store_op *op, struct mem_entry *e, uint64_t c)
{
    if (!op->store->events || !op->tokens)
        return;
    const uint8_t *parent = c > 0 ? op->keys + (c - 1) * KVRT_STORE_KEY_BYTES : op->has_parent ? op->parent : NULL;
    store_event_attach(op->store->events, &e->id, &e->chunk, parent, op->tokens + c * op->store->model.chunk_tokens);
}

/* A chunk whose heads are asked of the disk tier. */
struct probe {
    uint8_t key[KVRT_STORE_KEY_BYTES];
    uint64_t chunk;
};

static int cmp_probe(const void *a, const void *b)
{
    return memcmp(((const struct probe *)a)->key, ((const struct probe *)b)->key, KVRT_STORE_KEY_BYTES);
}

/* Which entries of the op are stored already (memory or disk):
 * present[c * units + u].  A chunk's heads are asked of each tier at once
 * (one lock of the memory tier, one cursor walk of the index): a 128k-token
 * lookup asks about 4096 entries.  The index is walked in key order: a
 * cursor whose next key is on the leaf page it stands on skips the descent
 * from the root (LMDB's cursor set), so 512 sorted probes cost about half
 * of 512 in chunk order. */
int store_find_present(struct store_op *op, bool *present)
{
    kvrt_store *s = op->store;
    const uint64_t H = op->num_heads, U = op->units, Hm = s->model.num_heads;
    uint64_t n = 0;
    struct probe *probes = s->has_disk ? malloc((op->num_chunks ? op->num_chunks : 1) * sizeof(*probes)) : NULL;
    bool *disk = s->has_disk ? malloc((H ? H : 1) * sizeof(*disk)) : NULL;
    if (s->has_disk && (!probes || !disk)) {
        free(probes);
        free(disk);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    }
    for (uint64_t c = 0; c < op->num_chunks; c++) {
        const uint8_t *key = op->keys + c * KVRT_STORE_KEY_BYTES;
        bool all = true;
        /* a group's heads are neighbours: one range per group */
        for (uint64_t g = 0; g < op->num_groups; g++) {
            uint32_t index = (uint32_t)((op->group_start + g) * Hm + op->head_start);
            all = mem_tier_has_heads(&s->mem, key, index, (uint32_t)H, present + c * U + g * H) && all;
        }
        if (!all && probes) {
            memcpy(probes[n].key, key, KVRT_STORE_KEY_BYTES);
            probes[n++].chunk = c;
        }
    }
    struct disk_read *r = NULL;
    int rc = n ? disk_read_begin(&s->disk, &r) : KVRT_OK;
    if (n > 1)
        qsort(probes, n, sizeof(*probes), cmp_probe);
    for (uint64_t i = 0; i < n && rc == KVRT_OK; i++) {
        for (uint64_t g = 0; g < op->num_groups && rc == KVRT_OK; g++) {
            bool *p = present + probes[i].chunk * U + g * H;
            uint32_t index = (uint32_t)((op->group_start + g) * Hm + op->head_start);
            rc = disk_read_has(r, probes[i].key, index, (uint32_t)H, disk);
            for (uint64_t h = 0; h < H && rc == KVRT_OK; h++)
                p[h] = p[h] || disk[h];
        }
    }
    disk_read_end(r);
    free(probes);
    free(disk);
    return rc;
}
