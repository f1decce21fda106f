/*
 * The memory tier (memory.c): entries in process memory, indexed by id,
 * least recently used evicted first.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_MEMORY_H
#define KVRT_STORE_MEMORY_H

#include <pthread.h>

#include "buffers.h"
#include "entry.h"
#include "events.h"

/* An entry's bytes in memory: header room, then the payload. */
struct mem_entry {
    struct store_id id;
    uint8_t *buf;     /* STORE_HEADER_BYTES + payload */
    uint32_t refs;    /* the index holds one, each reader and queued job one */
    uint32_t readers; /* gets using it: never evicted while > 0 */
    bool indexed;     /* findable by id */
    bool in_lru;      /* cached: counted in the tier's bytes, evictable */
    bool queued;      /* on its way to the lower tiers: findable until written */
    /* a chunk's lead entry with events on: its parent and tokens (events.h) */
    struct store_event_chunk *chunk;
    /* with a key: the entry's sealed copy (an entry of no tier), made by
     * the put on its workers; the queue's until the writer takes it, and
     * released with the entry otherwise */
    struct mem_entry *sealed;
    struct mem_entry *hnext;
    struct mem_entry *prev, *next; /* LRU: head most recent */
};

struct mem_tier {
    pthread_mutex_t lock;
    uint64_t capacity, bytes, entry_bytes;
    uint64_t entries, evicted; /* cached entries */
    uint64_t indexed;          /* findable ones: cached and queued */
    struct mem_entry **buckets;
    uint64_t num_buckets;
    struct mem_entry *lru_head, *lru_tail;
    /* every entry's buffer, and those of entries gone, for new ones */
    struct buf_pool pool;
    struct store_events *events; /* NULL: off */
};

int mem_tier_init(struct mem_tier *t, uint64_t capacity, uint64_t entry_bytes);
void mem_tier_free(struct mem_tier *t);
/* A new entry (refs 1, not indexed) with a buffer; NULL when out of memory. */
struct mem_entry *mem_entry_new(struct mem_tier *t, const struct store_id *id);
/* Drop a reference; the last frees (or pools) the buffer. */
void mem_entry_unref(struct mem_tier *t, struct mem_entry *e);
/* Index a new entry (the index takes the caller's reference).  cache:
 * keep it in the tier, evicting least-recently-used entries nobody reads
 * (an evicted entry still queued stays findable until it is written).  An
 * entry that does not fit, or with cache false, is indexed only while it
 * is queued.  false when it was not indexed (the caller keeps its
 * reference): it fits nowhere and is not queued, or one is indexed under
 * the id already. */
bool mem_tier_insert(struct mem_tier *t, struct mem_entry *e, bool cache);
/* A queued entry was written (or failed): findable no longer unless
 * cached. */
void mem_tier_written(struct mem_tier *t, struct mem_entry *e);
/* The entry under id, pinned for reading (refs and readers + 1), or NULL. */
struct mem_entry *mem_tier_pin(struct mem_tier *t, const struct store_id *id);
void mem_tier_unpin(struct mem_tier *t, struct mem_entry *e);
bool mem_tier_has(struct mem_tier *t, const struct store_id *id);
/* Which of heads [head, head + n) of a chunk are here (has[i]), under one
 * lock; true when all are. */
bool mem_tier_has_heads(struct mem_tier *t, const uint8_t key[KVRT_STORE_KEY_BYTES], uint32_t head, uint32_t n,
                        bool *has);

#endif
