#include <stdlib.h>
#include <string.h>

#include "gpu_plan.h"

uint32_t kvrt_plan_unit(const uint64_t *values, size_t n)
{
    uint64_t bits = 0;
    for (size_t i = 0; i < n; i++)
        bits |= values[i];
    if ((bits & 15u) == 0)
        return 16;
    if ((bits & 3u) == 0)
        return 4;
    return 1;
}

int kvrt_plan_idx32(const uint64_t *values, size_t n)
{
    const char *force = getenv("KVRT_GPU_INDEX64");
    if (force && strcmp(force, "1") == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (values[i] > UINT32_MAX)
            return 0;
    return 1;
}

uint64_t kvrt_plan_groups(uint64_t total, uint32_t local, uint64_t max_groups)
{
    uint64_t groups = total / local + (total % local != 0);
    if (groups > max_groups)
        groups = max_groups;
    return groups ? groups : 1;
}

enum { MARK_SRC = 1, MARK_DST = 2 };

size_t kvrt_plan_wave(const int64_t *src, const int64_t *dst, size_t stride, size_t start,
                      size_t n, uint8_t *marks)
{
    size_t end = start;
    for (; end < n; end++) {
        const int64_t d = dst[end * stride];
        if (marks[d])
            break;
        if (src && (marks[src[end * stride]] & MARK_DST))
            break;
        if (src)
            marks[src[end * stride]] |= MARK_SRC;
        marks[d] |= MARK_DST;
    }
    for (size_t i = start; i < end; i++) {
        if (src)
            marks[src[i * stride]] = 0;
        marks[dst[i * stride]] = 0;
    }
    return end;
}

uint32_t kvrt_plan_lane_shift(uint64_t units, uint32_t local)
{
    uint32_t shift = 0;
    while ((UINT64_C(1) << shift) < units && (UINT32_C(1) << (shift + 1)) <= local)
        shift++;
    return shift;
}

uint64_t kvrt_plan_decode_shared(uint32_t local, uint64_t d, uint64_t dv)
{
    return (uint64_t)local * 8u + (d + 2u * (uint64_t)local + dv) * 4u;
}
