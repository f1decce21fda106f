/*
 * decode against a double-precision reference: every layout, fp32/fp16/bf16
 * and fp8, grouped-query ratios, head sizes that are not a multiple of the
 * vector width, kernel-block splitting, padded pages, contexts split over
 * the threads (flash-decoding parts and their merge), and the kernel that
 * KVRT_CPU_ISA names: meson runs this program once per kernel, and a kernel
 * the CPU cannot run skips the whole program.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tap.h"

/* ---- the test's own element codecs (independent of the module) ---- */

static double f16_value(uint16_t h)
{
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return sign ? -v : v;
}

static double e4m3_value(uint8_t b)
{
    int sign = b >> 7, e = (b >> 3) & 15, m = b & 7;
    double v = (e == 15 && m == 7) ? NAN : e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
    return sign ? -v : v;
}

static double elem_value(int dtype, const unsigned char *p)
{
    uint16_t h;
    uint32_t u;
    float f;
    switch (dtype) {
    case KVRT_DTYPE_FP32: memcpy(&f, p, 4); return f;
    case KVRT_DTYPE_BF16:
        memcpy(&h, p, 2);
        u = (uint32_t)h << 16;
        memcpy(&f, &u, 4);
        return f;
    case KVRT_DTYPE_FP16: memcpy(&h, p, 2); return f16_value(h);
    case KVRT_DTYPE_FP8_E4M3: return e4m3_value(*p);
    case KVRT_DTYPE_FP8_E5M2: return f16_value((uint16_t)(*p << 8));
    }
    return NAN;
}

/* A random element of moderate magnitude (about 2^-7 .. 2). */
static void rnd_elem(int dtype, unsigned char *p)
{
    uint64_t r = rnd();
    uint32_t sign = (uint32_t)(r & 1);
    switch (dtype) {
    case KVRT_DTYPE_FP32: {
        float f = (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        memcpy(p, &f, 4);
        break;
    }
    case KVRT_DTYPE_BF16: {
        uint16_t h = (uint16_t)(sign << 15 | (uint32_t)(120 + (r >> 8) % 8) << 7 | (r >> 20 & 127));
        memcpy(p, &h, 2);
        break;
    }
    case KVRT_DTYPE_FP16: {
        uint16_t h = (uint16_t)(sign << 15 | (uint32_t)(8 + (r >> 8) % 8) << 10 | (r >> 20 & 1023));
        memcpy(p, &h, 2);
        break;
    }
    case KVRT_DTYPE_FP8_E4M3: *p = (uint8_t)(sign << 7 | (uint32_t)(1 + (r >> 8) % 8) << 3 | (r >> 20 & 7)); break;
    case KVRT_DTYPE_FP8_E5M2: *p = (uint8_t)(sign << 7 | (uint32_t)(8 + (r >> 8) % 8) << 2 | (r >> 20 & 3)); break;
    }
}

static const char *dtype_name(int d)
{
    static const char *n[] = {"fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "uint8"};
    return n[d];
}

/* Output rounding of each type, relative to the largest |V|. */
static double tolerance(int dtype)
{
    switch (dtype) {
    case KVRT_DTYPE_FP32: return 2e-6;
    case KVRT_DTYPE_FP16: return 2e-3;
    case KVRT_DTYPE_BF16: return 1.0 / 128;
    case KVRT_DTYPE_FP8_E4M3: return 0.07;
    default: return 0.13;
    }
}

struct dshape {
    const char *what;
    uint64_t r, k, H, G, D, Dv, pad;
    uint32_t S;
    uint32_t lens[6];
};

static const char *isa = "default";

static void run(const struct dshape *sh, int layout, int dtype)
{
    const uint64_t elem = dtype == KVRT_DTYPE_FP32 ? 4 : dtype <= KVRT_DTYPE_BF16 ? 2 : 1;
    const uint64_t bs = sh->r * sh->k;
    uint32_t maxb = 0;
    for (uint32_t s = 0; s < sh->S; s++)
        maxb = sh->lens[s] / bs + 1 > maxb ? (uint32_t)(sh->lens[s] / bs + 1) : maxb;
    const uint64_t B = (uint64_t)sh->S * maxb + 3;
    struct geom g = {.layout = layout,
                     .dtype = dtype,
                     .elem = elem,
                     .L = 2,
                     .B = B,
                     .r = sh->r,
                     .k = sh->k,
                     .H = sh->H,
                     .D = sh->D,
                     .Dv = sh->Dv,
                     .pad = sh->pad};
    struct test_cache tc;
    geom_build(&g, &tc);
    const uint32_t hq = (uint32_t)(sh->H * sh->G);
    const uint64_t qbytes = (uint64_t)sh->S * hq * sh->D * elem;
    const uint64_t obytes = (uint64_t)sh->S * hq * sh->Dv * elem;

    unsigned char *img = malloc(tc.cache.bytes), *q = malloc(qbytes), *out = malloc(obytes);
    for (uint64_t i = 0; i + elem <= tc.cache.bytes; i += elem)
        rnd_elem(dtype, img + i);
    for (uint64_t i = 0; i < qbytes; i += elem)
        rnd_elem(dtype, q + i);
    int64_t *perm = malloc(B * sizeof(int64_t));
    for (uint64_t i = 0; i < B; i++)
        perm[i] = (int64_t)i;
    rnd_shuffle(perm, B);
    int32_t *tables = malloc((size_t)sh->S * maxb * sizeof(int32_t));
    for (uint64_t i = 0; i < (uint64_t)sh->S * maxb; i++)
        tables[i] = (int32_t)perm[i];

    kvrt_plugin_device *dev = harness_bind(layout);
    kvrt_plugin_buffer *cb = harness_alloc(dev, tc.cache.bytes);
    kvrt_plugin_buffer *qb = harness_alloc(dev, qbytes + 32);
    kvrt_plugin_buffer *ob = harness_alloc(dev, obytes + 16);
    harness_upload(dev, cb, img, tc.cache.bytes);
    if (cpu->buffer_upload(dev, qb, 32, q, qbytes, &cpu_err) != KVRT_OK)
        tap_diag("upload failed: %s", cpu_err.message);
    const float scale = 1.0f / sqrtf((float)sh->D);
    struct kvrt_plugin_decode_args a = {
        .size = sizeof(a),
        .num_seqs = sh->S,
        .num_q_heads = hq,
        .max_blocks_per_seq = maxb,
        .q = qb,
        .q_offset = 32,
        .out = ob,
        .out_offset = 16,
        .block_tables = tables,
        .seq_lens = (const int32_t *)sh->lens,
        .scale = scale,
    };
    const uint32_t layer = 1;
    int rc = cpu->decode(dev, &tc.cache, cb, layer, &a, &cpu_err);
    if (cpu->buffer_download(dev, ob, 16, out, obytes, &cpu_err) != KVRT_OK)
        tap_diag("download failed: %s", cpu_err.message);

    double worst = 0, vmax = 0;
    uint32_t maxlen = 1;
    for (uint32_t s = 0; s < sh->S; s++)
        maxlen = sh->lens[s] > maxlen ? sh->lens[s] : maxlen;
    double *sc = malloc(sizeof(double) * maxlen), *o = malloc(sizeof(double) * sh->Dv);
    for (uint32_t s = 0; s < sh->S; s++)
        for (uint32_t h = 0; h < hq; h++) {
            const uint64_t kvh = h / sh->G, len = sh->lens[s];
            const unsigned char *qr = q + ((uint64_t)s * hq + h) * sh->D * elem;
            double mx = -INFINITY, sum = 0;
            for (uint64_t t = 0; t < len; t++) {
                uint64_t slot = (uint64_t)tables[s * maxb + t / bs] * bs + t % bs;
                const unsigned char *cell = img + cell_offset(&tc, layer, slot / sh->k, kvh, slot % sh->k);
                double d = 0;
                for (uint64_t i = 0; i < sh->D; i++)
                    d += elem_value(dtype, qr + i * elem) * elem_value(dtype, cell + i * elem);
                sc[t] = d * scale;
                mx = sc[t] > mx ? sc[t] : mx;
            }
            memset(o, 0, sizeof(double) * sh->Dv);
            for (uint64_t t = 0; t < len; t++) {
                uint64_t slot = (uint64_t)tables[s * maxb + t / bs] * bs + t % bs;
                const unsigned char *cell =
                    img + cell_offset(&tc, layer, slot / sh->k, kvh, slot % sh->k) + sh->D * elem;
                double p = exp(sc[t] - mx);
                sum += p;
                for (uint64_t i = 0; i < sh->Dv; i++) {
                    double v = elem_value(dtype, cell + i * elem);
                    o[i] += p * v;
                    vmax = fabs(v) > vmax ? fabs(v) : vmax;
                }
            }
            for (uint64_t i = 0; i < sh->Dv; i++) {
                double got = elem_value(dtype, out + (((uint64_t)s * hq + h) * sh->Dv + i) * elem);
                double err = fabs(got - o[i] / sum);
                if (!(err <= worst))
                    worst = err; /* NaN sticks */
            }
        }
    double tol = tolerance(dtype) * vmax;
    if (!tap_ok(rc == KVRT_OK && worst <= tol, "decode %s %s %s (%s kernel): max error %.3g <= %.3g", dtype_name(dtype),
                layout_name[layout], sh->what, isa, worst, tol) &&
        rc != KVRT_OK)
        tap_diag("  %s", cpu_err.message);

    free(img), free(q), free(out), free(perm), free(tables), free(sc), free(o);
    cpu->buffer_free(dev, cb);
    cpu->buffer_free(dev, qb);
    cpu->buffer_free(dev, ob);
    cpu->unbind(dev);
}

static void unsupported(int dtype)
{
    struct geom g = {.layout = KVRT_LAYOUT_LBHNC,
                     .dtype = dtype,
                     .elem = 1,
                     .L = 1,
                     .B = 2,
                     .r = 1,
                     .k = 4,
                     .H = 1,
                     .D = 8,
                     .Dv = 8};
    struct test_cache tc;
    geom_build(&g, &tc);
    kvrt_plugin_device *dev = harness_bind(KVRT_LAYOUT_LBHNC);
    kvrt_plugin_buffer *cb = harness_alloc(dev, tc.cache.bytes);
    kvrt_plugin_buffer *qb = harness_alloc(dev, 8), *ob = harness_alloc(dev, 8);
    int32_t table[1] = {0}, lens[1] = {3};
    struct kvrt_plugin_decode_args a = {.size = sizeof(a),
                                        .num_seqs = 1,
                                        .num_q_heads = 1,
                                        .max_blocks_per_seq = 1,
                                        .q = qb,
                                        .out = ob,
                                        .block_tables = table,
                                        .seq_lens = lens,
                                        .scale = 1};
    memset(cpu_err.message, 0, sizeof(cpu_err.message));
    int rc = cpu->decode(dev, &tc.cache, cb, 0, &a, &cpu_err);
    tap_ok(rc == KVRT_ERR_UNSUPPORTED && strstr(cpu_err.message, dtype_name(dtype)) && strstr(cpu_err.message, "bf16"),
           "decode on %s is KVRT_ERR_UNSUPPORTED naming the type and the valid ones", dtype_name(dtype));
    tap_diag("  %s", cpu_err.message);
    cpu->buffer_free(dev, cb);
    cpu->buffer_free(dev, qb);
    cpu->buffer_free(dev, ob);
    cpu->unbind(dev);
}

/* One token, D = 1, q = k = 1: the output is V itself, so every bit pattern
 * of the type must come back (NaN as a NaN, -0 as a zero). */
static void identity(int dtype)
{
    const uint64_t elem = dtype <= KVRT_DTYPE_BF16 ? 2 : 1, count = elem == 2 ? 65536 : 256;
    struct geom g = {.layout = KVRT_LAYOUT_LBHNC,
                     .dtype = dtype,
                     .elem = elem,
                     .L = 1,
                     .B = 1,
                     .r = 1,
                     .k = 1,
                     .H = 1,
                     .D = 1,
                     .Dv = count};
    struct test_cache tc;
    geom_build(&g, &tc);
    unsigned char *img = malloc(tc.cache.bytes), *out = malloc(count * elem);
    unsigned char one[2];
    uint16_t one16 = dtype == KVRT_DTYPE_FP16 ? 0x3c00 : 0x3f80;
    uint8_t one8 = dtype == KVRT_DTYPE_FP8_E4M3 ? 0x38 : 0x3c;
    if (elem == 2)
        memcpy(one, &one16, 2);
    else
        one[0] = one8;
    memcpy(img, one, elem);
    for (uint64_t i = 0; i < count; i++) {
        if (elem == 2) {
            uint16_t h = (uint16_t)i;
            memcpy(img + elem + 2 * i, &h, 2);
        } else {
            img[1 + i] = (uint8_t)i;
        }
    }
    kvrt_plugin_device *dev = harness_bind(KVRT_LAYOUT_LBHNC);
    kvrt_plugin_buffer *cb = harness_alloc(dev, tc.cache.bytes);
    kvrt_plugin_buffer *qb = harness_alloc(dev, elem), *ob = harness_alloc(dev, count * elem);
    harness_upload(dev, cb, img, tc.cache.bytes);
    harness_upload(dev, qb, one, elem);
    int32_t table[1] = {0}, lens[1] = {1};
    struct kvrt_plugin_decode_args a = {.size = sizeof(a),
                                        .num_seqs = 1,
                                        .num_q_heads = 1,
                                        .max_blocks_per_seq = 1,
                                        .q = qb,
                                        .out = ob,
                                        .block_tables = table,
                                        .seq_lens = lens,
                                        .scale = 1};
    int rc = cpu->decode(dev, &tc.cache, cb, 0, &a, &cpu_err);
    harness_download(dev, ob, out, count * elem);
    uint64_t bad = 0;
    for (uint64_t i = 0; i < count; i++) {
        double want = elem_value(dtype, img + elem + i * elem);
        double got = elem_value(dtype, out + i * elem);
        bool ok = isnan(want) ? isnan(got) : got == want;
        if (!ok && bad++ < 4)
            tap_diag("  pattern 0x%llx: got %g, want %g", (unsigned long long)i, got, want);
    }
    tap_ok(rc == KVRT_OK && bad == 0, "decode passes all %llu %s bit patterns through (%s kernel)",
           (unsigned long long)count, dtype_name(dtype), isa);
    free(img), free(out);
    cpu->buffer_free(dev, cb);
    cpu->buffer_free(dev, qb);
    cpu->buffer_free(dev, ob);
    cpu->unbind(dev);
}

int main(void)
{
    harness_load();
    static const struct dshape base = {"G=2 D=16", 1, 8, 2, 2, 16, 16, 0, 3, {1, 9, 37}};
    static const struct dshape groups[] = {
        {"G=1 D=20 Dv=12", 1, 8, 3, 1, 20, 12, 0, 2, {5, 17}},
        {"G=3 D=20 Dv=12", 1, 8, 2, 3, 20, 12, 0, 2, {16, 23}},
        {"G=4 D=7 Dv=9", 1, 4, 2, 4, 7, 9, 0, 3, {2, 4, 11}},
        {"G=8 D=64 Dv=32", 1, 16, 1, 8, 64, 32, 0, 2, {40, 70}},
    };
    static const struct dshape split = {"r=2", 2, 4, 2, 2, 16, 16, 0, 3, {3, 8, 29}};
    static const struct dshape padded = {"padded", 1, 8, 2, 2, 16, 16, 64, 2, {7, 20}};
    static const struct dshape big = {"big G=4 D=128", 1, 16, 4, 4, 128, 128, 0, 4, {300, 513, 64, 450}};
    static const struct dshape long1 = {"split S=1 H=1 G=4 D=128", 1, 16, 1, 4, 128, 128, 0, 1, {1000}};
    static const struct dshape long2 = {"split S=2 H=1 G=2 D=40", 1, 16, 1, 2, 40, 24, 0, 2, {3001, 1}};
    static const int fp[] = {KVRT_DTYPE_FP32, KVRT_DTYPE_FP16, KVRT_DTYPE_BF16};

    const char *want = getenv("KVRT_CPU_ISA");
    if (want && *want)
        isa = want;
    tap_plan_dynamic();
    for (int l = 0; l < 6; l++)
        for (int d = 0; d < 3; d++)
            run(&base, l, fp[d]);
    for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
        for (int d = 0; d < 3; d++)
            run(&groups[i], (int)(i % 2 ? KVRT_LAYOUT_LBNHC : KVRT_LAYOUT_LHBNC + 3 * (i / 2)), fp[d]);
    for (int l = 0; l < 2; l++)
        run(&split, l, KVRT_DTYPE_BF16);
    run(&padded, KVRT_LAYOUT_BLNHC, KVRT_DTYPE_FP16);
    run(&padded, KVRT_LAYOUT_LBHNC, KVRT_DTYPE_BF16);
    for (int d = KVRT_DTYPE_FP8_E4M3; d <= KVRT_DTYPE_FP8_E5M2; d++) {
        run(&base, KVRT_LAYOUT_BLHNC, d);
        run(&groups[2], KVRT_LAYOUT_LBNHC, d);
    }
    run(&big, KVRT_LAYOUT_LBHNC, KVRT_DTYPE_BF16);
    run(&big, KVRT_LAYOUT_BHLNC, KVRT_DTYPE_FP16);
    /* Four threads whatever the machine: one or two items then split. */
    setenv("KVRT_CPU_THREADS", "4", 1);
    for (int d = 0; d < 3; d++) {
        run(&long1, d == 1 ? KVRT_LAYOUT_BLNHC : KVRT_LAYOUT_LBHNC, fp[d]);
        run(&long2, d == 2 ? KVRT_LAYOUT_LHBNC : KVRT_LAYOUT_BLHNC, fp[d]);
    }
    run(&long1, KVRT_LAYOUT_LBNHC, KVRT_DTYPE_FP8_E4M3);
    unsetenv("KVRT_CPU_THREADS");
    for (int d = KVRT_DTYPE_FP16; d <= KVRT_DTYPE_FP8_E5M2; d++)
        identity(d);
    unsupported(KVRT_DTYPE_INT8);
    unsupported(KVRT_DTYPE_UINT8);
    return tap_done();
}
