/*
 * Attention and MLA layers: write K/V through the slot mapping, read them
 * back bit for bit, and decode every sequence against a reference computed
 * in double precision from the very values that were stored.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/plugin.h>
#include <kvrt/spec.h>

#include "run.h"

/* Distinct values drawn per layer: plenty for data that must not repeat
 * in a pattern, and cheap to convert (one table instead of one conversion
 * per element). */
#define TABLE_SIZE 4096

struct value_table {
    enum kvrt_dtype dtype;
    size_t es;
    uint8_t bytes[TABLE_SIZE * 4];
    double value[TABLE_SIZE];
};

static void table_fill(struct value_table *vt, enum kvrt_dtype dtype, struct numeric_rng *rng)
{
    vt->dtype = dtype;
    vt->es = kvrt_dtype_size(dtype);
    numeric_fill(rng, dtype, vt->bytes, TABLE_SIZE);
    for (size_t i = 0; i < TABLE_SIZE; i++)
        vt->value[i] = numeric_decode(dtype, vt->bytes + i * vt->es);
}

/* n random elements: the bytes to store and their values. */
static void draw(const struct value_table *vt, struct numeric_rng *rng, uint8_t *bytes, double *value, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t k = numeric_next(rng) % TABLE_SIZE;
        memcpy(bytes + i * vt->es, vt->bytes + k * vt->es, vt->es);
        if (value)
            value[i] = vt->value[k];
    }
}

/* The layer's data and the device buffers it moves through. */
struct layer_io {
    uint64_t tokens, heads, d, dv, es, hq;
    uint8_t *k, *v, *k_back, *v_back, *q, *out;
    double *kd, *vd, *qd, *ref;
    int64_t *slots;
    kvrt_buffer *kb, *vb, *kb2, *vb2, *qb, *ob;
};

static void io_free(struct layer_io *io)
{
    free(io->k);
    free(io->v);
    free(io->k_back);
    free(io->v_back);
    free(io->q);
    free(io->out);
    free(io->kd);
    free(io->vd);
    free(io->qd);
    free(io->ref);
    free(io->slots);
    kvrt_buffer_destroy(io->kb);
    kvrt_buffer_destroy(io->vb);
    kvrt_buffer_destroy(io->kb2);
    kvrt_buffer_destroy(io->vb2);
    kvrt_buffer_destroy(io->qb);
    kvrt_buffer_destroy(io->ob);
}

static int io_alloc(struct run_ctx *ctx, struct layer_io *io)
{
    const uint64_t kn = io->tokens * io->heads * io->d, vn = io->tokens * io->heads * io->dv;
    const uint64_t qn = ctx->batch->seqs * io->hq * io->d, on = ctx->batch->seqs * io->hq * io->dv;
    io->k = malloc(kn * io->es);
    io->k_back = malloc(kn * io->es);
    io->kd = malloc(kn * sizeof(double));
    io->v = malloc((vn ? vn : 1) * io->es);
    io->v_back = malloc((vn ? vn : 1) * io->es);
    io->vd = malloc((vn ? vn : 1) * sizeof(double));
    io->q = malloc((qn ? qn : 1) * io->es);
    io->qd = malloc((qn ? qn : 1) * sizeof(double));
    io->out = malloc((on ? on : 1) * io->es);
    io->ref = malloc((on ? on : 1) * sizeof(double));
    io->slots = malloc(io->tokens * sizeof(*io->slots));
    if (!io->k || !io->k_back || !io->kd || !io->v || !io->v_back || !io->vd || !io->q || !io->qd || !io->out ||
        !io->ref || !io->slots)
        return cli_error(CLI_EXIT_INTERNAL, "run: out of host memory for %llu tokens", (unsigned long long)io->tokens);
    kvrt_backend *b = ctx->backend;
    int rc = kvrt_buffer_create(b, kn * io->es, &io->kb);
    if (rc == KVRT_OK)
        rc = kvrt_buffer_create(b, kn * io->es, &io->kb2);
    if (rc == KVRT_OK && vn)
        rc = kvrt_buffer_create(b, vn * io->es, &io->vb);
    if (rc == KVRT_OK && vn)
        rc = kvrt_buffer_create(b, vn * io->es, &io->vb2);
    if (rc == KVRT_OK && qn && on) {
        rc = kvrt_buffer_create(b, qn * io->es, &io->qb);
        if (rc == KVRT_OK)
            rc = kvrt_buffer_create(b, on * io->es, &io->ob);
    }
    return rc == KVRT_OK ? CLI_EXIT_OK : cli_fail_status(rc);
}

/* Describe where a differing element of the read-back lives. */
static void report_read_mismatch(struct run_totals *t, const struct layer_io *io, const char *layer,
                                 const struct run_batch *b, const uint8_t *want, const uint8_t *got, uint64_t row_elems,
                                 const char *part)
{
    const uint64_t row = row_elems * io->es;
    for (uint64_t i = 0; i < io->tokens * io->heads; i++) {
        if (memcmp(want + i * row, got + i * row, row) == 0)
            continue;
        uint64_t tok = i / io->heads;
        run_failed(t,
                   "layer %s: %s read back differs from what was written: token %llu of sequence "
                   "%llu (slot %lld), head %llu",
                   layer, part, (unsigned long long)(tok % b->context), (unsigned long long)(tok / b->context),
                   (long long)io->slots[tok], (unsigned long long)(i % io->heads));
        return;
    }
}

/* out[s, h, :] = softmax(scale * q[s, h] . K[s, t, h / g]) . V[s, t, h / g] */
static double reference(const struct layer_io *io, const struct run_batch *b, float scale)
{
    const uint64_t group = io->hq / io->heads;
    double *p = malloc(b->context * sizeof(double));
    double largest = 0;
    if (!p)
        return -1;
    for (uint64_t s = 0; s < b->seqs; s++) {
        const uint64_t len = (uint64_t)b->seq_lens[s];
        for (uint64_t h = 0; h < io->hq; h++) {
            const double *q = io->qd + (s * io->hq + h) * io->d;
            const uint64_t kh = h / group;
            double max = -INFINITY, sum = 0;
            for (uint64_t t = 0; t < len; t++) {
                const double *k = io->kd + ((s * b->context + t) * io->heads + kh) * io->d;
                double dot = 0;
                for (uint64_t i = 0; i < io->d; i++)
                    dot += q[i] * k[i];
                p[t] = dot * (double)scale;
                max = p[t] > max ? p[t] : max;
            }
            for (uint64_t t = 0; t < len; t++)
                sum += (p[t] = exp(p[t] - max));
            double *o = io->ref + (s * io->hq + h) * io->dv;
            for (uint64_t i = 0; i < io->dv; i++)
                o[i] = 0;
            for (uint64_t t = 0; t < len; t++) {
                const double *v = io->vd + ((s * b->context + t) * io->heads + kh) * io->dv;
                const double w = p[t] / sum;
                for (uint64_t i = 0; i < io->dv; i++)
                    o[i] += w * v[i];
            }
            for (uint64_t i = 0; i < io->dv; i++)
                largest = fabs(o[i]) > largest ? fabs(o[i]) : largest;
        }
    }
    free(p);
    return largest;
}

/* Why this layer cannot be decoded, or NULL. */
static const char *decode_obstacle(const struct run_ctx *ctx, const struct kvrt_spec *s)
{
    if (!ctx->decode)
        return "decode was switched off (--no-decode)";
    if (s->kind == KVRT_SPEC_MLA)
        return "MLA layers store one latent vector per token and no V, and paged decode needs K and "
               "V (the core refuses it)";
    if (!(kvrt_backend_ops(ctx->backend) & KVRT_OP_DECODE))
        return "the backend does not implement paged decode";
    if (!numeric_is_float(s->dtype))
        return "paged decode works on floating-point caches; integer caches need scales the plugin "
               "ABI does not carry";
    return NULL;
}

static void skip_decode(struct run_totals *t, const char *reason)
{
    if (t->decode_skipped++ == 0)
        snprintf(t->skip_reason, sizeof(t->skip_reason), "%s", reason);
}

static int decode_layer(struct run_ctx *ctx, struct layer_io *io, size_t g, uint32_t layer, const char *name,
                        struct run_totals *t)
{
    const struct run_batch *b = ctx->batch;
    const struct run_group_batch *gb = &b->groups[g];
    struct value_table *vt = malloc(sizeof(*vt));
    if (!vt)
        return cli_error(CLI_EXIT_INTERNAL, "run: out of memory");
    table_fill(vt, ctx->model->groups[g].layers[0].spec.dtype, &ctx->rng);
    draw(vt, &ctx->rng, io->q, io->qd, b->seqs * io->hq * io->d);
    free(vt);
    int rc = kvrt_buffer_upload(io->qb, 0, io->q, b->seqs * io->hq * io->d * io->es);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    struct kvrt_decode_params p;
    kvrt_decode_params_default(&p);
    p.num_seqs = (uint32_t)b->seqs;
    p.num_q_heads = (uint32_t)io->hq;
    p.q = io->qb;
    p.out = io->ob;
    p.block_tables = gb->block_tables;
    p.max_blocks_per_seq = (uint32_t)gb->blocks_per_seq;
    p.seq_lens = b->seq_lens;
    p.scale = (float)(1.0 / sqrt((double)io->d));
    double t0 = cli_now();
    rc = kvrt_cache_decode(ctx->cache, layer, &p);
    double t1 = cli_now();
    if (rc == KVRT_ERR_UNSUPPORTED) {
        skip_decode(t, kvrt_error_message());
        return CLI_EXIT_OK;
    }
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    rc = kvrt_buffer_download(io->ob, 0, io->out, b->seqs * io->hq * io->dv * io->es);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    double largest = reference(io, b, p.scale);
    if (largest < 0)
        return cli_error(CLI_EXIT_INTERNAL, "run: out of memory");
    /* The kernel sees exactly the reference's inputs; what differs is fp32
     * accumulation (the 1e-5 term) and rounding the output to the cache
     * type (two units of roundoff of the largest output). */
    const double tol = (2 * numeric_unit_roundoff(ctx->model->groups[g].layers[0].spec.dtype) + 1e-5) * largest + 1e-6;
    double worst = 0;
    uint64_t worst_at = 0;
    for (uint64_t i = 0; i < b->seqs * io->hq * io->dv; i++) {
        double got = numeric_decode(ctx->model->groups[g].layers[0].spec.dtype, io->out + i * io->es);
        double err = fabs(got - io->ref[i]);
        if (!(err <= worst)) { /* NaN counts as the worst */
            worst = isnan(err) ? INFINITY : err;
            worst_at = i;
        }
    }
    t->max_abs_error = worst > t->max_abs_error ? worst : t->max_abs_error;
    t->tolerance = tol > t->tolerance ? tol : t->tolerance;
    if (worst > tol)
        run_failed(t,
                   "layer %s: decode differs from the double-precision reference by %.3g (tolerance "
                   "%.3g) at sequence %llu, query head %llu",
                   name, worst, tol, (unsigned long long)(worst_at / io->dv / io->hq),
                   (unsigned long long)(worst_at / io->dv % io->hq));
    uint64_t kv_tokens = 0;
    for (uint64_t s = 0; s < b->seqs; s++)
        kv_tokens += (uint64_t)b->seq_lens[s];
    t->decode.layers++;
    t->decode.bytes += kv_tokens * io->heads * (io->d + io->dv) * io->es;
    t->decode.seconds += t1 - t0;
    return CLI_EXIT_OK;
}

static int layer_round_trip(struct run_ctx *ctx, struct layer_io *io, size_t g, size_t i, struct run_totals *t)
{
    const struct kvrt_model_group *grp = &ctx->model->groups[g];
    const char *name = grp->layers[i].name;
    const uint64_t kbytes = io->tokens * io->heads * io->d * io->es;
    const uint64_t vbytes = io->tokens * io->heads * io->dv * io->es;
    uint32_t layer;
    int rc = kvrt_cache_layer_index(ctx->cache, name, &layer);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    struct value_table *vt = malloc(sizeof(*vt));
    if (!vt)
        return cli_error(CLI_EXIT_INTERNAL, "run: out of memory");
    table_fill(vt, grp->layers[i].spec.dtype, &ctx->rng);
    draw(vt, &ctx->rng, io->k, io->kd, io->tokens * io->heads * io->d);
    draw(vt, &ctx->rng, io->v, io->vd, io->tokens * io->heads * io->dv);
    free(vt);
    if ((rc = kvrt_buffer_upload(io->kb, 0, io->k, kbytes)) != KVRT_OK ||
        (vbytes && (rc = kvrt_buffer_upload(io->vb, 0, io->v, vbytes)) != KVRT_OK))
        return cli_fail_status(rc);

    double t0 = cli_now();
    rc = kvrt_cache_write(ctx->cache, layer, io->tokens, io->slots, io->kb, 0, io->vb, 0);
    double t1 = cli_now();
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    rc = kvrt_cache_read(ctx->cache, layer, io->tokens, io->slots, io->kb2, 0, io->vb2, 0);
    double t2 = cli_now();
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    t->write.layers++;
    t->write.bytes += kbytes + vbytes;
    t->write.seconds += t1 - t0;
    t->read.layers++;
    t->read.bytes += kbytes + vbytes;
    t->read.seconds += t2 - t1;
    if ((rc = kvrt_buffer_download(io->kb2, 0, io->k_back, kbytes)) != KVRT_OK ||
        (vbytes && (rc = kvrt_buffer_download(io->vb2, 0, io->v_back, vbytes)) != KVRT_OK))
        return cli_fail_status(rc);
    if (memcmp(io->k, io->k_back, kbytes) != 0) {
        t->read.failed = true;
        report_read_mismatch(t, io, name, ctx->batch, io->k, io->k_back, io->d, "K");
    }
    if (vbytes && memcmp(io->v, io->v_back, vbytes) != 0) {
        t->read.failed = true;
        report_read_mismatch(t, io, name, ctx->batch, io->v, io->v_back, io->dv, "V");
    }

    const char *why = decode_obstacle(ctx, &grp->layers[i].spec);
    if (why) {
        skip_decode(t, why);
        return CLI_EXIT_OK;
    }
    return decode_layer(ctx, io, g, layer, name, t);
}

int run_attention_group(struct run_ctx *ctx, size_t g, struct run_totals *t)
{
    const struct kvrt_model_group *grp = &ctx->model->groups[g];
    const struct kvrt_spec *s = &grp->layers[0].spec;
    const struct run_batch *b = ctx->batch;
    struct kvrt_spec_info in;
    struct layer_io io;
    int rc = kvrt_spec_derive(s, 0, &in);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    memset(&io, 0, sizeof(io));
    io.tokens = b->seqs * b->context;
    io.heads = in.head_slots;
    io.d = in.head_size;
    io.dv = in.head_size_v;
    io.es = in.elem_size;
    io.hq = ctx->q_heads && ctx->q_heads % io.heads == 0 ? ctx->q_heads : io.heads;
    t->q_heads = t->q_heads ? t->q_heads : io.hq;
    int code = io_alloc(ctx, &io);
    for (uint64_t seq = 0; code == CLI_EXIT_OK && seq < b->seqs; seq++)
        for (uint64_t tok = 0; tok < b->context; tok++)
            io.slots[seq * b->context + tok] = run_slot(b, g, seq, tok);
    for (size_t i = 0; code == CLI_EXIT_OK && i < grp->num_layers; i++) {
        code = layer_round_trip(ctx, &io, g, i, t);
        cli_progress_update(ctx->progress, ++ctx->layers_done, ctx->layers_total, "layers");
    }
    io_free(&io);
    return code;
}
