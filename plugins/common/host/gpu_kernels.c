#include "gpu_kernels.h"

const char *const kvrt_gpu_kernel_names[KVRT_GPU_K_COUNT] = {
#define KVRT_NAME_TOKENS(suffix, unit, idx32) "kvrt_tokens_" #suffix,
#define KVRT_NAME_PAGES(suffix, unit, idx32) "kvrt_pages_" #suffix,
#define KVRT_NAME_DECODE(suffix, dt, vec) "kvrt_decode_" #suffix,
#define KVRT_NAME_REDUCE(suffix, dt) "kvrt_decode_reduce_" #suffix,
    KVRT_MOVE_VARIANTS(KVRT_NAME_TOKENS) KVRT_MOVE_VARIANTS(KVRT_NAME_PAGES) KVRT_DECODE_VARIANTS(KVRT_NAME_DECODE)
        KVRT_REDUCE_VARIANTS(KVRT_NAME_REDUCE)};

static const struct {
    uint32_t unit;
    int idx32;
} move_variants[] = {
#define KVRT_VARIANT(suffix, unit, idx32) {unit, idx32},
    KVRT_MOVE_VARIANTS(KVRT_VARIANT)
#undef KVRT_VARIANT
};

static unsigned move_variant(uint32_t unit, int idx32)
{
    for (unsigned i = 0; i < sizeof(move_variants) / sizeof(move_variants[0]); i++)
        if (move_variants[i].unit == unit && move_variants[i].idx32 == (idx32 != 0))
            return i;
    return 0; /* unreachable: the planner only picks listed units */
}

enum kvrt_gpu_kernel kvrt_gpu_tokens_kernel(uint32_t unit, int idx32)
{
    return (enum kvrt_gpu_kernel)(KVRT_GPU_K_TOKENS_u8_i32 + move_variant(unit, idx32));
}

enum kvrt_gpu_kernel kvrt_gpu_pages_kernel(uint32_t unit, int idx32)
{
    return (enum kvrt_gpu_kernel)(KVRT_GPU_K_PAGES_u8_i32 + move_variant(unit, idx32));
}

int kvrt_gpu_decode_kernel(int dtype, int vec)
{
    static const int map[][3] = {
#define KVRT_DECODE_MAP(suffix, dt, v) {dt, v, KVRT_GPU_K_DECODE_##suffix},
        KVRT_DECODE_VARIANTS(KVRT_DECODE_MAP)
#undef KVRT_DECODE_MAP
    };
    for (unsigned i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (map[i][0] == dtype && map[i][1] == (vec != 0))
            return map[i][2];
    return -1;
}

int kvrt_gpu_reduce_kernel(int dtype)
{
    static const int map[][2] = {
#define KVRT_REDUCE_MAP(suffix, dt) {dt, KVRT_GPU_K_REDUCE_##suffix},
        KVRT_REDUCE_VARIANTS(KVRT_REDUCE_MAP)
#undef KVRT_REDUCE_MAP
    };
    for (unsigned i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (map[i][0] == dtype)
            return map[i][1];
    return -1;
}
