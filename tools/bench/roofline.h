/*
 * The physical limits a CPU-side op is rated against, measured in the same
 * run as the op: memcpy (every move reads and writes its bytes) and a
 * streaming read (decode only reads the cache), each with as many threads
 * as the op uses.  Shared by kvrt bench and bench/bench-cpu.c.
 */
#ifndef KVRT_TOOLS_ROOFLINE_H
#define KVRT_TOOLS_ROOFLINE_H

#include <stdint.h>

#define BENCH_ROOF_MAX_THREADS 256

struct bench_roof {
    uint8_t *src, *dst;
    uint64_t bytes;
    unsigned threads;
    uint64_t sink;
    double memcpy_gbps, read_gbps; /* best of the samples so far */
};

/* The threads the CPU backend's ops use: KVRT_CPU_THREADS, else the online
 * CPUs. */
unsigned bench_roof_threads(void);

/* Buffers of `bytes` (rounded up to a cache line), faulted in; -1 when
 * they cannot be allocated. */
int bench_roof_init(struct bench_roof *r, uint64_t bytes, unsigned threads);
void bench_roof_free(struct bench_roof *r);

/* One copy pass and one read pass; keeps the best GB/s of each. */
void bench_roof_sample(struct bench_roof *r);

/* One pass of each alone, in seconds, for callers that keep every sample
 * (a median) or flush caches in between. */
double bench_roof_copy_pass(struct bench_roof *r);
double bench_roof_read_pass(struct bench_roof *r);

#endif
