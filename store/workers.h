/*
 * The store's worker threads: a put spreads its chunks' canonical copies
 * (and their checksums) over the cores a serving node leaves idle, as a
 * parallel for.  One call at a time uses the pool; a caller that finds it
 * busy (several threads calling the store at once) runs its loop itself,
 * so nobody waits for another caller's work.
 *
 * Layer 2 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_WORKERS_H
#define KVRT_STORE_WORKERS_H

#include <stdint.h>

/* The most threads a store starts, whatever KVRT_STORE_THREADS asks. */
#define STORE_WORKERS_MAX 64u

struct store_workers;

/* The threads a store uses for one call, caller included: the env
 * KVRT_STORE_THREADS (1 to STORE_WORKERS_MAX; 1: none but the caller),
 * else the online CPUs, at most STORE_WORKERS_MAX.  *why is set (and the
 * default returned) for a value that is not a number in range. */
unsigned store_workers_wanted(const char **why);

/* Start threads - 1 threads (the caller is the last one).  *out is NULL
 * for threads <= 1, or when threads cannot be started (then fewer run: a
 * put is as correct on one thread). */
void store_workers_start(unsigned threads, struct store_workers **out);
void store_workers_stop(struct store_workers *w);

/* fn(ctx, i) for every i in [0, count), on the pool's threads and the
 * caller's, returning once all are done.  Serial on the caller's thread
 * when w is NULL, count is 1 or another call holds the pool.  What fn
 * wrote is visible to the caller on return. */
void store_workers_for(struct store_workers *w, uint64_t count, void (*fn)(void *ctx, uint64_t i), void *ctx);

/* How many threads a call may use (1 without a pool). */
unsigned store_workers_count(const struct store_workers *w);

#endif
