/* Slot lists in which a slot named twice keeps its last value (a scatter
 * writes them in order), made unique.
 *
 * Layer 7 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <stdlib.h>
#include <string.h>

#include <kvrt/common.h>

#include "error.h"
#include "slots_last_wins.h"

/* Open addressing over a power-of-two table at most half full. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

int kvrt_slots_last_wins(uint64_t n, const int64_t *slots, int64_t **out)
{
    *out = NULL;
    if (n < 2)
        return KVRT_OK;
    uint64_t size = 4;
    while (size < 2 * n && size <= (UINT64_MAX >> 2))
        size <<= 1;
    if (size > SIZE_MAX / sizeof(int64_t))
        return kvrt_fail(KVRT_ERR_NOMEM, "write: %llu slots are too many to check for duplicates",
                         (unsigned long long)n);
    int64_t *seen = malloc((size_t)size * sizeof(int64_t));
    if (!seen)
        return kvrt_fail(KVRT_ERR_NOMEM, "write: out of memory checking %llu slots for duplicates",
                         (unsigned long long)n);
    memset(seen, 0xff, (size_t)size * sizeof(int64_t)); /* -1: empty */
    int64_t *copy = NULL;
    for (uint64_t i = n; i-- > 0;) {
        const int64_t s = slots[i];
        if (s < 0)
            continue;
        uint64_t h = mix((uint64_t)s) & (size - 1);
        while (seen[h] >= 0 && seen[h] != s)
            h = (h + 1) & (size - 1);
        if (seen[h] < 0) {
            seen[h] = s;
            continue;
        }
        if (!copy) { /* the first duplicate: from here on, a copy */
            copy = malloc((size_t)n * sizeof(int64_t));
            if (!copy) {
                free(seen);
                return kvrt_fail(KVRT_ERR_NOMEM, "write: out of memory for %llu slots", (unsigned long long)n);
            }
            memcpy(copy, slots, (size_t)n * sizeof(int64_t));
        }
        copy[i] = -1;
    }
    free(seen);
    *out = copy;
    return KVRT_OK;
}
