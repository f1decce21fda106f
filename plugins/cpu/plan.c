/*
 * kvrt CPU backend — block plans (see plan.h).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "move.h"
#include "plan.h"

/* One axis of a layer's manager-block page: extent, byte stride in the
 * cache, byte stride in the staging order. */
struct axis {
    uint64_t extent;
    uint64_t stride;
    uint64_t stage;
};

struct builder {
    struct cpu_plan *plan;
    bool staged; /* staging offsets matter (gather/scatter), not for copy */
    bool oom;
};

static void push(struct builder *b, uint64_t cache_off, uint64_t cache_step, uint64_t stage_off, uint64_t stage_step,
                 uint64_t len, uint64_t count, uint64_t block_stride)
{
    struct cpu_plan *p = b->plan;
    const bool staged = b->staged;

    /* A repeat whose pieces touch on both sides is a single run. */
    if (count > 1 && cache_step == len && (!staged || stage_step == len)) {
        len *= count;
        count = 1;
    }
    if (p->count > 0) {
        struct cpu_run *last = &p->runs[p->count - 1];
        const bool same_block = last->block_stride == block_stride;
        const uint64_t last_end = last->cache_off + (last->count - 1) * last->cache_step + last->len;
        if (same_block && count == 1 && last->count == 1 && cache_off == last_end &&
            (!staged || stage_off == last->stage_off + last->len)) {
            last->len += len;
            return;
        }
        if (same_block && count == 1 && len == last->len) {
            if (last->count == 1 && cache_off > last->cache_off && (!staged || stage_off > last->stage_off)) {
                last->cache_step = cache_off - last->cache_off;
                last->stage_step = staged ? stage_off - last->stage_off : 0;
                last->count = 2;
                return;
            }
            if (last->count > 1 && cache_off == last->cache_off + last->count * last->cache_step &&
                (!staged || stage_off == last->stage_off + last->count * last->stage_step)) {
                last->count++;
                return;
            }
        }
    }
    if (p->count == p->capacity) {
        size_t cap = p->capacity ? 2 * p->capacity : 16;
        struct cpu_run *runs = realloc(p->runs, cap * sizeof(*runs));
        if (!runs) {
            b->oom = true;
            return;
        }
        p->runs = runs;
        p->capacity = cap;
    }
    p->runs[p->count++] = (struct cpu_run){
        .cache_off = cache_off,
        .cache_step = cache_step,
        .block_stride = block_stride,
        .stage_off = staged ? stage_off : 0,
        .stage_step = staged ? stage_step : 0,
        .len = len,
        .count = count,
    };
}

static uint64_t sort_key(struct axis a)
{
    return a.extent == 1 ? UINT64_MAX : a.stride;
}

/* Enumerate one layer's page of a manager block, axes outermost first; the
 * innermost axis goes in as one repeated run. */
static void add_layer(struct builder *b, const struct kvrt_plugin_layer *ly, uint64_t stage_base,
                      const struct axis ax[3])
{
    const uint64_t c = ly->content_bytes;
    const uint64_t block_stride = ly->blocks_per_block * ly->stride_block;
    for (uint64_t i0 = 0; i0 < ax[0].extent; i0++)
        for (uint64_t i1 = 0; i1 < ax[1].extent; i1++) {
            uint64_t off = ly->offset + i0 * ax[0].stride + i1 * ax[1].stride;
            uint64_t st = stage_base + i0 * ax[0].stage + i1 * ax[1].stage;
            push(b, off, ax[2].stride, st, ax[2].stage, c, ax[2].extent, block_stride);
        }
}

int cpu_plan_build(const struct kvrt_plugin_cache *cache, enum cpu_plan_order order, struct cpu_plan *out,
                   kvrt_plugin_error *err)
{
    memset(out, 0, sizeof(*out));
    struct builder b = {.plan = out, .staged = order != CPU_PLAN_COPY};
    uint64_t stage_base = 0;

    for (uint64_t l = 0; l < cache->num_layers && !b.oom; l++) {
        const struct kvrt_plugin_layer *ly = &cache->layers[l];
        const uint64_t c = ly->content_bytes, nm = ly->blocks_per_block * ly->states;
        /* The manager block's sub-blocks (u), heads (h), states (n); the
         * staging order is [h][u, n][c]. */
        struct axis u = {ly->blocks_per_block, ly->stride_block, ly->states * c};
        struct axis h = {ly->head_slots, ly->stride_head, nm * c};
        struct axis n = {ly->states, ly->stride_state, c};
        struct axis ax[3];
        if (order == CPU_PLAN_STAGING) {
            ax[0] = h, ax[1] = u, ax[2] = n;
        } else {
            /* Memory order: larger strides outside.  Extent-1 axes go
             * outermost so the innermost axis is a real one. */
            ax[0] = u, ax[1] = h, ax[2] = n;
            for (int i = 0; i < 3; i++)
                for (int j = 0; j + 1 < 3 - i; j++)
                    if (sort_key(ax[j]) < sort_key(ax[j + 1])) {
                        struct axis t = ax[j];
                        ax[j] = ax[j + 1];
                        ax[j + 1] = t;
                    }
        }
        add_layer(&b, ly, stage_base, ax);
        stage_base += ly->head_slots * nm * c;
    }
    if (b.oom) {
        cpu_plan_free(out);
        return cpu_fail(err, KVRT_ERR_NOMEM, "cannot allocate the block plan for %llu layers",
                        (unsigned long long)cache->num_layers);
    }
    uint64_t first = 0;
    for (size_t i = 0; i < out->count; i++) {
        out->runs[i].first = first;
        first += out->runs[i].len * out->runs[i].count;
    }
    out->block_bytes = first;
    return KVRT_OK;
}

void cpu_plan_free(struct cpu_plan *plan)
{
    free(plan->runs);
    memset(plan, 0, sizeof(*plan));
}

struct plan_job {
    const struct cpu_plan *plan;
    enum cpu_move mode;
    unsigned char *cache;
    unsigned char *staging;
    const int64_t *ids;
    bool stream; /* non-temporal stores: the move is bigger than the LLC */
};

/* Runs up to this long, in whole cache lines, are copied inline. */
#define SHORT_RUN 2048u

/* count pieces of len bytes (a multiple of 64), dst and src stepping apart. */
static void copy_cells(unsigned char *dst, uint64_t dst_step, const unsigned char *src, uint64_t src_step, uint64_t len,
                       uint64_t count, bool stream)
{
    /* Streamed cells must start 16-byte aligned (cache and staging buffers
     * are 64-byte aligned; an odd staging offset takes the plain path). */
    if (stream && ((uintptr_t)dst & 15) == 0 && (dst_step & 15) == 0) {
        for (uint64_t i = 0; i < count; i++, dst += dst_step, src += src_step)
            cpu_move_stream(dst, src, len);
        return;
    }
    for (uint64_t i = 0; i < count; i++, dst += dst_step, src += src_step)
        for (uint64_t b = 0; b < len; b += 64)
            memcpy(dst + b, src + b, 64); /* a fixed size: inlined moves */
}

/* The run holding byte `rem` of a block: the last run with first <= rem. */
static size_t find_run(const struct cpu_plan *p, uint64_t rem)
{
    size_t lo = 0, hi = p->count;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->runs[mid].first <= rem)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Bytes [begin, end) of the stream "item 0's block, item 1's block, ...". */
static void plan_task(void *ctx, unsigned worker, uint64_t begin, uint64_t end)
{
    const struct plan_job *job = ctx;
    const struct cpu_plan *p = job->plan;
    (void)worker;

    uint64_t item = begin / p->block_bytes;
    uint64_t rem = begin % p->block_bytes;
    size_t r = find_run(p, rem);
    rem -= p->runs[r].first;
    uint64_t rep = rem / p->runs[r].len;
    uint64_t off = rem % p->runs[r].len;

    for (uint64_t pos = begin; pos < end;) {
        const struct cpu_run *run = &p->runs[r];
        /* Whole repeats of a short run (a transposed [N, H, C] page moves
         * cell by cell): a tight loop of inlined copies instead of one
         * generic step and one memcpy call per cell, which measured about a
         * third slower. */
        if (off == 0 && run->count > 1 && run->len % 64 == 0 && run->len <= SHORT_RUN && job->mode != CPU_MOVE_COPY) {
            uint64_t reps = (end - pos) / run->len;
            if (reps > run->count - rep)
                reps = run->count - rep;
            if (reps > 0) {
                unsigned char *block = job->cache + (uint64_t)job->ids[item] * run->block_stride;
                unsigned char *c = block + run->cache_off + rep * run->cache_step;
                unsigned char *s = job->staging + item * p->block_bytes + run->stage_off + rep * run->stage_step;
                if (job->mode == CPU_MOVE_GATHER)
                    copy_cells(s, run->stage_step, c, run->cache_step, run->len, reps, job->stream);
                else
                    copy_cells(c, run->cache_step, s, run->stage_step, run->len, reps, job->stream);
                pos += reps * run->len;
                rep += reps;
                if (rep == run->count) {
                    rep = 0;
                    if (++r == p->count) {
                        r = 0;
                        item++;
                    }
                }
                continue;
            }
        }
        uint64_t n = run->len - off;
        if (n > end - pos)
            n = end - pos;
        uint64_t in_block = run->cache_off + rep * run->cache_step + off;
        switch (job->mode) {
        case CPU_MOVE_GATHER:
        case CPU_MOVE_SCATTER: {
            unsigned char *block = job->cache + (uint64_t)job->ids[item] * run->block_stride;
            unsigned char *c = block + in_block;
            unsigned char *s = job->staging + item * p->block_bytes + run->stage_off + rep * run->stage_step + off;
            if (job->mode == CPU_MOVE_GATHER)
                cpu_move(s, c, n, job->stream);
            else
                cpu_move(c, s, n, job->stream);
            break;
        }
        case CPU_MOVE_COPY: {
            uint64_t src = (uint64_t)job->ids[2 * item], dst = (uint64_t)job->ids[2 * item + 1];
            if (src != dst)
                cpu_move(job->cache + dst * run->block_stride + in_block,
                         job->cache + src * run->block_stride + in_block, n, job->stream);
            break;
        }
        }
        pos += n;
        off += n;
        if (off == run->len) {
            off = 0;
            if (++rep == run->count) {
                rep = 0;
                if (++r == p->count) {
                    r = 0;
                    item++;
                }
            }
        }
    }
    if (job->stream)
        cpu_move_fence();
}

void cpu_plan_run(kvrt_plugin_device *dev, const struct cpu_plan *plan, enum cpu_move mode, unsigned char *cache,
                  unsigned char *staging, const int64_t *ids, uint64_t items)
{
    if (items == 0 || plan->block_bytes == 0)
        return;
    uint64_t total = items * plan->block_bytes;
    struct plan_job job = {plan, mode, cache, staging, ids, total > dev->llc_bytes};
    /* Several chunks per thread, none too small to be worth a wake-up: a
     * thread the scheduler holds back leaves its share to the others. */
    uint64_t grain = total / ((uint64_t)8 * cpu_threads(dev)) + 1;
    if (grain < CPU_PARALLEL_MIN_BYTES)
        grain = CPU_PARALLEL_MIN_BYTES;
    cpu_pool_run(dev->pool, total, grain, plan_task, &job);
}

enum { MARK_READ = 1, MARK_WRITTEN = 2 };

void cpu_plan_run_ordered(kvrt_plugin_device *dev, const struct cpu_plan *plan, enum cpu_move mode,
                          unsigned char *cache, unsigned char *staging, const int64_t *ids, uint64_t items,
                          uint64_t num_blocks)
{
    /* Per item: the block it reads (copy only) and the block it writes. */
    const uint64_t per_item = mode == CPU_MOVE_COPY ? 2 : 1;
    uint64_t stage_step = mode == CPU_MOVE_COPY ? 0 : plan->block_bytes;
    unsigned char *marks = calloc(num_blocks ? num_blocks : 1, 1);
    if (!marks) {
        /* Still correct, only slower: one item at a time. */
        for (uint64_t i = 0; i < items; i++)
            cpu_plan_run(dev, plan, mode, cache, staging ? staging + i * stage_step : NULL, ids + per_item * i, 1);
        return;
    }

    uint64_t start = 0;
    for (uint64_t i = 0; i <= items; i++) {
        bool flush = i == items;
        if (!flush) {
            const int64_t *it = ids + per_item * i;
            uint64_t dst = (uint64_t)it[per_item - 1];
            flush = (marks[dst] & (MARK_READ | MARK_WRITTEN)) || (per_item == 2 && (marks[it[0]] & MARK_WRITTEN));
        }
        if (flush) {
            cpu_plan_run(dev, plan, mode, cache, staging ? staging + start * stage_step : NULL, ids + per_item * start,
                         i - start);
            for (uint64_t j = start * per_item; j < i * per_item; j++)
                marks[ids[j]] = 0;
            start = i;
        }
        if (i < items) {
            const int64_t *it = ids + per_item * i;
            if (per_item == 2)
                marks[it[0]] |= MARK_READ;
            marks[it[per_item - 1]] |= MARK_WRITTEN;
        }
    }
    free(marks);
}
