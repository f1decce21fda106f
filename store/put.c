/* Put: the entries a span's chunks lack, copied out of the cache group by
 * group (every missing head of a layer group together) into sealed entries, indexed in memory and queued for the lower
 * tiers (docs/store.md "Operations").
 *
 * Layer 5 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

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
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_put: out of memory");
    }
    return KVRT_OK;
}

/* Zero the padding of a payload of group g past its layers (a group
 * smaller than the largest), fed to its checksum. */
static void pad(const struct store_model *m, uint64_t g, uint8_t *payload, XXH3_state_t *sum)
{
    uint64_t at = store_group_bytes(m, g);
    if (at == m->payload_bytes)
        return;
    memset(payload + at, 0, m->payload_bytes - at);
    if (sum)
        STORE_SUM_UPDATE(sum, payload + at, m->payload_bytes - at);
}

int store_put_run(struct store_op *op, uint64_t *tokens)
{
    kvrt_store *s = op->store;
    const struct store_model *m = &s->model;
    uint64_t H = op->num_heads, U = op->units, T = m->chunk_tokens;
    bool *present = malloc((op->num_chunks * U > 0 ? op->num_chunks * U : 1) * sizeof(*present));
    if (!present)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_put: out of memory");
    int rc = store_find_present(op, present);
    uint64_t stored_chunks = 0;
    if (rc == KVRT_OK && op->replica != 0) {
        /* another replica holds the same heads: replica 0 writes them */
        for (uint64_t c = 0; c < op->num_chunks; c++) {
            bool all = true;
            for (uint64_t u = 0; u < U; u++)
                all = all && present[c * U + u];
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
        bool all = true;
        for (uint64_t g = 0; g < op->num_groups && rc == KVRT_OK; g++) {
            /* the group's missing heads, copied out together */
            const uint64_t group = op->group_start + g;
            uint64_t n = 0;
            for (uint64_t h = 0; h < H; h++) {
                if (present[c * U + g * H + h]) {
                    found++;
                    continue;
                }
                struct store_id id;
                store_op_id(op, c, g * H + h, &id);
                struct mem_entry *e = mem_entry_new(&s->mem, &id);
                if (!e) {
                    rc = BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_put: out of memory for an entry of %llu bytes",
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
            struct canon_chunk ch = {(op->first_chunk + c) * T, group, ps.slots, n, ps.payloads,
                                     where ? ps.sums : NULL};
            canon_pack(&io, m, &ch);
            for (uint64_t i = 0; i < n; i++) {
                struct mem_entry *e = ps.entries[i];
                pad(m, group, ps.payloads[i], where ? &ps.sums[i] : NULL);
                if (where) {
                    store_entry_seal_end(e->buf, &ps.sums[i]);
                    e->refs++; /* the queue's */
                    e->queued = true;
                }
                copied++;
                store_op_attach(op, e, c);
                bool kept = mem_tier_insert(&s->mem, e, s->has_mem);
                if (!kept)
                    mem_entry_unref(&s->mem, e); /* the index did not take it */
                if (where)
                    writer_enqueue(s, e, where);
                all = all && (kept || where);
            }
        }
        stored_chunks += all && rc == KVRT_OK;
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
