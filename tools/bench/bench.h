/*
 * kvrt bench: each operation's throughput on a backend and layout, next to
 * the machine's memcpy measured in the same run.
 *
 *   bench_ops.c   the measurements (one cache per layout)
 *   bench_plot.c  the bar chart (--plot)
 *   roofline.c    memcpy and streaming read, timed next to each op
 *   cli_bench.c   the command
 */
#ifndef KVRT_TOOLS_BENCH_H
#define KVRT_TOOLS_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include <kvrt/runtime.h>

#include "cli.h"
#include "roofline.h"

enum bench_op { BENCH_WRITE, BENCH_READ, BENCH_COPY, BENCH_GATHER, BENCH_SCATTER, BENCH_DECODE, BENCH_NUM_OPS };

extern const char *const bench_op_names[BENCH_NUM_OPS];

struct bench_shape {
    enum kvrt_dtype dtype;
    uint64_t kv_heads, head_size, block_size, layers;
    uint64_t tokens;        /* write, read */
    uint64_t pairs;         /* copy */
    uint64_t blocks;        /* gather, scatter */
    uint64_t seqs, context; /* decode */
    uint64_t q_heads;
    unsigned repeat; /* timed repetitions after one warm-up */
};

/* The roofline an op's ratio uses: decode only reads the cache (read),
 * every other op moves bytes (memcpy). */
enum bench_roofline { BENCH_ROOF_MEMCPY, BENCH_ROOF_READ };

struct bench_result {
    const char *backend;
    enum bench_op op;
    enum kvrt_layout layout;
    enum kvrt_dtype dtype;
    bool skipped;
    char reason[384];
    uint64_t bytes; /* per repetition */
    double best_s, median_s;
    /* Best of the samples timed between this op's repetitions. */
    double memcpy_gbps, read_gbps;
    enum bench_roofline roofline;
    double roofline_gbps; /* the backend's own copy roofline; 0: none (memcpy) */
};

double bench_gbps(uint64_t bytes, double seconds);

/* The GB/s of the roofline that bounds r, and r's ratio to it (0 if none). */
double bench_roof_gbps(const struct bench_result *r);
double bench_ratio(const struct bench_result *r);
extern const char *const bench_roofline_names[2];

/* Measure the ops marked in `ops` on one bound backend; out[op] for each.
 * Returns a CLI exit status (error printed). */
int bench_layout(kvrt_backend *b, const struct bench_shape *sh, const bool ops[BENCH_NUM_OPS],
                 struct bench_result out[BENCH_NUM_OPS], struct cli_progress *progress, uint64_t *steps_done,
                 uint64_t steps_total);

/* A bar chart of GB/s per layout and op, with the memcpy line. */
int bench_plot_svg(const char *path, double memcpy_gbps, const struct bench_result *r, size_t n);

#endif
