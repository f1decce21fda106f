/* The queue to the lower tiers: a put leaves its entries in memory and
 * here, sealed (header, checksum: computed while the bytes it just copied
 * are still in the CPU's caches); one thread writes them to the disk tier
 * in batches, one transaction each, then to the shared tier.
 * The queue is bounded in bytes: a put waits while it is full.  Reads
 * (recency), bad entries to delete and hit counts ride along with the
 * next batch, or go on their own within a second.
 *
 * Layer 4 of libkvrt-store (docs/store.md, "Layers").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "events.h"
#include "handle.h"

/* Most entries and bytes of one disk transaction. */
#define BATCH_ENTRIES 256u
#define BATCH_BYTES (256ull << 20)
/* Reads kept before they are written on their own. */
#define TOUCH_BATCH 4096u

static bool has_side_work(const struct writer *w)
{
    return w->num_touches || w->num_drops || w->add_hits || w->add_misses;
}

/* Most bytes of one batch with a key: each entry is sealed into a buffer
 * of its own on its way out, so a batch holds its bytes twice. */
#define SEALED_BATCH_BYTES (64ull << 20)

struct batch {
    struct mem_entry *all[BATCH_ENTRIES];
    unsigned where[BATCH_ENTRIES];
    /* what leaves the process: all[i] itself, or (with a key) its sealed
     * copy, an entry of no tier that only lends its buffer */
    struct mem_entry *out[BATCH_ENTRIES];
    struct mem_entry *disk[BATCH_ENTRIES];
    struct mem_entry *shared[BATCH_ENTRIES];
    uint64_t n, nd, ns;
    uint64_t bytes; /* the jobs' bytes, counted in the queue */
    /* with a key, for the seals the queue thread makes itself */
    kvrt_store *s;
    bool seal[BATCH_ENTRIES];
    char why[BATCH_ENTRIES][160]; /* per entry: why it could not be sealed */
};

/* Take up to one batch of jobs and the side work (lock held). */
static void take(struct writer *w, struct batch *bt, struct disk_batch *b)
{
    bt->n = bt->nd = bt->ns = bt->bytes = 0;
    uint64_t bytes = 0;
    while (bt->n < BATCH_ENTRIES && w->count && (bt->n == 0 || bytes + w->value_bytes <= w->batch_bytes)) {
        struct writer_job *j = &w->ring[w->head];
        bt->where[bt->n] = j->where;
        bt->all[bt->n++] = j->entry;
        bytes += w->value_bytes;
        bt->bytes += j->bytes;
        w->head = (w->head + 1) % w->cap;
        w->count--;
    }
    memset(b, 0, sizeof(*b));
    b->touches = w->touches;
    b->num_touches = w->num_touches;
    b->drops = w->drops;
    b->num_drops = w->num_drops;
    b->add_hits = w->add_hits;
    b->add_misses = w->add_misses;
    w->touches = NULL;
    w->drops = NULL;
    w->num_touches = w->cap_touches = w->num_drops = w->cap_drops = 0;
    w->add_hits = w->add_misses = 0;
    w->flush_now = false;
}

/* The bytes each entry of the batch leaves the process as: with a key, the
 * sealed copy the put made, or one the queue thread seals now into a
 * buffer of the pool (an entry that cannot be sealed is not written, and
 * counted as a failure).  Those seals run on the store's workers, an entry
 * each: AES-256-GCM goes at about 4.4 GB/s a core. */
static void seal_one(void *ctx, uint64_t i)
{
    struct batch *bt = ctx;
    struct mem_entry *e = bt->all[i], *o = bt->out[i];
    if (bt->seal[i] && store_entry_seal_out(&bt->s->model, &e->id, e->buf, o->buf) != KVRT_OK)
        snprintf(bt->why[i], sizeof(bt->why[i]), "%s", kvrt_error_message());
}

static uint64_t seal_out(kvrt_store *s, struct batch *bt, char *why, size_t size)
{
    uint64_t failed = 0, todo = 0;
    bt->nd = bt->ns = 0;
    for (uint64_t i = 0; i < bt->n; i++) {
        struct mem_entry *e = bt->all[i];
        bt->out[i] = NULL;
        bt->seal[i] = false;
        bt->why[i][0] = '\0';
        if (!s->model.secret)
            continue;
        if (e->sealed) { /* the put sealed it: the copy is the queue's */
            bt->out[i] = e->sealed;
            e->sealed = NULL;
            continue;
        }
        bt->out[i] = mem_entry_new(&s->mem, &e->id);
        bt->seal[i] = bt->out[i] != NULL;
        todo += bt->seal[i];
    }
    if (todo) {
        bt->s = s;
        store_workers_for(s->workers, bt->n, seal_one, bt);
    }
    for (uint64_t i = 0; i < bt->n; i++) {
        struct mem_entry *e = bt->all[i];
        if (s->model.secret) {
            struct mem_entry *o = bt->out[i];
            if (!o || bt->why[i][0]) {
                snprintf(why, size, "%s", o ? bt->why[i] : "out of memory for a sealed entry");
                mem_entry_unref(&s->mem, o);
                bt->out[i] = NULL;
                failed++;
                continue;
            }
            /* lends the chunk's token ids to the tiers' events; taken back
             * before the sealed copy goes (it owns nothing) */
            o->chunk = e->chunk;
            e = o;
        }
        if (bt->where[i] & WRITE_DISK)
            bt->disk[bt->nd++] = e;
        if (bt->where[i] & WRITE_SHARED)
            bt->shared[bt->ns++] = e;
    }
    return failed;
}

/* Write one batch (lock not held). */
/* KV events of a committed disk batch: its evictions and drops, then its
 * new entries. */
static void disk_batch_events(struct store_events *ev, const struct disk_batch *b)
{
    if (!ev)
        return;
    for (uint64_t i = 0; i < b->num_gone; i++)
        store_event_removed(ev, STORE_TIER_DISK, &b->gone[i]);
    for (uint64_t i = 0; b->fresh && i < b->written; i++)
        store_event_stored(ev, STORE_TIER_DISK, &b->fresh[i]->id, b->fresh[i]->chunk);
}

static void write_out(kvrt_store *s, struct batch *bt, struct disk_batch *b, uint64_t *failed, char *why, size_t size)
{
    *failed = seal_out(s, bt, why, size);
    if (s->has_disk && (bt->nd || b->num_touches || b->num_drops || b->add_hits || b->add_misses)) {
        b->puts = bt->disk;
        b->num_puts = bt->nd;
        if (disk_write(&s->disk, b) != KVRT_OK) {
            snprintf(why, size, "%s", kvrt_error_message());
            *failed += bt->nd;
            store_warn(&s->log, "%llu entries were not written to the disk tier: %s", ULL(bt->nd), why);
        } else {
            disk_batch_events(s->events, b);
        }
        disk_batch_done(b);
    }
    uint64_t shared = 0;
    if (s->has_shared && bt->ns)
        shared = shared_put(&s->shared, bt->shared, bt->ns, s->writer.value_bytes);
    for (uint64_t i = 0; s->has_shared && i < b->num_drops; i++)
        shared_drop(&s->shared, &b->drops[i]);
    pthread_mutex_lock(&s->count_lock);
    s->counts.written_disk += b->written;
    s->counts.evicted_disk += b->evicted;
    s->counts.written_shared += shared;
    s->counts.write_failures += *failed + (bt->ns - shared);
    pthread_mutex_unlock(&s->count_lock);
    free((void *)b->touches);
    free((void *)b->drops);
    for (uint64_t i = 0; i < bt->n; i++) {
        if (bt->out[i])
            bt->out[i]->chunk = NULL;
        mem_entry_unref(&s->mem, bt->out[i]);
        mem_tier_written(&s->mem, bt->all[i]);
        mem_entry_unref(&s->mem, bt->all[i]);
    }
}

static void *writer_main(void *arg)
{
    kvrt_store *s = arg;
    struct writer *w = &s->writer;
    struct batch *bt = malloc(sizeof(*bt));
    pthread_mutex_lock(&w->lock);
    while (bt) {
        while (!w->count && !w->stop && !(w->flush_now && has_side_work(w)) && w->num_touches < TOUCH_BATCH) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            if (pthread_cond_timedwait(&w->wake, &w->lock, &ts) == ETIMEDOUT && has_side_work(w))
                break;
        }
        if (w->stop && !w->count && !has_side_work(w))
            break;
        struct disk_batch b;
        take(w, bt, &b);
        w->busy = true;
        pthread_cond_broadcast(&w->done); /* room in the queue */
        pthread_mutex_unlock(&w->lock);
        uint64_t failed;
        char why[512] = "";
        write_out(s, bt, &b, &failed, why, sizeof(why));
        pthread_mutex_lock(&w->lock);
        w->bytes -= bt->bytes;
        w->written += bt->n;
        w->busy = false;
        if (failed) {
            w->failed_since_flush += failed;
            snprintf(w->failure, sizeof(w->failure), "%s", why);
        }
        pthread_cond_broadcast(&w->done);
    }
    pthread_mutex_unlock(&w->lock);
    free(bt);
    return NULL;
}

int writer_start(kvrt_store *s, uint64_t max_bytes)
{
    struct writer *w = &s->writer;
    memset(w, 0, sizeof(*w));
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    pthread_cond_init(&w->done, NULL);
    w->value_bytes = STORE_HEADER_BYTES + s->model.payload_bytes;
    w->max_bytes = max_bytes;
    w->batch_bytes = s->model.secret ? SEALED_BATCH_BYTES : BATCH_BYTES;
    w->cap = max_bytes / w->value_bytes + 2;
    w->ring = calloc(w->cap, sizeof(*w->ring));
    if (!w->ring)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory for the queue");
    if (pthread_create(&w->thread, NULL, writer_main, s) != 0) {
        free(w->ring);
        w->ring = NULL;
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: cannot start the writer thread");
    }
    w->started = true;
    return KVRT_OK;
}

void writer_stop(kvrt_store *s)
{
    struct writer *w = &s->writer;
    if (!w->started)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    free(w->ring);
    free(w->touches);
    free(w->drops);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->done);
    pthread_mutex_destroy(&w->lock);
    w->started = false;
}

void writer_enqueue(kvrt_store *s, struct mem_entry *e, unsigned where)
{
    struct writer *w = &s->writer;
    pthread_mutex_lock(&w->lock);
    /* full: wait for the writer (one entry always fits an empty queue) */
    uint64_t bytes = e->sealed ? 2 * w->value_bytes : w->value_bytes;
    while (w->count > 0 && (w->bytes + bytes > w->max_bytes || w->count == w->cap))
        pthread_cond_wait(&w->done, &w->lock);
    w->ring[(w->head + w->count) % w->cap] = (struct writer_job){e, where, bytes};
    w->count++;
    w->bytes += bytes;
    w->enqueued++;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

static void push_id(struct store_id **arr, uint64_t *n, uint64_t *cap, const struct store_id *id)
{
    if (*n == *cap) {
        uint64_t c = *cap ? *cap * 2 : 64;
        struct store_id *g = realloc(*arr, c * sizeof(*g));
        if (!g)
            return; /* a lost read or drop only costs order or a second check */
        *arr = g;
        *cap = c;
    }
    (*arr)[(*n)++] = *id;
}

void writer_touch(kvrt_store *s, const struct store_id *id)
{
    struct writer *w = &s->writer;
    if (!w->started)
        return;
    pthread_mutex_lock(&w->lock);
    push_id(&w->touches, &w->num_touches, &w->cap_touches, id);
    if (w->num_touches >= TOUCH_BATCH)
        pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

void writer_drop(kvrt_store *s, const struct store_id *id)
{
    struct writer *w = &s->writer;
    if (!w->started)
        return;
    pthread_mutex_lock(&w->lock);
    push_id(&w->drops, &w->num_drops, &w->cap_drops, id);
    w->flush_now = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
}

void writer_count(kvrt_store *s, uint64_t hits, uint64_t misses)
{
    struct writer *w = &s->writer;
    if (!w->started || (!hits && !misses))
        return;
    pthread_mutex_lock(&w->lock);
    w->add_hits += hits;
    w->add_misses += misses;
    pthread_mutex_unlock(&w->lock);
}

int writer_flush(kvrt_store *s)
{
    struct writer *w = &s->writer;
    if (!w->started)
        return KVRT_OK;
    pthread_mutex_lock(&w->lock);
    uint64_t target = w->enqueued;
    w->flush_now = true;
    pthread_cond_signal(&w->wake);
    while (w->written < target || w->busy || has_side_work(w))
        pthread_cond_wait(&w->done, &w->lock);
    uint64_t failed = w->failed_since_flush;
    char why[512];
    snprintf(why, sizeof(why), "%s", w->failure);
    w->failed_since_flush = 0;
    w->failure[0] = '\0';
    pthread_mutex_unlock(&w->lock);
    if (failed)
        return BASE_FAIL(KVRT_ERR_DEVICE, "kvrt_store_flush: %llu entries could not be written to the disk tier: %s",
                         ULL(failed), why);
    return KVRT_OK;
}

void writer_queued(kvrt_store *s, uint64_t *entries, uint64_t *bytes)
{
    struct writer *w = &s->writer;
    *entries = *bytes = 0;
    if (!w->started)
        return;
    pthread_mutex_lock(&w->lock);
    *entries = w->count;
    *bytes = w->bytes;
    pthread_mutex_unlock(&w->lock);
}
