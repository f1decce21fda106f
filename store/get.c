/* Get: each chunk's entries from memory, the disk (read ahead of the copy)
 * or the shared tier (received while the chunk before is copied), checked,
 * copied into the cache, and promoted to the upper tiers; the first chunk
 * missing a head ends it (docs/store.md "Operations").
 *
 * Layer 5 of libkvrt-store (docs/store.md, "Layers").
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op.h"

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
static void bad_entry(kvrt_store *s, const struct store_id *id, const char *tier, const char *why, bool rejected)
{
    char hex[65];
    kvrt_store_hex(id->key, hex);
    const uint64_t Hm = s->model.num_heads;
    if (s->model.num_groups > 1)
        store_warn(&s->log, "dropped %s entry %.16s.../head %llu of layer group %llu: %s", tier, hex,
                   ULL(id->head % Hm), ULL(id->head / Hm), why);
    else
        store_warn(&s->log, "dropped %s entry %.16s.../head %u: %s", tier, hex, id->head, why);
    pthread_mutex_lock(&s->count_lock);
    s->counts.dropped++;
    s->counts.rejected += rejected;
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
    /* per head, once the read is in: its checks done (on the workers),
     * and what failed (NULL: good), a copy in why_text */
    bool *checked;         /* [H] */
    const char **why;      /* [H] */
    char (*why_text)[256]; /* [H] */
};

/* Shared-tier values checked as they arrive (shared_get_many's arrived),
 * on threads other than the one receiving: the receiving thread queues
 * each value and reads the next while a worker computes its checksum or
 * opens its seal.  On one thread a keyed get of 1 MiB values paid its
 * receive and its AES-256-GCM open one after the other (0.38 + 0.24 ms a
 * value on the build machine: 0.62 of an unkeyed get).  The receive is
 * item 0 of a parallel for and the checkers the items after it, so a pool
 * that is busy runs them in order on the caller's thread: the receive
 * whole, then every check.  Without a pool (one thread) each value is
 * checked as it arrives, while it is still in the CPU's caches.  why[i] is
 * a copy of what failed (NULL: good). */
struct arrivals {
    const struct store_model *m;
    const struct store_id *ids;
    char **why;
    /* the receive's arguments */
    struct shared_tier *t;
    uint64_t n, value_bytes;
    uint8_t *const *bufs;
    uint64_t *lens;
    bool *got;
    /* arrived values waiting for a checker */
    pthread_mutex_t lock;
    pthread_cond_t more;
    uint64_t *queue, queued, taken;
    uint8_t **values;
    uint64_t *value_lens;
    bool received, twice;
    bool inline_checks; /* no pool: the receiving thread checks */
};

/* A chunk being found: per head its entry (f), and what it asks of the
 * shared tier (the heads memory and the disk missed). */
struct chunk_find {
    struct found *f;
    uint64_t got, missing;
    struct store_id *ids; /* heads missed locally, asked of the shared tier */
    uint64_t *miss_head;
    struct mem_entry **shared_e;
    uint8_t **shared_bufs;
    uint64_t *shared_lens;
    bool *shared_got;
    struct arrivals arr;
    bool asked; /* arr holds a request to the shared tier */
};

/* Everything a get needs per head, allocated once: two chunks' finds, the
 * one being copied into the cache and the next, received meanwhile. */
struct get_scratch {
    struct chunk_find cf[2];
    uint64_t *slots; /* head slots 0..H-1 */
    uint8_t **payloads;
    struct mem_entry **promoted;           /* [chunks x H]: shared hits to queue for the disk */
    struct ahead ahead[STORE_AHEAD_POSTS]; /* chunk c's is ahead[c % STORE_AHEAD_POSTS] */
};

static void get_scratch_free(struct get_scratch *g)
{
    // NOLINTBEGIN(bugprone-multi-level-implicit-pointer-conversion)
    for (unsigned i = 0; i < 2; i++) {
        struct chunk_find *cf = &g->cf[i];
        free(cf->f);
        free(cf->ids);
        free(cf->miss_head);
        free(cf->shared_e);
        free(cf->shared_bufs);
        free(cf->shared_lens);
        free(cf->shared_got);
    }
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
        free(A->checked);
        free(A->why);
        free(A->why_text);
    }
    // NOLINTEND(bugprone-multi-level-implicit-pointer-conversion)
    memset(g, 0, sizeof(*g));
}

static int get_scratch_init(struct get_scratch *g, uint64_t H, uint64_t chunks)
{
    memset(g, 0, sizeof(*g));
    size_t n = H ? H : 1, p = chunks * H > 0 ? chunks * H : 1;
    // NOLINTBEGIN(bugprone-sizeof-expression): arrays of pointers
    bool ok = (g->slots = calloc(n, sizeof(*g->slots))) && (g->payloads = calloc(n, sizeof(*g->payloads))) &&
              (g->promoted = calloc(p, sizeof(*g->promoted)));
    for (unsigned i = 0; i < 2 && ok; i++) {
        struct chunk_find *cf = &g->cf[i];
        ok = (cf->f = calloc(n, sizeof(*cf->f))) && (cf->ids = calloc(n, sizeof(*cf->ids))) &&
             (cf->miss_head = calloc(n, sizeof(*cf->miss_head))) && (cf->shared_e = calloc(n, sizeof(*cf->shared_e))) &&
             (cf->shared_bufs = calloc(n, sizeof(*cf->shared_bufs))) &&
             (cf->shared_lens = calloc(n, sizeof(*cf->shared_lens))) &&
             (cf->shared_got = calloc(n, sizeof(*cf->shared_got)));
    }
    for (unsigned i = 0; i < STORE_AHEAD_POSTS && ok; i++) {
        struct ahead *A = &g->ahead[i];
        ok = (A->e = calloc(n, sizeof(*A->e))) && (A->slot = calloc(n, sizeof(*A->slot))) &&
             (A->len = calloc(n, sizeof(*A->len))) && (A->bufs = calloc(n, sizeof(*A->bufs))) &&
             (A->slots = calloc(n, sizeof(*A->slots))) && (A->lens = calloc(n, sizeof(*A->lens))) &&
             (A->head = calloc(n, sizeof(*A->head))) && (A->checked = calloc(n, sizeof(*A->checked))) &&
             (A->why = calloc(n, sizeof(*A->why))) && (A->why_text = calloc(n, sizeof(*A->why_text)));
        // NOLINTEND(bugprone-sizeof-expression)
    }
    if (!ok) {
        get_scratch_free(g);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_get: out of memory");
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
    for (uint64_t h = 0; h < op->units; h++) {
        struct store_id id;
        store_op_id(op, c, h, &id);
        bool found = false;
        uint64_t slot;
        A->e[h] = NULL;
        A->checked[h] = false;
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

/* A chunk's read-ahead entries checked on the store's workers, each
 * entry's checksum (or seal) on whichever thread claims it, before the
 * chunk is looked at: on one thread the checks of a chunk took as long as
 * its read (XXH3 at 15 GB/s against 7-9 GB/s of O_DIRECT reads, AES-GCM
 * at 4.4 GB/s), and the disk waited for them. */
struct ahead_checks {
    const struct store_op *op;
    struct ahead *A;
    uint64_t c;
};

static void check_one(void *ctx, uint64_t k)
{
    const struct ahead_checks *x = ctx;
    struct ahead *A = x->A;
    uint64_t h = A->head[k];
    struct mem_entry *e = A->e[h];
    if (!e)
        return;
    struct store_id id;
    store_op_id(x->op, x->c, h, &id);
    const char *why = store_entry_check(&x->op->store->model, &id, e->buf, A->len[h]);
    A->why[h] = NULL;
    if (why) {
        /* the message may live in this worker's thread-local buffer */
        snprintf(A->why_text[h], sizeof(A->why_text[h]), "%s", why);
        A->why[h] = A->why_text[h];
    }
    A->checked[h] = true;
}

static void check_ahead(const struct store_op *op, struct ahead *A, uint64_t c)
{
    struct ahead_checks x = {op, A, c};
    store_workers_for(op->store->workers, A->n, check_one, &x);
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
    bool found = e != NULL, checked = e && A->checked[h];
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
        const char *why = checked ? A->why[h] : store_entry_check(&s->model, id, e->buf, len);
        if (!why) {
            f->payload = e->buf + STORE_HEADER_BYTES;
            f->read = e;
            f->tier = 1;
            return true;
        }
        /* a slot reused by a writer since this read began is no damage */
        if (disk_still_at(&s->disk, id, slot))
            bad_entry(s, id, "disk", why, s->model.secret || store_entry_sealed(e->buf, len));
    }
    mem_entry_unref(&s->mem, e);
    return false;
}

static char checks_failed[] = "it failed its checks";

static void check_value(struct arrivals *a, uint64_t i)
{
    const char *why = store_entry_check(a->m, &a->ids[i], a->values[i], a->value_lens[i]);
    if (why && !(a->why[i] = strdup(why)))
        a->why[i] = checks_failed;
}

static void queue_arrived(void *user, size_t i, uint8_t *value, uint64_t len)
{
    struct arrivals *a = user;
    pthread_mutex_lock(&a->lock);
    if (a->values[i]) {
        /* never twice (cluster.c finishes a request with its value); were
         * it, its bytes might change under a check: it fails hereafter */
        a->twice = true;
        pthread_mutex_unlock(&a->lock);
        return;
    }
    a->values[i] = value;
    a->value_lens[i] = len;
    if (a->inline_checks) {
        pthread_mutex_unlock(&a->lock);
        check_value(a, i);
        return;
    }
    a->queue[a->queued++] = i;
    pthread_cond_signal(&a->more);
    pthread_mutex_unlock(&a->lock);
}

static void receive_or_check(void *ctx, uint64_t item)
{
    struct arrivals *a = ctx;
    if (item == 0) {
        shared_get_many(a->t, a->ids, a->n, a->value_bytes, a->bufs, a->lens, a->got, queue_arrived, a);
        pthread_mutex_lock(&a->lock);
        a->received = true;
        pthread_cond_broadcast(&a->more);
        pthread_mutex_unlock(&a->lock);
        return;
    }
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (a->taken == a->queued && !a->received)
            pthread_cond_wait(&a->more, &a->lock);
        if (a->taken == a->queued)
            break;
        uint64_t i = a->queue[a->taken++];
        pthread_mutex_unlock(&a->lock);
        check_value(a, i);
        pthread_mutex_lock(&a->lock);
    }
    pthread_mutex_unlock(&a->lock);
}

/* Ready a's queue for the values to come (checkers: the items after the
 * receive, 0 to check on the receiving thread).  False: out of memory. */
static bool arrivals_begin(struct arrivals *a, uint64_t checkers)
{
    a->queue = calloc(a->n, sizeof(*a->queue));
    a->values = calloc(a->n, sizeof(*a->values));
    a->value_lens = calloc(a->n, sizeof(*a->value_lens));
    a->inline_checks = checkers == 0;
    if (!a->queue || !a->values || !a->value_lens) {
        free(a->queue);
        // NOLINTNEXTLINE(bugprone-multi-level-implicit-pointer-conversion)
        free(a->values);
        free(a->value_lens);
        return false;
    }
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->more, NULL);
    return true;
}

/* After the receive and its checkers: a value got is a value checked, or
 * it fails. */
static void arrivals_end(struct arrivals *a)
{
    pthread_cond_destroy(&a->more);
    pthread_mutex_destroy(&a->lock);
    for (uint64_t i = 0; i < a->n; i++)
        if (a->got[i] && !a->why[i] && (!a->values[i] || a->twice))
            a->why[i] = checks_failed;
    free(a->queue);
    // NOLINTNEXTLINE(bugprone-multi-level-implicit-pointer-conversion)
    free(a->values);
    free(a->value_lens);
}

/* A chunk's entries, every head, from memory and the disk; what they
 * missed is made ready to ask of the shared tier (cf->asked), each value
 * to be read straight into an entry's buffer. */
static void find_begin(struct store_op *op, struct disk_read *r, struct ahead *A, uint64_t c, struct chunk_find *cf)
{
    kvrt_store *s = op->store;
    uint64_t H = op->units;
    cf->got = cf->missing = 0;
    cf->asked = false;
    for (uint64_t h = 0; h < H; h++) {
        struct store_id id;
        store_op_id(op, c, h, &id);
        if (find_local(op, r, A, h, &id, &cf->f[h])) {
            cf->got++;
        } else {
            cf->ids[cf->missing] = id;
            cf->miss_head[cf->missing++] = h;
        }
    }
    if (!cf->missing || !s->has_shared)
        return;
    bool buffers = true;
    for (uint64_t i = 0; i < cf->missing; i++) {
        cf->shared_e[i] = mem_entry_new(&s->mem, &cf->ids[i]);
        cf->shared_bufs[i] = cf->shared_e[i] ? cf->shared_e[i]->buf : NULL;
        cf->shared_got[i] = false;
        buffers = buffers && cf->shared_e[i];
    }
    cf->arr = (struct arrivals){.m = &s->model,
                                .ids = cf->ids,
                                .why = buffers ? calloc(cf->missing, sizeof(char *)) : NULL,
                                .t = &s->shared,
                                .n = cf->missing,
                                .value_bytes = STORE_HEADER_BYTES + s->model.payload_bytes,
                                .bufs = cf->shared_bufs,
                                .lens = cf->shared_lens,
                                .got = cf->shared_got};
    cf->asked = cf->arr.why && arrivals_begin(&cf->arr, store_workers_count(s->workers) - 1);
    if (!cf->asked) {
        free(cf->arr.why);
        for (uint64_t i = 0; i < cf->missing; i++) {
            mem_entry_unref(&s->mem, cf->shared_e[i]);
            cf->shared_e[i] = NULL;
        }
    }
}

/* The shared tier's answers to find_begin, once received and checked:
 * the good ones found, the bad ones dropped. */
static void find_end(kvrt_store *s, struct chunk_find *cf)
{
    if (!cf->asked)
        return;
    struct arrivals *arr = &cf->arr;
    arrivals_end(arr);
    for (uint64_t i = 0; i < cf->missing; i++) {
        struct mem_entry *e = cf->shared_e[i];
        cf->shared_e[i] = NULL;
        if (cf->shared_got[i]) {
            const char *why = arr->why[i];
            if (!why) {
                struct found *f = &cf->f[cf->miss_head[i]];
                f->payload = e->buf + STORE_HEADER_BYTES;
                f->read = e;
                f->tier = 2;
                cf->got++;
                continue;
            }
            bad_entry(s, &cf->ids[i], "shared", why, s->model.secret || store_entry_sealed(e->buf, cf->shared_lens[i]));
        }
        mem_entry_unref(&s->mem, e);
    }
    for (uint64_t i = 0; i < cf->missing; i++)
        if (arr->why[i] != checks_failed)
            free(arr->why[i]);
    free(arr->why);
    cf->asked = false;
}

/* A chunk's copy into the cache, spread over the store's workers: its
 * layer groups' heads in parts, each part written by whichever thread
 * claims it (the parts write disjoint head slots of the cache). */
struct get_unpack {
    const struct canon_io *io;
    const struct store_model *m;
    uint64_t first;       /* the chunk's first token */
    uint64_t group_start; /* the span's first layer group */
    uint64_t heads, parts, per;
    const uint64_t *slots; /* head slots 0 .. heads - 1 */
    uint8_t **payloads;    /* [groups x heads] */
};

static void unpack_part(void *ctx, uint64_t i)
{
    const struct get_unpack *u = ctx;
    uint64_t k = i / u->parts, h0 = (i % u->parts) * u->per;
    if (h0 >= u->heads)
        return;
    uint64_t n = u->heads - h0 < u->per ? u->heads - h0 : u->per;
    struct canon_chunk ch = {u->first, u->group_start + k, u->slots + h0, n, u->payloads + k * u->heads + h0, NULL};
    canon_unpack(u->io, u->m, &ch);
}

/* Chunk c's entries found (find_begin): its disk reads waited for and
 * checked, the read of the chunk STORE_AHEAD_POSTS - 1 after it posted. */
static void find_next(struct store_op *op, struct disk_read *r, struct disk_ahead *a, struct get_scratch *g, uint64_t c,
                      struct chunk_find *cf)
{
    const uint64_t depth = STORE_AHEAD_POSTS - 1;
    struct ahead *A = r ? &g->ahead[c % STORE_AHEAD_POSTS] : NULL;
    if (r && c + depth < op->num_chunks)
        post_ahead(op, r, a, c + depth, &g->ahead[(c + depth) % STORE_AHEAD_POSTS]);
    if (A) {
        wait_ahead(a, A);
        check_ahead(op, A, c);
    }
    find_begin(op, r, A, c, cf);
}

/* One parallel for of a turn: the receive of the next chunk's shared
 * values (item 0), the current chunk's copy into the cache (the unpack
 * parts after it) and the checkers of the received values (the rest).
 * So the cache is written while the next values are on the wire: received
 * and then copied one after the other, the server stood idle during every
 * chunk's copy and its last check. */
struct turn {
    struct arrivals *a;   /* NULL: nothing to receive */
    struct get_unpack *u; /* NULL: nothing to copy */
    uint64_t unpacks;
};

static void turn_item(void *ctx, uint64_t i)
{
    const struct turn *t = ctx;
    if (t->a && i == 0) {
        receive_or_check(t->a, 0);
        return;
    }
    i -= t->a != NULL;
    if (i < t->unpacks)
        unpack_part(t->u, i);
    else if (t->a)
        receive_or_check(t->a, 1); /* a checker */
}

static void run_turn(kvrt_store *s, struct chunk_find *next, struct get_unpack *u, uint64_t unpacks)
{
    struct turn t = {next && next->asked ? &next->arr : NULL, u, u ? unpacks : 0};
    /* as many checkers as threads: the receiving one joins them when done */
    uint64_t checkers = t.a && !t.a->inline_checks ? store_workers_count(s->workers) : 0;
    store_workers_for(s->workers, (t.a ? 1 : 0) + t.unpacks + checkers, turn_item, &t);
    if (next)
        find_end(s, next);
}

int store_get_run(struct store_op *op, uint64_t *tokens)
{
    kvrt_store *s = op->store;
    const struct store_model *m = &s->model;
    /* H: the chunk's entries, every head of every layer group */
    uint64_t H = op->units, T = m->chunk_tokens;
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
    /* a thread reads the next chunks while this one is checked and copied */
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
    /* each turn copies chunk c into the cache while chunk c + 1 is found
     * (its shared values received and checked): run_turn */
    struct chunk_find *cur = &g.cf[0], *next = &g.cf[1];
    if (op->num_chunks > 0) {
        find_next(op, r, a, &g, 0, cur);
        run_turn(s, cur, NULL, 0);
    }
    for (uint64_t c = 0; c < op->num_chunks; c++) {
        if (cur->got < H) {
            misses += H - cur->got;
            for (uint64_t h = 0; h < H; h++)
                release_found(s, &cur->f[h]);
            break;
        }
        for (uint64_t h = 0; h < H; h++)
            g.payloads[h] = (uint8_t *)cur->f[h].payload;
        /* every entry of the chunk is checked: now into the cache */
        uint64_t parts = store_workers_count(s->workers);
        parts = parts < op->num_heads ? parts : op->num_heads;
        struct get_unpack u = {&io,           m,     (op->first_chunk + c) * T,           op->group_start,
                               op->num_heads, parts, (op->num_heads + parts - 1) / parts, g.slots,
                               g.payloads};
        bool more = c + 1 < op->num_chunks;
        if (more)
            find_next(op, r, a, &g, c + 1, next);
        run_turn(s, more ? next : NULL, &u, op->num_groups * parts);
        for (uint64_t h = 0; h < H; h++) {
            struct found *f = &cur->f[h];
            hits[f->tier]++;
            if (f->tier == 1)
                writer_touch(s, &f->read->id);
            if ((f->tier == 1 && s->has_mem) || (f->tier == 2 && (s->has_mem || s->has_disk))) {
                /* promoted as read: the buffer, a checked entry, becomes the
                 * memory tier's, and a shared hit is queued for the disk */
                struct mem_entry *e = f->read;
                f->read = NULL;
                store_op_attach(op, e, c);
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
        struct chunk_find *done = cur;
        cur = next;
        next = done;
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
