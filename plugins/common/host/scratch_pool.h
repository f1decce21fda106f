/*
 * Device scratch for the index arrays a call uploads (slots, block ids, block
 * tables).  Calls may run concurrently on one device, so each call takes its
 * own entries and gives them back once its work is complete; entries are
 * reused so a steady stream of calls allocates nothing.
 */
#ifndef KVRT_SCRATCH_POOL_H
#define KVRT_SCRATCH_POOL_H

#include <pthread.h>
#include <stdint.h>

#include <kvrt/plugin.h>

struct kvrt_scratch {
    void *mem; /* cl_mem or device pointer: a kernel argument as is */
    uint64_t capacity;
    struct kvrt_scratch *next;
};

struct kvrt_scratch_pool {
    pthread_mutex_t lock;
    struct kvrt_scratch *free_list;
    unsigned num_free;
    void *ctx;
    /* Allocate `bytes` of device memory into *mem, or fail with a message. */
    int (*alloc)(void *ctx, uint64_t bytes, void **mem, kvrt_plugin_error *err);
    void (*release)(void *ctx, void *mem);
};

void kvrt_scratch_pool_init(struct kvrt_scratch_pool *pool, void *ctx,
                            int (*alloc)(void *, uint64_t, void **, kvrt_plugin_error *),
                            void (*release)(void *, void *));
/* Frees every entry; no entry may be in use. */
void kvrt_scratch_pool_destroy(struct kvrt_scratch_pool *pool);

int kvrt_scratch_acquire(struct kvrt_scratch_pool *pool, uint64_t bytes, struct kvrt_scratch **out,
                         kvrt_plugin_error *err);
/* Only once the device no longer uses it. */
void kvrt_scratch_release(struct kvrt_scratch_pool *pool, struct kvrt_scratch *s);

#endif
