#include <stdlib.h>
#include <string.h>

#include "gpu_plan.h"
#include "kvrt_variants.h"

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

size_t kvrt_plan_wave(const int64_t *src, const int64_t *dst, size_t stride, size_t start, size_t n, uint8_t *marks)
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

static uint64_t env_cap(const char *name, uint64_t device_max)
{
    const char *env = getenv(name);
    if (env) {
        char *end;
        const unsigned long long v = strtoull(env, &end, 10);
        if (end != env && *end == '\0' && v > 0 && v < device_max)
            return v;
    }
    return device_max;
}

uint64_t kvrt_plan_max_groups(uint64_t device_max)
{
    return env_cap("KVRT_GPU_MAX_GROUPS", device_max);
}

uint64_t kvrt_plan_shared_bytes(uint64_t device_bytes)
{
    return env_cap("KVRT_GPU_SHARED_BYTES", device_bytes);
}

uint64_t kvrt_plan_decode_shared(uint32_t local, uint64_t q_chunk, uint64_t tile, uint64_t d, uint64_t dv)
{
    return tile * 8u + q_chunk * (d + tile + (uint64_t)local + dv + 3u) * 4u;
}

static uint64_t env_u64(const char *name)
{
    const char *env = getenv(name);
    if (!env)
        return 0;
    char *end;
    const unsigned long long v = strtoull(env, &end, 10);
    return end != env && *end == '\0' ? v : 0;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

int kvrt_plan_decode(const struct kvrt_decode_shape *sh, const struct kvrt_decode_device *dev,
                     struct kvrt_decode_plan *p)
{
    memset(p, 0, sizeof(*p));
    const uint64_t ve = !sh->vec ? 1 : sh->elem == 4 ? 4 : 8;
    const uint64_t group = sh->kv_heads ? sh->q_heads / sh->kv_heads : 1;
    uint32_t local = dev->local ? dev->local : 64;
    while (local & (local - 1))
        local &= local - 1;
    p->chunks = ceil_div(group ? group : 1, KVRT_DECODE_MAX_G);
    p->q_chunk = ceil_div(group ? group : 1, p->chunks);

    uint64_t lanes = env_u64("KVRT_GPU_DECODE_LANES");
    if (lanes == 0 || (lanes & (lanes - 1)) != 0)
        lanes = dev->lanes;
    if (lanes == 0) {
        lanes = 1;
        while (lanes < sh->d / ve)
            lanes <<= 1;
    }
    if (lanes > 32)
        lanes = 32;

    const uint64_t max_len = sh->max_len ? sh->max_len : 1;
    const uint64_t base = sh->seqs * sh->kv_heads * p->chunks;
    uint64_t part = env_u64("KVRT_GPU_DECODE_PARTITION");
    if (part == 0) {
        const uint64_t target = 2 * (dev->compute_units ? dev->compute_units : 1);
        part = max_len;
        if (base < target) {
            part = ceil_div(max_len, ceil_div(target, base ? base : 1));
            part = part < 256 ? 256 : part;
        }
    }
    uint64_t tile = 256;
    while (tile > 8 && tile > part)
        tile /= 2;
    for (;;) {
        while (lanes > local)
            lanes >>= 1;
        p->shared = kvrt_plan_decode_shared(local, p->q_chunk, tile, sh->d, sh->dv);
        if (p->shared <= dev->shared_bytes)
            break;
        if (tile > 8)
            tile /= 2;
        else if (local > 32)
            local /= 2;
        else
            return -1;
    }
    p->local = local;
    p->lane_shift = 0;
    while ((UINT64_C(1) << p->lane_shift) < lanes)
        p->lane_shift++;
    p->tile = tile;
    p->part_tokens = ceil_div(part < max_len ? part : max_len, tile) * tile;
    p->parts = ceil_div(max_len, p->part_tokens);
    p->work = base * p->parts;
    p->groups = p->work < dev->max_groups ? p->work : dev->max_groups;
    if (p->groups == 0)
        p->groups = 1;
    return 0;
}
