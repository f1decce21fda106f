/* Reading a get's next chunks while it checks and copies this one.  A
 * get's chunks follow each other: with the slots of chunks c + 1 and c + 2
 * posted before chunk c is checked and copied, the disk is not idle while
 * the CPU works, nor while this thread waits to be woken (on a busy
 * two-core machine, one chunk ahead left the disk idle a fifth of a cold
 * get), and the CPU never waits for a read it could have started.  (The
 * kernel's own read-ahead did this for buffered reads; with O_DIRECT
 * nobody else does.)  One thread per get, for the get's life: a post is a
 * list of slots and buffers, read in order of posting, and at most
 * STORE_AHEAD_POSTS are outstanding (the chunk being copied and the ones
 * after it).
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include <pthread.h>
#include <stdlib.h>

#include "disk.h"

struct ahead_post {
    uint8_t *const *bufs;
    const uint64_t *slots;
    uint64_t *lens;
    uint64_t n;
};

struct disk_ahead {
    struct disk_tier *d;
    bool threaded, stop;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    struct ahead_post posts[STORE_AHEAD_POSTS]; /* post s is posts[s % STORE_AHEAD_POSTS] */
    uint64_t posted, finished;                  /* posts [finished, posted) are outstanding */
};

static void *ahead_main(void *arg)
{
    struct disk_ahead *a = arg;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (a->finished == a->posted && !a->stop)
            pthread_cond_wait(&a->wake, &a->lock);
        if (a->finished == a->posted)
            break;
        struct ahead_post p = a->posts[a->finished % STORE_AHEAD_POSTS];
        pthread_mutex_unlock(&a->lock);
        disk_read_slots(a->d, p.bufs, p.slots, p.n, p.lens);
        pthread_mutex_lock(&a->lock);
        a->finished++;
        pthread_cond_broadcast(&a->done);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

int disk_ahead_begin(struct disk_tier *d, bool threaded, struct disk_ahead **out)
{
    struct disk_ahead *a = calloc(1, sizeof(*a));
    if (!a)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    a->d = d;
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->wake, NULL);
    pthread_cond_init(&a->done, NULL);
    /* without a thread (one chunk, or none to be had) each post reads at once */
    a->threaded = threaded && pthread_create(&a->thread, NULL, ahead_main, a) == 0;
    *out = a;
    return KVRT_OK;
}

uint64_t disk_ahead_post(struct disk_ahead *a, uint8_t *const *bufs, const uint64_t *slots, uint64_t n, uint64_t *lens)
{
    if (!a->threaded) {
        disk_read_slots(a->d, bufs, slots, n, lens);
        return a->posted++;
    }
    pthread_mutex_lock(&a->lock);
    /* one post too many waits for the first (callers wait for it anyway) */
    while (a->posted - a->finished >= STORE_AHEAD_POSTS)
        pthread_cond_wait(&a->done, &a->lock);
    a->posts[a->posted % STORE_AHEAD_POSTS] = (struct ahead_post){bufs, slots, lens, n};
    uint64_t seq = a->posted++;
    pthread_cond_signal(&a->wake);
    pthread_mutex_unlock(&a->lock);
    return seq;
}

void disk_ahead_wait(struct disk_ahead *a, uint64_t seq)
{
    if (!a->threaded)
        return;
    pthread_mutex_lock(&a->lock);
    while (a->finished <= seq)
        pthread_cond_wait(&a->done, &a->lock);
    pthread_mutex_unlock(&a->lock);
}

void disk_ahead_end(struct disk_ahead *a)
{
    if (!a)
        return;
    if (a->threaded) {
        pthread_mutex_lock(&a->lock);
        a->stop = true;
        pthread_cond_signal(&a->wake);
        pthread_mutex_unlock(&a->lock);
        pthread_join(a->thread, NULL);
    }
    pthread_cond_destroy(&a->wake);
    pthread_cond_destroy(&a->done);
    pthread_mutex_destroy(&a->lock);
    free(a);
}
