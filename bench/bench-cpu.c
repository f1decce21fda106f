/*
 * bench-cpu — bandwidth of the CPU backend's operations, per layout, next to
 * memcpy on the same machine.  Not a test: the numbers justify the layout
 * preference order in plugins/cpu/plugin.c (see plugins/cpu/README.md).
 *
 *   bench-cpu [module.so] [--reps N] [--layout NAME] [--op NAME] [--warm] [--median]
 *
 * Shapes: bf16, 8 KV heads, head size 128 (K and V), 16-token blocks, 4
 * layers.  write/read: 4096 tokens of one layer; copy: 64 block pairs;
 * gather/scatter: 64 blocks; decode: 16 sequences x 2048 tokens, 32 query
 * heads.  Bandwidth counts bytes of cache touched: written (write), read
 * (read, decode K+V), moved (copy, gather, scatter).  Every repetition starts
 * with cold caches (a 64 MiB buffer is rewritten first).  The roofline of
 * the same bytes (tools/bench/roofline.c, the one kvrt bench uses: memcpy
 * for moves, a streaming read for decode, as many threads as the backend's
 * ops) is timed alternately with each op, and the best of the runs of each
 * is reported (--median for the median): on a shared machine the best run
 * is the least disturbed one.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <kvrt/layout.h>
#include <kvrt/plugin.h>

#include "roofline.h"

#ifndef KVRT_CPU_MODULE_PATH
#define KVRT_CPU_MODULE_PATH "kvrt-cpu.so"
#endif

enum { L = 4, H = 8, D = 128, BLOCK = 16, ELEM = 2, NUM_BLOCKS = 2304 };
enum { WRITE_TOKENS = 4096, COPY_PAIRS = 64, GATHER_BLOCKS = 64 };
enum { DEC_SEQS = 16, DEC_LEN = 2048, DEC_QHEADS = 32 };
#define C ((uint64_t)(2 * D * ELEM))
#define PAGE ((uint64_t)H * BLOCK * C)
#define FLUSH_BYTES (64u << 20)

static const struct kvrt_plugin_descriptor *desc;
static kvrt_plugin_device *dev;
static kvrt_plugin_error err;
static unsigned char *flush_buf;
static int reps = 11;
static int warm;       /* --warm: skip the cache flush (compute cost only) */
static int use_median; /* --median: report the median instead of the best run */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void flush_caches(void)
{
    static unsigned char v;
    if (warm)
        return;
    memset(flush_buf, ++v, FLUSH_BYTES);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void check(int rc, const char *what)
{
    if (rc != KVRT_OK) {
        fprintf(stderr, "bench-cpu: %s failed (%d): %s\n", what, rc, err.message);
        exit(1);
    }
}

static kvrt_plugin_buffer *alloc_buf(uint64_t bytes)
{
    kvrt_plugin_buffer *b;
    check(desc->buffer_alloc(dev, bytes, &b, &err), "buffer_alloc");
    /* Touch every page so first-touch faults are not measured. */
    check(desc->buffer_zero(dev, b, 0, bytes, &err), "buffer_zero");
    return b;
}

/* [L, B, H, N, C] byte strides of a dense cache in the given layout. */
static void cache_for_layout(int layout, struct kvrt_plugin_cache *cache, struct kvrt_plugin_layer layers[L])
{
    const uint64_t extent[5] = {L, NUM_BLOCKS, H, BLOCK, C};
    uint64_t stride[5], s = 1;
    /* The core's layout table, not a copy of it. */
    int order[KVRT_NUM_AXES];
    if (kvrt_layout_stride_order((enum kvrt_layout)layout, order) != KVRT_OK) {
        fprintf(stderr, "bench-cpu: layout %d has no stride order\n", layout);
        exit(1);
    }
    for (int p = 4; p >= 0; p--) {
        int axis = order[p];
        stride[axis] = s;
        s *= extent[axis];
    }
    for (int l = 0; l < L; l++)
        layers[l] = (struct kvrt_plugin_layer){
            .size = sizeof(struct kvrt_plugin_layer),
            .kind = KVRT_SPEC_ATTENTION,
            .dtype = KVRT_DTYPE_BF16,
            .elem_size = ELEM,
            .offset = (uint64_t)l * stride[0],
            .num_view_blocks = NUM_BLOCKS,
            .blocks_per_block = 1,
            .view_block_tokens = BLOCK,
            .head_slots = H,
            .states = BLOCK,
            .content_bytes = C,
            .head_size = D,
            .head_size_v = D,
            .stride_block = stride[1],
            .stride_head = stride[2],
            .stride_state = stride[3],
        };
    *cache = (struct kvrt_plugin_cache){
        .size = sizeof(struct kvrt_plugin_cache),
        .layout = layout,
        .bytes = s,
        .num_blocks = NUM_BLOCKS,
        .block_size = BLOCK,
        .num_layers = L,
        .layers = layers,
    };
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void shuffle(int64_t *v, uint64_t n)
{
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = rng() % (i + 1);
        int64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

struct ctx {
    struct kvrt_plugin_cache cache;
    struct kvrt_plugin_layer layers[L];
    kvrt_plugin_buffer *cbuf, *k, *v, *stage, *q, *out;
    int64_t *slots, *blocks, *pairs;
    int32_t *tables, *lens;
};

static int run_op(struct ctx *x, const char *op)
{
    if (!strcmp(op, "write"))
        return desc->write(dev, &x->cache, x->cbuf, 1, WRITE_TOKENS, x->slots, x->k, 0, x->v, 0, &err);
    if (!strcmp(op, "read"))
        return desc->read(dev, &x->cache, x->cbuf, 1, WRITE_TOKENS, x->slots, x->k, 0, x->v, 0, &err);
    if (!strcmp(op, "copy"))
        return desc->copy_blocks(dev, &x->cache, x->cbuf, COPY_PAIRS, x->pairs, &err);
    if (!strcmp(op, "gather"))
        return desc->gather(dev, &x->cache, x->cbuf, GATHER_BLOCKS, x->blocks, x->stage, 0, &err);
    if (!strcmp(op, "scatter"))
        return desc->scatter(dev, &x->cache, x->cbuf, GATHER_BLOCKS, x->blocks, x->stage, 0, &err);
    struct kvrt_plugin_decode_args a = {
        .size = sizeof(a),
        .num_seqs = DEC_SEQS,
        .num_q_heads = DEC_QHEADS,
        .max_blocks_per_seq = DEC_LEN / BLOCK,
        .q = x->q,
        .out = x->out,
        .block_tables = x->tables,
        .seq_lens = x->lens,
        .scale = 1.0f / sqrtf((float)D),
    };
    return desc->decode(dev, &x->cache, x->cbuf, 1, &a, &err);
}

static uint64_t op_bytes(const char *op)
{
    if (!strcmp(op, "write") || !strcmp(op, "read"))
        return (uint64_t)WRITE_TOKENS * H * C;
    if (!strcmp(op, "copy"))
        return (uint64_t)COPY_PAIRS * L * PAGE;
    if (!strcmp(op, "gather") || !strcmp(op, "scatter"))
        return (uint64_t)GATHER_BLOCKS * L * PAGE;
    return (uint64_t)DEC_SEQS * DEC_LEN * H * C;
}

static void fill_random(kvrt_plugin_buffer *b, uint64_t bytes)
{
    /* Small finite bf16 values: decode must not see NaNs. */
    unsigned char *tmp = malloc(bytes);
    for (uint64_t i = 0; i + 1 < bytes; i += 2) {
        uint16_t h = (uint16_t)(0x3c00u + (rng() & 0x3ffu)); /* ~[0.0078, 0.0156) */
        if (rng() & 1)
            h |= 0x8000u;
        memcpy(tmp + i, &h, 2);
    }
    check(desc->buffer_upload(dev, b, 0, tmp, bytes, &err), "upload");
    free(tmp);
}

static const char *const ops[] = {"write", "read", "copy", "gather", "scatter", "decode"};

int main(int argc, char **argv)
{
    const char *path = KVRT_CPU_MODULE_PATH, *only_layout = NULL, *only_op = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layout") && i + 1 < argc)
            only_layout = argv[++i];
        else if (!strcmp(argv[i], "--warm"))
            warm = 1;
        else if (!strcmp(argv[i], "--median"))
            use_median = 1;
        else if (!strcmp(argv[i], "--op") && i + 1 < argc)
            only_op = argv[++i];
        else if (argv[i][0] != '-')
            path = argv[i];
        else {
            fprintf(stderr, "usage: %s [module.so] [--reps N] [--layout NAME] [--op NAME] [--warm] [--median]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 64)
        reps = 11;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "bench-cpu: %s\n", dlerror());
        return 1;
    }
    /* memcpy: ISO C has no cast from void * to a function pointer. */
    void *sym = dlsym(h, KVRT_PLUGIN_ENTRY_SYMBOL);
    kvrt_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof(entry));
    if (!entry) {
        fprintf(stderr, "bench-cpu: %s\n", dlerror());
        return 1;
    }
    desc = entry();
    flush_buf = malloc(FLUSH_BYTES);

    struct kvrt_plugin_bind_info bi = {sizeof(bi), KVRT_LAYOUT_LBHNC, NULL};
    check(desc->bind(&bi, &dev, &err), "bind");

    const unsigned threads = bench_roof_threads();
    printf("# kvrt-cpu %s, %s; bf16 H=%d D=%d block=%d L=%d; %s of %d cold runs\n", desc->version, path, H, D, BLOCK, L,
           use_median ? "median" : "best", reps);
    printf("# roof = memcpy (decode: streaming read) of the same bytes with %u thread%s, as the ops use;\n", threads,
           threads == 1 ? "" : "s");
    printf("#        timed alternately with the op\n");
    printf("# ratio = op GB/s / roof GB/s; cpu_ms = process CPU time of the op\n");
    printf("%-8s %-6s %9s %8s %8s %6s %8s\n", "op", "layout", "ms", "GB/s", "roof", "ratio", "cpu_ms");
    desc->unbind(dev);

    for (int lay = 0; lay < 6; lay++) {
        if (only_layout && strcmp(only_layout, kvrt_layout_name((enum kvrt_layout)lay)) != 0)
            continue;
        bi.layout = lay;
        check(desc->bind(&bi, &dev, &err), "bind");
        struct ctx x;
        memset(&x, 0, sizeof(x));
        cache_for_layout(lay, &x.cache, x.layers);
        x.cbuf = alloc_buf(x.cache.bytes);
        fill_random(x.cbuf, x.cache.bytes);
        uint64_t kbytes = (uint64_t)WRITE_TOKENS * H * D * ELEM;
        x.k = alloc_buf(kbytes);
        x.v = alloc_buf(kbytes);
        fill_random(x.k, kbytes);
        fill_random(x.v, kbytes);
        x.stage = alloc_buf((uint64_t)GATHER_BLOCKS * L * PAGE);
        x.q = alloc_buf((uint64_t)DEC_SEQS * DEC_QHEADS * D * ELEM);
        x.out = alloc_buf((uint64_t)DEC_SEQS * DEC_QHEADS * D * ELEM);
        fill_random(x.q, (uint64_t)DEC_SEQS * DEC_QHEADS * D * ELEM);

        int64_t perm[NUM_BLOCKS];
        for (int i = 0; i < NUM_BLOCKS; i++)
            perm[i] = i;
        shuffle(perm, NUM_BLOCKS);
        x.slots = malloc(WRITE_TOKENS * sizeof(int64_t));
        for (int t = 0; t < WRITE_TOKENS; t++)
            x.slots[t] = perm[t / BLOCK] * BLOCK + t % BLOCK;
        x.blocks = malloc(GATHER_BLOCKS * sizeof(int64_t));
        memcpy(x.blocks, perm, GATHER_BLOCKS * sizeof(int64_t));
        x.pairs = malloc((size_t)2 * COPY_PAIRS * sizeof(int64_t));
        for (int i = 0; i < COPY_PAIRS; i++) {
            x.pairs[(size_t)2 * i] = perm[i];
            x.pairs[2 * i + 1] = perm[COPY_PAIRS + i];
        }
        x.tables = malloc((size_t)DEC_SEQS * (DEC_LEN / BLOCK) * sizeof(int32_t));
        x.lens = malloc(DEC_SEQS * sizeof(int32_t));
        for (int s = 0; s < DEC_SEQS; s++) {
            x.lens[s] = DEC_LEN;
            for (int b = 0; b < DEC_LEN / BLOCK; b++)
                x.tables[s * (DEC_LEN / BLOCK) + b] = (int32_t)perm[s * (DEC_LEN / BLOCK) + b];
        }

        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            if (only_op && strcmp(only_op, ops[o]) != 0)
                continue;
            /* The roofline of the same bytes, timed alternately with the op,
             * so a busy or throttled machine moves both numbers together. */
            uint64_t bytes = op_bytes(ops[o]);
            const int reads_only = strcmp(ops[o], "decode") == 0;
            struct bench_roof roof;
            if (bench_roof_init(&roof, bytes, threads) != 0) {
                fprintf(stderr, "bench-cpu: cannot allocate 2 x %llu bytes for the roofline\n",
                        (unsigned long long)bytes);
                return 1;
            }
            double t_op[64] = {0}, t_mc[64] = {0}, t_cpu[64] = {0};
            check(run_op(&x, ops[o]), ops[o]); /* warm-up: code, page tables */
            for (int r = 0; r < reps; r++) {
                flush_caches();
                t_mc[r] = reads_only ? bench_roof_read_pass(&roof) : bench_roof_copy_pass(&roof);
                flush_caches();
                double c0 = cpu_now();
                double t0 = now();
                check(run_op(&x, ops[o]), ops[o]);
                t_op[r] = now() - t0;
                t_cpu[r] = cpu_now() - c0;
            }
            qsort(t_op, (size_t)reps, sizeof(double), cmp_double);
            qsort(t_mc, (size_t)reps, sizeof(double), cmp_double);
            qsort(t_cpu, (size_t)reps, sizeof(double), cmp_double);
            /* The best run is the one least disturbed by other processes;
             * both sides are treated alike. */
            int pick = use_median ? reps / 2 : 0;
            double gbs = (double)bytes / t_op[pick] / 1e9;
            double mcs = (double)bytes / t_mc[pick] / 1e9;
            printf("%-8s %-6s %9.3f %8.2f %8.2f %6.2f %8.3f\n", ops[o], kvrt_layout_name((enum kvrt_layout)lay),
                   t_op[pick] * 1e3, gbs, mcs, gbs / mcs, t_cpu[pick] * 1e3);
            fflush(stdout);
            bench_roof_free(&roof);
        }
        kvrt_plugin_buffer *bufs[] = {x.cbuf, x.k, x.v, x.stage, x.q, x.out};
        for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
            desc->buffer_free(dev, bufs[i]);
        free(x.slots);
        free(x.blocks);
        free(x.pairs);
        free(x.tables);
        free(x.lens);
        desc->unbind(dev);
    }
    free(flush_buf);
    return 0;
}
