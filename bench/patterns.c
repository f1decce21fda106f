/*
 * bench/patterns.c — the memory access patterns of kvrt's block moves,
 * without kvrt, next to the memcpy roofline of `kvrt bench` (one 256 MiB
 * libc memcpy).  Evidence for the CPU-backend recommendations in
 * BENCHMARKS.md; not part of the build.
 *
 *   cc -O2 -mavx2 -pthread bench/patterns.c -o /tmp/patterns && /tmp/patterns [rounds]
 *
 * Moves 1024 random 64 KiB pages (256 blocks x 4 layers of the benchmark
 * shape: 8 heads x 16 tokens x 512-byte cells) out of a 512 MiB cache into a
 * packed staging buffer, on 2 threads, six ways:
 *   page/memcpy      one memcpy per page (an [H, N, C] page: LBHNC gather)
 *   page/stream      the same with non-temporal (streaming) stores
 *   nhc/staging+mc   an [N, H, C] page transposed cell by cell in staging
 *                    order with memcpy (what kvrt-cpu's plan does today)
 *   nhc/staging+st   the same with streaming stores
 *   nhc/cache+mc     the transposition walked in cache (memory) order, memcpy
 *   nhc/cache+st     the same with streaming stores
 * Each round runs every variant once (interleaved, so they share the
 * machine's load); best and median GB/s and the ratio of the best to the
 * best memcpy are printed.
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE 65536u
#define CELL 512u
#define HEADS 8u
#define TOKENS 16u
#define CACHE_PAGES 8192u
#define MOVED 1024u
#define THREADS 2
#define ROOF (256u << 20)

static unsigned char *cache, *stage, *roof_src, *roof_dst;
static unsigned ids[MOVED];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void stream_copy(unsigned char *d, const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(s + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(s + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(s + i + 64));
        __m256i e = _mm256_loadu_si256((const __m256i *)(s + i + 96));
        _mm256_stream_si256((__m256i *)(d + i), a);
        _mm256_stream_si256((__m256i *)(d + i + 32), b);
        _mm256_stream_si256((__m256i *)(d + i + 64), c);
        _mm256_stream_si256((__m256i *)(d + i + 96), e);
    }
}

enum variant {
    PAGE_MEMCPY,
    PAGE_STREAM,
    NHC_STAGING_MEMCPY,
    NHC_STAGING_STREAM,
    NHC_CACHE_MEMCPY,
    NHC_CACHE_STREAM,
    NUM_VARIANTS
};
static const char *const names[NUM_VARIANTS] = {"page/memcpy",    "page/stream",  "nhc/staging+mc",
                                                "nhc/staging+st", "nhc/cache+mc", "nhc/cache+st"};

struct task {
    unsigned begin, end;
    enum variant v;
};

static void *work(void *arg)
{
    const struct task *t = arg;
    for (unsigned g = t->begin; g < t->end; g++) {
        const unsigned char *s = cache + (size_t)ids[g] * PAGE;
        unsigned char *d = stage + (size_t)g * PAGE;
        switch (t->v) {
        case PAGE_MEMCPY: memcpy(d, s, PAGE); break;
        case PAGE_STREAM: stream_copy(d, s, PAGE); break;
        case NHC_STAGING_MEMCPY: /* staging [h][n] <- cache [n][h] */
        case NHC_STAGING_STREAM:
            for (unsigned h = 0; h < HEADS; h++)
                for (unsigned n = 0; n < TOKENS; n++) {
                    unsigned char *dc = d + (h * TOKENS + n) * CELL;
                    const unsigned char *sc = s + (n * HEADS + h) * CELL;
                    if (t->v == NHC_STAGING_MEMCPY)
                        memcpy(dc, sc, CELL);
                    else
                        stream_copy(dc, sc, CELL);
                }
            break;
        case NHC_CACHE_MEMCPY:
        case NHC_CACHE_STREAM:
            for (unsigned n = 0; n < TOKENS; n++)
                for (unsigned h = 0; h < HEADS; h++) {
                    unsigned char *dc = d + (h * TOKENS + n) * CELL;
                    const unsigned char *sc = s + (n * HEADS + h) * CELL;
                    if (t->v == NHC_CACHE_MEMCPY)
                        memcpy(dc, sc, CELL);
                    else
                        stream_copy(dc, sc, CELL);
                }
            break;
        default: break;
        }
    }
    _mm_sfence();
    return NULL;
}

static double run(enum variant v)
{
    pthread_t th[THREADS];
    struct task t[THREADS];
    double t0 = now();
    for (unsigned i = 0; i < THREADS; i++) {
        t[i] = (struct task){MOVED / THREADS * i, MOVED / THREADS * (i + 1), v};
        pthread_create(&th[i], NULL, work, &t[i]);
    }
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    return (double)MOVED * PAGE / (now() - t0) / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 9;
    if (rounds < 1 || rounds > 1000)
        rounds = 9;
    cache = aligned_alloc(4096, (size_t)CACHE_PAGES * PAGE);
    stage = aligned_alloc(4096, (size_t)MOVED * PAGE);
    roof_src = aligned_alloc(4096, ROOF);
    roof_dst = aligned_alloc(4096, ROOF);
    if (!cache || !stage || !roof_src || !roof_dst)
        return 1;
    memset(cache, 1, (size_t)CACHE_PAGES * PAGE);
    memset(stage, 0, (size_t)MOVED * PAGE);
    memset(roof_src, 2, ROOF);
    memset(roof_dst, 0, ROOF);
    srand(1);
    for (unsigned i = 0; i < MOVED; i++)
        ids[i] = (unsigned)rand() % CACHE_PAGES;

    double *r[NUM_VARIANTS + 1];
    for (int v = 0; v <= NUM_VARIANTS; v++)
        r[v] = calloc((size_t)rounds, sizeof(double));
    for (int i = 0; i < rounds; i++) {
        double t0 = now();
        memcpy(roof_dst, roof_src, ROOF);
        r[NUM_VARIANTS][i] = ROOF / (now() - t0) / 1e9;
        for (int v = 0; v < NUM_VARIANTS; v++)
            r[v][i] = run((enum variant)v);
    }
    for (int v = 0; v <= NUM_VARIANTS; v++)
        qsort(r[v], (size_t)rounds, sizeof(double), cmp);
    const double roof = r[NUM_VARIANTS][rounds - 1];
    printf("memcpy 256 MiB, 1 thread: best %.2f GB/s, median %.2f GB/s (%d rounds)\n", roof,
           r[NUM_VARIANTS][rounds / 2], rounds);
    for (int v = 0; v < NUM_VARIANTS; v++)
        printf("%-18s best %6.2f GB/s  median %6.2f GB/s  best/memcpy %.2f\n", names[v], r[v][rounds - 1],
               r[v][rounds / 2], r[v][rounds - 1] / roof);
    return 0;
}
