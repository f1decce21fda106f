#include <stdlib.h>

#include "gpu_error.h"
#include "scratch_pool.h"

/*
 * Device allocation and release (cudaMalloc/cudaFree, clCreateBuffer) are
 * slow and cudaFree synchronises the whole device, so they must stay out of
 * the steady state: capacities are powers of two (a growing size settles
 * after a few calls), a request takes the smallest idle entry that fits,
 * and up to KVRT_SCRATCH_KEEP idle entries are kept (each call holds at
 * most KVRT_GPU_CALL_MAX_SCRATCH, so eight concurrent calls never free).
 * Past that, the smallest entry is the one freed.
 */
#define KVRT_SCRATCH_KEEP 32
#define KVRT_SCRATCH_MIN 4096u

void kvrt_scratch_pool_init(struct kvrt_scratch_pool *pool, void *ctx,
                            int (*alloc)(void *, uint64_t, void **, kvrt_plugin_error *),
                            void (*release)(void *, void *))
{
    pthread_mutex_init(&pool->lock, NULL);
    pool->free_list = NULL;
    pool->num_free = 0;
    pool->ctx = ctx;
    pool->alloc = alloc;
    pool->release = release;
}

void kvrt_scratch_pool_destroy(struct kvrt_scratch_pool *pool)
{
    struct kvrt_scratch *s = pool->free_list;
    while (s) {
        struct kvrt_scratch *next = s->next;
        pool->release(pool->ctx, s->mem);
        free(s);
        s = next;
    }
    pool->free_list = NULL;
    pool->num_free = 0;
    pthread_mutex_destroy(&pool->lock);
}

int kvrt_scratch_acquire(struct kvrt_scratch_pool *pool, uint64_t bytes, struct kvrt_scratch **out,
                         kvrt_plugin_error *err)
{
    pthread_mutex_lock(&pool->lock);
    struct kvrt_scratch **best = NULL;
    for (struct kvrt_scratch **link = &pool->free_list; *link; link = &(*link)->next)
        if ((*link)->capacity >= bytes && (!best || (*link)->capacity < (*best)->capacity))
            best = link;
    if (best) {
        struct kvrt_scratch *s = *best;
        *best = s->next;
        pool->num_free--;
        pthread_mutex_unlock(&pool->lock);
        s->next = NULL;
        *out = s;
        return KVRT_OK;
    }
    pthread_mutex_unlock(&pool->lock);

    uint64_t capacity = KVRT_SCRATCH_MIN;
    while (capacity < bytes && capacity <= UINT64_MAX / 2)
        capacity *= 2;
    if (capacity < bytes)
        capacity = bytes;
    struct kvrt_scratch *s = calloc(1, sizeof(*s));
    if (!s)
        return kvrt_gpu_fail(err, KVRT_ERR_NOMEM, "out of host memory for a scratch entry");
    s->capacity = capacity;
    int rc = pool->alloc(pool->ctx, s->capacity, &s->mem, err);
    if (rc != KVRT_OK) {
        free(s);
        return rc;
    }
    *out = s;
    return KVRT_OK;
}

void kvrt_scratch_release(struct kvrt_scratch_pool *pool, struct kvrt_scratch *s)
{
    pthread_mutex_lock(&pool->lock);
    s->next = pool->free_list;
    pool->free_list = s;
    pool->num_free++;
    s = NULL;
    if (pool->num_free > KVRT_SCRATCH_KEEP) {
        struct kvrt_scratch **smallest = &pool->free_list;
        for (struct kvrt_scratch **link = &pool->free_list; *link; link = &(*link)->next)
            if ((*link)->capacity < (*smallest)->capacity)
                smallest = link;
        s = *smallest;
        *smallest = s->next;
        pool->num_free--;
    }
    pthread_mutex_unlock(&pool->lock);
    if (s) {
        pool->release(pool->ctx, s->mem);
        free(s);
    }
}
