/*
 * The staging order's layout (kvrt_placement_staging_layer / _bytes): each
 * layer's unpadded page at the running offset in placement order, over
 * several groups and sets, padded pages left out; refusals by name.
 */
#include <string.h>

#include <kvrt/kvrt.h>

#include "tap.h"

static struct kvrt_spec spec(uint64_t heads, uint64_t head_size, uint64_t padded)
{
    struct kvrt_spec s;
    kvrt_spec_default(&s);
    s.dtype = KVRT_DTYPE_BF16;
    s.block_size = 16;
    s.num_kv_heads = heads;
    s.head_size = head_size;
    if (padded)
        s.page_size_padded = padded;
    return s;
}

int main(void)
{
    tap_plan_dynamic();
    /* Group 0: two layers of 4 heads x 16 tokens x (2 x 64 x 2 B) = 16 KiB
     * pages, padded to 20 KiB; group 1: three layers of 2 heads, 8 KiB. */
    struct kvrt_layer_entry g0[2] = {{"a.0", spec(4, 64, 20480)}, {"a.1", spec(4, 64, 20480)}};
    struct kvrt_layer_entry g1[3] = {{"b.0", spec(2, 64, 0)}, {"b.1", spec(2, 64, 0)}, {"b.2", spec(2, 64, 0)}};
    struct kvrt_group groups[2] = {{g0, 2}, {g1, 3}};
    kvrt_placement *p = NULL;
    int rc = kvrt_placement_create(KVRT_LAYOUT_BLHNC, groups, 2, 8, 0, &p);
    if (!tap_ok(rc == KVRT_OK, "a placement of two groups (%s)", kvrt_error_message()))
        return tap_done();
    const uint64_t page0 = 4 * 16 * 256, page1 = 2 * 16 * 256;
    const uint64_t want[5][2] = {
        {0, page0}, {page0, page0}, {2 * page0, page1}, {2 * page0 + page1, page1}, {2 * page0 + 2 * page1, page1}};
    for (uint64_t l = 0; l < 5; l++) {
        uint64_t off = 99, bytes = 99;
        rc = kvrt_placement_staging_layer(p, l, &off, &bytes);
        tap_ok(rc == KVRT_OK && off == want[l][0] && bytes == want[l][1],
               "layer %llu: staging offset %llu, %llu bytes (the unpadded page)", (unsigned long long)l,
               (unsigned long long)off, (unsigned long long)bytes);
    }
    uint64_t total = 0;
    rc = kvrt_placement_staging_bytes(p, &total);
    tap_ok(rc == KVRT_OK && total == 2 * page0 + 3 * page1, "one block's staging bytes: %llu",
           (unsigned long long)total);
    uint64_t off, bytes;
    rc = kvrt_placement_staging_layer(p, 5, &off, &bytes);
    const char *m = kvrt_error_message();
    tap_ok(rc == KVRT_ERR_INVALID && strstr(m, "layer 5") && strstr(m, "valid 0..4") && !strchr(m, '\n'),
           "layer 5 of 5 is refused, naming it and the valid range: %s", m);
    tap_ok(kvrt_placement_staging_layer(NULL, 0, &off, &bytes) == KVRT_ERR_INVALID &&
               kvrt_placement_staging_layer(p, 0, NULL, &bytes) == KVRT_ERR_INVALID &&
               kvrt_placement_staging_bytes(p, NULL) == KVRT_ERR_INVALID &&
               kvrt_placement_staging_bytes(NULL, &total) == KVRT_ERR_INVALID,
           "NULL placement or outputs are refused");
    kvrt_placement_destroy(p);
    return tap_done();
}
