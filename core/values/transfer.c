/*
 * Transfer regions: the byte runs an RDMA/NIXL-style engine registers.
 *
 * A requested range of consecutive blocks of one set is a small strided box
 * (layers x blocks x kernel blocks x H x N x C).  Its axes are sorted by
 * stride and merged from the innermost while they are dense, which leaves one
 * run length and a few axes to enumerate.  All runs of all sets are then
 * sorted and merged, so the work is O(runs log runs) and never touches bytes.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <stdlib.h>
#include <string.h>

#include <kvrt/transfer.h>

#include "checked.h"
#include "error.h"

enum { MAX_BOX_AXES = 6 };

struct box_axis {
    uint64_t extent;
    uint64_t stride;
    bool in_page; /* one of kernel-block, H, N, C: the axes of one page */
};

/* Runs of one (set, block range): `run` bytes at every index of `outer`. */
struct run_pattern {
    uint64_t run;
    int num_outer;
    struct box_axis outer[MAX_BOX_AXES];
};

static void sort_axes(struct box_axis *axes, int n)
{
    for (int i = 1; i < n; i++) {
        struct box_axis a = axes[i];
        int j = i;
        for (; j > 0 && axes[j - 1].stride > a.stride; j--)
            axes[j] = axes[j - 1];
        axes[j] = a;
    }
}

static void make_pattern(const struct kvrt_placement_set *set, uint64_t range_len, struct run_pattern *pt)
{
    const struct kvrt_geometry *g = &set->geometry;
    const uint64_t unpadded = g->info.unpadded_page_size, padded = g->info.page_size;
    const struct box_axis all[MAX_BOX_AXES] = {
        {g->shape_bytes[KVRT_AXIS_C], g->strides_bytes[KVRT_AXIS_C], true},
        {g->shape_bytes[KVRT_AXIS_N], g->strides_bytes[KVRT_AXIS_N], true},
        {g->shape_bytes[KVRT_AXIS_H], g->strides_bytes[KVRT_AXIS_H], true},
        {g->info.kernel_blocks_per_block, g->strides_bytes[KVRT_AXIS_B], true},
        {g->num_layers, g->layer_stride, false},
        {range_len, g->block_stride, false},
    };
    struct box_axis axes[MAX_BOX_AXES];
    int n = 0, page_axes = 0, merged_page_axes = 0;

    /* Axes of extent 1 never step, whatever their stride. */
    for (int i = 0; i < MAX_BOX_AXES; i++) {
        if (all[i].extent > 1) {
            axes[n++] = all[i];
            page_axes += all[i].in_page;
        }
    }
    sort_axes(axes, n);

    uint64_t run = 1;
    int i = 0;
    for (;;) {
        /* A whole dense page that is padded transfers with its padding:
         * the padding is owned by the page, and including it lets pages
         * merge into one run per block (or per layer). */
        if (merged_page_axes == page_axes && run == unpadded && padded > unpadded)
            run = padded;
        if (i == n || axes[i].stride != run)
            break;
        /* Cannot overflow: run * extent spans bytes inside the allocation. */
        run *= axes[i].extent;
        merged_page_axes += axes[i].in_page;
        i++;
    }
    pt->run = run;
    pt->num_outer = n - i;
    memcpy(pt->outer, axes + i, (size_t)(n - i) * sizeof(axes[0]));
}

static uint64_t pattern_count(const struct run_pattern *pt)
{
    uint64_t count = 1;
    for (int i = 0; i < pt->num_outer; i++)
        if (kvrt_mul_overflow(count, pt->outer[i].extent, &count))
            return UINT64_MAX;
    return count;
}

static struct kvrt_region *emit(const struct run_pattern *pt, uint64_t base, struct kvrt_region *out)
{
    uint64_t idx[MAX_BOX_AXES] = {0};
    for (;;) {
        uint64_t off = base;
        for (int i = 0; i < pt->num_outer; i++)
            off += idx[i] * pt->outer[i].stride;
        out->offset = off;
        out->length = pt->run;
        out++;
        int i = 0;
        for (; i < pt->num_outer; i++) {
            if (++idx[i] < pt->outer[i].extent)
                break;
            idx[i] = 0;
        }
        if (i == pt->num_outer)
            return out;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_region(const void *a, const void *b)
{
    const struct kvrt_region *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->length < y->length ? -1 : x->length > y->length;
}

/* Sorted, deduplicated block ids as [start, start + len) ranges. */
struct block_range {
    uint64_t start, len;
};

static int make_ranges(const uint64_t *ids, size_t n, struct block_range **out, size_t *num)
{
    uint64_t *sorted = malloc(n * sizeof(*sorted));
    struct block_range *ranges = malloc(n * sizeof(*ranges));
    size_t k = 0;
    if (!sorted || !ranges) {
        free(sorted);
        free(ranges);
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory sorting %zu block ids", n);
    }
    memcpy(sorted, ids, n * sizeof(*sorted));
    qsort(sorted, n, sizeof(*sorted), cmp_u64);
    for (size_t i = 0; i < n; i++) {
        if (k > 0 && sorted[i] <= ranges[k - 1].start + ranges[k - 1].len) {
            if (sorted[i] == ranges[k - 1].start + ranges[k - 1].len)
                ranges[k - 1].len++;
            continue;
        }
        ranges[k].start = sorted[i];
        ranges[k].len = 1;
        k++;
    }
    free(sorted);
    *out = ranges;
    *num = k;
    return KVRT_OK;
}

/* Sort and merge runs that touch or overlap (groups overlay the same bytes). */
static size_t merge_regions(struct kvrt_region *r, size_t n)
{
    size_t k = 0;
    qsort(r, n, sizeof(*r), cmp_region);
    for (size_t i = 0; i < n; i++) {
        if (k > 0 && r[i].offset <= r[k - 1].offset + r[k - 1].length) {
            uint64_t end = r[i].offset + r[i].length;
            if (end > r[k - 1].offset + r[k - 1].length)
                r[k - 1].length = end - r[k - 1].offset;
            continue;
        }
        r[k++] = r[i];
    }
    return k;
}

static int collect(const kvrt_placement *p, const struct block_range *ranges, size_t num_ranges,
                   struct kvrt_region **regions, size_t *num_regions)
{
    const size_t num_sets = kvrt_placement_num_sets(p);
    struct kvrt_placement_set set;
    struct run_pattern pt;
    uint64_t total = 0;

    /* Count first, so that one exact allocation holds every run. */
    for (size_t s = 0; s < num_sets; s++) {
        kvrt_placement_get_set(p, s, &set);
        for (size_t i = 0; i < num_ranges; i++) {
            make_pattern(&set, ranges[i].len, &pt);
            if (kvrt_add_overflow(total, pattern_count(&pt), &total))
                total = UINT64_MAX;
        }
    }
    if (total > SIZE_MAX / sizeof(struct kvrt_region))
        return kvrt_fail(KVRT_ERR_NOMEM,
                         "the requested blocks split into %llu runs before merging, more than memory "
                         "can hold; request fewer blocks at a time",
                         ULL(total));
    struct kvrt_region *r = malloc((size_t)total * sizeof(*r) + 1);
    if (!r)
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory for %llu transfer runs", ULL(total));

    struct kvrt_region *end = r;
    for (size_t s = 0; s < num_sets; s++) {
        kvrt_placement_get_set(p, s, &set);
        for (size_t i = 0; i < num_ranges; i++) {
            make_pattern(&set, ranges[i].len, &pt);
            end = emit(&pt, set.offset + ranges[i].start * set.block_stride, end);
        }
    }
    size_t n = merge_regions(r, (size_t)(end - r));
    struct kvrt_region *shrunk = realloc(r, n * sizeof(*r) + 1);
    *regions = shrunk ? shrunk : r;
    *num_regions = n;
    return KVRT_OK;
}

int kvrt_transfer_regions(const kvrt_placement *p, const uint64_t *block_ids, size_t num_block_ids,
                          struct kvrt_region **regions, size_t *num_regions)
{
    struct block_range *ranges = NULL;
    size_t num_ranges = 0;

    if (!regions || !num_regions)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_transfer_regions: regions and num_regions must not be NULL");
    *regions = NULL;
    *num_regions = 0;
    if (!p)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_transfer_regions: placement is NULL");
    if (num_block_ids > 0 && !block_ids)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "kvrt_transfer_regions: block_ids is NULL but %zu ids were "
                         "announced",
                         num_block_ids);
    const uint64_t num_blocks = kvrt_placement_num_blocks(p);
    for (size_t i = 0; i < num_block_ids; i++)
        if (block_ids[i] >= num_blocks)
            return kvrt_fail(KVRT_ERR_INVALID,
                             "block id %llu (entry %zu) is out of range: the placement has %llu blocks "
                             "(valid ids 0..%llu)",
                             ULL(block_ids[i]), i, ULL(num_blocks), ULL(num_blocks - 1));
    if (num_block_ids == 0)
        return KVRT_OK;

    int rc = make_ranges(block_ids, num_block_ids, &ranges, &num_ranges);
    if (rc == KVRT_OK)
        rc = collect(p, ranges, num_ranges, regions, num_regions);
    free(ranges);
    return rc;
}
