/*
 * Misuse of the spec, geometry, placement and transfer APIs: every refusal
 * returns the documented status and a message that names the field, the
 * value and what is valid.  Sizes that do not fit in 64 bits are
 * KVRT_ERR_OVERFLOW, never a wrapped number.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <kvrt/kvrt.h>

#include "tap.h"

/* One test point: rc == want and the message contains every string of the
 * NULL-terminated list. */
static void expect(int rc, int want, const char *what, ...)
{
    const char *msg = kvrt_error_message();
    bool ok = rc == want && *msg;
    va_list ap;
    va_start(ap, what);
    for (const char *s = va_arg(ap, const char *); s; s = va_arg(ap, const char *)) {
        if (!strstr(msg, s)) {
            tap_diag("  message lacks \"%s\"", s);
            ok = false;
        }
    }
    va_end(ap);
    if (!tap_ok(ok, "%s: %s", what, kvrt_status_name(want)))
        tap_diag("  got %s: %s", kvrt_status_name(rc), msg);
}

static struct kvrt_spec attention(void)
{
    struct kvrt_spec s;
    kvrt_spec_default(&s);
    s.block_size = 16;
    s.num_kv_heads = 2;
    s.head_size = 64;
    return s;
}

static int derive(const struct kvrt_spec *s, uint64_t k)
{
    struct kvrt_spec_info info;
    return kvrt_spec_derive(s, k, &info);
}

static int geometry(enum kvrt_layout layout, const struct kvrt_spec *s, uint64_t layers, uint64_t blocks, uint64_t k)
{
    struct kvrt_geometry_params gp;
    struct kvrt_geometry g;
    kvrt_geometry_params_default(&gp);
    gp.layout = layout;
    gp.spec = s;
    gp.num_layers = layers;
    gp.num_blocks = blocks;
    gp.kernel_block_size = k;
    return kvrt_geometry_compute(&gp, &g);
}

static void spec_zero_sizes(void)
{
    struct kvrt_spec s;

    s = attention();
    s.block_size = 0;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "block_size 0", "block_size 0", "at least 1", NULL);
    s = attention();
    s.num_kv_heads = 0;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "num_kv_heads 0", "num_kv_heads 0", "at least 1", NULL);
    s = attention();
    s.head_size = 0;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "head_size 0", "head_size 0", "at least 1", NULL);
    s = attention();
    s.num_head_slots = 0;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "num_head_slots 0", "num_head_slots 0", "unset", NULL);
    s = attention();
    s.state_content_bytes = 0;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "attention state_content_bytes 0", "state_content_bytes 0", NULL);
    s = attention();
    s.tokens_per_state_num = 0;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "tokens_per_state 0/1", "tokens_per_state 0/1", "at least 1", NULL);
    s = attention();
    s.tokens_per_state_den = 0;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "tokens_per_state 1/0", "tokens_per_state 1/0", NULL);
    s = attention();
    s.page_size_padded = 0;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "page_size_padded 0", "page_size_padded 0", "8192", NULL);

    kvrt_spec_default(&s);
    s.kind = KVRT_SPEC_STATE;
    s.block_size = 16;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "state spec without content", "state_content_bytes", NULL);
    s.state_content_bytes = 0;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "state_content_bytes 0", "state_content_bytes 0", NULL);
    s.state_content_bytes = 100;
    s.num_head_slots = 2;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "state spec with 2 head slots", "num_head_slots 2", "one head slot", NULL);
}

static void spec_rules(void)
{
    struct kvrt_spec s;

    s = attention();
    s.page_size_padded = 8191;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "padded page smaller than the page", "page_size_padded 8191", "8192", NULL);
    s.page_size_padded = 8193;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "padded page not a whole number of fp16 elements", "8193", "2", NULL);
    s = attention();
    expect(derive(&s, 6), KVRT_ERR_INVALID, "kernel block not dividing the block",
           "kernel_block_size 6 does not divide block_size 16", NULL);
    expect(derive(&s, 32), KVRT_ERR_INVALID, "kernel block larger than the block",
           "kernel_block_size 32 does not divide block_size 16", NULL);
    s.tokens_per_state_num = 32;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "zero states per block", "tokens_per_state 32/1", "block_size 16",
           "zero states", NULL);
    s.tokens_per_state_num = 4;
    expect(derive(&s, 2), KVRT_ERR_INVALID, "zero states per kernel block", "kernel_block_size 2", "zero states",
           "4 tokens", NULL);
    s.block_size = 12;
    s.tokens_per_state_num = 3;
    expect(derive(&s, 4), KVRT_ERR_INVALID, "kernel split whose states do not add up", "kernel_block_size 4",
           "4 states", "3 kernel blocks", NULL);
    tap_ok(derive(&s, 6) == KVRT_OK, "an exact kernel split at tokens_per_state 3 is accepted");

    s = attention();
    s.dtype = KVRT_DTYPE_FP32;
    s.state_content_bytes = 6;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "content not a whole number of fp32 elements", "state_content_bytes 6",
           "fp32", "4", NULL);
    s = attention();
    s.kind = KVRT_SPEC_MLA;
    s.head_size_v = 64;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "mla with head_size_v", "head_size_v 64", "mla", "0", NULL);
    s = attention();
    s.head_size_v = 0;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "attention with head_size_v 0", "head_size_v 0", "mla", NULL);

    kvrt_spec_default(&s);
    s.kind = KVRT_SPEC_STATE;
    s.block_size = 16;
    s.state_content_bytes = 100;
    expect(derive(&s, 8), KVRT_ERR_INVALID, "splitting a state spec", "kernel_block_size 8", "state", NULL);

    s = attention();
    s.kind = (enum kvrt_spec_kind)7;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "invalid kind", "kind 7", "attention", "mla", "state", NULL);
    s = attention();
    s.dtype = (enum kvrt_dtype)42;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "invalid dtype", "dtype 42", "fp32", "bf16", "uint8", NULL);
    expect(kvrt_spec_derive(NULL, 0, NULL), KVRT_ERR_INVALID, "NULL spec", "NULL", NULL);
}

static void spec_overflow(void)
{
    struct kvrt_spec s;

    s = attention();
    s.num_kv_heads = 1ull << 40;
    s.head_size = 1ull << 30;
    expect(derive(&s, 0), KVRT_ERR_OVERFLOW, "heads * page overflow", "1099511627776", "64 bits", NULL);
    s = attention();
    s.head_size = 1ull << 62;
    s.dtype = KVRT_DTYPE_FP32;
    expect(derive(&s, 0), KVRT_ERR_OVERFLOW, "(head_size + head_size_v) * elem overflow", "head_size", "element size",
           NULL);
    s = attention();
    s.head_size = UINT64_MAX - 1;
    s.head_size_v = 5;
    expect(derive(&s, 0), KVRT_ERR_OVERFLOW, "head_size + head_size_v overflow", "head_size_v 5", NULL);
    s = attention();
    s.tokens_per_state_den = 1ull << 62;
    expect(derive(&s, 0), KVRT_ERR_OVERFLOW, "block_size * tokens_per_state denominator overflow", "block_size 16",
           "denominator", NULL);

    /* 2^40 blocks of 2^30-byte pages: 2^70 bytes. */
    s = attention();
    s.num_kv_heads = 1 << 20;
    s.head_size = 32; /* C = 128 bytes, N = 16, page = 2^31 */
    expect(geometry(KVRT_LAYOUT_LBHNC, &s, 1, 1ull << 40, 0), KVRT_ERR_OVERFLOW, "2^40 blocks of 2 GiB pages",
           "1099511627776", "64 bits", NULL);
    expect(geometry(KVRT_LAYOUT_BLHNC, &s, 80, 1ull << 34, 0), KVRT_ERR_OVERFLOW,
           "80 layers * 2^34 blocks of 2 GiB pages", "64 bits", NULL);

    struct kvrt_layer_entry layers[2] = {{"a", s}, {"b", s}};
    struct kvrt_group g = {layers, 2};
    kvrt_placement *p = NULL;
    expect(kvrt_placement_create(KVRT_LAYOUT_BLHNC, &g, 1, 1ull << 40, 0, &p), KVRT_ERR_OVERFLOW,
           "placement of 2^40 blocks", "num_blocks 1099511627776", "64 bits", NULL);
    tap_ok(p == NULL, "a refused placement leaves *out NULL");
}

static void geometry_misuse(void)
{
    struct kvrt_spec s = attention();
    struct kvrt_geometry_params gp;
    struct kvrt_geometry g;
    struct kvrt_view v;

    expect(geometry((enum kvrt_layout)9, &s, 1, 1, 0), KVRT_ERR_INVALID, "invalid layout", "layout value 9", "LBHNC",
           "BHLNC", NULL);
    expect(geometry(KVRT_LAYOUT_LBHNC, &s, 0, 1, 0), KVRT_ERR_INVALID, "zero layers", "num_layers 0", NULL);
    expect(geometry(KVRT_LAYOUT_LBHNC, &s, 1, 0, 0), KVRT_ERR_INVALID, "zero blocks", "num_blocks 0", NULL);
    expect(geometry(KVRT_LAYOUT_LBHNC, NULL, 1, 1, 0), KVRT_ERR_INVALID, "NULL spec", "spec", NULL);
    expect(kvrt_geometry_compute(NULL, &g), KVRT_ERR_INVALID, "NULL params", "NULL", NULL);

    expect(geometry(KVRT_LAYOUT_BLHNC, &s, 2, 4, 8), KVRT_ERR_REFUSED, "kernel split of an interleaved block", "BLHNC",
           "block stride 16384", "8192", "smaller block size", "layer-compact layout such as LBNHC", NULL);
    expect(geometry(KVRT_LAYOUT_LHBNC, &s, 1, 4, 8), KVRT_ERR_REFUSED, "kernel split with H outside the block", "LHBNC",
           "block stride 4096", "8192", "smaller block size", "LBNHC", NULL);
    s.page_size_padded = 9000;
    expect(geometry(KVRT_LAYOUT_LBHNC, &s, 1, 4, 8), KVRT_ERR_INVALID, "padding with a kernel split", "padded",
           "kernel_block_size 8", NULL);
    expect(geometry(KVRT_LAYOUT_LHBNC, &s, 2, 4, 0), KVRT_ERR_REFUSED, "padding with H outside the page", "LHBNC",
           "axis H", "page_size_padded 9000", NULL);
    expect(geometry(KVRT_LAYOUT_BHLNC, &s, 2, 4, 0), KVRT_ERR_REFUSED, "padding in BHLNC with 2 heads", "BHLNC", NULL);
    s.num_kv_heads = 1;
    s.page_size_padded = 4500;
    tap_ok(geometry(KVRT_LAYOUT_LHBNC, &s, 2, 4, 0) == KVRT_OK, "padding in LHBNC with 1 head is accepted");

    s = attention();
    kvrt_geometry_params_default(&gp);
    gp.layout = KVRT_LAYOUT_LBHNC;
    gp.spec = &s;
    gp.num_layers = 2;
    gp.num_blocks = 4;
    gp.fixed_strides[KVRT_AXIS_B] = 4096;
    expect(kvrt_geometry_compute(&gp, &g), KVRT_ERR_INVALID, "fixed block stride below the page", "4096", "8192",
           "axis B", NULL);
    gp.fixed_strides[KVRT_AXIS_B] = KVRT_UNSET;
    gp.fixed_strides[KVRT_AXIS_C] = 2;
    expect(kvrt_geometry_compute(&gp, &g), KVRT_ERR_INVALID, "fixed C stride", "axis C", "1", NULL);
    gp.fixed_strides[KVRT_AXIS_C] = KVRT_UNSET;
    gp.fixed_strides[KVRT_AXIS_B] = 8193;
    tap_ok(kvrt_geometry_compute(&gp, &g) == KVRT_OK, "an odd fixed block stride computes");
    expect(kvrt_geometry_layer_view(&g, 0, 0, &v), KVRT_ERR_INVALID, "odd stride has no element view", "8193",
           "element size 2", NULL);
    gp.fixed_strides[KVRT_AXIS_B] = 10000;
    tap_ok(kvrt_geometry_compute(&gp, &g) == KVRT_OK && g.total_bytes == 80000 && g.layer_stride == 40000,
           "a fixed block stride grows the axes outside it");
    expect(kvrt_geometry_layer_view(&g, 0, 2, &v), KVRT_ERR_INVALID, "view of layer 2 of 2", "layer 2", "2 layers",
           NULL);
    expect(kvrt_geometry_layer_view(&g, UINT64_MAX - 5, 1, &v), KVRT_ERR_OVERFLOW, "view offset overflow", "64 bits",
           NULL);
}

static void placement_misuse(void)
{
    struct kvrt_spec s = attention(), small = attention();
    kvrt_placement *p = NULL;
    small.head_size = 32;

    expect(kvrt_placement_create(KVRT_LAYOUT_LBNHC, NULL, 0, 4, 0, &p), KVRT_ERR_INVALID, "no groups",
           "at least 1 group", NULL);
    struct kvrt_group empty = {NULL, 0};
    expect(kvrt_placement_create(KVRT_LAYOUT_LBNHC, &empty, 1, 4, 0, &p), KVRT_ERR_INVALID, "empty group",
           "group 0 has no layers", NULL);
    struct kvrt_layer_entry unnamed[1] = {{NULL, s}};
    struct kvrt_group g_unnamed = {unnamed, 1};
    expect(kvrt_placement_create(KVRT_LAYOUT_LBNHC, &g_unnamed, 1, 4, 0, &p), KVRT_ERR_INVALID, "unnamed layer",
           "no name", NULL);
    struct kvrt_layer_entry dup0[2] = {{"model.layers.0.attn", s}, {"x", s}};
    struct kvrt_layer_entry dup1[1] = {{"model.layers.0.attn", s}};
    struct kvrt_group dups[2] = {{dup0, 2}, {dup1, 1}};
    expect(kvrt_placement_create(KVRT_LAYOUT_LBNHC, dups, 2, 4, 0, &p), KVRT_ERR_INVALID, "duplicate names",
           "\"model.layers.0.attn\" is used twice", "group 0 layer 0", "group 1 layer 0", NULL);
    struct kvrt_layer_entry one[1] = {{"a", s}};
    struct kvrt_group g_one = {one, 1};
    expect(kvrt_placement_create(KVRT_LAYOUT_LBNHC, &g_one, 1, 0, 0, &p), KVRT_ERR_INVALID, "zero blocks",
           "num_blocks 0", NULL);
    expect(kvrt_placement_create((enum kvrt_layout) - 1, &g_one, 1, 4, 0, &p), KVRT_ERR_INVALID, "invalid layout",
           "layout value -1", "BLHNC", NULL);
    struct kvrt_layer_entry bad[1] = {{"bad.layer", s}};
    bad[0].spec.block_size = 0;
    struct kvrt_group g_bad = {bad, 1};
    expect(kvrt_placement_create(KVRT_LAYOUT_LBNHC, &g_bad, 1, 4, 0, &p), KVRT_ERR_INVALID, "bad spec names its layer",
           "\"bad.layer\"", "block_size 0", NULL);

    struct kvrt_layer_entry ga[1] = {{"a", s}}, gb[1] = {{"b", small}};
    struct kvrt_group mixed[2] = {{ga, 1}, {gb, 1}};
    expect(kvrt_placement_create(KVRT_LAYOUT_LBHNC, mixed, 2, 4, 0, &p), KVRT_ERR_REFUSED,
           "mixed pages in two groups of a layer-compact layout", "LBHNC", "BLHNC", "8192", "4096", NULL);
    expect(kvrt_placement_create(KVRT_LAYOUT_BHLNC, mixed, 2, 4, 0, &p), KVRT_ERR_REFUSED,
           "mixed pages in a layout that is not block compact", "BHLNC", "BLHNC", NULL);

    /* A 6-byte state page before an fp32 layer pushes it off its grid. */
    struct kvrt_spec state;
    kvrt_spec_default(&state);
    state.kind = KVRT_SPEC_STATE;
    state.block_size = 16;
    state.state_content_bytes = 6;
    struct kvrt_spec f32 = attention();
    f32.dtype = KVRT_DTYPE_FP32;
    struct kvrt_layer_entry hybrid[2] = {{"mamba", state}, {"attn", f32}};
    struct kvrt_group g_hybrid = {hybrid, 2};
    expect(kvrt_placement_create(KVRT_LAYOUT_BLHNC, &g_hybrid, 1, 4, 0, &p), KVRT_ERR_INVALID,
           "layer pushed off its element grid", "\"attn\"", "offset inside each block is 6", "multiple of 4",
           "page_size_padded", NULL);
    hybrid[0].spec.page_size_padded = 8;
    tap_ok(kvrt_placement_create(KVRT_LAYOUT_BLHNC, &g_hybrid, 1, 4, 0, &p) == KVRT_OK,
           "padding the state page to 8 bytes fixes it");

    size_t set = 0;
    uint64_t layer = 0;
    struct kvrt_placement_set info;
    struct kvrt_view v;
    expect(kvrt_placement_find_layer(p, "Attn", &set, &layer), KVRT_ERR_INVALID, "unknown layer name", "\"Attn\"",
           NULL);
    expect(kvrt_placement_get_set(p, 2, &info), KVRT_ERR_INVALID, "set out of range", "set 2", "2 sets", NULL);
    expect(kvrt_placement_layer_view(p, 1, 1, &v), KVRT_ERR_INVALID, "layer out of range", "layer 1", "1 layers", NULL);

    uint64_t ids[3] = {0, 3, 4};
    struct kvrt_region *regions = (struct kvrt_region *)&ids;
    size_t num = 99;
    expect(kvrt_transfer_regions(p, ids, 3, &regions, &num), KVRT_ERR_INVALID, "block id out of range", "block id 4",
           "4 blocks", "0..3", NULL);
    tap_ok(regions == NULL && num == 0, "a refused transfer leaves no regions");
    expect(kvrt_transfer_regions(p, NULL, 2, &regions, &num), KVRT_ERR_INVALID, "NULL block ids", "NULL", NULL);
    expect(kvrt_transfer_regions(NULL, ids, 1, &regions, &num), KVRT_ERR_INVALID, "NULL placement", "NULL", NULL);
    tap_ok(kvrt_transfer_regions(p, ids, 0, &regions, &num) == KVRT_OK && num == 0, "no block ids: no regions");
    kvrt_placement_destroy(p);

    uint64_t nb = 0;
    expect(kvrt_placement_blocks_for_budget(KVRT_LAYOUT_LBNHC, &g_one, 1, 8191, &nb), KVRT_ERR_INVALID,
           "budget below one block", "8191", "8192", NULL);
    tap_ok(kvrt_placement_blocks_for_budget(KVRT_LAYOUT_LBNHC, &g_one, 1, 8192 * 10 + 5, &nb) == KVRT_OK && nb == 10,
           "a budget of 10 blocks and a bit gives 10 blocks");
}

static void small_apis(void)
{
    enum kvrt_dtype d;
    expect(kvrt_dtype_parse("FP16", &d), KVRT_ERR_INVALID, "dtype names are case-sensitive", "\"FP16\"", "fp16",
           "bfloat16", NULL);
    tap_ok(kvrt_dtype_parse("bfloat16", &d) == KVRT_OK && d == KVRT_DTYPE_BF16, "bfloat16 is bf16");
    tap_ok(kvrt_dtype_size((enum kvrt_dtype)7) == 0 && kvrt_dtype_name((enum kvrt_dtype) - 1) == NULL,
           "invalid dtypes have no size and no name");
    tap_ok(kvrt_spec_kind_name((enum kvrt_spec_kind)3) == NULL &&
               strcmp(kvrt_spec_kind_name(KVRT_SPEC_MLA), "mla") == 0,
           "kind names");

    struct kvrt_spec a = attention(), b = attention();
    b.head_size_v = b.head_size;
    b.tokens_per_state_num = b.tokens_per_state_den = 3;
    tap_ok(kvrt_spec_equal(&a, &b), "spec_equal resolves defaults (head_size_v, tokens_per_state 3/3)");
    b.num_kv_heads = 4;
    tap_ok(!kvrt_spec_equal(&a, &b), "spec_equal tells different head counts apart");
    a.block_size = 0;
    (void)derive(&a, 0);
    char before[256];
    snprintf(before, sizeof(before), "%s", kvrt_error_message());
    (void)kvrt_spec_equal(&a, &b);
    tap_ok(strcmp(before, kvrt_error_message()) == 0, "spec_equal leaves the last error message alone");
}

/* Reserved bytes are for later API minors: non-zero today is refused. */
static void reserved_bytes(void)
{
    struct kvrt_spec s = attention();
    s.reserved[5] = 7;
    expect(derive(&s, 0), KVRT_ERR_INVALID, "a spec with a non-zero reserved byte", "kvrt_spec.reserved[5]",
           "must be 0", NULL);
    s = attention();
    struct kvrt_geometry_params gp;
    struct kvrt_geometry g;
    kvrt_geometry_params_default(&gp);
    gp.spec = &s;
    gp.num_layers = 1;
    gp.num_blocks = 1;
    gp.reserved[31] = 1;
    expect(kvrt_geometry_compute(&gp, &g), KVRT_ERR_INVALID, "geometry params with a non-zero reserved byte",
           "kvrt_geometry_params.reserved[31]", NULL);
    gp.reserved[31] = 0;
    tap_ok(kvrt_geometry_compute(&gp, &g) == KVRT_OK, "the same params with reserved bytes zero are accepted");
}

int main(void)
{
    tap_plan_dynamic();
    reserved_bytes();
    spec_zero_sizes();
    spec_rules();
    spec_overflow();
    geometry_misuse();
    placement_misuse();
    small_apis();
    return tap_done();
}
