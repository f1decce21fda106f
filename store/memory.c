/* The memory tier: a bounded in-process pool of entries, indexed by
 * (chunk key, head), least recently used first out.  An entry being read
 * (pinned by a get) is never evicted; one queued for the lower tiers may
 * leave the index, and its bytes live until the queue lets go.  Buffers of
 * entries gone are kept for the next entries (all entries of a store have
 * one size; buffers.c), so a warm pool copies without page faults.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "memory.h"

static uint64_t hash_id(const struct store_id *id)
{
    uint64_t h;
    memcpy(&h, id->key, sizeof(h));
    return h ^ ((uint64_t)id->head * 0x9e3779b97f4a7c15ull);
}

static bool same(const struct store_id *a, const struct store_id *b)
{
    return a->head == b->head && memcmp(a->key, b->key, KVRT_STORE_KEY_BYTES) == 0;
}

int mem_tier_init(struct mem_tier *t, uint64_t capacity, uint64_t entry_bytes)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    t->capacity = capacity;
    t->entry_bytes = entry_bytes;
    t->num_buckets = 64;
    /* an array of pointers to entries: sizeof(*t->buckets) is a pointer's size */
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    t->buckets = calloc(t->num_buckets, sizeof(*t->buckets));
    int rc = buf_pool_init(&t->pool, store_slot_bytes(entry_bytes));
    if (rc != KVRT_OK || !t->buckets) {
        mem_tier_free(t);
        return rc != KVRT_OK ? rc : BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    }
    return KVRT_OK;
}

static void unlink_lru(struct mem_tier *t, struct mem_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        t->lru_head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        t->lru_tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_lru(struct mem_tier *t, struct mem_entry *e)
{
    e->prev = NULL;
    e->next = t->lru_head;
    if (t->lru_head)
        t->lru_head->prev = e;
    t->lru_head = e;
    if (!t->lru_tail)
        t->lru_tail = e;
}

static void release(struct mem_tier *t, struct mem_entry *e)
{
    buf_pool_put(&t->pool, e->buf);
    free(e->chunk);
    free(e);
}

/* Drop one reference with the lock held (and the sealed copy's with the
 * last: it has no other owner). */
static void unref_locked(struct mem_tier *t, struct mem_entry *e)
{
    if (--e->refs > 0)
        return;
    if (e->sealed && --e->sealed->refs == 0)
        release(t, e->sealed);
    release(t, e);
}

void mem_tier_free(struct mem_tier *t)
{
    for (uint64_t i = 0; t->buckets && i < t->num_buckets; i++)
        for (struct mem_entry *e = t->buckets[i], *n; e; e = n) {
            n = e->hnext;
            if (e->in_lru) /* the process's memory goes with it */
                store_event_removed(t->events, STORE_TIER_MEMORY, &e->id);
            e->indexed = false;
            unref_locked(t, e);
        }
    buf_pool_free(&t->pool);
    free(t->buckets);
    pthread_mutex_destroy(&t->lock);
    memset(t, 0, sizeof(*t));
}

struct mem_entry *mem_entry_new(struct mem_tier *t, const struct store_id *id)
{
    struct mem_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->id = *id;
    e->refs = 1;
    pthread_mutex_lock(&t->lock);
    e->buf = buf_pool_get(&t->pool);
    pthread_mutex_unlock(&t->lock);
    if (!e->buf) {
        free(e);
        return NULL;
    }
    return e;
}

void mem_entry_unref(struct mem_tier *t, struct mem_entry *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&t->lock);
    unref_locked(t, e);
    pthread_mutex_unlock(&t->lock);
}

static struct mem_entry **slot_of(struct mem_tier *t, const struct store_id *id)
{
    struct mem_entry **p = &t->buckets[hash_id(id) & (t->num_buckets - 1)];
    while (*p && !same(&(*p)->id, id))
        p = &(*p)->hnext;
    return p;
}

static void leave_lru(struct mem_tier *t, struct mem_entry *e)
{
    if (!e->in_lru)
        return;
    unlink_lru(t, e);
    e->in_lru = false;
    t->bytes -= t->entry_bytes;
    t->entries--;
}

static void unindex(struct mem_tier *t, struct mem_entry *e)
{
    struct mem_entry **p = slot_of(t, &e->id);
    if (*p == e)
        *p = e->hnext;
    e->hnext = NULL;
    leave_lru(t, e);
    e->indexed = false;
    t->indexed--;
}

static void grow(struct mem_tier *t)
{
    uint64_t n = t->num_buckets * 2;
    /* pointers to entries, as t->buckets */
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    struct mem_entry **b = calloc(n, sizeof(*b));
    if (!b)
        return; /* longer chains, still correct */
    for (uint64_t i = 0; i < t->num_buckets; i++)
        for (struct mem_entry *e = t->buckets[i], *next; e; e = next) {
            next = e->hnext;
            uint64_t j = hash_id(&e->id) & (n - 1);
            e->hnext = b[j];
            b[j] = e;
        }
    free(t->buckets);
    t->buckets = b;
    t->num_buckets = n;
}

bool mem_tier_insert(struct mem_tier *t, struct mem_entry *e, bool cache)
{
    pthread_mutex_lock(&t->lock);
    if (*slot_of(t, &e->id)) {
        pthread_mutex_unlock(&t->lock);
        return false;
    }
    /* evict from the cold end, passing over entries being read; one still
     * queued leaves the tier but stays findable until it is written */
    struct mem_entry *v = t->lru_tail;
    while (cache && t->entry_bytes <= t->capacity && t->bytes + t->entry_bytes > t->capacity && v) {
        struct mem_entry *prev = v->prev;
        if (v->readers == 0) {
            t->evicted++;
            store_event_removed(t->events, STORE_TIER_MEMORY, &v->id);
            if (v->queued) {
                leave_lru(t, v);
            } else {
                unindex(t, v);
                unref_locked(t, v);
            }
        }
        v = prev;
    }
    bool fits = cache && t->entry_bytes <= t->capacity && t->bytes + t->entry_bytes <= t->capacity;
    if (!fits && !e->queued) {
        pthread_mutex_unlock(&t->lock);
        return false;
    }
    if (t->indexed + 1 > t->num_buckets)
        grow(t);
    struct mem_entry **p = slot_of(t, &e->id);
    e->hnext = NULL;
    *p = e;
    e->indexed = true;
    t->indexed++;
    if (fits) {
        push_lru(t, e);
        e->in_lru = true;
        t->bytes += t->entry_bytes;
        t->entries++;
        store_event_stored(t->events, STORE_TIER_MEMORY, &e->id, e->chunk);
    }
    pthread_mutex_unlock(&t->lock);
    return true;
}

void mem_tier_written(struct mem_tier *t, struct mem_entry *e)
{
    pthread_mutex_lock(&t->lock);
    e->queued = false;
    if (e->indexed && !e->in_lru) {
        unindex(t, e);
        unref_locked(t, e); /* the index's */
    }
    pthread_mutex_unlock(&t->lock);
}

struct mem_entry *mem_tier_pin(struct mem_tier *t, const struct store_id *id)
{
    pthread_mutex_lock(&t->lock);
    struct mem_entry *e = *slot_of(t, id);
    if (e) {
        e->refs++;
        e->readers++;
        if (e->in_lru) {
            unlink_lru(t, e);
            push_lru(t, e);
        }
    }
    pthread_mutex_unlock(&t->lock);
    return e;
}

void mem_tier_unpin(struct mem_tier *t, struct mem_entry *e)
{
    pthread_mutex_lock(&t->lock);
    e->readers--;
    unref_locked(t, e);
    pthread_mutex_unlock(&t->lock);
}

bool mem_tier_has(struct mem_tier *t, const struct store_id *id)
{
    pthread_mutex_lock(&t->lock);
    bool has = *slot_of(t, id) != NULL;
    pthread_mutex_unlock(&t->lock);
    return has;
}

bool mem_tier_has_heads(struct mem_tier *t, const uint8_t key[KVRT_STORE_KEY_BYTES], uint32_t head, uint32_t n,
                        bool *has)
{
    struct store_id id;
    memcpy(id.key, key, KVRT_STORE_KEY_BYTES);
    bool all = true;
    pthread_mutex_lock(&t->lock);
    for (uint32_t i = 0; i < n; i++) {
        id.head = head + i;
        has[i] = *slot_of(t, &id) != NULL;
        all = all && has[i];
    }
    pthread_mutex_unlock(&t->lock);
    return all;
}
