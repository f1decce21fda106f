/* The store's worker threads (workers.h): a parallel for over a small,
 * fixed pool.  Each item is claimed with one atomic increment, so items of
 * unequal cost (a chunk with fewer missing heads) balance themselves, and
 * the caller works too instead of only waiting.
 *
 * Layer 2 of libkvrt-store (docs/store.md, "Layers").
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "workers.h"

struct store_workers {
    pthread_mutex_t busy; /* held by the call using the pool */
    pthread_mutex_t lock; /* the job and the counts below */
    pthread_cond_t go, done;
    unsigned threads, started; /* started: pool threads running */
    bool stop;
    uint64_t generation; /* one per job */
    unsigned working;    /* pool threads still on the job */
    void (*fn)(void *ctx, uint64_t i);
    void *ctx;
    uint64_t count;
    _Atomic uint64_t next;
    pthread_t tid[STORE_WORKERS_MAX];
};

unsigned store_workers_wanted(const char **why)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned def = cpus < 1 ? 1u : cpus > (long)STORE_WORKERS_MAX ? STORE_WORKERS_MAX : (unsigned)cpus;
    *why = NULL;
    const char *v = getenv("KVRT_STORE_THREADS");
    if (!v || !*v)
        return def;
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || *end || n < 1 || n > STORE_WORKERS_MAX || v[0] == '-') {
        *why = v;
        return def;
    }
    return (unsigned)n;
}

/* Claim items until none is left. */
static void drain(struct store_workers *w)
{
    for (uint64_t i; (i = atomic_fetch_add_explicit(&w->next, 1, memory_order_relaxed)) < w->count;)
        w->fn(w->ctx, i);
}

static void *worker_main(void *arg)
{
    struct store_workers *w = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->generation == seen && !w->stop)
            pthread_cond_wait(&w->go, &w->lock);
        if (w->stop)
            break;
        seen = w->generation;
        pthread_mutex_unlock(&w->lock);
        drain(w);
        pthread_mutex_lock(&w->lock);
        /* the unlock that follows publishes fn's writes to the caller,
         * which takes this lock before it returns */
        if (--w->working == 0)
            pthread_cond_signal(&w->done);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

void store_workers_start(unsigned threads, struct store_workers **out)
{
    *out = NULL;
    if (threads <= 1)
        return;
    struct store_workers *w = calloc(1, sizeof(*w));
    if (!w)
        return;
    pthread_mutex_init(&w->busy, NULL);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->go, NULL);
    pthread_cond_init(&w->done, NULL);
    w->threads = threads > STORE_WORKERS_MAX ? STORE_WORKERS_MAX : threads;
    for (unsigned i = 0; i + 1 < w->threads; i++) {
        if (pthread_create(&w->tid[i], NULL, worker_main, w) != 0)
            break;
        w->started++;
    }
    if (w->started == 0) {
        store_workers_stop(w);
        return;
    }
    *out = w;
}

void store_workers_stop(struct store_workers *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_broadcast(&w->go);
    pthread_mutex_unlock(&w->lock);
    for (unsigned i = 0; i < w->started; i++)
        pthread_join(w->tid[i], NULL);
    pthread_cond_destroy(&w->go);
    pthread_cond_destroy(&w->done);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->busy);
    free(w);
}

unsigned store_workers_count(const struct store_workers *w)
{
    return w ? w->started + 1 : 1;
}

void store_workers_for(struct store_workers *w, uint64_t count, void (*fn)(void *ctx, uint64_t i), void *ctx)
{
    if (!w || count < 2 || pthread_mutex_trylock(&w->busy) != 0) {
        for (uint64_t i = 0; i < count; i++)
            fn(ctx, i);
        return;
    }
    pthread_mutex_lock(&w->lock);
    w->fn = fn;
    w->ctx = ctx;
    w->count = count;
    atomic_store_explicit(&w->next, 0, memory_order_relaxed);
    w->working = w->started;
    w->generation++;
    pthread_cond_broadcast(&w->go);
    pthread_mutex_unlock(&w->lock);
    drain(w);
    pthread_mutex_lock(&w->lock);
    while (w->working > 0)
        pthread_cond_wait(&w->done, &w->lock);
    pthread_mutex_unlock(&w->lock);
    pthread_mutex_unlock(&w->busy);
}
