/*
 * kvrt CPU backend — worker pool (see pool.h for the contract).
 */
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

struct cpu_job {
    cpu_task_fn fn;
    void *ctx;
    uint64_t n;
    uint64_t grain;
    atomic_uint_fast64_t next; /* first unclaimed item */
    atomic_uint next_worker;   /* worker ids handed out so far */
};

struct cpu_pool {
    unsigned threads; /* participants, submitter included */
    unsigned started; /* worker threads actually running */
    pthread_t *workers;

    /* Held by the submitter for the whole job: one job at a time. */
    pthread_mutex_t submit;

    pthread_mutex_t lock;
    pthread_cond_t wake; /* a new job or stop */
    pthread_cond_t done; /* the last busy worker finished */
    uint64_t generation; /* bumped per job; workers run each one once */
    unsigned busy;       /* workers still inside the current job */
    bool stop;
    struct cpu_job *job;
    pid_t pid; /* a forked child has none of the workers */
};

static void run_chunks(struct cpu_job *job, unsigned worker)
{
    for (;;) {
        uint64_t begin = atomic_fetch_add(&job->next, job->grain);
        if (begin >= job->n)
            return;
        uint64_t end = job->n - begin < job->grain ? job->n : begin + job->grain;
        job->fn(job->ctx, worker, begin, end);
    }
}

static void *worker_main(void *arg)
{
    struct cpu_pool *pool = arg;
    uint64_t seen = 0;

    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->stop && pool->generation == seen)
            pthread_cond_wait(&pool->wake, &pool->lock);
        if (pool->stop)
            break;
        seen = pool->generation;
        struct cpu_job *job = pool->job;
        if (!job)
            continue; /* woke after the submitter finished the job alone */
        pool->busy++;
        pthread_mutex_unlock(&pool->lock);

        /* Worker ids in the order workers arrive, so the ids in use are
         * always 1 .. k and per-worker scratch stays small. */
        unsigned id = atomic_fetch_add(&job->next_worker, 1u);
        run_chunks(job, id);

        pthread_mutex_lock(&pool->lock);
        if (--pool->busy == 0)
            pthread_cond_signal(&pool->done);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

bool cpu_pool_default_threads(unsigned *threads, const char **bad)
{
    const char *env = getenv("KVRT_CPU_THREADS");
    if (env) {
        /* Digits only: strtol alone would take " 4", "+4" and "4x". */
        unsigned long v = 0;
        bool digits = *env != '\0';
        for (const char *p = env; *p && digits; p++) {
            digits = *p >= '0' && *p <= '9';
            if (digits && v <= CPU_POOL_MAX_THREADS)
                v = v * 10 + (unsigned long)(*p - '0');
        }
        if (!digits || v < 1 || v > CPU_POOL_MAX_THREADS) {
            *bad = env;
            return false;
        }
        *threads = (unsigned)v;
        return true;
    }
    long n = 0;
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        n = CPU_COUNT(&set);
#endif
    if (n <= 0)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0)
        n = 1;
    *threads = n > CPU_POOL_MAX_THREADS ? CPU_POOL_MAX_THREADS : (unsigned)n;
    return true;
}

struct cpu_pool *cpu_pool_create(unsigned threads)
{
    if (threads < 1)
        threads = 1;
    if (threads > CPU_POOL_MAX_THREADS)
        threads = CPU_POOL_MAX_THREADS;
    struct cpu_pool *pool = calloc(1, sizeof(*pool));
    if (!pool)
        return NULL;
    pool->workers = calloc(threads, sizeof(*pool->workers));
    if (!pool->workers) {
        free(pool);
        return NULL;
    }
    pthread_mutex_init(&pool->submit, NULL);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    for (unsigned i = 0; i + 1 < threads; i++) {
        if (pthread_create(&pool->workers[i], NULL, worker_main, pool) != 0)
            break;
        pool->started++;
    }
    pool->threads = pool->started + 1;
    pool->pid = getpid();
    return pool;
}

void cpu_pool_destroy(struct cpu_pool *pool)
{
    if (!pool)
        return;
    /* In a forked child the workers do not exist and the locks may have
     * been copied held: only the memory is ours to release. */
    if (pool->pid == getpid()) {
        pthread_mutex_lock(&pool->lock);
        pool->stop = true;
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->lock);
        for (unsigned i = 0; i < pool->started; i++)
            pthread_join(pool->workers[i], NULL);
        pthread_cond_destroy(&pool->done);
        pthread_cond_destroy(&pool->wake);
        pthread_mutex_destroy(&pool->lock);
        pthread_mutex_destroy(&pool->submit);
    }
    free(pool->workers);
    free(pool);
}

unsigned cpu_pool_threads(const struct cpu_pool *pool)
{
    return pool ? pool->threads : 1;
}

void cpu_pool_run(struct cpu_pool *pool, uint64_t n, uint64_t grain, cpu_task_fn fn, void *ctx)
{
    if (n == 0)
        return;
    unsigned threads = cpu_pool_threads(pool);
    if (grain == 0)
        grain = (n + threads - 1) / threads;

    /* Inline: nothing to share, no workers (or none in this forked child),
     * or the pool is taken by another submitter, whose job already keeps the
     * other cores busy. */
    if (n <= grain || threads == 1 || pool->pid != getpid() || pthread_mutex_trylock(&pool->submit) != 0) {
        fn(ctx, 0, 0, n);
        return;
    }

    struct cpu_job job = {.fn = fn, .ctx = ctx, .n = n, .grain = grain};
    atomic_init(&job.next, 0);
    atomic_init(&job.next_worker, 1u);

    pthread_mutex_lock(&pool->lock);
    pool->job = &job;
    pool->busy = 0; /* counted by the workers that pick the job up */
    pool->generation++;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);

    run_chunks(&job, 0);

    /* `job` lives on this stack: wait until no worker can touch it. */
    pthread_mutex_lock(&pool->lock);
    pool->job = NULL; /* a worker not awake yet skips this job */
    while (pool->busy > 0)
        pthread_cond_wait(&pool->done, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
    pthread_mutex_unlock(&pool->submit);
}
