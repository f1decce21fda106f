/*
 * The shared tier (shared.c): entries on a Redis-protocol server or a
 * Redis Cluster, so that engines on several hosts share one store.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_SHARED_H
#define KVRT_STORE_SHARED_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <kvrt/store.h>

#include "base/log.h"
#include "cluster.h"
#include "memory.h"
#include "redis_url.h"

#define SHARED_DOWN_MAX 32

struct shared_tier {
    char url[300];
    struct redis_url parsed;
    double timeout_s;           /* the deadline of each call */
    const struct base_log *log; /* the store's, for warnings; NULL until init */
    SSL_CTX *tls;
    char *password; /* the password file's content, or NULL */
    struct cluster_config cfg;
    pthread_mutex_t lock;    /* the state below */
    pthread_mutex_t fg_lock; /* the foreground client */
    struct cluster *fg;      /* gets, lookups, drops */
    struct cluster *bg;      /* the writer thread's */
    /* nodes that failed and were warned about (one line per outage, even
     * when both clients see it) */
    char down[SHARED_DOWN_MAX][REDIS_HOST_MAX + 10];
    int num_down;
    uint64_t errors;
    /* both clients' counts (cluster.h): maps learnt, redirections
     * followed; and failed nodes a new map left out */
    uint64_t maps, moved, asked, failovers;
    struct store_events *events; /* KV events (events.h); NULL: off */
};

/* From the options' shared, shared_timeout_s and shared_* files; refuses
 * (KVRT_ERR_INVALID naming the value) a bad URL or file. */
int shared_init(struct shared_tier *t, const struct base_log *log, const struct kvrt_store_options *o);
void shared_free(struct shared_tier *t);
/* GETs of ids[0..n), each value read into bufs[i] (entry buffers of
 * value_bytes): got[i] and lens[i] (the value's size, at most
 * value_bytes: a longer value fails its connection).  A node that fails
 * costs the keys it serves a miss.  arrived (or NULL) is called with each
 * value as it arrives, before the next is read: a check there overlaps
 * the servers sending the rest (every got[i] was passed to it). */
void shared_get_many(struct shared_tier *t, const struct store_id *ids, uint64_t n, uint64_t value_bytes,
                     uint8_t *const *bufs, uint64_t *lens, bool *got,
                     void (*arrived)(void *user, size_t i, uint8_t *value, uint64_t len), void *user);
/* EXISTS of ids[0..n): has[i]; false where unreachable. */
void shared_has(struct shared_tier *t, const struct store_id *ids, uint64_t n, bool *has);
/* SET of sealed entries (the writer thread); returns how many went in. */
uint64_t shared_put(struct shared_tier *t, struct mem_entry *const *entries, uint64_t n, uint64_t value_bytes);
/* Delete an entry that failed its checks. */
void shared_drop(struct shared_tier *t, const struct store_id *id);
bool shared_is_up(struct shared_tier *t);
/* The tier's node counters, for kvrt_store_stats. */
void shared_counts(struct shared_tier *t, struct kvrt_store_stats *st);

#endif
