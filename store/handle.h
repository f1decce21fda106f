/*
 * The store's handle: its model, tiers, queue, log, counters and the state
 * of its requests, which the queue and every layer above it read.
 *
 * Layer 4 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_HANDLE_H
#define KVRT_STORE_HANDLE_H

#include "disk.h"
#include "shared.h"
#include "seal.h"
#include "workers.h"
#include "writer.h"

/* What this process counted (kvrt_store_stats), under count_lock. */
struct store_counters {
    uint64_t hits_memory, hits_disk, hits_shared, misses;
    uint64_t put_entries, put_present;
    uint64_t written_disk, written_shared, write_failures, dropped, rejected, evicted_disk;
};

struct kvrt_store {
    struct store_model model;
    struct store_secret secret; /* model.secret points here with a key */
    bool inspect;               /* opened without a model */
    struct mem_tier mem;
    bool has_mem;
    struct disk_tier disk;
    bool has_disk;
    struct shared_tier shared;
    bool has_shared;
    struct writer writer;
    struct base_log log; /* the options' callback (store_warn) */
    char *description;   /* the directory's model record (inspecting) */
    pthread_mutex_t count_lock;
    struct store_counters counts;
    /* asynchronous requests (request.c) */
    pthread_mutex_t req_lock;
    pthread_cond_t req_wake;
    pthread_t worker;
    bool worker_started, worker_stop;
    kvrt_store_request *req_head, *req_tail;
    uint64_t req_open;
    pthread_cond_t req_drained;
    struct store_events *events;   /* KV events for routers (events.h); NULL: off */
    struct store_workers *workers; /* a put's copies spread over them; NULL: the caller's thread */
};

#endif
