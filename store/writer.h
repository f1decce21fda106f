/*
 * The queue to the lower tiers (writer.c): sealed entries, reads and drops
 * written to the disk and shared tiers by a thread of the store's own.
 *
 * Layer 4 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_WRITER_H
#define KVRT_STORE_WRITER_H

#include <pthread.h>

#include "memory.h"

#define WRITE_DISK 1u
#define WRITE_SHARED 2u

struct writer_job {
    struct mem_entry *entry;
    unsigned where;
    uint64_t bytes; /* counted against max_bytes: twice value_bytes with a sealed copy */
};

struct writer {
    pthread_t thread;
    bool started, stop;
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    struct writer_job *ring;
    uint64_t cap, head, count;
    uint64_t bytes, max_bytes, value_bytes;
    uint64_t batch_bytes;       /* most bytes one batch writes */
    uint64_t enqueued, written; /* sequence numbers: a flush waits for written >= enqueued */
    bool flush_now;
    bool busy; /* a batch is being written */
    struct store_id *touches;
    uint64_t num_touches, cap_touches;
    struct store_id *drops;
    uint64_t num_drops, cap_drops;
    uint64_t add_hits, add_misses;
    uint64_t failed_since_flush;
    char failure[512];
};

int writer_start(kvrt_store *s, uint64_t max_bytes);
void writer_stop(kvrt_store *s);
/* Queue a sealed entry (takes a reference) for the tiers in `where`; waits
 * while the queue is full.  With a key, an entry whose encrypted copy the
 * put made (e->sealed) leaves as that copy; the queue thread seals the
 * others. */
void writer_enqueue(kvrt_store *s, struct mem_entry *e, unsigned where);
/* Record a read (the disk's recency order), a bad entry to delete, and
 * hits and misses for the directory's counters. */
void writer_touch(kvrt_store *s, const struct store_id *id);
void writer_drop(kvrt_store *s, const struct store_id *id);
void writer_count(kvrt_store *s, uint64_t hits, uint64_t misses);
/* Wait until what was queued before the call is written; the failures
 * since the last flush, reported. */
int writer_flush(kvrt_store *s);
void writer_queued(kvrt_store *s, uint64_t *entries, uint64_t *bytes);

#endif
