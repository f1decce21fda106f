/*
 * write and read: every layout, several element types and shapes.  The cache
 * image after a write is compared byte for byte with one built here from the
 * test's own strides, so a consistent-but-wrong address cannot pass; then
 * read must give K and V back and leave the rows of skipped slots alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tap.h"

struct shape {
    const char *what;
    int dtype;
    uint64_t elem;
    uint64_t L, B, r, k, H, D, Dv, C, pad;
    uint64_t tokens;
};

static void run(const struct shape *sh, int layout)
{
    struct geom g = {.layout = layout,
                     .dtype = sh->dtype,
                     .elem = sh->elem,
                     .L = sh->L,
                     .B = sh->B,
                     .r = sh->r,
                     .k = sh->k,
                     .H = sh->H,
                     .D = sh->D,
                     .Dv = sh->Dv,
                     .C = sh->C,
                     .pad = sh->pad};
    struct test_cache tc;
    geom_build(&g, &tc);
    const uint64_t layer = sh->L - 1;
    const uint64_t T = sh->tokens, kb = sh->D * sh->elem, vb = sh->Dv * sh->elem;
    const uint64_t krow = sh->H * kb, vrow = sh->H * vb;
    const uint64_t slots_total = sh->B * sh->r * sh->k;

    kvrt_plugin_device *dev = harness_bind(layout);
    kvrt_plugin_buffer *cache = harness_alloc(dev, tc.cache.bytes);
    kvrt_plugin_buffer *k = harness_alloc(dev, T * krow);
    kvrt_plugin_buffer *v = vb ? harness_alloc(dev, T * vrow) : NULL;

    unsigned char *kh = malloc(T * krow), *vh = malloc(T * vrow + 1);
    unsigned char *expect = calloc(1, tc.cache.bytes), *got = malloc(tc.cache.bytes);
    int64_t *perm = malloc(slots_total * sizeof(int64_t)), *slots = malloc(T * sizeof(int64_t));
    rnd_bytes(kh, T * krow);
    rnd_bytes(vh, T * vrow);
    for (uint64_t i = 0; i < slots_total; i++)
        perm[i] = (int64_t)i;
    rnd_shuffle(perm, slots_total);
    uint64_t skipped = 0;
    for (uint64_t t = 0; t < T; t++) {
        slots[t] = rnd() % 7 == 0 ? -1 - (int64_t)(rnd() % 3) : perm[t];
        skipped += slots[t] < 0;
        if (slots[t] < 0)
            continue;
        uint64_t s = (uint64_t)slots[t];
        for (uint64_t h = 0; h < sh->H; h++) {
            uint64_t off = cell_offset(&tc, layer, s / sh->k, h, s % sh->k);
            memcpy(expect + off, kh + t * krow + h * kb, kb);
            memcpy(expect + off + kb, vh + t * vrow + h * vb, vb);
        }
    }
    harness_upload(dev, k, kh, T * krow);
    if (v)
        harness_upload(dev, v, vh, T * vrow);

    int rc = cpu->write(dev, &tc.cache, cache, (uint32_t)layer, T, slots, k, 0, v, 0, &cpu_err);
    harness_download(dev, cache, got, tc.cache.bytes);
    tap_ok(rc == KVRT_OK && memcmp(got, expect, tc.cache.bytes) == 0,
           "write %s %s: %llu tokens (%llu skipped) land exactly in their cells", sh->what, layout_name[layout],
           (unsigned long long)T, (unsigned long long)skipped);

    /* Read back into buffers pre-filled with a marker: skipped rows keep it. */
    unsigned char *kr = malloc(T * krow), *vr = malloc(T * vrow + 1);
    memset(kr, 0xa5, T * krow);
    memset(vr, 0xa5, T * vrow);
    harness_upload(dev, k, kr, T * krow);
    if (v)
        harness_upload(dev, v, vr, T * vrow);
    rc = cpu->read(dev, &tc.cache, cache, (uint32_t)layer, T, slots, k, 0, v, 0, &cpu_err);
    harness_download(dev, k, kr, T * krow);
    if (v)
        harness_download(dev, v, vr, T * vrow);
    bool ok = rc == KVRT_OK;
    for (uint64_t t = 0; t < T && ok; t++) {
        if (slots[t] >= 0) {
            ok = memcmp(kr + t * krow, kh + t * krow, krow) == 0 && memcmp(vr + t * vrow, vh + t * vrow, vrow) == 0;
        } else {
            for (uint64_t i = 0; i < krow; i++)
                ok = ok && kr[t * krow + i] == 0xa5;
            for (uint64_t i = 0; i < vrow; i++)
                ok = ok && vr[t * vrow + i] == 0xa5;
        }
        if (!ok)
            tap_diag("  token %llu (slot %lld) differs", (unsigned long long)t, (long long)slots[t]);
    }
    tap_ok(ok, "read %s %s: rows come back, skipped rows untouched", sh->what, layout_name[layout]);

    free(kh), free(vh), free(kr), free(vr), free(expect), free(got), free(perm), free(slots);
    cpu->buffer_free(dev, cache);
    cpu->buffer_free(dev, k);
    cpu->buffer_free(dev, v);
    cpu->unbind(dev);
}

int main(void)
{
    harness_load();
    static const struct shape shapes[] = {
        /* what           dtype                   e  L  B   r  k   H  D   Dv  C    pad tokens */
        {"fp32", KVRT_DTYPE_FP32, 4, 2, 9, 1, 4, 3, 8, 8, 0, 0, 30},
        {"fp16", KVRT_DTYPE_FP16, 2, 3, 6, 1, 8, 2, 16, 16, 0, 0, 40},
        {"bf16 Dv!=D", KVRT_DTYPE_BF16, 2, 2, 5, 1, 8, 4, 24, 8, 0, 0, 35},
        {"bf16 C>K+V", KVRT_DTYPE_BF16, 2, 2, 5, 1, 4, 2, 8, 8, 48, 0, 18},
        {"fp8_e4m3", KVRT_DTYPE_FP8_E4M3, 1, 2, 7, 1, 4, 2, 16, 16, 0, 0, 25},
        {"int8", KVRT_DTYPE_INT8, 1, 1, 5, 1, 8, 3, 5, 7, 0, 0, 36},
        {"mla fp16", KVRT_DTYPE_FP16, 2, 2, 6, 1, 8, 1, 36, 0, 0, 0, 44},
        {"mla 2 slots", KVRT_DTYPE_BF16, 2, 2, 6, 1, 8, 2, 16, 0, 0, 0, 44},
        {"bf16 big", KVRT_DTYPE_BF16, 2, 2, 160, 1, 16, 8, 64, 64, 0, 0, 2048},
    };
    static const struct shape split[] = {
        {"fp16 r=2", KVRT_DTYPE_FP16, 2, 2, 6, 2, 4, 2, 8, 8, 0, 0, 40},
    };
    static const struct shape padded[] = {
        {"fp32 padded", KVRT_DTYPE_FP32, 4, 3, 6, 1, 4, 2, 4, 4, 0, 96, 20},
    };
    tap_plan_dynamic();
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int l = 0; l < 6; l++)
            run(&shapes[s], l);
    /* Kernel-block splitting needs a dense unpadded block; padding needs a
     * block-compact layout (the core's geometry rules). */
    for (int l = 0; l < 2; l++)
        run(&split[0], l);
    for (int l = 0; l < 6; l++)
        if (layout_block_compact(l))
            run(&padded[0], l);
    return tap_done();
}
