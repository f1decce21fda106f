#include "harness.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

const struct kvrt_plugin_descriptor *cpu;
kvrt_plugin_error cpu_err;

const char *const layout_name[6] = {"LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC"};
/* stride_order[p] = logical axis (L0 B1 H2 N3 C4) at physical position p. */
static const int stride_order[6][5] = {
    {0, 1, 2, 3, 4}, {0, 1, 3, 2, 4}, {0, 2, 1, 3, 4}, {1, 0, 2, 3, 4}, {1, 0, 3, 2, 4}, {1, 2, 0, 3, 4},
};

static void bail(const char *what)
{
    printf("Bail out! %s: %s\n", what, cpu_err.message);
    fflush(stdout);
    exit(1);
}

void harness_load(void)
{
    const char *path = getenv("KVRT_CPU_MODULE");
    if (!path || !*path)
        tap_skip_all("KVRT_CPU_MODULE is not set (run through meson test)");
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("Bail out! dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    /* memcpy: ISO C has no cast from void * to a function pointer. */
    void *sym = dlsym(h, KVRT_PLUGIN_ENTRY_SYMBOL);
    kvrt_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof(entry));
    if (!entry) {
        printf("Bail out! %s has no %s\n", path, KVRT_PLUGIN_ENTRY_SYMBOL);
        exit(1);
    }
    cpu = entry();
    /* meson runs some programs once per decode kernel (KVRT_CPU_ISA); one
     * this CPU cannot run is a skip, with the module's reason. */
    const char *isa = getenv("KVRT_CPU_ISA");
    if (isa && *isa && cpu->probe(&cpu_err) == KVRT_ERR_UNSUPPORTED)
        tap_skip_all("%s", cpu_err.message);
}

kvrt_plugin_device *harness_bind(int layout)
{
    struct kvrt_plugin_bind_info info = {sizeof(info), layout, NULL};
    kvrt_plugin_device *dev = NULL;
    if (cpu->bind(&info, &dev, &cpu_err) != KVRT_OK)
        bail("bind");
    return dev;
}

kvrt_plugin_buffer *harness_alloc(kvrt_plugin_device *dev, uint64_t bytes)
{
    kvrt_plugin_buffer *b = NULL;
    if (cpu->buffer_alloc(dev, bytes, &b, &cpu_err) != KVRT_OK)
        bail("buffer_alloc");
    if (cpu->buffer_zero(dev, b, 0, bytes, &cpu_err) != KVRT_OK)
        bail("buffer_zero");
    return b;
}

void harness_upload(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, const void *src, uint64_t bytes)
{
    if (cpu->buffer_upload(dev, buf, 0, src, bytes, &cpu_err) != KVRT_OK)
        bail("buffer_upload");
}

void harness_download(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, void *dst, uint64_t bytes)
{
    if (cpu->buffer_download(dev, buf, 0, dst, bytes, &cpu_err) != KVRT_OK)
        bail("buffer_download");
}

bool layout_block_compact(int layout)
{
    int a = stride_order[layout][0], b = stride_order[layout][1];
    return (a == 0 && b == 1) || (a == 1 && b == 0);
}

void geom_build(struct geom *g, struct test_cache *out)
{
    if (g->N == 0)
        g->N = g->k;
    if (g->C == 0)
        g->C = (g->D + g->Dv) * g->elem;
    const uint64_t extent[5] = {g->L, g->B * g->r, g->H, g->N, g->C};
    uint64_t stride[5], s = 1;
    /* Walk physical positions from the innermost out; the first of L/B
     * met (the page's owner) strides by the padded page. */
    bool padded = false;
    for (int p = 4; p >= 0; p--) {
        int axis = stride_order[g->layout][p];
        if (!padded && (axis == 0 || axis == 1)) {
            s += g->pad;
            padded = true;
        }
        stride[axis] = s;
        s *= extent[axis];
    }
    memset(out, 0, sizeof(*out));
    for (uint64_t l = 0; l < g->L; l++)
        out->layers[l] = (struct kvrt_plugin_layer){
            .size = sizeof(struct kvrt_plugin_layer),
            .kind = g->Dv == 0 ? KVRT_SPEC_MLA : KVRT_SPEC_ATTENTION,
            .dtype = g->dtype,
            .elem_size = (uint32_t)g->elem,
            .offset = l * stride[0],
            .num_view_blocks = g->B * g->r,
            .blocks_per_block = g->r,
            .view_block_tokens = g->k,
            .head_slots = g->H,
            .states = g->N,
            .content_bytes = g->C,
            .head_size = g->D,
            .head_size_v = g->Dv,
            .stride_block = stride[1],
            .stride_head = stride[2],
            .stride_state = stride[3],
        };
    out->cache = (struct kvrt_plugin_cache){
        .size = sizeof(struct kvrt_plugin_cache),
        .layout = g->layout,
        .bytes = s,
        .num_blocks = g->B,
        .block_size = g->r * g->k,
        .num_layers = g->L,
        .layers = out->layers,
    };
}

uint64_t cell_offset(const struct test_cache *c, uint64_t l, uint64_t vb, uint64_t h, uint64_t n)
{
    const struct kvrt_plugin_layer *ly = &c->layers[l];
    return ly->offset + vb * ly->stride_block + h * ly->stride_head + n * ly->stride_state;
}

/* One generator per thread, each with its own seed: the concurrency test's
 * workers must not share state (a data race) nor draw the same data (a
 * worker writing into another's cache would then go unnoticed).  The first
 * thread to draw gets the historical seed, so single-threaded runs repeat. */
static _Thread_local uint64_t rng_state;
static atomic_uint rng_threads;

uint64_t rnd(void)
{
    if (rng_state == 0)
        rng_state = 0x2545f4914f6cdd1dull + 0x9e3779b97f4a7c15ull * atomic_fetch_add(&rng_threads, 1u);
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

void rnd_bytes(void *dst, uint64_t n)
{
    unsigned char *p = dst;
    for (uint64_t i = 0; i < n; i++)
        p[i] = (unsigned char)(rnd() >> 56);
}

void rnd_shuffle(int64_t *v, uint64_t n)
{
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = rnd() % i;
        int64_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}
