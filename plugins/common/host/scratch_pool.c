#include <stdlib.h>

#include "gpu_error.h"
#include "scratch_pool.h"

/* Idle entries kept for reuse; more than this are freed on release. */
#define KVRT_SCRATCH_KEEP 8
/* Small requests are rounded up so one entry serves many call sizes. */
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

int kvrt_scratch_acquire(struct kvrt_scratch_pool *pool, uint64_t bytes,
                         struct kvrt_scratch **out, kvrt_plugin_error *err)
{
    pthread_mutex_lock(&pool->lock);
    struct kvrt_scratch **link = &pool->free_list;
    for (; *link; link = &(*link)->next) {
        if ((*link)->capacity >= bytes) {
            struct kvrt_scratch *s = *link;
            *link = s->next;
            pool->num_free--;
            pthread_mutex_unlock(&pool->lock);
            s->next = NULL;
            *out = s;
            return KVRT_OK;
        }
    }
    pthread_mutex_unlock(&pool->lock);

    struct kvrt_scratch *s = calloc(1, sizeof(*s));
    if (!s)
        return kvrt_gpu_fail(err, KVRT_ERR_NOMEM, "out of host memory for a scratch entry");
    s->capacity = bytes < KVRT_SCRATCH_MIN ? KVRT_SCRATCH_MIN : bytes;
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
    if (pool->num_free < KVRT_SCRATCH_KEEP) {
        s->next = pool->free_list;
        pool->free_list = s;
        pool->num_free++;
        s = NULL;
    }
    pthread_mutex_unlock(&pool->lock);
    if (s) {
        pool->release(pool->ctx, s->mem);
        free(s);
    }
}
