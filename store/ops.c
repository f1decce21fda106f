/* Put, get and lookup: spans checked completely before anything moves, then
 * entries copied between a cache and the tiers, chunk by chunk and head by
 * head (docs/store.md "Operations"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "store_internal.h"

static int check_reserved(const uint8_t *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return STORE_FAIL(KVRT_ERR_INVALID,
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
static int span_heads(const kvrt_store *s, const char *fn, uint64_t start, uint64_t n, uint64_t *out_n)
{
    uint64_t H = s->model.num_heads;
    if (n == 0) {
        if (start != 0)
            return STORE_FAIL(KVRT_ERR_INVALID,
                              "%s: head_start %llu with num_heads 0 (all heads); give both, or neither", fn,
                              ULL(start));
        n = H;
    }
    if (start >= H || n > H - start)
        return STORE_FAIL(KVRT_ERR_INVALID,
                          "%s: heads [%llu, %llu) are outside the model's %llu KV heads; give head_start and "
                          "num_heads with head_start + num_heads <= %llu",
                          fn, ULL(start), ULL(start + n), ULL(H), ULL(H));
    *out_n = n;
    return KVRT_OK;
}

static int check_tokens(const char *fn, const int32_t *tokens, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (tokens[i] < 0)
            return STORE_FAIL(KVRT_ERR_INVALID, "%s: tokens[%llu] is %d; token ids are >= 0", fn, ULL(i),
                              (int)tokens[i]);
    return KVRT_OK;
}

static int check_table(const char *fn, const struct canon_map *map, const int64_t *table, uint64_t from, uint64_t to)
{
    for (uint64_t i = from; i < to; i++)
        if (table[i] < 0 || (uint64_t)table[i] >= map->num_blocks)
            return STORE_FAIL(KVRT_ERR_INVALID, "%s: block_table[%llu] is %lld; the cache's blocks are 0 to %llu", fn,
                              ULL(i), (long long)table[i], ULL(map->num_blocks - 1));
    if (to - from < 2)
        return KVRT_OK;
    int64_t *sorted = malloc((to - from) * sizeof(*sorted));
    if (!sorted)
        return STORE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory", fn);
    memcpy(sorted, table + from, (to - from) * sizeof(*sorted));
    qsort(sorted, to - from, sizeof(*sorted), cmp_i64);
    int rc = KVRT_OK;
    for (uint64_t i = 1; i < to - from && rc == KVRT_OK; i++)
        if (sorted[i] == sorted[i - 1])
            rc = STORE_FAIL(KVRT_ERR_INVALID,
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

int store_op_prepare(kvrt_store *s, const struct kvrt_store_span *span, bool is_put, bool copy, struct store_op *op)
{
    const char *fn = is_put ? "kvrt_store_put" : "kvrt_store_get";
    memset(op, 0, sizeof(*op));
    if (!s || !span)
        return STORE_FAIL(KVRT_ERR_INVALID, "%s: the store and the span are required", fn);
    if (s->inspect)
        return STORE_FAIL(KVRT_ERR_STATE,
                          "%s: the store was opened to inspect its directory (no model); open it with the model to "
                          "put and get",
                          fn);
    if (span->size != sizeof(*span))
        return STORE_FAIL(KVRT_ERR_INVALID, "%s: span size %zu; expected %zu (call kvrt_store_span_default)", fn,
                          span->size, sizeof(*span));
    int rc = check_reserved(span->reserved, sizeof(span->reserved), "kvrt_store_span");
    if (rc != KVRT_OK)
        return rc;
    if (!span->cache)
        return STORE_FAIL(KVRT_ERR_INVALID, "%s: the span has no cache", fn);
    const uint64_t T = s->model.chunk_tokens;
    uint64_t heads;
    if ((rc = span_heads(s, fn, span->head_start, span->num_heads, &heads)) != KVRT_OK)
        return rc;
    if (span->num_tokens && !span->tokens)
        return STORE_FAIL(KVRT_ERR_INVALID, "%s: num_tokens is %llu but tokens is NULL", fn, ULL(span->num_tokens));
    if (span->first > span->num_tokens)
        return STORE_FAIL(KVRT_ERR_INVALID, "%s: first %llu is past the %llu tokens given", fn, ULL(span->first),
                          ULL(span->num_tokens));
    uint64_t count = span->count == KVRT_UNSET ? span->num_tokens - span->first : span->count;
    if (count > span->num_tokens - span->first)
        return STORE_FAIL(KVRT_ERR_INVALID,
                          "%s: the range [%llu, %llu) needs %llu token ids, but tokens has %llu; give every token id "
                          "from the sequence's first up to the range's end",
                          fn, ULL(span->first), ULL(span->first + count), ULL(span->first + count),
                          ULL(span->num_tokens));
    if (span->first % T)
        return STORE_FAIL(KVRT_ERR_INVALID,
                          "%s: first %llu is not on a chunk boundary; give a multiple of chunk_tokens (%llu)", fn,
                          ULL(span->first), ULL(T));
    if ((rc = canon_map_build(&s->model, span->cache, heads, &op->map)) != KVRT_OK)
        return rc;
    op->is_put = is_put;
    op->store = s;
    op->first_chunk = span->first / T;
    op->num_chunks = count / T;
    op->head_start = span->head_start;
    op->num_heads = heads;
    op->replica = span->replica;
    uint64_t end = (op->first_chunk + op->num_chunks) * T;
    const uint64_t bs = op->map.block_size;
    uint64_t need = op->num_chunks ? (end + bs - 1) / bs : 0;
    if (span->num_blocks < need || (need && !span->block_table)) {
        rc = STORE_FAIL(KVRT_ERR_INVALID,
                        "%s: block_table has %llu blocks, but tokens up to %llu need %llu blocks of %llu tokens; "
                        "give the sequence's whole block table",
                        fn, ULL(span->block_table ? span->num_blocks : 0), ULL(end), ULL(need), ULL(bs));
        store_op_free(op);
        return rc;
    }
    if ((rc = check_tokens(fn, span->tokens, end)) != KVRT_OK ||
        (rc = check_table(fn, &op->map, span->block_table, span->first / bs, need)) != KVRT_OK) {
        store_op_free(op);
        return rc;
    }
    uint64_t all = op->first_chunk + op->num_chunks;
    op->keys = malloc((all ? all : 1) * KVRT_STORE_KEY_BYTES);
    if (!op->keys) {
        store_op_free(op);
        return STORE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory for %llu keys", fn, ULL(all));
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
                return STORE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory", fn);
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
            return STORE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory", fn);
        }
        memcpy(op->table_copy, span->block_table, need * sizeof(*op->table_copy));
        op->table = op->table_copy;
    }
    return KVRT_OK;
}

static void id_of(const struct store_op *op, uint64_t c, uint64_t h, struct store_id *id)
{
    memcpy(id->key, op->keys + c * KVRT_STORE_KEY_BYTES, KVRT_STORE_KEY_BYTES);
    id->head = (uint32_t)(op->head_start + h);
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
 * present[c * heads + h].  A chunk's heads are asked of each tier at once
 * (one lock of the memory tier, one cursor walk of the index): a 128k-token
 * lookup asks about 4096 entries.  The index is walked in key order: a
 * cursor whose next key is on the leaf page it stands on skips the descent
 * from the root (LMDB's cursor set), so 512 sorted probes cost about half
 * of 512 in chunk order. */
static int find_present(struct store_op *op, bool *present)
{
    kvrt_store *s = op->store;
    uint64_t H = op->num_heads, n = 0;
    struct probe *probes = s->has_disk ? malloc((op->num_chunks ? op->num_chunks : 1) * sizeof(*probes)) : NULL;
    bool *disk = s->has_disk ? malloc((H ? H : 1) * sizeof(*disk)) : NULL;
    if (s->has_disk && (!probes || !disk)) {
        free(probes);
        free(disk);
        return STORE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    }
    for (uint64_t c = 0; c < op->num_chunks; c++) {
        const uint8_t *key = op->keys + c * KVRT_STORE_KEY_BYTES;
        if (!mem_tier_has_heads(&s->mem, key, (uint32_t)op->head_start, (uint32_t)H, present + c * H) && probes) {
            memcpy(probes[n].key, key, KVRT_STORE_KEY_BYTES);
            probes[n++].chunk = c;
        }
    }
    struct disk_read *r = NULL;
    int rc = n ? disk_read_begin(&s->disk, &r) : KVRT_OK;
    if (n > 1)
        qsort(probes, n, sizeof(*probes), cmp_probe);
    for (uint64_t i = 0; i < n && rc == KVRT_OK; i++) {
        bool *p = present + probes[i].chunk * H;
        rc = disk_read_has(r, probes[i].key, (uint32_t)op->head_start, (uint32_t)H, disk);
        for (uint64_t h = 0; h < H && rc == KVRT_OK; h++)
            p[h] = p[h] || disk[h];
    }
    disk_read_end(r);
    free(probes);
    free(disk);
    return rc;
}

/* What a put copies out of one chunk: the new entries of its missing heads,
 * their head slots and payloads, and their checksum states. */
struct put_scratch {
    struct mem_entry **entries;
    uint64_t *slots;
    uint8_t **payloads;
    XXH3_state_t *sums;
};

static void put_scratch_free(struct put_scratch *ps)
{
    // NOLINTNEXTLINE(bugprone-multi-level-implicit-pointer-conversion)
    free(ps->entries);
    free(ps->slots);
    // NOLINTNEXTLINE(bugprone-multi-level-implicit-pointer-conversion)
    free(ps->payloads);
    free(ps->sums);
    memset(ps, 0, sizeof(*ps));
}

static int put_scratch_init(struct put_scratch *ps, uint64_t heads, bool sums)
{
    size_t n = heads ? heads : 1;
    memset(ps, 0, sizeof(*ps));
    /* arrays of pointers: sizeof(*x) is a pointer's size */
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    ps->entries = calloc(n, sizeof(*ps->entries));
    ps->slots = calloc(n, sizeof(*ps->slots));
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    ps->payloads = calloc(n, sizeof(*ps->payloads));
    /* XXH3 states want 64-byte alignment; their size is a multiple of it */
    if (sums && n <= SIZE_MAX / sizeof(*ps->sums))
        ps->sums = aligned_alloc(64, n * sizeof(*ps->sums));
    if (!ps->entries || !ps->slots || !ps->payloads || (sums && !ps->sums)) {
        put_scratch_free(ps);
        return STORE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_put: out of memory");
    }
    return KVRT_OK;
}

static int run_put(struct store_op *op, uint64_t *tokens)
{
    kvrt_store *s = op->store;
    const struct store_model *m = &s->model;
    uint64_t H = op->num_heads, T = m->chunk_tokens;
    bool *present = malloc((op->num_chunks * H > 0 ? op->num_chunks * H : 1) * sizeof(*present));
    if (!present)
        return STORE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_put: out of memory");
    int rc = find_present(op, present);
    uint64_t stored_chunks = 0;
    if (rc == KVRT_OK && op->replica != 0) {
        /* another replica holds the same heads: replica 0 writes them */
        for (uint64_t c = 0; c < op->num_chunks; c++) {
            bool all = true;
            for (uint64_t h = 0; h < H; h++)
                all = all && present[c * H + h];
            stored_chunks += all;
        }
        free(present);
        *tokens = stored_chunks * T;
        return KVRT_OK;
    }
    struct canon_io io;
    if (rc == KVRT_OK)
        rc = canon_io_begin(&io, &op->map, op->table, op->table_len);
    if (rc != KVRT_OK) {
        free(present);
        return rc;
    }
    unsigned where = (s->has_disk ? WRITE_DISK : 0) | (s->has_shared ? WRITE_SHARED : 0);
    uint64_t copied = 0, found = 0;
    struct put_scratch ps = {NULL, NULL, NULL, NULL};
    if (rc == KVRT_OK)
        rc = put_scratch_init(&ps, H, where != 0);
    for (uint64_t c = 0; c < op->num_chunks && rc == KVRT_OK; c++) {
        /* the chunk's missing heads, copied out together */
        uint64_t n = 0;
        for (uint64_t h = 0; h < H; h++) {
            if (present[c * H + h]) {
                found++;
                continue;
            }
            struct store_id id;
            id_of(op, c, h, &id);
            struct mem_entry *e = mem_entry_new(&s->mem, &id);
            if (!e) {
                rc = STORE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_put: out of memory for an entry of %llu bytes",
                                ULL(m->payload_bytes));
                break;
            }
            ps.entries[n] = e;
            ps.slots[n] = h;
            ps.payloads[n] = e->buf + STORE_HEADER_BYTES;
            if (where)
                store_entry_seal_begin(m, &id, e->buf, &ps.sums[n]);
            n++;
        }
        if (rc != KVRT_OK) {
            for (uint64_t i = 0; i < n; i++)
                mem_entry_unref(&s->mem, ps.entries[i]);
            break;
        }
        struct canon_chunk ch = {(op->first_chunk + c) * T, ps.slots, n, ps.payloads, where ? ps.sums : NULL};
        canon_pack(&io, m, &ch);
        bool all = true;
        for (uint64_t i = 0; i < n; i++) {
            struct mem_entry *e = ps.entries[i];
            if (where) {
                store_entry_seal_end(e->buf, &ps.sums[i]);
                e->refs++; /* the queue's */
                e->queued = true;
            }
            copied++;
            store_event_attach(s->events, e, op, c);
            bool kept = mem_tier_insert(&s->mem, e, s->has_mem);
            if (!kept)
                mem_entry_unref(&s->mem, e); /* the index did not take it */
            if (where)
                writer_enqueue(s, e, where);
            all = all && (kept || where);
        }
        stored_chunks += all;
    }
    put_scratch_free(&ps);
    canon_io_end(&io);
    free(present);
    pthread_mutex_lock(&s->count_lock);
    s->counts.put_entries += copied;
    s->counts.put_present += found;
    pthread_mutex_unlock(&s->count_lock);
    *tokens = stored_chunks * T;
    return rc;
}

/* One entry found for a get. */
struct found {
    const uint8_t *payload;
    struct mem_entry *pinned; /* memory hit */
    struct mem_entry *read;   /* disk or shared hit: read into this entry's buffer */
    int tier;                 /* 0 memory, 1 disk, 2 shared */
};

static void release_found(kvrt_store *s, struct found *f)
{
    if (f->pinned)
        mem_tier_unpin(&s->mem, f->pinned);
    mem_entry_unref(&s->mem, f->read);
    memset(f, 0, sizeof(*f));
}

/* A bad entry: one line, dropped from its tier, counted, a miss. */
static void bad_entry(kvrt_store *s, const struct store_id *id, const char *tier, const char *why)
{
    char hex[65];
    kvrt_store_hex(id->key, hex);
    store_warn(s, "dropped %s entry %.16s.../head %u: %s", tier, hex, id->head, why);
    pthread_mutex_lock(&s->count_lock);
    s->counts.dropped++;
    pthread_mutex_unlock(&s->count_lock);
    if (strcmp(tier, "disk") == 0)
        writer_drop(s, id);
    else if (s->has_shared)
        shared_drop(&s->shared, id);
}

/* The disk reads of one chunk, posted before the chunk before it is
 * copied (disk_ahead.c).  Per head: the entry being read into, or NULL
 * (in memory when posted, or not on disk); per read: the post. */
struct ahead {
    bool posted;
    uint64_t seq, n;
    struct mem_entry **e; /* [H] */
    uint64_t *slot, *len; /* [H] */
    uint8_t **bufs;       /* [n] */
    uint64_t *slots, *lens, *head;
};

/* Everything a get needs per head, allocated once. */
struct get_scratch {
    struct found *f;
    struct store_id *ids; /* heads missed locally, asked of the shared tier */
    uint64_t *miss_head;
    struct mem_entry **shared_e;
    uint8_t **shared_bufs;
    uint64_t *shared_lens;
    bool *shared_got;
    uint64_t *slots; /* head slots 0..H-1 */
    uint8_t **payloads;
    struct mem_entry **promoted;           /* [chunks x H]: shared hits to queue for the disk */
    struct ahead ahead[STORE_AHEAD_POSTS]; /* chunk c's is ahead[c % STORE_AHEAD_POSTS] */
};

static void get_scratch_free(struct get_scratch *g)
{
    free(g->f);
    free(g->ids);
    free(g->miss_head);
    // NOLINTBEGIN(bugprone-multi-level-implicit-pointer-conversion)
    free(g->shared_e);
    free(g->shared_bufs);
    free(g->shared_lens);
    free(g->shared_got);
    free(g->slots);
    free(g->payloads);
    free(g->promoted);
    for (unsigned i = 0; i < STORE_AHEAD_POSTS; i++) {
        struct ahead *A = &g->ahead[i];
        free(A->e);
        free(A->slot);
        free(A->len);
        free(A->bufs);
        free(A->slots);
        free(A->lens);
        free(A->head);
    }
    // NOLINTEND(bugprone-multi-level-implicit-pointer-conversion)
    memset(g, 0, sizeof(*g));
}

static int get_scratch_init(struct get_scratch *g, uint64_t H, uint64_t chunks)
{
    memset(g, 0, sizeof(*g));
    size_t n = H ? H : 1, p = chunks * H > 0 ? chunks * H : 1;
    bool ok = (g->f = calloc(n, sizeof(*g->f))) && (g->ids = calloc(n, sizeof(*g->ids))) &&
              (g->miss_head = calloc(n, sizeof(*g->miss_head))) &&
              // NOLINTBEGIN(bugprone-sizeof-expression): arrays of pointers
              (g->shared_e = calloc(n, sizeof(*g->shared_e))) &&
              (g->shared_bufs = calloc(n, sizeof(*g->shared_bufs))) &&
              (g->shared_lens = calloc(n, sizeof(*g->shared_lens))) &&
              (g->shared_got = calloc(n, sizeof(*g->shared_got))) && (g->slots = calloc(n, sizeof(*g->slots))) &&
              (g->payloads = calloc(n, sizeof(*g->payloads))) && (g->promoted = calloc(p, sizeof(*g->promoted)));
    for (unsigned i = 0; i < STORE_AHEAD_POSTS && ok; i++) {
        struct ahead *A = &g->ahead[i];
        ok = (A->e = calloc(n, sizeof(*A->e))) && (A->slot = calloc(n, sizeof(*A->slot))) &&
             (A->len = calloc(n, sizeof(*A->len))) && (A->bufs = calloc(n, sizeof(*A->bufs))) &&
             (A->slots = calloc(n, sizeof(*A->slots))) && (A->lens = calloc(n, sizeof(*A->lens))) &&
             (A->head = calloc(n, sizeof(*A->head)));
        // NOLINTEND(bugprone-sizeof-expression)
    }
    if (!ok) {
        get_scratch_free(g);
        return STORE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_get: out of memory");
    }
    for (uint64_t h = 0; h < H; h++)
        g->slots[h] = h;
    return KVRT_OK;
}

/* Start reading chunk c's entries that are on disk and not in memory. */
static void post_ahead(struct store_op *op, struct disk_read *r, struct disk_ahead *a, uint64_t c, struct ahead *A)
{
    kvrt_store *s = op->store;
    A->n = 0;
    for (uint64_t h = 0; h < op->num_heads; h++) {
        struct store_id id;
        id_of(op, c, h, &id);
        bool found = false;
        uint64_t slot;
        A->e[h] = NULL;
        /* memory pins it in its turn; an entry found nowhere is a miss then */
        if (mem_tier_has(&s->mem, &id) || disk_read_find(r, &id, &found, &slot) != KVRT_OK || !found)
            continue;
        struct mem_entry *e = mem_entry_new(&s->mem, &id);
        if (!e)
            continue;
        A->e[h] = e;
        A->slot[h] = slot;
        A->bufs[A->n] = e->buf;
        A->slots[A->n] = slot;
        A->head[A->n++] = h;
    }
    A->seq = disk_ahead_post(a, A->bufs, A->slots, A->n, A->lens);
    A->posted = true;
}

static void wait_ahead(struct disk_ahead *a, struct ahead *A)
{
    if (!A->posted)
        return;
    disk_ahead_wait(a, A->seq);
    for (uint64_t k = 0; k < A->n; k++)
        A->len[A->head[k]] = A->lens[k];
    A->posted = false;
}

/* What a get stopped before: its reads finished and let go. */
static void drop_ahead(kvrt_store *s, struct disk_ahead *a, struct ahead *A, uint64_t H)
{
    wait_ahead(a, A);
    for (uint64_t h = 0; A->e && h < H; h++) {
        mem_entry_unref(&s->mem, A->e[h]);
        A->e[h] = NULL;
    }
}

/* Head h's entry from memory or the disk (read ahead into A->e[h], or now). */
static bool find_local(struct store_op *op, struct disk_read *r, struct ahead *A, uint64_t h, const struct store_id *id,
                       struct found *f)
{
    kvrt_store *s = op->store;
    memset(f, 0, sizeof(*f));
    struct mem_entry *e = A ? A->e[h] : NULL;
    if (A)
        A->e[h] = NULL;
    /* memory, or on its way to the lower tiers */
    if ((f->pinned = mem_tier_pin(&s->mem, id))) {
        mem_entry_unref(&s->mem, e);
        f->payload = f->pinned->buf + STORE_HEADER_BYTES;
        f->tier = 0;
        return true;
    }
    if (!r)
        return false;
    bool found = e != NULL;
    uint64_t slot = e ? A->slot[h] : 0, len = e ? A->len[h] : 0;
    if (!e && (e = mem_entry_new(&s->mem, id)) && disk_read_get(r, id, e->buf, &found, &slot, &len) != KVRT_OK)
        found = false;
    /* in neither memory nor the get's snapshot of the index: it may have
     * been written since the snapshot was taken, and then left memory (an
     * entry leaves memory only after its batch is committed), so a fresh
     * snapshot has it */
    if (e && !found && disk_read_refresh(r) == KVRT_OK && disk_read_get(r, id, e->buf, &found, &slot, &len) != KVRT_OK)
        found = false;
    if (e && found) {
        /* read into an entry's buffer: a hit is then promoted as it is */
        const char *why = store_entry_check(&s->model, id, e->buf, len);
        if (!why) {
            f->payload = e->buf + STORE_HEADER_BYTES;
            f->read = e;
            f->tier = 1;
            return true;
        }
        /* a slot reused by a writer since this read began is no damage */
        if (disk_still_at(&s->disk, id, slot))
            bad_entry(s, id, "disk", why);
    }
    mem_entry_unref(&s->mem, e);
    return false;
}

/* The chunk's entries, every head: memory and disk first, then what they
 * missed from the shared tier in one pipeline, each value read straight
 * into an entry's buffer.  How many were found. */
static uint64_t find_chunk(struct store_op *op, struct disk_read *r, struct ahead *A, uint64_t c, struct get_scratch *g)
{
    kvrt_store *s = op->store;
    uint64_t H = op->num_heads, got = 0, missing = 0;
    for (uint64_t h = 0; h < H; h++) {
        struct store_id id;
        id_of(op, c, h, &id);
        if (find_local(op, r, A, h, &id, &g->f[h])) {
            got++;
        } else {
            g->ids[missing] = id;
            g->miss_head[missing++] = h;
        }
    }
    if (!missing || !s->has_shared)
        return got;
    bool buffers = true;
    for (uint64_t i = 0; i < missing; i++) {
        g->shared_e[i] = mem_entry_new(&s->mem, &g->ids[i]);
        g->shared_bufs[i] = g->shared_e[i] ? g->shared_e[i]->buf : NULL;
        buffers = buffers && g->shared_e[i];
    }
    if (buffers)
        shared_get_many(&s->shared, g->ids, missing, STORE_HEADER_BYTES + s->model.payload_bytes, g->shared_bufs,
                        g->shared_lens, g->shared_got);
    for (uint64_t i = 0; i < missing; i++) {
        struct mem_entry *e = g->shared_e[i];
        g->shared_e[i] = NULL;
        if (buffers && g->shared_got[i]) {
            const char *why = store_entry_check(&s->model, &g->ids[i], e->buf, g->shared_lens[i]);
            if (!why) {
                struct found *f = &g->f[g->miss_head[i]];
                f->payload = e->buf + STORE_HEADER_BYTES;
                f->read = e;
                f->tier = 2;
                got++;
                continue;
            }
            bad_entry(s, &g->ids[i], "shared", why);
        }
        mem_entry_unref(&s->mem, e);
    }
    return got;
}

static int run_get(struct store_op *op, uint64_t *tokens)
{
    kvrt_store *s = op->store;
    const struct store_model *m = &s->model;
    uint64_t H = op->num_heads, T = m->chunk_tokens;
    struct get_scratch g;
    int rc = get_scratch_init(&g, H, op->num_chunks);
    if (rc != KVRT_OK)
        return rc;
    struct canon_io io;
    rc = canon_io_begin(&io, &op->map, op->table, op->table_len);
    struct disk_read *r = NULL;
    struct disk_ahead *a = NULL;
    if (rc == KVRT_OK && s->has_disk && (rc = disk_read_begin(&s->disk, &r)) != KVRT_OK)
        canon_io_end(&io);
    /* a thread reads the next chunk while this one is copied */
    if (rc == KVRT_OK && r && (rc = disk_ahead_begin(&s->disk, op->num_chunks > 1, &a)) != KVRT_OK) {
        disk_read_end(r);
        canon_io_end(&io);
    }
    if (rc != KVRT_OK) {
        get_scratch_free(&g);
        return rc;
    }
    uint64_t loaded = 0, hits[3] = {0, 0, 0}, misses = 0, num_promoted = 0;
    /* chunks 0 .. STORE_AHEAD_POSTS - 2 now, then each turn the one that
     * many ahead */
    const uint64_t depth = STORE_AHEAD_POSTS - 1;
    for (uint64_t c = 0; r && c < depth && c < op->num_chunks; c++)
        post_ahead(op, r, a, c, &g.ahead[c % STORE_AHEAD_POSTS]);
    for (uint64_t c = 0; c < op->num_chunks; c++) {
        struct ahead *A = r ? &g.ahead[c % STORE_AHEAD_POSTS] : NULL;
        if (r && c + depth < op->num_chunks)
            post_ahead(op, r, a, c + depth, &g.ahead[(c + depth) % STORE_AHEAD_POSTS]);
        if (A)
            wait_ahead(a, A);
        uint64_t got = find_chunk(op, r, A, c, &g);
        if (got < H) {
            misses += H - got;
            for (uint64_t h = 0; h < H; h++)
                release_found(s, &g.f[h]);
            break;
        }
        for (uint64_t h = 0; h < H; h++)
            g.payloads[h] = (uint8_t *)g.f[h].payload;
        struct canon_chunk ch = {(op->first_chunk + c) * T, g.slots, H, g.payloads, NULL};
        canon_unpack(&io, m, &ch);
        for (uint64_t h = 0; h < H; h++) {
            struct found *f = &g.f[h];
            hits[f->tier]++;
            if (f->tier == 1)
                writer_touch(s, &f->read->id);
            if ((f->tier == 1 && s->has_mem) || (f->tier == 2 && (s->has_mem || s->has_disk))) {
                /* promoted as read: the buffer, a checked entry, becomes the
                 * memory tier's, and a shared hit is queued for the disk */
                struct mem_entry *e = f->read;
                f->read = NULL;
                store_event_attach(s->events, e, op, c);
                if (f->tier == 2 && s->has_disk) {
                    e->refs++;
                    e->queued = true;
                    g.promoted[num_promoted++] = e;
                }
                if (!mem_tier_insert(&s->mem, e, s->has_mem))
                    mem_entry_unref(&s->mem, e);
            }
            release_found(s, f);
        }
        loaded += T;
    }
    for (unsigned i = 0; r && i < STORE_AHEAD_POSTS; i++)
        drop_ahead(s, a, &g.ahead[i], H);
    disk_ahead_end(a);
    disk_read_end(r);
    for (uint64_t i = 0; i < num_promoted; i++)
        writer_enqueue(s, g.promoted[i], WRITE_DISK);
    rc = canon_io_commit(&io);
    canon_io_end(&io);
    get_scratch_free(&g);
    pthread_mutex_lock(&s->count_lock);
    s->counts.hits_memory += hits[0];
    s->counts.hits_disk += hits[1];
    s->counts.hits_shared += hits[2];
    s->counts.misses += misses;
    pthread_mutex_unlock(&s->count_lock);
    writer_count(s, hits[0] + hits[1] + hits[2], misses);
    *tokens = rc == KVRT_OK ? loaded : 0;
    return rc;
}

int store_op_run(struct store_op *op, uint64_t *tokens)
{
    uint64_t t = 0;
    int rc = op->is_put ? run_put(op, &t) : run_get(op, &t);
    if (tokens)
        *tokens = t;
    return rc;
}

/* ---- lookup ------------------------------------------------------------------ */

/* How many chunks to ask the shared tier about at once. */
#define LOOKUP_WINDOW 16u

int kvrt_store_lookup(kvrt_store *s, const int32_t *tokens, uint64_t num_tokens, uint64_t head_start,
                      uint64_t num_heads, uint64_t *stored)
{
    const char *fn = "kvrt_store_lookup";
    if (!s || !stored)
        return STORE_FAIL(KVRT_ERR_INVALID, "%s: the store and stored are required", fn);
    *stored = 0;
    if (s->inspect)
        return STORE_FAIL(KVRT_ERR_STATE, "%s: the store was opened to inspect its directory (no model)", fn);
    if (num_tokens && !tokens)
        return STORE_FAIL(KVRT_ERR_INVALID, "%s: num_tokens is %llu but tokens is NULL", fn, ULL(num_tokens));
    uint64_t H;
    int rc = span_heads(s, fn, head_start, num_heads, &H);
    const uint64_t T = s->model.chunk_tokens, n = num_tokens / T;
    if (rc == KVRT_OK)
        rc = check_tokens(fn, tokens, n * T);
    if (rc != KVRT_OK || n == 0)
        return rc;
    struct store_op op;
    memset(&op, 0, sizeof(op));
    op.store = s;
    op.num_chunks = n;
    op.head_start = head_start;
    op.num_heads = H;
    op.keys = malloc(n * KVRT_STORE_KEY_BYTES);
    bool *present = malloc(n * H * sizeof(*present));
    if (!op.keys || !present) {
        free(op.keys);
        free(present);
        return STORE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory for %llu chunks", fn, ULL(n));
    }
    if ((rc = store_chunk_keys(&s->model, tokens, n, op.keys)) == KVRT_OK)
        rc = find_present(&op, present);
    uint64_t c = 0;
    while (rc == KVRT_OK && c < n) {
        bool all = true;
        for (uint64_t h = 0; h < H; h++)
            all = all && present[c * H + h];
        if (all) {
            c++;
            continue;
        }
        if (!s->has_shared)
            break;
        /* the rest of the window from the shared tier */
        uint64_t w = n - c < LOOKUP_WINDOW ? n - c : LOOKUP_WINDOW, k = 0;
        struct store_id *ids = malloc(w * H * sizeof(*ids));
        bool *has = malloc(w * H * sizeof(*has));
        uint64_t *where = malloc(w * H * sizeof(*where));
        if (!ids || !has || !where) {
            free(ids);
            free(has);
            free(where);
            rc = STORE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory", fn);
            break;
        }
        for (uint64_t i = 0; i < w; i++)
            for (uint64_t h = 0; h < H; h++)
                if (!present[(c + i) * H + h]) {
                    id_of(&op, c + i, h, &ids[k]);
                    where[k++] = (c + i) * H + h;
                }
        shared_has(&s->shared, ids, k, has);
        uint64_t got = 0;
        for (uint64_t i = 0; i < k; i++)
            if (has[i]) {
                present[where[i]] = true;
                got++;
            }
        free(ids);
        free(has);
        free(where);
        bool first_complete = true;
        for (uint64_t h = 0; h < H; h++)
            first_complete = first_complete && present[c * H + h];
        if (!first_complete || got == 0)
            break;
    }
    *stored = c * T;
    free(op.keys);
    free(present);
    return rc;
}
