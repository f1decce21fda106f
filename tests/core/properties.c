/*
 * Properties of placements and transfer regions over thousands of random,
 * seeded (hence reproducible) cases.  Every property is checked against a
 * byte bitmap built from the views alone, independently of how the library
 * computes its answers.
 *
 * Each property is one test point at the end; the first failing cases are
 * printed as diagnostics with their case number.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/kvrt.h>

#include "tap.h"

#define NUM_CASES 20000
#define MAX_DIAG 10
#define ULL(x) ((unsigned long long)(x))

static uint64_t rng;

static uint64_t rnd(void)
{
    /* xorshift64*: tiny, and the same sequence on every platform. */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [lo, hi]. */
static uint64_t pick(uint64_t lo, uint64_t hi)
{
    return lo + rnd() % (hi - lo + 1);
}

enum property {
    P_REFUSALS_CLEAN,
    P_VIEWS_INSIDE,
    P_NO_OVERLAP,
    P_EXACT_COVER,
    P_FIND_LAYER,
    P_REGIONS_SHAPE,
    P_REGIONS_EXACT,
    P_REGIONS_PER_BLOCK,
    P_BUDGET,
    P_SCALE,
    P_FIXED,
    NUM_PROPERTIES
};

static const char *const property_names[NUM_PROPERTIES] = {
    "every refusal is KVRT_ERR_INVALID or KVRT_ERR_REFUSED with a message",
    "every layer view stays inside the allocation",
    "layers of one group never share a byte",
    "an unpadded single-group placement covers every byte exactly once",
    "every layer is found by name at its set and index",
    "transfer regions are sorted, non-empty, non-overlapping and non-adjacent",
    "transfer regions cover exactly the pages of the requested blocks",
    "block-outermost block-compact single-group layouts give one run per run of blocks",
    "blocks_for_budget gives the largest number of blocks that fits",
    "transfers of 20000 ids out of 50000 blocks move exactly their pages in every layout",
    "a fixed stride is kept, refused only below the span inside it, and layers stay disjoint",
};

static int failures[NUM_PROPERTIES];
static int checked[NUM_PROPERTIES];
static int current_case;

static void check(enum property p, bool ok, const char *fmt, ...) TAP_PRINTF(3, 4);

static void check(enum property p, bool ok, const char *fmt, ...)
{
    checked[p]++;
    if (ok)
        return;
    if (failures[p]++ < MAX_DIAG) {
        char text[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        tap_diag("case %d: %s: %s", current_case, property_names[p], text);
    }
}

static void random_spec(struct kvrt_spec *s, uint64_t block_size)
{
    struct kvrt_spec_info info;
    const uint64_t kind = pick(0, 9);
    kvrt_spec_default(s);
    s->dtype = (enum kvrt_dtype)pick(0, KVRT_NUM_DTYPES - 1);
    s->block_size = block_size;
    if (kind == 9) {
        s->kind = KVRT_SPEC_STATE;
        s->state_content_bytes = pick(1, 96);
    } else if (kind >= 7) {
        s->kind = KVRT_SPEC_MLA;
        s->num_kv_heads = 1;
        s->head_size = pick(1, 16);
        s->head_size_v = pick(0, 1) ? KVRT_UNSET : 0;
    } else {
        s->num_kv_heads = pick(1, 4);
        s->head_size = pick(1, 8);
        s->head_size_v = pick(0, 2) ? KVRT_UNSET : pick(1, 8);
        if (pick(0, 5) == 0)
            s->num_head_slots = pick(1, 3);
    }
    if (s->kind != KVRT_SPEC_STATE && pick(0, 3) == 0) {
        static const uint64_t tps[][2] = {{2, 1}, {4, 1}, {1, 2}, {3, 1}, {3, 2}};
        const uint64_t *t = tps[pick(0, 4)];
        s->tokens_per_state_num = t[0];
        s->tokens_per_state_den = t[1];
    }
    if (pick(0, 4) == 0 && kvrt_spec_derive(s, 0, &info) == KVRT_OK)
        s->page_size_padded = info.unpadded_page_size + kvrt_dtype_size(s->dtype) * pick(0, 8);
}

struct random_case {
    enum kvrt_layout layout;
    uint64_t num_blocks, kernel_block_size;
    size_t num_groups;
    struct kvrt_group groups[3];
    struct kvrt_layer_entry layers[3][4];
    char names[3][4][48];
};

static void random_case(struct random_case *c)
{
    struct kvrt_spec pool[3];
    const size_t pool_size = (size_t)pick(1, 3);
    memset(c, 0, sizeof(*c));
    /* Hybrid models usually share one block size; make that common. */
    const bool shared_block_size = pick(0, 1);
    uint64_t block_size = 0;
    for (size_t i = 0; i < pool_size; i++) {
        if (i == 0 || !shared_block_size)
            block_size = pick(0, 3) ? 1u << pick(0, 4) : pick(1, 12);
        random_spec(&pool[i], block_size);
    }
    c->layout = (enum kvrt_layout)pick(0, KVRT_NUM_LAYOUTS - 1);
    c->num_blocks = pick(1, 6);
    if (pick(0, 3) == 0) {
        uint64_t k = pick(1, pool[0].block_size);
        while (k > 1 && pool[0].block_size % k)
            k--;
        c->kernel_block_size = k;
    }
    c->num_groups = (size_t)pick(1, 3);
    for (size_t g = 0; g < c->num_groups; g++) {
        size_t n = (size_t)pick(1, 4);
        for (size_t l = 0; l < n; l++) {
            snprintf(c->names[g][l], sizeof(c->names[g][l]), "g%zu.l%zu", g, l);
            c->layers[g][l].name = c->names[g][l];
            c->layers[g][l].spec = pool[pick(0, pool_size - 1)];
        }
        c->groups[g].layers = c->layers[g];
        c->groups[g].num_layers = n;
    }
}

/* Call fn(bytes_start, length, ctx) for every contiguous C row of block b of
 * a view (b = manager block; kernel blocks of it included). */
typedef void (*row_fn)(uint64_t start, uint64_t len, void *ctx);

static void for_each_row(const struct kvrt_view *v, uint64_t r, uint64_t b, uint64_t block_stride_kernel, row_fn fn,
                         void *ctx)
{
    for (uint64_t j = 0; j < r; j++)
        for (uint64_t h = 0; h < v->shape_bytes[1]; h++)
            for (uint64_t n = 0; n < v->shape_bytes[2]; n++)
                fn(v->offset_bytes + (b * r + j) * block_stride_kernel + h * v->strides_bytes[1] +
                       n * v->strides_bytes[2],
                   v->shape_bytes[3], ctx);
}

struct bitmap {
    uint8_t *count;
    uint64_t size;
    bool out_of_range;
};

static void mark(uint64_t start, uint64_t len, void *ctx)
{
    struct bitmap *bm = ctx;
    if (start > bm->size || len > bm->size - start) {
        bm->out_of_range = true;
        return;
    }
    for (uint64_t i = 0; i < len; i++)
        if (bm->count[start + i] < 255)
            bm->count[start + i]++;
}

static void check_views(const kvrt_placement *p, uint64_t size)
{
    for (size_t s = 0; s < kvrt_placement_num_sets(p); s++) {
        struct kvrt_placement_set set;
        kvrt_placement_get_set(p, s, &set);
        for (uint64_t l = 0; l < set.num_layers; l++) {
            struct kvrt_view v;
            if (kvrt_placement_layer_view(p, s, l, &v) != KVRT_OK) {
                check(P_VIEWS_INSIDE, false, "no view of set %zu layer %llu: %s", s, ULL(l), kvrt_error_message());
                continue;
            }
            uint64_t last = v.offset_bytes + v.shape_bytes[3] - 1;
            for (int i = 0; i < 3; i++)
                last += (v.shape_bytes[i] - 1) * v.strides_bytes[i];
            /* A padded page owns its padding: that must fit as well. */
            uint64_t page_end =
                v.offset_bytes + (set.geometry.num_blocks - 1) * set.block_stride + set.geometry.info.page_size;
            check(P_VIEWS_INSIDE, last < size && page_end <= size,
                  "set %zu layer %llu ends at byte %llu (page end %llu) of %llu", s, ULL(l), ULL(last), ULL(page_end),
                  ULL(size));
            size_t fs = 99;
            uint64_t fl = 99;
            check(P_FIND_LAYER,
                  kvrt_placement_find_layer(p, set.layer_names[l], &fs, &fl) == KVRT_OK && fs == s && fl == l,
                  "\"%s\" found at set %zu layer %llu, placed at set %zu layer %llu", set.layer_names[l], fs, ULL(fl),
                  s, ULL(l));
        }
    }
}

/* Bytes of every layer of every set of `group` (all blocks); true when some
 * spec of the group is padded. */
static bool mark_group(const kvrt_placement *p, size_t group, struct bitmap *bm)
{
    bool padded = false;
    for (size_t s = 0; s < kvrt_placement_num_sets(p); s++) {
        struct kvrt_placement_set set;
        kvrt_placement_get_set(p, s, &set);
        if (set.group != group)
            continue;
        const struct kvrt_spec_info *info = &set.geometry.info;
        padded |= info->page_size != info->unpadded_page_size;
        for (uint64_t l = 0; l < set.num_layers; l++) {
            struct kvrt_view v;
            if (kvrt_placement_layer_view(p, s, l, &v) != KVRT_OK)
                continue; /* reported by check_views */
            for (uint64_t b = 0; b < set.geometry.num_blocks; b++)
                for_each_row(&v, info->kernel_blocks_per_block, b, set.geometry.strides_bytes[KVRT_AXIS_B], mark, bm);
        }
    }
    return padded;
}

static void check_cover(const kvrt_placement *p, const struct random_case *c, struct bitmap *bm)
{
    for (size_t g = 0; g < c->num_groups; g++) {
        memset(bm->count, 0, bm->size);
        bm->out_of_range = false;
        bool padded = mark_group(p, g, bm);
        uint64_t twice = 0, missing = 0;
        for (uint64_t i = 0; i < bm->size; i++) {
            twice += bm->count[i] > 1;
            missing += bm->count[i] == 0;
        }
        check(P_NO_OVERLAP, twice == 0 && !bm->out_of_range, "group %zu: %llu bytes used twice%s", g, ULL(twice),
              bm->out_of_range ? ", some outside the allocation" : "");
        if (c->num_groups == 1 && !padded)
            check(P_EXACT_COVER, missing == 0 && twice == 0, "%llu bytes unused, %llu used twice of %llu", ULL(missing),
                  ULL(twice), ULL(bm->size));
    }
}

/* The bytes a transfer of `ids` must move, from the views alone. */
static void expected_transfer(const kvrt_placement *p, const uint64_t *ids, size_t n, struct bitmap *bm)
{
    memset(bm->count, 0, bm->size);
    for (size_t s = 0; s < kvrt_placement_num_sets(p); s++) {
        struct kvrt_placement_set set;
        kvrt_placement_get_set(p, s, &set);
        const struct kvrt_spec_info *info = &set.geometry.info;
        for (uint64_t l = 0; l < set.num_layers; l++) {
            struct kvrt_view v;
            if (kvrt_placement_layer_view(p, s, l, &v) != KVRT_OK)
                continue; /* reported by check_views */
            for (size_t i = 0; i < n; i++) {
                if (info->page_size != info->unpadded_page_size)
                    mark(v.offset_bytes + ids[i] * set.block_stride, info->page_size, bm);
                else
                    for_each_row(&v, info->kernel_blocks_per_block, ids[i], set.geometry.strides_bytes[KVRT_AXIS_B],
                                 mark, bm);
            }
        }
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void check_transfer(const kvrt_placement *p, const struct random_case *c, struct bitmap *bm)
{
    const uint64_t nb = kvrt_placement_num_blocks(p);
    uint64_t ids[16];
    size_t n = (size_t)pick(0, 2 * nb < 16 ? 2 * nb : 16);
    for (size_t i = 0; i < n; i++)
        ids[i] = pick(0, nb - 1);

    struct kvrt_region *regions = NULL;
    size_t num = 0;
    int rc = kvrt_transfer_regions(p, ids, n, &regions, &num);
    if (rc != KVRT_OK) {
        check(P_REGIONS_SHAPE, false, "transfer of %zu ids failed: %s", n, kvrt_error_message());
        return;
    }
    bool shape_ok = (n == 0) == (num == 0);
    for (size_t i = 0; i < num && shape_ok; i++)
        shape_ok =
            regions[i].length > 0 && (i == 0 || regions[i].offset > regions[i - 1].offset + regions[i - 1].length);
    check(P_REGIONS_SHAPE, shape_ok, "%zu regions for %zu ids are not sorted and separated", num, n);

    expected_transfer(p, ids, n, bm);
    uint8_t *want = malloc(bm->size ? bm->size : 1);
    for (uint64_t i = 0; want && i < bm->size; i++)
        want[i] = bm->count[i] != 0;
    memset(bm->count, 0, bm->size);
    bm->out_of_range = false;
    for (size_t i = 0; i < num; i++)
        mark(regions[i].offset, regions[i].length, bm);
    uint64_t diff = 0;
    for (uint64_t i = 0; want && i < bm->size; i++)
        diff += (bm->count[i] != 0) != want[i];
    check(P_REGIONS_EXACT, want && diff == 0 && !bm->out_of_range,
          "%llu bytes differ from the requested pages (%zu ids, %zu regions)%s", ULL(diff), n, num,
          bm->out_of_range ? ", regions leave the allocation" : "");
    free(want);

    if (c->num_groups == 1 && kvrt_layout_block_outermost(c->layout) && kvrt_layout_block_compact(c->layout)) {
        qsort(ids, n, sizeof(ids[0]), cmp_u64);
        size_t runs = 0;
        for (size_t i = 0; i < n; i++)
            runs += i == 0 || ids[i] > ids[i - 1] + 1;
        check(P_REGIONS_PER_BLOCK, num == runs, "%zu regions for %zu runs of blocks", num, runs);
    }
    kvrt_free(regions);
}

/* The largest count that fits the budget and can be placed, by brute force
 * (alignment can make some counts unplaceable); 0 when none. */
static uint64_t best_count(const struct random_case *c, uint64_t per_block, uint64_t budget)
{
    for (uint64_t m = budget / per_block; m >= 1; m--) {
        kvrt_placement *q = NULL;
        int rc = kvrt_placement_create(c->layout, c->groups, c->num_groups, m, 0, &q);
        bool fits = rc == KVRT_OK && kvrt_placement_size(q) <= budget;
        kvrt_placement_destroy(q);
        if (fits)
            return m;
    }
    return 0;
}

static void check_budget(const kvrt_placement *p, const struct random_case *c)
{
    const uint64_t per_block = kvrt_placement_bytes_per_block(p);
    const uint64_t budget = pick(0, 8 * per_block);
    uint64_t nb = 0;
    int rc = kvrt_placement_blocks_for_budget(c->layout, c->groups, c->num_groups, budget, &nb);
    uint64_t best = best_count(c, per_block, budget);
    if (best == 0)
        check(P_BUDGET, rc == KVRT_ERR_INVALID && *kvrt_error_message(),
              "budget %llu (block %llu bytes) holds no placeable count, but got %s", ULL(budget), ULL(per_block),
              kvrt_status_name(rc));
    else
        check(P_BUDGET, rc == KVRT_OK && nb == best, "budget %llu, block %llu bytes: %llu blocks, want %llu (%s)",
              ULL(budget), ULL(per_block), ULL(nb), ULL(best), kvrt_error_message());
}

/* Geometry with one caller-fixed stride: kept as given, everything outside
 * grows from it, and no two cells of any layer share a byte. */
static void check_fixed_strides(struct bitmap *bm, uint64_t max_size)
{
    for (int i = 0; i < 3000; i++) {
        struct kvrt_geometry_params gp;
        struct kvrt_geometry g0, g;
        struct kvrt_spec s;
        current_case = 100000 + i;
        random_spec(&s, 1u << pick(0, 4));
        kvrt_geometry_params_default(&gp);
        gp.layout = (enum kvrt_layout)pick(0, KVRT_NUM_LAYOUTS - 1);
        gp.spec = &s;
        gp.num_layers = pick(1, 3);
        gp.num_blocks = pick(1, 4);
        if (kvrt_geometry_compute(&gp, &g0) != KVRT_OK)
            continue;
        const int axis = (int)pick(KVRT_AXIS_L, KVRT_AXIS_N);
        const uint64_t r = g0.info.kernel_blocks_per_block;
        const uint64_t natural = axis == KVRT_AXIS_B ? g0.block_stride : g0.strides_bytes[axis];
        const uint64_t elem = g0.info.elem_size;
        const bool shrink = natural > elem && pick(0, 3) == 0;
        const uint64_t fixed = shrink ? natural - elem : natural + elem * pick(0, 3);
        gp.fixed_strides[axis] = fixed;
        int rc = kvrt_geometry_compute(&gp, &g);
        if (shrink) {
            /* Below the span inside it: refused unless the axis never steps. */
            bool steps = g0.shape_bytes[axis] > 1;
            check(P_FIXED, steps ? rc == KVRT_ERR_INVALID : rc == KVRT_OK, "axis %d fixed to %llu below %llu: %s", axis,
                  ULL(fixed), ULL(natural), kvrt_status_name(rc));
            continue;
        }
        if (rc != KVRT_OK) {
            check(P_FIXED, false, "axis %d fixed to %llu (natural %llu) refused: %s", axis, ULL(fixed), ULL(natural),
                  kvrt_error_message());
            continue;
        }
        check(P_FIXED, (axis == KVRT_AXIS_B ? g.block_stride : g.strides_bytes[axis]) == fixed,
              "axis %d fixed to %llu came out %llu", axis, ULL(fixed), ULL(g.strides_bytes[axis]));
        if (g.total_bytes > max_size)
            continue;
        bm->size = g.total_bytes;
        bm->out_of_range = false;
        memset(bm->count, 0, bm->size);
        for (uint64_t l = 0; l < g.num_layers; l++) {
            struct kvrt_view v;
            if (kvrt_geometry_layer_view(&g, 0, l, &v) != KVRT_OK) {
                /* Only an odd fixed stride may lack an element view. */
                check(P_FIXED, fixed % elem != 0, "no view: %s", kvrt_error_message());
                continue;
            }
            for (uint64_t b = 0; b < g.num_blocks; b++)
                for_each_row(&v, r, b, g.strides_bytes[KVRT_AXIS_B], mark, bm);
        }
        uint64_t twice = 0;
        for (uint64_t k = 0; k < bm->size; k++)
            twice += bm->count[k] > 1;
        check(P_FIXED, twice == 0 && !bm->out_of_range, "axis %d fixed to %llu: %llu bytes shared%s", axis, ULL(fixed),
              ULL(twice), bm->out_of_range ? ", cells outside total_bytes" : "");
    }
}

/* Big enough that a byte bitmap of the allocation would be silly (GiBs): the
 * regions are checked by their total, which for one unpadded group must be
 * distinct ids * bytes per block, and by their order. */
static void check_scale(void)
{
    enum { LAYERS = 6, BLOCKS = 50000, IDS = 20000 };
    struct kvrt_layer_entry layers[LAYERS];
    char names[LAYERS][24];
    static uint64_t ids[IDS];
    struct kvrt_spec s;

    kvrt_spec_default(&s);
    s.block_size = 16;
    s.num_kv_heads = 4;
    s.head_size = 64;
    for (int l = 0; l < LAYERS; l++) {
        snprintf(names[l], sizeof(names[l]), "big.%d", l);
        layers[l].name = names[l];
        layers[l].spec = s;
    }
    struct kvrt_group g = {layers, LAYERS};
    for (size_t i = 0; i < IDS; i++)
        ids[i] = pick(0, BLOCKS - 1);
    static uint64_t sorted[IDS];
    memcpy(sorted, ids, sizeof(ids));
    qsort(sorted, IDS, sizeof(sorted[0]), cmp_u64);
    uint64_t distinct = 0;
    for (size_t i = 0; i < IDS; i++)
        distinct += i == 0 || sorted[i] != sorted[i - 1];

    for (int layout = 0; layout < KVRT_NUM_LAYOUTS; layout++) {
        kvrt_placement *p = NULL;
        struct kvrt_region *r = NULL;
        size_t n = 0;
        current_case = -1 - layout;
        int rc = kvrt_placement_create((enum kvrt_layout)layout, &g, 1, BLOCKS, 0, &p);
        if (rc == KVRT_OK)
            rc = kvrt_transfer_regions(p, ids, IDS, &r, &n);
        uint64_t total = 0;
        bool ok = rc == KVRT_OK;
        for (size_t i = 0; ok && i < n; i++) {
            ok = r[i].length > 0 && r[i].offset + r[i].length <= kvrt_placement_size(p) &&
                 (i == 0 || r[i].offset > r[i - 1].offset + r[i - 1].length);
            total += r[i].length;
        }
        check(P_SCALE, ok && total == distinct * kvrt_placement_bytes_per_block(p),
              "%s: %zu regions, %llu bytes for %llu distinct blocks of %llu bytes (%s)",
              kvrt_layout_name((enum kvrt_layout)layout), n, ULL(total), ULL(distinct),
              ULL(kvrt_placement_bytes_per_block(p)), rc == KVRT_OK ? "ok" : kvrt_error_message());
        kvrt_free(r);
        kvrt_placement_destroy(p);
    }
}

int main(void)
{
    int placed = 0, refused = 0, split = 0, padded_cases = 0, multi_group = 0;
    const uint64_t max_size = 1u << 22;
    struct bitmap bm = {malloc(max_size), 0, false};

    tap_plan_dynamic();
    if (!bm.count) {
        printf("Bail out! out of memory\n");
        return 1;
    }
    for (current_case = 0; current_case < NUM_CASES; current_case++) {
        struct random_case c;
        kvrt_placement *p = NULL;
        rng = 0x6b767274ULL * 2654435761ULL + (uint64_t)current_case * 0x9E3779B97F4A7C15ULL;
        rnd();
        random_case(&c);
        int rc = kvrt_placement_create(c.layout, c.groups, c.num_groups, c.num_blocks, c.kernel_block_size, &p);
        if (rc != KVRT_OK) {
            refused++;
            check(P_REFUSALS_CLEAN,
                  (rc == KVRT_ERR_INVALID || rc == KVRT_ERR_REFUSED) && p == NULL && *kvrt_error_message(), "%s: %s",
                  kvrt_status_name(rc), kvrt_error_message());
            continue;
        }
        const uint64_t size = kvrt_placement_size(p);
        if (size > max_size) {
            tap_diag("case %d: size %llu is too big for the bitmap; params need shrinking", current_case, ULL(size));
            kvrt_placement_destroy(p);
            continue;
        }
        placed++;
        multi_group += c.num_groups > 1;
        split += c.kernel_block_size && c.kernel_block_size != c.layers[0][0].spec.block_size;
        for (size_t s = 0; s < kvrt_placement_num_sets(p); s++) {
            struct kvrt_placement_set set;
            kvrt_placement_get_set(p, s, &set);
            if (set.geometry.info.page_size != set.geometry.info.unpadded_page_size) {
                padded_cases++;
                break;
            }
        }
        bm.size = size;
        check_views(p, size);
        check_cover(p, &c, &bm);
        for (int t = 0; t < 3; t++)
            check_transfer(p, &c, &bm);
        check_budget(p, &c);
        kvrt_placement_destroy(p);
    }
    check_fixed_strides(&bm, max_size);
    free(bm.count);
    check_scale();

    tap_diag("%d cases: %d placed (%d with several groups, %d padded, %d split), %d refused", NUM_CASES, placed,
             multi_group, padded_cases, split, refused);
    for (int p = 0; p < NUM_PROPERTIES; p++)
        tap_ok(failures[p] == 0 && checked[p] > 0, "%s (%d checks, %d failed)", property_names[p], checked[p],
               failures[p]);
    /* Random cases only prove something if enough of each kind get placed. */
    tap_ok(placed >= NUM_CASES / 3 && multi_group >= 100 && padded_cases >= 50 && split >= 50,
           "the generator places enough cases of every kind");
    return tap_done();
}
