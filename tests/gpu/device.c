/*
 * Device checks of one GPU plugin ($KVRT_TEST_PLUGIN): every declared layout
 * with fp32, bf16, fp16 and a byte type, against host emulation and an fp64
 * decode reference.  Without a usable device the plan is "1..0 # SKIP" with
 * the probe's reason; with KVRT_TEST_EXPECT_NODEV=<text> (the OpenCL no-ICD
 * and bad-device runs) the probe *must* fail with a reason containing <text>,
 * and that reason is the skip.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_cache.h"
#include "gpu_checks.h"
#include "gpu_plugin.h"
#include "tap.h"

struct config {
    int dtype;
    uint64_t elem, d, dv;
    const char *name;
};

/* Head sizes chosen so the byte-moving kernels take every unit width:
 * 16-byte (fp32, fp16), 4-byte (bf16 D6), 1-byte (int8 D5). */
/* clang-format off */
static const struct config configs[] = {
    {KVRT_DTYPE_FP32, 4, 16, 16, "fp32 D16/16"},
    {KVRT_DTYPE_BF16, 2, 6, 4, "bf16 D6/4"},
    {KVRT_DTYPE_FP16, 2, 8, 8, "fp16 D8/8"},
    {KVRT_DTYPE_INT8, 1, 5, 2, "int8 D5/2"},
};
/* Decode on every computed type; fp8 outputs are rounded to fp8. */
static const struct config decode_configs[] = {
    {KVRT_DTYPE_FP32, 4, 16, 16, "fp32 D16/16"},
    {KVRT_DTYPE_BF16, 2, 12, 8, "bf16 D12/8"},
    {KVRT_DTYPE_FP16, 2, 8, 8, "fp16 D8/8"},
    {KVRT_DTYPE_FP8_E4M3, 1, 16, 16, "fp8_e4m3 D16/16"},
    {KVRT_DTYPE_FP8_E5M2, 1, 8, 12, "fp8_e5m2 D8/12"},
};
/* clang-format on */
#define NUM_CONFIGS (sizeof(configs) / sizeof(configs[0]))

static struct gpu_geom geom(int layout, const struct config *cfg, uint64_t pad)
{
    struct gpu_geom g = {
        .layout = layout,
        .dtype = cfg->dtype,
        .elem = cfg->elem,
        .layers = 3,
        .blocks = 7,
        .block_size = 8,
        .heads = 2,
        .d = cfg->d,
        .dv = cfg->dv,
        .r = gpu_split_legal(layout) && !pad ? 2 : 1,
        .pad = pad,
        .base = 32,
    };
    return g;
}

static void rig_init(struct gpu_rig *rig, char *tag, size_t size, const struct kvrt_plugin_descriptor *p,
                     kvrt_plugin_device *dev, int layout, const char *what)
{
    snprintf(tag, size, "%s %s", gpu_layout_name(layout), what);
    rig->p = p;
    rig->dev = dev;
    rig->tag = tag;
}

static void run_layout(const struct kvrt_plugin_descriptor *p, kvrt_plugin_device **devs, int li)
{
    const int layout = p->layouts[li];
    const int other = p->layouts[(li + 1) % (int)p->num_layouts];
    char tag[96], tag_b[96];
    struct gpu_rig rig, rig_b;
    struct gpu_cache c, cb;

    for (size_t i = 0; i < NUM_CONFIGS; i++) {
        const struct gpu_geom g = geom(layout, &configs[i], 0);
        const struct gpu_geom gb = geom(other, &configs[i], 0);
        gpu_cache_build(&c, &g);
        gpu_cache_build(&cb, &gb);
        rig_init(&rig, tag, sizeof(tag), p, devs[layout], layout, configs[i].name);
        rig_init(&rig_b, tag_b, sizeof(tag_b), p, devs[other], other, configs[i].name);
        gpu_check_write_read(&rig, &c);
        gpu_check_copy(&rig, &c);
        gpu_check_stage(&rig, &c, &rig_b, &cb);
    }

    /* Decode: 70 tokens span more than one work-group chunk. */
    static const int32_t lens[] = {1, 37, 70};
    for (size_t i = 0; i < sizeof(decode_configs) / sizeof(decode_configs[0]); i++) {
        const struct config cfg = decode_configs[i];
        struct gpu_geom g = geom(layout, &cfg, 0);
        g.blocks = 16;
        gpu_cache_build(&c, &g);
        rig_init(&rig, tag, sizeof(tag), p, devs[layout], layout, cfg.name);
        gpu_check_decode(&rig, &c, 4, lens, 3);
    }
    struct gpu_geom g = geom(layout, &configs[3], 0);
    gpu_cache_build(&c, &g);
    rig_init(&rig, tag, sizeof(tag), p, devs[layout], layout, configs[3].name);
    gpu_check_decode_refused(&rig, &c);
}

/* Padded pages (where a layout allows them): strides no longer a product. */
static void run_padded(const struct kvrt_plugin_descriptor *p, kvrt_plugin_device **devs)
{
    char tag[96], tag_b[96];
    struct gpu_rig rig, rig_b;
    struct gpu_cache c, cb;
    static const int32_t lens[] = {9, 23};
    for (uint32_t li = 0; li < p->num_layouts; li++) {
        const int layout = p->layouts[li];
        if (!gpu_block_compact(layout))
            continue;
        const int other = layout == KVRT_LAYOUT_LBHNC ? KVRT_LAYOUT_BHLNC : KVRT_LAYOUT_LBHNC;
        const struct gpu_geom g = geom(layout, &configs[0], 48);
        const struct gpu_geom gb = geom(other, &configs[0], 0);
        gpu_cache_build(&c, &g);
        gpu_cache_build(&cb, &gb);
        rig_init(&rig, tag, sizeof(tag), p, devs[layout], layout, "fp32 padded page");
        rig_init(&rig_b, tag_b, sizeof(tag_b), p, devs[other], other, "fp32");
        gpu_check_write_read(&rig, &c);
        gpu_check_copy(&rig, &c);
        gpu_check_stage(&rig, &c, &rig_b, &cb);
        gpu_check_decode(&rig, &c, 2, lens, 2);
    }
}

/* Realistic head size and grouped-query ratio on the preferred layout. */
static void run_large_decode(const struct kvrt_plugin_descriptor *p, kvrt_plugin_device **devs)
{
    char tag[96];
    struct gpu_rig rig;
    struct gpu_cache c;
    const struct config cfg = {KVRT_DTYPE_BF16, 2, 128, 128, "bf16 D128 Hq8/H2"};
    struct gpu_geom g = geom(p->layouts[0], &cfg, 0);
    g.blocks = 48;
    g.block_size = 16;
    g.r = gpu_split_legal(g.layout) ? 2 : 1;
    g.layers = 2;
    gpu_cache_build(&c, &g);
    rig_init(&rig, tag, sizeof(tag), p, devs[g.layout], g.layout, cfg.name);
    static const int32_t lens[] = {300, 5, 129};
    gpu_check_decode(&rig, &c, 8, lens, 3);
}

/* Decode shapes only a partitioned, GQA-sharing kernel passes, on the
 * preferred layout: group sizes 1, 4, 8 and 16 (two chunks of 8), many
 * partitions with lengths that are not multiples of them, length-1
 * sequences, a 32K-token sequence, MLA head sizes under a GPU's 48 KiB of
 * local memory, lanes sharing a K row (the local-memory reduction on
 * OpenCL) and the grid-stride loop of a capped launch. */
static void run_decode_shapes(const struct kvrt_plugin_descriptor *p, kvrt_plugin_device **devs)
{
    char tag[128];
    struct gpu_rig rig;
    static struct gpu_cache c; /* large: keep it off the stack */
    const int layout = p->layouts[0];
    static const int32_t lens[] = {1, 37, 70, 16, 1, 100};
    static const uint64_t groups[] = {1, 4, 8, 16};
    const struct config cfg = {KVRT_DTYPE_FP16, 2, 16, 16, "fp16 D16/16"};
    for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++) {
        struct gpu_geom g = geom(layout, &cfg, 0);
        g.blocks = 40;
        g.layers = 1;
        g.heads = 2;
        gpu_cache_build(&c, &g);
        setenv("KVRT_GPU_DECODE_PARTITION", "16", 1);
        char what[96];
        snprintf(what, sizeof(what), "%s GQA %llu, 16-token partitions", cfg.name, (unsigned long long)groups[i]);
        rig_init(&rig, tag, sizeof(tag), p, devs[layout], layout, what);
        gpu_check_decode(&rig, &c, 2 * groups[i], lens, 6);
        unsetenv("KVRT_GPU_DECODE_PARTITION");
    }
    /* Lanes sharing a row (cross-lane sums) and a capped, grid-stride launch. */
    static const char *const lanes[] = {"2", "4", "16"};
    for (size_t i = 0; i < sizeof(lanes) / sizeof(lanes[0]); i++) {
        const struct config fp32 = {KVRT_DTYPE_FP32, 4, 64, 64, "fp32 D64/64"};
        struct gpu_geom g = geom(layout, &fp32, 0);
        g.blocks = 40;
        g.layers = 1;
        gpu_cache_build(&c, &g);
        setenv("KVRT_GPU_DECODE_LANES", lanes[i], 1);
        setenv("KVRT_GPU_DECODE_PARTITION", "32", 1);
        setenv("KVRT_GPU_MAX_GROUPS", "3", 1);
        char what[96];
        snprintf(what, sizeof(what), "%s, %s lanes per token, 3 work-groups grid-stride", fp32.name, lanes[i]);
        rig_init(&rig, tag, sizeof(tag), p, devs[layout], layout, what);
        gpu_check_decode(&rig, &c, 8, lens, 6);
        unsetenv("KVRT_GPU_DECODE_LANES");
        unsetenv("KVRT_GPU_DECODE_PARTITION");
        unsetenv("KVRT_GPU_MAX_GROUPS");
    }
    /* Head size 256, GQA 8, one partition per sequence and several tiles. */
    {
        const struct config big = {KVRT_DTYPE_BF16, 2, 256, 256, "bf16 D256/256"};
        struct gpu_geom g = geom(layout, &big, 0);
        g.blocks = 48;
        g.layers = 1;
        g.heads = 1;
        g.r = 1;
        gpu_cache_build(&c, &g);
        static const int32_t big_lens[] = {300, 17};
        rig_init(&rig, tag, sizeof(tag), p, devs[layout], layout, "bf16 D256/256, GQA 8");
        gpu_check_decode(&rig, &c, 8, big_lens, 2);
    }
    /* MLA 576/512, 8 query heads on one latent head, under 48 KiB. */
    {
        const struct config mla = {KVRT_DTYPE_BF16, 2, 576, 512, "bf16 MLA 576/512"};
        struct gpu_geom g = geom(layout, &mla, 0);
        g.blocks = 14;
        g.layers = 1;
        g.heads = 1;
        g.r = 1;
        gpu_cache_build(&c, &g);
        setenv("KVRT_GPU_SHARED_BYTES", "49152", 1);
        static const int32_t mla_lens[] = {90, 3};
        rig_init(&rig, tag, sizeof(tag), p, devs[layout], layout, "bf16 MLA 576/512, Hq 8, 48 KiB of local memory");
        gpu_check_decode(&rig, &c, 8, mla_lens, 2);
        unsetenv("KVRT_GPU_SHARED_BYTES");
    }
    /* One 32K-token sequence, partitions chosen by the planner. */
    {
        const struct config longc = {KVRT_DTYPE_FP16, 2, 16, 16, "fp16 D16/16"};
        struct gpu_geom g = geom(layout, &longc, 0);
        g.block_size = 16;
        g.blocks = 32768 / 16 + 1;
        g.layers = 1;
        g.heads = 1;
        g.r = 1;
        gpu_cache_build(&c, &g);
        static const int32_t long_len[] = {32768};
        rig_init(&rig, tag, sizeof(tag), p, devs[layout], layout, "fp16 D16/16, one 32768-token sequence, GQA 4");
        gpu_check_decode(&rig, &c, 4, long_len, 1);
    }
}

/* The 64-bit index variants, forced on small data. */
static void run_index64(const struct kvrt_plugin_descriptor *p, kvrt_plugin_device **devs)
{
    char tag[96], tag_b[96];
    struct gpu_rig rig, rig_b;
    struct gpu_cache c, cb;
    setenv("KVRT_GPU_INDEX64", "1", 1);
    setenv("KVRT_GPU_MAX_GROUPS", "2", 1);        /* and every launch grid-strides */
    for (size_t i = 0; i < NUM_CONFIGS; i += 3) { /* fp32 and int8: 16- and 1-byte units */
        const int layout = p->layouts[0], other = p->layouts[p->num_layouts - 1];
        const struct gpu_geom g = geom(layout, &configs[i], 0);
        const struct gpu_geom gb = geom(other, &configs[i], 0);
        gpu_cache_build(&c, &g);
        gpu_cache_build(&cb, &gb);
        char what[64];
        snprintf(what, sizeof(what), "%s 64-bit index, 2 work-groups", configs[i].name);
        rig_init(&rig, tag, sizeof(tag), p, devs[layout], layout, what);
        rig_init(&rig_b, tag_b, sizeof(tag_b), p, devs[other], other, what);
        gpu_check_write_read(&rig, &c);
        gpu_check_copy(&rig, &c);
        gpu_check_stage(&rig, &c, &rig_b, &cb);
    }
    unsetenv("KVRT_GPU_INDEX64");
    unsetenv("KVRT_GPU_MAX_GROUPS");
}

/* KVRT_TEST_EXPECT_NODEV=<text>: probe and bind must fail with
 * KVRT_ERR_NODEV and a reason containing <text>; that reason is the skip. */
static int expect_nodev(const struct kvrt_plugin_descriptor *p, int rc, const char *why, const char *expected)
{
    kvrt_plugin_device *dev = NULL;
    kvrt_plugin_error err = {""};
    struct kvrt_plugin_bind_info info = {sizeof(info), p->layouts[0], NULL};
    int brc = rc == KVRT_ERR_NODEV ? p->bind(&info, &dev, &err) : KVRT_OK;
    const bool says_why = why[0] && strstr(why, expected) != NULL;
    if (rc == KVRT_ERR_NODEV && says_why && brc == KVRT_ERR_NODEV && err.message[0])
        tap_skip_all("%s: no device, as arranged: %s", p->name, why);
    tap_ok(rc == KVRT_ERR_NODEV && says_why,
           "probe without a device: KVRT_ERR_NODEV with a reason naming '%s' (got %d '%s')", expected, rc, why);
    tap_ok(brc == KVRT_ERR_NODEV && err.message[0], "bind without a device: KVRT_ERR_NODEV with a reason (got %d '%s')",
           brc, err.message);
    if (dev)
        p->unbind(dev);
    return tap_done();
}

int main(void)
{
    tap_plan_dynamic();
    const struct kvrt_plugin_descriptor *p = gpu_plugin_load();
    if (!p)
        return tap_done();
    kvrt_plugin_error why = {""};
    const int rc = p->probe(&why);
    const char *expected = getenv("KVRT_TEST_EXPECT_NODEV");
    if (expected)
        return expect_nodev(p, rc, why.message, expected);
    if (rc != KVRT_OK) {
        if (rc == KVRT_ERR_NODEV && why.message[0])
            tap_skip_all("%s: no usable device: %s", p->name, why.message);
        tap_ok(false, "probe: KVRT_OK, or KVRT_ERR_NODEV with a reason (got %d '%s')", rc, why.message);
        return tap_done();
    }
    tap_diag("%s probe: ok", p->name);

    kvrt_plugin_device *devs[KVRT_NUM_LAYOUTS] = {NULL};
    bool bound = true;
    for (uint32_t i = 0; i < p->num_layouts; i++)
        bound &= gpu_bind(p, p->layouts[i], &devs[p->layouts[i]]) == KVRT_OK;
    if (bound) {
        for (uint32_t i = 0; i < p->num_layouts; i++)
            run_layout(p, devs, (int)i);
        run_padded(p, devs);
        run_large_decode(p, devs);
        run_decode_shapes(p, devs);
        run_index64(p, devs);
        char tag[96];
        struct gpu_rig rig;
        struct gpu_cache c;
        const struct config cfg = {KVRT_DTYPE_FP32, 4, 16, 16, "fp32"};
        const struct gpu_geom g = geom(p->layouts[0], &cfg, 0);
        gpu_cache_build(&c, &g);
        rig_init(&rig, tag, sizeof(tag), p, devs[g.layout], g.layout, cfg.name);
        gpu_check_threads(&rig, &c);
        /* The copy roofline kvrt bench divides by. */
        double bps = 0;
        kvrt_plugin_error err = {""};
        const int mrc = KVRT_PLUGIN_HAS(p, measure_copy) && p->measure_copy
                            ? p->measure_copy(devs[g.layout], 8u << 20, &bps, &err)
                            : KVRT_ERR_UNSUPPORTED;
        if (!tap_ok(mrc == KVRT_OK && bps > 0, "measure_copy: 8 MiB device copies at %.2f GB/s", bps / 1e9))
            tap_diag("  %d: %s", mrc, err.message);
    }
    for (int l = 0; l < KVRT_NUM_LAYOUTS; l++)
        if (devs[l])
            p->unbind(devs[l]);
    return tap_done();
}
