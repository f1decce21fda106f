/*
 * kvrt CPU backend — a small persistent worker pool.
 *
 * A job is a range of items [0, n) cut into chunks of `grain` items; the
 * submitting thread and the workers claim chunks from a shared counter until
 * none is left, so a late-waking worker costs nothing and uneven chunks
 * balance themselves.  One job runs on the pool at a time: a thread that
 * submits while another job is running does its whole job alone instead of
 * waiting, which keeps concurrent submitters correct and both cores busy.
 * A child process forked from the owner has no workers: it runs every job
 * inline, and destroying the pool there only frees memory.
 */
#ifndef KVRT_CPU_POOL_H
#define KVRT_CPU_POOL_H

#include <stdbool.h>
#include <stdint.h>

struct cpu_pool;

/* Called with a chunk [begin, end) of the job's items; `worker` identifies
 * the participant (0 .. cpu_pool_threads()-1) so a job can keep per-worker
 * scratch.  Two calls of one job never share a worker index at once. */
typedef void (*cpu_task_fn)(void *ctx, unsigned worker, uint64_t begin, uint64_t end);

/* threads: participants including the submitter; 1 starts no worker.
 * Returns NULL when memory runs out; if some threads cannot be started the
 * pool runs with fewer (cpu_pool_threads() says how many). */
struct cpu_pool *cpu_pool_create(unsigned threads);
void cpu_pool_destroy(struct cpu_pool *pool);
unsigned cpu_pool_threads(const struct cpu_pool *pool);

/* Run fn over [0, n) in chunks of grain (0: one chunk per participant).
 * Returns when every chunk is done.  Small jobs (one chunk) run inline. */
void cpu_pool_run(struct cpu_pool *pool, uint64_t n, uint64_t grain, cpu_task_fn fn, void *ctx);

#define CPU_POOL_MAX_THREADS 256

/* The number of participants to use by default: KVRT_CPU_THREADS when set,
 * else the CPUs this process may run on.  Returns false, with *bad the
 * value, when KVRT_CPU_THREADS is set but not a whole number 1..256: a
 * thread count kvrt cannot honour is an error, not a silent default. */
bool cpu_pool_default_threads(unsigned *threads, const char **bad);

#endif
