/* Put: the entries a span's chunks lack, copied out of the cache group by
 * group (every missing head of a layer group together) into sealed entries
 * (with a key, also their encrypted copies), indexed in memory and queued
 * for the lower tiers (docs/store.md "Operations").
 *
 * Layer 5 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

/* What a put copies out of a batch of chunks: per unit (a chunk's layer
 * group) the new entries of its missing heads, their head slots, payloads
 * and checksum states, H of each per unit (unit i's from i * H of the
 * scratch's arrays). */
struct put_unit {
    uint64_t c, group, n; /* chunk of the span, layer group, new entries */
    struct mem_entry **entries;
    uint64_t *slots;
    uint8_t **payloads;
    XXH3_state_t *sums; /* NULL: nothing leaves the process */
};

struct put_scratch {
    struct put_unit *units;
    struct mem_entry **entries;
    uint64_t *slots;
    uint8_t **payloads;
    XXH3_state_t *sums;
};

static void put_scratch_free(struct put_scratch *ps)
{
    free(ps->units);
    // NOLINTNEXTLINE(bugprone-multi-level-implicit-pointer-conversion)
    free(ps->entries);
    free(ps->slots);
    // NOLINTNEXTLINE(bugprone-multi-level-implicit-pointer-conversion)
    free(ps->payloads);
    free(ps->sums);
    memset(ps, 0, sizeof(*ps));
}

static int put_scratch_init(struct put_scratch *ps, uint64_t units, uint64_t heads, bool sums)
{
    memset(ps, 0, sizeof(*ps));
    heads = heads ? heads : 1;
    units = units ? units : 1;
    if (units > SIZE_MAX / sizeof(XXH3_state_t) / heads)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_put: out of memory");
    size_t n = (size_t)(units * heads);
    ps->units = calloc(units, sizeof(*ps->units));
    /* arrays of pointers: sizeof(*x) is a pointer's size */
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    ps->entries = calloc(n, sizeof(*ps->entries));
    ps->slots = calloc(n, sizeof(*ps->slots));
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    ps->payloads = calloc(n, sizeof(*ps->payloads));
    /* XXH3 states want 64-byte alignment; their size is a multiple of it */
    if (sums)
        ps->sums = aligned_alloc(64, n * sizeof(*ps->sums));
    if (!ps->units || !ps->entries || !ps->slots || !ps->payloads || (sums && !ps->sums)) {
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

/* The copies of one batch, spread over the store's workers: each unit is
 * read out of the cache (canon_pack, checksumming as it copies) by
 * whichever thread claims it, then sealed; the units share nothing they
 * write. */
struct put_batch {
    const struct canon_io *io;
    const struct store_model *m;
    struct mem_tier *mem;
    uint64_t first_token; /* of the span's chunk 0 */
    struct put_unit *units;
};

/* With a key, each entry's sealed copy is made here, on the put's workers,
 * rather than by the queue thread before it writes: the seal (AES-256-GCM,
 * about 4.4 GB/s a core) then runs beside the disk's writes instead of
 * between them.  A copy that cannot be sealed is dropped; the queue
 * thread seals it again and reports why it cannot. */
static void pack_unit(void *ctx, uint64_t i)
{
    const struct put_batch *b = ctx;
    struct put_unit *u = &b->units[i];
    const uint64_t T = b->m->chunk_tokens;
    struct canon_chunk ch = {b->first_token + u->c * T, u->group, u->slots, u->n, u->payloads, u->sums};
    canon_pack(b->io, b->m, &ch);
    for (uint64_t k = 0; k < u->n; k++) {
        struct mem_entry *e = u->entries[k];
        pad(b->m, u->group, u->payloads[k], u->sums ? &u->sums[k] : NULL);
        if (!u->sums)
            continue;
        store_entry_seal_end(e->buf, &u->sums[k]);
        if (e->sealed && store_entry_seal_out(b->m, &e->id, e->buf, e->sealed->buf) != KVRT_OK) {
            mem_entry_unref(b->mem, e->sealed);
            e->sealed = NULL;
        }
    }
}

/* Chunks per batch: enough to keep every worker busy with a few units
 * each, few enough that a batch's entries (allocated before its copies)
 * stay a small part of the memory tier and the queue. */
#define PUT_BATCH_CHUNKS_PER_THREAD 2u

int store_put_run(struct store_op *op, uint64_t *tokens)
{
    kvrt_store *s = op->store;
    const struct store_model *m = &s->model;
    uint64_t H = op->num_heads, U = op->units, T = m->chunk_tokens, G = op->num_groups;
    if (H == 0 || G == 0 || U != H * G) /* steps.c makes every span name heads and groups */
        return BASE_FAIL(KVRT_ERR_STATE, "kvrt_store_put: a span of %llu heads and %llu layer groups", ULL(H), ULL(G));
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
    uint64_t batch = (uint64_t)store_workers_count(s->workers) * PUT_BATCH_CHUNKS_PER_THREAD;
    if (batch > op->num_chunks)
        batch = op->num_chunks ? op->num_chunks : 1;
    struct put_scratch ps;
    rc = put_scratch_init(&ps, batch * G, H, where != 0);
    struct put_batch pb = {&io, m, &s->mem, op->first_chunk * T, ps.units};
    for (uint64_t c0 = 0; c0 < op->num_chunks && rc == KVRT_OK; c0 += batch) {
        uint64_t chunks = op->num_chunks - c0 < batch ? op->num_chunks - c0 : batch, units = 0;
        /* 1. the batch's new entries, unit by unit (the allocator's lock) */
        for (uint64_t c = c0; c < c0 + chunks && rc == KVRT_OK; c++)
            for (uint64_t g = 0; g < G && rc == KVRT_OK; g++) {
                /* unit i's arrays: H of each from i * H */
                struct put_unit *u = &ps.units[units];
                u->entries = ps.entries + units * H;
                u->slots = ps.slots + units * H;
                u->payloads = ps.payloads + units * H;
                u->sums = where ? ps.sums + units * H : NULL;
                units++;
                u->c = c;
                u->group = op->group_start + g;
                u->n = 0;
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
                    u->entries[u->n] = e;
                    u->slots[u->n] = h;
                    u->payloads[u->n] = e->buf + STORE_HEADER_BYTES;
                    if (where)
                        store_entry_seal_begin(m, &id, e->buf, &u->sums[u->n]);
                    if (where && m->secret)
                        e->sealed = mem_entry_new(&s->mem, &id); /* NULL: the queue thread seals it */
                    u->n++;
                }
            }
        if (rc != KVRT_OK) {
            for (uint64_t i = 0; i < units; i++)
                for (uint64_t k = 0; k < ps.units[i].n; k++)
                    mem_entry_unref(&s->mem, ps.units[i].entries[k]);
            break;
        }
        /* 2. the copies, on every worker */
        store_workers_for(s->workers, units, pack_unit, &pb);
        /* 3. indexed and queued in the span's order */
        for (uint64_t i = 0; i < units; i += G) {
            bool all = true;
            for (uint64_t g = 0; g < G; g++) {
                struct put_unit *u = &ps.units[i + g];
                for (uint64_t k = 0; k < u->n; k++) {
                    struct mem_entry *e = u->entries[k];
                    if (where) {
                        e->refs++; /* the queue's */
                        e->queued = true;
                    }
                    copied++;
                    store_op_attach(op, e, u->c);
                    bool kept = mem_tier_insert(&s->mem, e, s->has_mem);
                    if (!kept)
                        mem_entry_unref(&s->mem, e); /* the index did not take it */
                    if (where)
                        writer_enqueue(s, e, where);
                    all = all && (kept || where);
                }
            }
            stored_chunks += all;
        }
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
