/*
 * The measurements.  Each op runs once to warm up (first touch of pages,
 * kernel builds), then `repeat` times; the best and the median are kept.
 * Bytes counted per repetition (also in `kvrt bench --help`):
 *   write, read      layers x tokens x heads x (D + Dv) x element size
 *   copy             pairs x bytes of one block across all layers
 *   gather, scatter  the staging bytes: blocks x pages of every layer
 *   decode           one layer: seqs x context x heads x (D + Dv) x element size
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/placement.h>
#include <kvrt/plugin.h>

#include "bench.h"
#include "numeric.h"

const char *const bench_op_names[BENCH_NUM_OPS] = {"write", "read", "copy_blocks", "gather", "scatter", "decode"};
const char *const bench_roofline_names[2] = {"memcpy", "read"};

/* Roofline buffers are at least this big, beyond any last-level cache the
 * project's machines have, so the limit is memory's, as the op's is. */
#define ROOF_MIN_BYTES (64ull << 20)

double bench_roof_gbps(const struct bench_result *r)
{
    return r->roofline == BENCH_ROOF_READ ? r->read_gbps : r->memcpy_gbps;
}

double bench_ratio(const struct bench_result *r)
{
    const double roof = bench_roof_gbps(r);
    return roof > 0 ? bench_gbps(r->bytes, r->best_s) / roof : 0;
}

double bench_gbps(uint64_t bytes, double seconds)
{
    return seconds > 0 ? (double)bytes / seconds / 1e9 : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Distinct random block ids 0..num_blocks-1, the first n of a shuffle. */
static int64_t *random_blocks(struct numeric_rng *rng, uint64_t num_blocks, uint64_t n)
{
    /* calloc: every entry is defined even where the analyser cannot follow
     * the fill loop (callers read the first n, n <= num_blocks). */
    int64_t *ids = calloc(num_blocks, sizeof(*ids));
    if (!ids)
        return NULL;
    for (uint64_t i = 0; i < num_blocks; i++)
        ids[i] = (int64_t)i;
    /* left = num_blocks - i, the ids not yet drawn: never 0 while i < n. */
    for (uint64_t i = 0, left = num_blocks; i < n && left > 0; i++, left--) {
        uint64_t j = i + numeric_next(rng) % left;
        int64_t t = ids[i];
        ids[i] = ids[j];
        ids[j] = t;
    }
    return ids;
}

/* Everything one layout's measurements use. */
struct bench_env {
    kvrt_backend *b;
    kvrt_cache *cache;
    const struct bench_shape *sh;
    uint64_t elem, row_k, row_v; /* bytes of one token's K / V over all heads */
    uint64_t num_layers;
    int64_t *slots;
    int64_t *pairs;
    int64_t *gather_ids;
    int32_t *tables, *lens;
    uint64_t max_blocks_per_seq;
    kvrt_buffer *k, *v, *staging, *q, *out;
};

typedef int (*bench_fn)(struct bench_env *e);

static int op_write(struct bench_env *e)
{
    for (uint32_t l = 0; l < e->num_layers; l++) {
        int rc = kvrt_cache_write(e->cache, l, e->sh->tokens, e->slots, e->k, 0, e->v, 0);
        if (rc != KVRT_OK)
            return rc;
    }
    return KVRT_OK;
}

static int op_read(struct bench_env *e)
{
    for (uint32_t l = 0; l < e->num_layers; l++) {
        int rc = kvrt_cache_read(e->cache, l, e->sh->tokens, e->slots, e->k, 0, e->v, 0);
        if (rc != KVRT_OK)
            return rc;
    }
    return KVRT_OK;
}

static int op_copy(struct bench_env *e)
{
    return kvrt_cache_copy_blocks(e->cache, e->sh->pairs, e->pairs);
}

static int op_gather(struct bench_env *e)
{
    return kvrt_cache_gather(e->cache, e->sh->blocks, e->gather_ids, e->staging, 0);
}

static int op_scatter(struct bench_env *e)
{
    return kvrt_cache_scatter(e->cache, e->sh->blocks, e->gather_ids, e->staging, 0);
}

static int op_decode(struct bench_env *e)
{
    struct kvrt_decode_params p;
    kvrt_decode_params_default(&p);
    p.num_seqs = (uint32_t)e->sh->seqs;
    p.num_q_heads = (uint32_t)e->sh->q_heads;
    p.q = e->q;
    p.out = e->out;
    p.block_tables = e->tables;
    p.max_blocks_per_seq = (uint32_t)e->max_blocks_per_seq;
    p.seq_lens = e->lens;
    p.scale = (float)(1.0 / sqrt((double)e->sh->head_size));
    return kvrt_cache_decode(e->cache, 0, &p);
}

static const bench_fn fns[BENCH_NUM_OPS] = {op_write, op_read, op_copy, op_gather, op_scatter, op_decode};

static int upload_random(kvrt_buffer *buf, enum kvrt_dtype dtype, uint64_t bytes, struct numeric_rng *rng)
{
    const uint64_t es = kvrt_dtype_size(dtype);
    uint8_t *host = malloc(bytes ? bytes : 1);
    if (!host)
        return KVRT_ERR_NOMEM;
    /* Small values: no denormals or overflow to slow a kernel down. */
    for (uint64_t i = 0; i < bytes / es; i++)
        numeric_encode(dtype, numeric_uniform(rng) * 0.5, host + i * es);
    int rc = kvrt_buffer_upload(buf, 0, host, bytes);
    free(host);
    return rc;
}

static uint64_t blocks_needed(const struct bench_shape *sh, const bool ops[BENCH_NUM_OPS], uint64_t *per_seq)
{
    uint64_t n = 1;
    *per_seq = (sh->context + sh->block_size - 1) / sh->block_size;
    if (ops[BENCH_WRITE] || ops[BENCH_READ])
        n = (sh->tokens + sh->block_size - 1) / sh->block_size;
    if (ops[BENCH_COPY] && 2 * sh->pairs > n)
        n = 2 * sh->pairs;
    if ((ops[BENCH_GATHER] || ops[BENCH_SCATTER]) && sh->blocks > n)
        n = sh->blocks;
    if (ops[BENCH_DECODE] && sh->seqs * *per_seq > n)
        n = sh->seqs * *per_seq;
    return n;
}

static int prepare(struct bench_env *e, const bool ops[BENCH_NUM_OPS], uint64_t num_blocks)
{
    const struct bench_shape *sh = e->sh;
    struct numeric_rng rng = {42};
    int rc = KVRT_OK;
    if (ops[BENCH_WRITE] || ops[BENCH_READ]) {
        int64_t *blocks = random_blocks(&rng, num_blocks, num_blocks);
        e->slots = malloc(sh->tokens * sizeof(*e->slots));
        if (!blocks || !e->slots) {
            free(blocks);
            return KVRT_ERR_NOMEM;
        }
        for (uint64_t t = 0; t < sh->tokens; t++)
            e->slots[t] = blocks[t / sh->block_size] * (int64_t)sh->block_size + (int64_t)(t % sh->block_size);
        free(blocks);
        if ((rc = kvrt_buffer_create(e->b, sh->tokens * e->row_k, &e->k)) ||
            (rc = kvrt_buffer_create(e->b, sh->tokens * e->row_v, &e->v)) ||
            (rc = upload_random(e->k, sh->dtype, sh->tokens * e->row_k, &rng)) ||
            (rc = upload_random(e->v, sh->dtype, sh->tokens * e->row_v, &rng)))
            return rc;
    }
    if (ops[BENCH_COPY]) {
        int64_t *blocks = random_blocks(&rng, num_blocks, 2 * sh->pairs);
        e->pairs = malloc(2 * sh->pairs * sizeof(*e->pairs));
        if (!blocks || !e->pairs) {
            free(blocks);
            return KVRT_ERR_NOMEM;
        }
        for (uint64_t i = 0; i < sh->pairs; i++) {
            e->pairs[2 * i] = blocks[i];
            e->pairs[2 * i + 1] = blocks[sh->pairs + i];
        }
        free(blocks);
    }
    if (ops[BENCH_GATHER] || ops[BENCH_SCATTER]) {
        uint64_t bytes;
        e->gather_ids = random_blocks(&rng, num_blocks, sh->blocks);
        if (!e->gather_ids)
            return KVRT_ERR_NOMEM;
        if ((rc = kvrt_cache_staging_bytes(e->cache, sh->blocks, &bytes)) ||
            (rc = kvrt_buffer_create(e->b, bytes, &e->staging)) || (rc = kvrt_buffer_zero(e->staging, 0, bytes)))
            return rc;
    }
    if (ops[BENCH_DECODE]) {
        int64_t *blocks = random_blocks(&rng, num_blocks, sh->seqs * e->max_blocks_per_seq);
        e->tables = malloc(sh->seqs * e->max_blocks_per_seq * sizeof(*e->tables));
        e->lens = malloc(sh->seqs * sizeof(*e->lens));
        if (!blocks || !e->tables || !e->lens) {
            free(blocks);
            return KVRT_ERR_NOMEM;
        }
        for (uint64_t i = 0; i < sh->seqs * e->max_blocks_per_seq; i++)
            e->tables[i] = (int32_t)blocks[i];
        for (uint64_t s = 0; s < sh->seqs; s++)
            e->lens[s] = (int32_t)sh->context;
        free(blocks);
        const uint64_t qb = sh->seqs * sh->q_heads * sh->head_size * e->elem;
        if ((rc = kvrt_buffer_create(e->b, qb, &e->q)) || (rc = kvrt_buffer_create(e->b, qb, &e->out)) ||
            (rc = upload_random(e->q, sh->dtype, qb, &rng)))
            return rc;
    }
    return rc;
}

static void env_free(struct bench_env *e)
{
    free(e->slots);
    free(e->pairs);
    free(e->gather_ids);
    free(e->tables);
    free(e->lens);
    kvrt_buffer_destroy(e->k);
    kvrt_buffer_destroy(e->v);
    kvrt_buffer_destroy(e->staging);
    kvrt_buffer_destroy(e->q);
    kvrt_buffer_destroy(e->out);
    kvrt_cache_destroy(e->cache);
}

static uint64_t op_bytes(const struct bench_env *e, enum bench_op op, const kvrt_placement *p)
{
    const struct bench_shape *sh = e->sh;
    uint64_t staging = 0;
    switch (op) {
    case BENCH_WRITE:
    case BENCH_READ: return e->num_layers * sh->tokens * (e->row_k + e->row_v);
    case BENCH_COPY: return sh->pairs * kvrt_placement_bytes_per_block(p);
    case BENCH_GATHER:
    case BENCH_SCATTER: kvrt_cache_staging_bytes(e->cache, sh->blocks, &staging); return staging;
    default: return sh->seqs * sh->context * (e->row_k + e->row_v);
    }
}

/* Why an op cannot run on this backend, or NULL. */
static const char *obstacle(kvrt_backend *b, const struct bench_shape *sh, enum bench_op op)
{
    static const uint32_t bits[BENCH_NUM_OPS] = {KVRT_OP_WRITE,  KVRT_OP_READ,    KVRT_OP_COPY_BLOCKS,
                                                 KVRT_OP_GATHER, KVRT_OP_SCATTER, KVRT_OP_DECODE};
    if (!(kvrt_backend_ops(b) & bits[op]))
        return "the backend does not implement it";
    if (op == BENCH_DECODE && !numeric_is_float(sh->dtype))
        return "paged decode needs a floating-point cache";
    if (op == BENCH_DECODE && sh->q_heads % sh->kv_heads != 0)
        return "--q-heads is not a multiple of --kv-heads";
    return NULL;
}

int bench_layout(kvrt_backend *b, const struct bench_shape *sh, const bool ops[BENCH_NUM_OPS],
                 struct bench_result out[BENCH_NUM_OPS], struct cli_progress *progress, uint64_t *steps_done,
                 uint64_t steps_total)
{
    struct bench_env e;
    memset(&e, 0, sizeof(e));
    e.b = b;
    e.sh = sh;
    e.elem = kvrt_dtype_size(sh->dtype);
    e.row_k = e.row_v = sh->kv_heads * sh->head_size * e.elem;
    e.num_layers = sh->layers;
    bool run[BENCH_NUM_OPS];
    for (int op = 0; op < BENCH_NUM_OPS; op++) {
        const char *why = ops[op] ? obstacle(b, sh, (enum bench_op)op) : NULL;
        run[op] = ops[op] && !why;
        out[op].skipped = ops[op] && why;
        snprintf(out[op].reason, sizeof(out[op].reason), "%s", why ? why : "");
    }
    const uint64_t num_blocks = blocks_needed(sh, run, &e.max_blocks_per_seq);

    struct kvrt_spec spec;
    kvrt_spec_default(&spec);
    spec.dtype = sh->dtype;
    spec.block_size = sh->block_size;
    spec.num_kv_heads = sh->kv_heads;
    spec.head_size = sh->head_size;
    struct kvrt_layer_entry *layers = calloc(sh->layers, sizeof(*layers));
    char(*names)[32] = calloc(sh->layers, sizeof(*names));
    if (!layers || !names) {
        free(layers);
        free(names);
        return cli_error(CLI_EXIT_INTERNAL, "bench: out of memory");
    }
    for (uint64_t l = 0; l < sh->layers; l++) {
        snprintf(names[l], sizeof(names[l]), "layer.%llu", (unsigned long long)l);
        layers[l].name = names[l];
        layers[l].spec = spec;
    }
    struct kvrt_group group = {layers, sh->layers};
    kvrt_placement *p = NULL;
    int rc = kvrt_placement_create(kvrt_backend_layout(b), &group, 1, num_blocks, 0, &p);
    free(layers);
    free(names);
    if (rc == KVRT_OK)
        rc = kvrt_cache_create(b, p, &e.cache);
    if (rc == KVRT_OK)
        rc = prepare(&e, run, num_blocks);
    /* One pair of roofline buffers for the layout, as big as its largest
     * op (at least ROOF_MIN_BYTES); each op keeps its own samples. */
    struct bench_roof roof;
    memset(&roof, 0, sizeof(roof));
    uint64_t roof_bytes = ROOF_MIN_BYTES;
    for (int op = 0; rc == KVRT_OK && op < BENCH_NUM_OPS; op++)
        if (run[op] && op_bytes(&e, (enum bench_op)op, p) > roof_bytes)
            roof_bytes = op_bytes(&e, (enum bench_op)op, p);
    if (rc == KVRT_OK && bench_roof_init(&roof, roof_bytes, bench_roof_threads()) != 0)
        rc = KVRT_ERR_NOMEM;
    for (int op = 0; rc == KVRT_OK && op < BENCH_NUM_OPS; op++) {
        if (!ops[op])
            continue;
        char detail[64];
        snprintf(detail, sizeof(detail), "%s %s", kvrt_layout_name(kvrt_backend_layout(b)), bench_op_names[op]);
        cli_progress_update(progress, *steps_done, steps_total, detail);
        out[op].roofline = op == BENCH_DECODE ? BENCH_ROOF_READ : BENCH_ROOF_MEMCPY;
        if (run[op]) {
            const uint64_t bytes = op_bytes(&e, (enum bench_op)op, p);
            double *t = calloc(sh->repeat, sizeof(double));
            if (!t) {
                rc = KVRT_ERR_NOMEM;
                break;
            }
            roof.memcpy_gbps = roof.read_gbps = 0;
            rc = fns[op](&e); /* warm-up */
            /* Each repetition is followed by one memcpy and one read of
             * the same threads: the limits are sampled as often as the op. */
            for (unsigned i = 0; rc == KVRT_OK && i < sh->repeat; i++) {
                double t0 = cli_now();
                rc = fns[op](&e);
                t[i] = cli_now() - t0;
                bench_roof_sample(&roof);
            }
            if (rc == KVRT_OK) {
                qsort(t, sh->repeat, sizeof(double), cmp_double);
                out[op].best_s = t[0];
                out[op].median_s = t[sh->repeat / 2];
                out[op].bytes = bytes;
                out[op].memcpy_gbps = roof.memcpy_gbps;
                out[op].read_gbps = roof.read_gbps;
            }
            free(t);
        }
        ++*steps_done;
    }
    bench_roof_free(&roof);
    int code = rc == KVRT_OK ? CLI_EXIT_OK : cli_fail_status(rc);
    env_free(&e);
    kvrt_placement_destroy(p);
    return code;
}
