/*
 * A mutex taken and given back, by one name in both libraries (the lock of
 * an agent, a tier, a queue).  Inline: a lock is on every hot path.
 *
 * Base of libkvrt-xfer and libkvrt-store: below every layer of both.
 */
#ifndef KVRT_BASE_LOCK_H
#define KVRT_BASE_LOCK_H

#include <pthread.h>

static inline void base_lock(pthread_mutex_t *m)
{
    pthread_mutex_lock(m);
}

static inline void base_unlock(pthread_mutex_t *m)
{
    pthread_mutex_unlock(m);
}

#endif
