/*
 * copy_blocks, gather and scatter: every layout, and every pair of layouts
 * for a gather under one and a scatter under the other (a layout
 * conversion).  Expected images and staging buffers are built here from the
 * test's own strides.  Small moves and moves beyond the last-level cache
 * (streaming stores, another walk order) both.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tap.h"

struct bshape {
    const char *what;
    uint64_t elem;
    uint64_t L, B, r, k, H, N, D, Dv, C, pad;
};

static void setup(const struct bshape *s, int layout, struct test_cache *tc)
{
    struct geom g = {.layout = layout,
                     .dtype = KVRT_DTYPE_FP16,
                     .elem = s->elem,
                     .L = s->L,
                     .B = s->B,
                     .r = s->r,
                     .k = s->k,
                     .H = s->H,
                     .N = s->N,
                     .D = s->D,
                     .Dv = s->Dv,
                     .C = s->C,
                     .pad = s->pad};
    geom_build(&g, tc);
}

static uint64_t block_bytes(const struct test_cache *tc)
{
    const struct kvrt_plugin_layer *ly = &tc->layers[0];
    return tc->cache.num_layers * ly->head_slots * ly->blocks_per_block * ly->states * ly->content_bytes;
}

/* Walk one manager block's cells in staging order, moving C bytes between
 * the image and the staging area: to_stage selects the direction. */
static void stage_block(const struct test_cache *tc, unsigned char *img, int64_t block, unsigned char *stage,
                        bool to_stage)
{
    for (uint64_t l = 0; l < tc->cache.num_layers; l++) {
        const struct kvrt_plugin_layer *ly = &tc->layers[l];
        const uint64_t nm = ly->blocks_per_block * ly->states;
        for (uint64_t h = 0; h < ly->head_slots; h++)
            for (uint64_t n = 0; n < nm; n++) {
                uint64_t vb = (uint64_t)block * ly->blocks_per_block + n / ly->states;
                unsigned char *cell = img + cell_offset(tc, l, vb, h, n % ly->states);
                if (to_stage)
                    memcpy(stage, cell, ly->content_bytes);
                else
                    memcpy(cell, stage, ly->content_bytes);
                stage += ly->content_bytes;
            }
    }
}

static void test_convert(const struct bshape *s, int from, int to)
{
    struct test_cache a, b;
    setup(s, from, &a);
    setup(s, to, &b);
    const uint64_t bb = block_bytes(&a), nblk = s->B - 1, off = 64;
    int64_t *ids = malloc(nblk * sizeof(int64_t)), *ids2 = malloc(nblk * sizeof(int64_t));
    int64_t *perm = malloc(s->B * sizeof(int64_t));
    for (uint64_t i = 0; i < s->B; i++)
        perm[i] = (int64_t)i;
    rnd_shuffle(perm, s->B);
    memcpy(ids, perm, nblk * sizeof(int64_t));
    ids[nblk - 1] = ids[0]; /* gather may name a block twice */
    rnd_shuffle(perm, s->B);
    memcpy(ids2, perm, nblk * sizeof(int64_t));

    kvrt_plugin_device *dev = harness_bind(from);
    kvrt_plugin_device *dev2 = harness_bind(to);
    kvrt_plugin_buffer *ca = harness_alloc(dev, a.cache.bytes);
    kvrt_plugin_buffer *cb = harness_alloc(dev2, b.cache.bytes);
    kvrt_plugin_buffer *st = harness_alloc(dev, off + nblk * bb);
    kvrt_plugin_buffer *st2 = harness_alloc(dev2, off + nblk * bb);

    unsigned char *img = malloc(a.cache.bytes), *stage = malloc(off + nblk * bb);
    unsigned char *expect = malloc(off + nblk * bb);
    rnd_bytes(img, a.cache.bytes);
    harness_upload(dev, ca, img, a.cache.bytes);
    memset(expect, 0, off);
    for (uint64_t i = 0; i < nblk; i++)
        stage_block(&a, img, ids[i], expect + off + i * bb, true);

    int rc = cpu->gather(dev, &a.cache, ca, nblk, ids, st, off, &cpu_err);
    harness_download(dev, st, stage, off + nblk * bb);
    bool same = from == to;
    if (same || to == (from + 1) % 6)
        tap_ok(rc == KVRT_OK && memcmp(stage, expect, off + nblk * bb) == 0,
               "gather %s %s: %llu blocks in staging order", s->what, layout_name[from], (unsigned long long)nblk);

    /* Scatter into the other layout: the image built here must match, and
     * gathering it again must give the same staging bytes. */
    unsigned char *bimg = calloc(1, b.cache.bytes), *bgot = malloc(b.cache.bytes);
    for (uint64_t i = 0; i < nblk; i++)
        stage_block(&b, bimg, ids2[i], expect + off + i * bb, false);
    harness_upload(dev2, st2, expect, off + nblk * bb);
    rc = cpu->scatter(dev2, &b.cache, cb, nblk, ids2, st2, off, &cpu_err);
    harness_download(dev2, cb, bgot, b.cache.bytes);
    bool ok = rc == KVRT_OK && memcmp(bgot, bimg, b.cache.bytes) == 0;
    rc = cpu->gather(dev2, &b.cache, cb, nblk, ids2, st, off, &cpu_err);
    harness_download(dev, st, stage, off + nblk * bb);
    ok = ok && rc == KVRT_OK && memcmp(stage + off, expect + off, nblk * bb) == 0;
    tap_ok(ok, "gather %s -> scatter %s (%s): cells identical, gathers back equal", layout_name[from], layout_name[to],
           s->what);

    free(ids), free(ids2), free(perm), free(img), free(stage), free(expect), free(bimg), free(bgot);
    cpu->buffer_free(dev, ca);
    cpu->buffer_free(dev2, cb);
    cpu->buffer_free(dev, st);
    cpu->buffer_free(dev2, st2);
    cpu->unbind(dev);
    cpu->unbind(dev2);
}

/* Scatter naming a block twice keeps the later copy, as if done in order
 * (big shapes run on several threads). */
static void test_scatter_repeat(const struct bshape *s, int layout)
{
    struct test_cache tc;
    setup(s, layout, &tc);
    const uint64_t bb = block_bytes(&tc);
    int64_t ids[8] = {2, 0, 2, 1, 3, 4, 5, 2};
    kvrt_plugin_device *dev = harness_bind(layout);
    kvrt_plugin_buffer *c = harness_alloc(dev, tc.cache.bytes);
    kvrt_plugin_buffer *st = harness_alloc(dev, 8 * bb);
    unsigned char *stage = malloc(8 * bb), *img = calloc(1, tc.cache.bytes);
    unsigned char *got = malloc(tc.cache.bytes);
    rnd_bytes(stage, 8 * bb);
    harness_upload(dev, st, stage, 8 * bb);
    for (int i = 0; i < 8; i++)
        stage_block(&tc, img, ids[i], stage + (uint64_t)i * bb, false);
    int rc = cpu->scatter(dev, &tc.cache, c, 8, ids, st, 0, &cpu_err);
    harness_download(dev, c, got, tc.cache.bytes);
    tap_ok(rc == KVRT_OK && memcmp(got, img, tc.cache.bytes) == 0,
           "scatter %s %s naming block 2 three times keeps the last copy", s->what, layout_name[layout]);
    free(stage), free(img), free(got);
    cpu->buffer_free(dev, c);
    cpu->buffer_free(dev, st);
    cpu->unbind(dev);
}

static void test_copy(const struct bshape *s, int layout, uint64_t independent)
{
    struct test_cache tc;
    setup(s, layout, &tc);
    const uint64_t bb = block_bytes(&tc);
    /* Dependent pairs first (a chain, a swap, a self-copy, one block
     * written twice), then independent ones onto fresh blocks. */
    enum { FIXED = 8 };
    uint64_t np = FIXED + independent;
    int64_t *pairs = malloc(2 * np * sizeof(int64_t));
    int64_t fixed[2 * FIXED] = {0, 1, 1, 2, 3, 4, 4, 3, 5, 5, 6, 0, 7, 9, 8, 9};
    memcpy(pairs, fixed, sizeof(fixed));
    for (uint64_t i = 0; i < independent; i++) {
        pairs[2 * (FIXED + i)] = (int64_t)(10 + i);
        pairs[2 * (FIXED + i) + 1] = (int64_t)(10 + independent + i);
    }
    kvrt_plugin_device *dev = harness_bind(layout);
    kvrt_plugin_buffer *c = harness_alloc(dev, tc.cache.bytes);
    unsigned char *img = malloc(tc.cache.bytes), *got = malloc(tc.cache.bytes);
    unsigned char *tmp = malloc(bb);
    rnd_bytes(img, tc.cache.bytes);
    harness_upload(dev, c, img, tc.cache.bytes);
    for (uint64_t i = 0; i < np; i++) {
        stage_block(&tc, img, pairs[2 * i], tmp, true);
        stage_block(&tc, img, pairs[2 * i + 1], tmp, false);
    }
    int rc = cpu->copy_blocks(dev, &tc.cache, c, np, pairs, &cpu_err);
    harness_download(dev, c, got, tc.cache.bytes);
    tap_ok(rc == KVRT_OK && memcmp(got, img, tc.cache.bytes) == 0,
           "copy_blocks %s %s: %llu pairs applied in order, nothing else touched", s->what, layout_name[layout],
           (unsigned long long)np);
    free(pairs), free(img), free(got), free(tmp);
    cpu->buffer_free(dev, c);
    cpu->unbind(dev);
}

int main(void)
{
    harness_load();
    static const struct bshape small = {"fp16", 2, 3, 12, 1, 4, 3, 0, 4, 4, 0, 0};
    static const struct bshape odd = {"C>K+V, 2 states/view block", 1, 2, 8, 1, 4, 2, 2, 3, 2, 9, 0};
    static const struct bshape split = {"r=2", 4, 2, 10, 2, 4, 3, 0, 2, 2, 0, 0};
    static const struct bshape padded = {"padded page", 2, 3, 10, 1, 4, 2, 0, 4, 4, 0, 80};
    static const struct bshape big = {"big", 2, 4, 96, 1, 16, 4, 0, 64, 64, 0, 0};
    /* 256 KiB blocks, 159 moved at once: 40 MiB, beyond the 32 MiB above
     * which the module streams its stores and walks [N, H, C] pages in
     * cache order. */
    static const struct bshape huge = {"beyond the LLC", 2, 4, 160, 1, 16, 8, 0, 128, 128, 0, 0};
    /* copy: 170 independent pairs onto fresh blocks (42.5 MiB) need 350. */
    static const struct bshape huge_copy = {"beyond the LLC", 2, 4, 352, 1, 16, 8, 0, 128, 128, 0, 0};

    tap_plan_dynamic();
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++)
            test_convert(&small, a, b);
    for (int a = 0; a < 6; a++)
        test_convert(&odd, a, (a + 3) % 6);
    for (int a = 0; a < 2; a++) /* splitting: dense unpadded blocks only */
        test_convert(&split, a, 1 - a);
    for (int a = 0; a < 6; a++)
        if (layout_block_compact(a))
            for (int b = 0; b < 6; b++)
                if (layout_block_compact(b))
                    test_convert(&padded, a, b);
    for (int a = 0; a < 6; a++)
        test_convert(&big, a, 5 - a);

    for (int a = 0; a < 6; a++) {
        test_scatter_repeat(&small, a);
        test_scatter_repeat(&big, a);
    }

    /* Beyond the LLC: gathers from both transposed ([N, H, C]) layouts and
     * one [H, N, C] one, scatters into three others (heavy: 40 MiB each). */
    test_convert(&huge, KVRT_LAYOUT_LBNHC, KVRT_LAYOUT_LHBNC);
    test_convert(&huge, KVRT_LAYOUT_BLNHC, KVRT_LAYOUT_BHLNC);
    test_convert(&huge, KVRT_LAYOUT_BLHNC, KVRT_LAYOUT_BLNHC);

    for (int a = 0; a < 6; a++) {
        test_copy(&small, a, 1);
        test_copy(&big, a, 40);
    }
    test_copy(&huge_copy, KVRT_LAYOUT_LBHNC, 170);
    test_copy(&huge_copy, KVRT_LAYOUT_BLNHC, 170);
    test_copy(&split, 0, 0);
    test_copy(&padded, 3, 0);
    return tap_done();
}
