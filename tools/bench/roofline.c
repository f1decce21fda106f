/*
 * The physical limits an op is rated against, measured with as many threads
 * as the backend's op uses: memcpy (every move reads and writes) and a
 * streaming read (decode only reads the cache; a read streams ~1.8x faster
 * than a copy on the machines this runs on, so rating decode against memcpy
 * flatters it).  kvrt bench (bench_ops.c) and bench/bench-cpu.c time one
 * of each next to every repetition of every op, so a machine whose bandwidth
 * moves during the run (shared hosts, frequency changes) moves both sides of
 * the ratio together.  One implementation, one thread policy: both
 * benchmarks rate an op against the roofline of as many threads as the op.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "roofline.h"

struct roof_slice {
    const uint8_t *src;
    uint8_t *dst;
    size_t bytes;
    uint64_t sum;
};

static void *copy_slice(void *arg)
{
    struct roof_slice *s = arg;
    memcpy(s->dst, s->src, s->bytes);
    return NULL;
}

/* Eight independent sums: the loads, not an add chain, set the pace. */
static void *read_slice(void *arg)
{
    struct roof_slice *s = arg;
    const uint64_t *p = (const uint64_t *)(const void *)s->src;
    const size_t n = s->bytes / 8;
    uint64_t a[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            a[j] += p[i + (size_t)j];
    for (; i < n; i++)
        a[0] += p[i];
    s->sum = a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
    return NULL;
}

static double roof_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

unsigned bench_roof_threads(void)
{
    const char *env = getenv("KVRT_CPU_THREADS");
    long n = env ? strtol(env, NULL, 10) : 0;
    if (n < 1)
        n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    return n > BENCH_ROOF_MAX_THREADS ? BENCH_ROOF_MAX_THREADS : (unsigned)n;
}

int bench_roof_init(struct bench_roof *r, uint64_t bytes, unsigned threads)
{
    memset(r, 0, sizeof(*r));
    bytes = (bytes + 63) & ~(uint64_t)63;
    r->src = aligned_alloc(64, bytes);
    r->dst = aligned_alloc(64, bytes);
    if (!r->src || !r->dst) {
        bench_roof_free(r);
        return -1;
    }
    /* Fault every page in before timing, and keep the data non-trivial. */
    memset(r->src, 0x5a, bytes);
    memset(r->dst, 0, bytes);
    r->bytes = bytes;
    r->threads = threads ? threads : 1;
    return 0;
}

void bench_roof_free(struct bench_roof *r)
{
    free(r->src);
    free(r->dst);
    r->src = r->dst = NULL;
}

/* One pass of fn over the buffer, cut into r->threads cache-line-aligned
 * slices; the caller's thread takes the first.  Returns seconds. */
static double run_pass(struct bench_roof *r, void *(*fn)(void *))
{
    struct roof_slice s[BENCH_ROOF_MAX_THREADS];
    pthread_t tid[BENCH_ROOF_MAX_THREADS];
    bool started[BENCH_ROOF_MAX_THREADS] = {false};
    memset(s, 0, sizeof(s));
    const unsigned t = r->threads < 1 ? 1 : r->threads > BENCH_ROOF_MAX_THREADS ? BENCH_ROOF_MAX_THREADS : r->threads;
    const size_t lines = r->bytes / 64;
    for (unsigned i = 0; i < t; i++) {
        size_t a = lines * i / t, b = lines * (i + 1) / t;
        s[i] = (struct roof_slice){r->src + a * 64, r->dst + a * 64, (b - a) * 64, 0};
    }
    double t0 = roof_now();
    for (unsigned i = 1; i < t; i++)
        started[i] = pthread_create(&tid[i], NULL, fn, &s[i]) == 0;
    fn(&s[0]);
    for (unsigned i = 1; i < t; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            fn(&s[i]); /* no thread: do its share here */
    }
    double sec = roof_now() - t0;
    for (unsigned i = 0; i < t; i++)
        r->sink ^= s[i].sum;
    r->src[r->sink % r->bytes] ^= r->dst[(r->sink * 4099) % r->bytes]; /* the copy is used */
    return sec;
}

double bench_roof_copy_pass(struct bench_roof *r)
{
    return run_pass(r, copy_slice);
}

double bench_roof_read_pass(struct bench_roof *r)
{
    return run_pass(r, read_slice);
}

static double gbps(uint64_t bytes, double seconds)
{
    return seconds > 0 ? (double)bytes / seconds / 1e9 : 0;
}

void bench_roof_sample(struct bench_roof *r)
{
    double cg = gbps(r->bytes, bench_roof_copy_pass(r)), sg = gbps(r->bytes, bench_roof_read_pass(r));
    r->memcpy_gbps = cg > r->memcpy_gbps ? cg : r->memcpy_gbps;
    r->read_gbps = sg > r->read_gbps ? sg : r->read_gbps;
}
