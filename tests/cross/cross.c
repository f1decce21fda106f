/*
 * Portability across backends: a cache written by one backend, gathered,
 * scattered into another backend's cache under a different layout and read
 * back gives identical K and V bytes, in both directions; paged decode on
 * both backends over the same data agrees within the element type's
 * tolerance.  Runs CPU against OpenCL (PoCL here), and against CUDA or ROCm
 * when they have a device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/kvrt.h>

#include "fixtures.h"
#include "tap.h"

#define LAYERS 2
#define H 2
#define HQ 8
#define D 32
#define BLOCK 8
#define BLOCKS 6
#define TOKENS (BLOCK * BLOCKS)

static uint32_t rng = 12345u;

static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

/* Random finite values of the element type, as raw bytes. */
static void fill(void *dst, size_t n, enum kvrt_dtype t)
{
    for (size_t i = 0; i < n; i++) {
        float f = ((float)(next() % 2001) - 1000.0f) / 512.0f;
        if (t == KVRT_DTYPE_FP32) {
            memcpy((char *)dst + 4 * i, &f, 4);
        } else { /* bf16: the upper half of an fp32 */
            uint32_t u;
            memcpy(&u, &f, 4);
            uint16_t b = (uint16_t)(u >> 16);
            memcpy((char *)dst + 2 * i, &b, 2);
        }
    }
}

static float load(const void *src, size_t i, enum kvrt_dtype t)
{
    float f;
    if (t == KVRT_DTYPE_FP32) {
        memcpy(&f, (const char *)src + 4 * i, 4);
    } else {
        uint16_t b;
        memcpy(&b, (const char *)src + 2 * i, 2);
        uint32_t u = (uint32_t)b << 16;
        memcpy(&f, &u, 4);
    }
    return f;
}

struct side {
    kvrt_backend *be;
    kvrt_placement *p;
    kvrt_cache *c;
};

static bool make_side(kvrt_runtime *rt, const char *backend, enum kvrt_layout layout, enum kvrt_dtype t, struct side *s)
{
    memset(s, 0, sizeof(*s));
    struct kvrt_spec spec = fixture_attention(t, BLOCK, H, D);
    if (kvrt_runtime_bind(rt, backend, kvrt_layout_name(layout), &s->be) != KVRT_OK ||
        fixture_placement(layout, &spec, LAYERS, BLOCKS, &s->p) != KVRT_OK ||
        kvrt_cache_create(s->be, s->p, &s->c) != KVRT_OK) {
        tap_diag("%s/%s: %s", backend, kvrt_layout_name(layout), kvrt_error_message());
        return false;
    }
    return true;
}

static void drop_side(struct side *s)
{
    kvrt_cache_destroy(s->c);
    kvrt_placement_destroy(s->p);
}

/* Upload host bytes to a new buffer of `be`. */
static kvrt_buffer *upload(kvrt_backend *be, const void *src, uint64_t n)
{
    kvrt_buffer *b = NULL;
    if (kvrt_buffer_create(be, n, &b) != KVRT_OK || kvrt_buffer_upload(b, 0, src, n) != KVRT_OK) {
        tap_diag("upload: %s", kvrt_error_message());
        kvrt_buffer_destroy(b);
        return NULL;
    }
    return b;
}

static bool write_all(struct side *s, const void *k, const void *v, uint64_t row_bytes, int64_t *slots)
{
    bool ok = true;
    uint64_t n = (uint64_t)TOKENS * H * row_bytes;
    for (uint32_t l = 0; l < LAYERS && ok; l++) {
        kvrt_buffer *kb = upload(s->be, (const char *)k + l * n, n), *vb = upload(s->be, (const char *)v + l * n, n);
        ok = kb && vb && kvrt_cache_write(s->c, l, TOKENS, slots, kb, 0, vb, 0) == KVRT_OK;
        if (!ok)
            tap_diag("write: %s", kvrt_error_message());
        kvrt_buffer_destroy(kb);
        kvrt_buffer_destroy(vb);
    }
    return ok;
}

static bool read_all(struct side *s, void *k, void *v, uint64_t row_bytes, int64_t *slots)
{
    bool ok = true;
    uint64_t n = (uint64_t)TOKENS * H * row_bytes;
    for (uint32_t l = 0; l < LAYERS && ok; l++) {
        kvrt_buffer *kb = NULL, *vb = NULL;
        ok = kvrt_buffer_create(s->be, n, &kb) == KVRT_OK && kvrt_buffer_create(s->be, n, &vb) == KVRT_OK &&
             kvrt_cache_read(s->c, l, TOKENS, slots, kb, 0, vb, 0) == KVRT_OK &&
             kvrt_buffer_download(kb, 0, (char *)k + l * n, n) == KVRT_OK &&
             kvrt_buffer_download(vb, 0, (char *)v + l * n, n) == KVRT_OK;
        if (!ok)
            tap_diag("read: %s", kvrt_error_message());
        kvrt_buffer_destroy(kb);
        kvrt_buffer_destroy(vb);
    }
    return ok;
}

/* gather on `from`, move the staging bytes through host memory, scatter on `to`. */
static bool transfer(struct side *from, struct side *to, const int64_t *ids, uint64_t n)
{
    uint64_t bytes = 0;
    kvrt_buffer *a = NULL, *b = NULL;
    void *host = NULL;
    bool ok = kvrt_cache_staging_bytes(from->c, n, &bytes) == KVRT_OK && (host = malloc(bytes)) &&
              kvrt_buffer_create(from->be, bytes, &a) == KVRT_OK &&
              kvrt_cache_gather(from->c, n, ids, a, 0) == KVRT_OK &&
              kvrt_buffer_download(a, 0, host, bytes) == KVRT_OK && (b = upload(to->be, host, bytes)) &&
              kvrt_cache_scatter(to->c, n, ids, b, 0) == KVRT_OK;
    if (!ok)
        tap_diag("transfer: %s", kvrt_error_message());
    kvrt_buffer_destroy(a);
    kvrt_buffer_destroy(b);
    free(host);
    return ok;
}

static bool decode(struct side *s, const void *q, void *out, enum kvrt_dtype t, const int32_t *tables,
                   const int32_t *lens, uint32_t seqs)
{
    uint64_t es = kvrt_dtype_size(t), qbytes = (uint64_t)seqs * HQ * D * es;
    kvrt_buffer *qb = upload(s->be, q, qbytes), *ob = NULL;
    struct kvrt_decode_params p;
    kvrt_decode_params_default(&p);
    p.num_seqs = seqs;
    p.num_q_heads = HQ;
    p.q = qb;
    p.block_tables = tables;
    p.max_blocks_per_seq = BLOCKS;
    p.seq_lens = lens;
    p.scale = 1.0f / sqrtf((float)D);
    bool ok = qb && kvrt_buffer_create(s->be, qbytes, &ob) == KVRT_OK;
    p.out = ob;
    ok = ok && kvrt_cache_decode(s->c, 1, &p) == KVRT_OK && kvrt_buffer_download(ob, 0, out, qbytes) == KVRT_OK;
    if (!ok)
        tap_diag("decode: %s", kvrt_error_message());
    kvrt_buffer_destroy(qb);
    kvrt_buffer_destroy(ob);
    return ok;
}

static void pair(kvrt_runtime *rt, const char *other, enum kvrt_layout la, enum kvrt_layout lb, enum kvrt_dtype t)
{
    const char *tn = kvrt_dtype_name(t);
    uint64_t row = D * kvrt_dtype_size(t), n = (uint64_t)LAYERS * TOKENS * H * row;
    char *k = malloc(n), *v = malloc(n), *k2 = calloc(1, n), *v2 = calloc(1, n);
    int64_t slots[TOKENS];
    for (int i = 0; i < TOKENS; i++)
        slots[i] = i;
    int64_t ids[BLOCKS];
    for (int i = 0; i < BLOCKS; i++)
        ids[i] = BLOCKS - 1 - i; /* out of order on purpose */
    struct side cpu, dev;
    if (!make_side(rt, "cpu", la, t, &cpu) || !make_side(rt, other, lb, t, &dev)) {
        tap_ok(false, "cpu %s -> %s %s (%s): caches created", kvrt_layout_name(la), other, kvrt_layout_name(lb), tn);
        goto out;
    }
    /* cpu -> other */
    fill(k, n / kvrt_dtype_size(t), t);
    fill(v, n / kvrt_dtype_size(t), t);
    tap_ok(write_all(&cpu, k, v, row, slots) && transfer(&cpu, &dev, ids, BLOCKS) &&
               read_all(&dev, k2, v2, row, slots) && memcmp(k, k2, n) == 0 && memcmp(v, v2, n) == 0,
           "cpu %s -> %s %s (%s): K and V identical after gather, scatter and read", kvrt_layout_name(la), other,
           kvrt_layout_name(lb), tn);

    /* decode over the same data on both sides */
    enum { SEQS = 3 };
    int32_t tables[SEQS * BLOCKS], lens[SEQS] = {1, TOKENS / 2 + 3, TOKENS};
    for (int s = 0; s < SEQS; s++)
        for (int b = 0; b < BLOCKS; b++)
            tables[s * BLOCKS + b] = (b * 5 + s) % BLOCKS;
    uint64_t qn = (uint64_t)SEQS * HQ * D;
    char *q = malloc(qn * 4), *o1 = malloc(qn * 4), *o2 = malloc(qn * 4);
    fill(q, qn, t);
    bool ok = decode(&cpu, q, o1, t, tables, lens, SEQS) && decode(&dev, q, o2, t, tables, lens, SEQS);
    double maxdiff = 0, maxabs = 0;
    for (uint64_t i = 0; ok && i < qn; i++) {
        double a = load(o1, i, t), b = load(o2, i, t);
        maxdiff = fmax(maxdiff, fabs(a - b));
        maxabs = fmax(maxabs, fabs(a));
    }
    double tol = (t == KVRT_DTYPE_FP32 ? 1e-4 : 2e-2) * fmax(1.0, maxabs);
    tap_ok(ok && maxdiff <= tol, "decode on cpu %s and %s %s (%s) agree: max |diff| %.3g <= %.3g", kvrt_layout_name(la),
           other, kvrt_layout_name(lb), tn, maxdiff, tol);
    free(q);
    free(o1);
    free(o2);

    /* other -> cpu */
    fill(k, n / kvrt_dtype_size(t), t);
    fill(v, n / kvrt_dtype_size(t), t);
    memset(k2, 0, n);
    memset(v2, 0, n);
    tap_ok(write_all(&dev, k, v, row, slots) && transfer(&dev, &cpu, ids, BLOCKS) &&
               read_all(&cpu, k2, v2, row, slots) && memcmp(k, k2, n) == 0 && memcmp(v, v2, n) == 0,
           "%s %s -> cpu %s (%s): K and V identical after gather, scatter and read", other, kvrt_layout_name(lb),
           kvrt_layout_name(la), tn);
out:
    drop_side(&cpu);
    drop_side(&dev);
    free(k);
    free(v);
    free(k2);
    free(v2);
}

int main(int argc, char **argv)
{
    const char *other = argc > 1 ? argv[1] : "opencl";
    kvrt_runtime *rt = NULL;
    if (kvrt_runtime_open(NULL, &rt) != KVRT_OK)
        tap_skip_all("no runtime: %s", kvrt_error_message());
    size_t i;
    if (kvrt_runtime_find_plugin(rt, other, &i) != KVRT_OK) {
        kvrt_runtime_close(rt);
        tap_skip_all("backend %s is not built", other);
    }
    struct kvrt_plugin_info info;
    kvrt_runtime_plugin_info(rt, i, &info);
    if (!info.available) {
        char why[512];
        snprintf(why, sizeof(why), "%s", info.reason);
        kvrt_runtime_close(rt);
        tap_skip_all("backend %s has no device: %s", other, why);
    }
    tap_plan_dynamic();
    static const enum kvrt_layout pairs[][2] = {
        {KVRT_LAYOUT_LBNHC, KVRT_LAYOUT_BLHNC},
        {KVRT_LAYOUT_BHLNC, KVRT_LAYOUT_LHBNC},
        {KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_BLNHC},
    };
    const enum kvrt_dtype types[] = {KVRT_DTYPE_FP32, KVRT_DTYPE_BF16};
    for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++)
        for (size_t t = 0; t < 2; t++)
            if (kvrt_runtime_plugin_admits(rt, i, pairs[p][1]))
                pair(rt, other, pairs[p][0], pairs[p][1], types[t]);
    kvrt_runtime_close(rt);
    return tap_done();
}
