/*
 * kvrt bench: each operation's throughput on a backend and layout, next to
 * the machine's memcpy measured in the same run.
 *
 *   bench_ops.c   the measurements (one cache per layout)
 *   bench_plot.c  the bar chart (--plot)
 *   cli_bench.c   the command
 */
#ifndef KVRT_TOOLS_BENCH_H
#define KVRT_TOOLS_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include <kvrt/runtime.h>

#include "cli.h"

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
    unsigned repeat;        /* timed repetitions after one warm-up */
};

struct bench_result {
    const char *backend;
    enum bench_op op;
    enum kvrt_layout layout;
    enum kvrt_dtype dtype;
    bool skipped;
    char reason[384];
    uint64_t bytes;         /* per repetition */
    double best_s, median_s;
    double roofline_gbps;   /* the backend's own copy roofline; 0: none (memcpy) */
};

double bench_gbps(uint64_t bytes, double seconds);

/* Host memcpy bandwidth: `bytes` per copy, best of `repeat` after a warm-up. */
double bench_memcpy_gbps(uint64_t bytes, unsigned repeat);

/* Measure the ops marked in `ops` on one bound backend; out[op] for each.
 * Returns a CLI exit status (error printed). */
int bench_layout(kvrt_backend *b, const struct bench_shape *sh, const bool ops[BENCH_NUM_OPS],
                 struct bench_result out[BENCH_NUM_OPS], struct cli_progress *progress,
                 uint64_t *steps_done, uint64_t steps_total);

/* A bar chart of GB/s per layout and op, with the memcpy line. */
int bench_plot_svg(const char *path, double memcpy_gbps, const struct bench_result *r, size_t n);

#endif
