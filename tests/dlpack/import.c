/*
 * DLPack import (kvrt_cache_from_dlpack): a flat tensor of the cache's
 * bytes, or the 5-D view of the whole cache in every layout, becomes a
 * cache over that memory; a view that is not the layout's is refused
 * naming the first differing axis and both values; the producer's deleter
 * runs exactly once, after the last reference, and never on a refusal; a
 * tensor kvrt exported from one runtime is a cache of another (on the GPU
 * backends too, where there is a device).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/dlpack.h>
#include <kvrt/kvrt.h>

#include "fixtures.h"
#include "tap.h"

#define LAYERS 3
#define BLOCKS 5

/* A producer: one allocation, a deleter that counts. */
struct producer {
    DLManagedTensor managed;
    int64_t shape[5], strides[5];
    void *memory;
    int deleted;
};

static void producer_deleter(DLManagedTensor *self)
{
    struct producer *p = self->manager_ctx;
    p->deleted++;
}

static void producer_init(struct producer *p, void *memory, DLDataType dtype, int ndim, const int64_t *shape,
                          const int64_t *strides)
{
    memset(p, 0, sizeof(*p));
    p->memory = memory;
    DLTensor *t = &p->managed.dl_tensor;
    t->data = memory;
    t->device = (DLDevice){kDLCPU, 0};
    t->ndim = ndim;
    t->dtype = dtype;
    memcpy(p->shape, shape, (size_t)ndim * sizeof(*shape));
    t->shape = p->shape;
    if (strides) {
        memcpy(p->strides, strides, (size_t)ndim * sizeof(*strides));
        t->strides = p->strides;
    }
    p->managed.manager_ctx = p;
    p->managed.deleter = producer_deleter;
}

static const DLDataType bytes_type = {kDLInt, 8, 1};

static void expect_refused(int rc, int want, const char *const *needles, const struct producer *p, const char *what)
{
    const char *msg = kvrt_error_message();
    bool named = true;
    for (size_t i = 0; needles[i]; i++)
        named = named && strstr(msg, needles[i]);
    if (!tap_ok(rc == want && named && p->deleted == 0, "%s: %s, the tensor not taken", what, kvrt_status_name(want)))
        tap_diag("  got %s: %s (deleter ran %d times)", kvrt_status_name(rc), msg, p->deleted);
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

static void check_flat(kvrt_backend *b, const kvrt_placement *pl)
{
    uint64_t bytes = kvrt_placement_size(pl);
    unsigned char *mem = aligned_alloc(64, bytes + 64);
    memset(mem, 0x5a, bytes + 64);
    struct producer p;
    int64_t n = (int64_t)bytes;
    producer_init(&p, mem, bytes_type, 1, &n, NULL);
    p.managed.dl_tensor.byte_offset = 64; /* the bytes start past it */
    p.managed.dl_tensor.shape[0] = n;
    kvrt_cache *c = NULL;
    int rc = kvrt_cache_from_dlpack(b, pl, &p.managed, &c);
    void *addr = NULL;
    if (!tap_ok(rc == KVRT_OK && kvrt_cache_is_wrapped(c) &&
                    kvrt_buffer_address(kvrt_cache_buffer(c), &addr, NULL) == KVRT_OK && addr == mem + 64,
                "a flat int8 tensor becomes a cache at data + byte_offset"))
        tap_diag("  %s", kvrt_error_message());
    unsigned char first[16];
    kvrt_buffer_download(kvrt_cache_buffer(c), 0, first, sizeof(first));
    tap_ok(first[0] == 0x5a && first[15] == 0x5a, "its bytes are kept");
    DLManagedTensor *view = NULL;
    kvrt_cache_export_layer(c, 0, KVRT_VIEW_ALL, &view);
    kvrt_cache_destroy(c);
    tap_ok(p.deleted == 0, "destroyed with a view alive: the producer's tensor is still held");
    if (view)
        view->deleter(view);
    tap_ok(p.deleted == 1, "the view's deleter ran: the producer's deleter ran, once");

    /* Refusals: the caller keeps the tensor. */
    producer_init(&p, mem, bytes_type, 1, &(int64_t){n - 1}, NULL);
    expect_refused(kvrt_cache_from_dlpack(b, pl, &p.managed, &c), KVRT_ERR_INVALID,
                   NEEDLES("kvrt_cache_from_dlpack", "needs"), &p, "a flat tensor one byte short");
    int64_t shape2[2] = {2, n / 4}, strides2[2] = {1, 2};
    producer_init(&p, mem, bytes_type, 2, shape2, strides2);
    expect_refused(kvrt_cache_from_dlpack(b, pl, &p.managed, &c), KVRT_ERR_INVALID,
                   NEEDLES("not contiguous", "axis 1", "stride 2"), &p, "a 2-D tensor that is not contiguous");
    producer_init(&p, mem, bytes_type, 1, &n, NULL);
    p.managed.dl_tensor.device = (DLDevice){kDLVulkan, 0};
    expect_refused(kvrt_cache_from_dlpack(b, pl, &p.managed, &c), KVRT_ERR_INVALID, NEEDLES("device type 7", "vulkan"),
                   &p, "a Vulkan tensor");
    producer_init(&p, mem, (DLDataType){kDLFloat, 16, 4}, 1, &n, NULL);
    expect_refused(kvrt_cache_from_dlpack(b, pl, &p.managed, &c), KVRT_ERR_INVALID, NEEDLES("4 lanes"), &p,
                   "a vector element type");
    free(mem);
}

/* The 5-D view of the whole cache, in one layout. */
static void check_view(kvrt_runtime *rt, enum kvrt_layout layout)
{
    const char *name = kvrt_layout_name(layout);
    struct kvrt_spec spec = fixture_attention(KVRT_DTYPE_FP32, 4, 2, 8);
    kvrt_backend *b = NULL;
    kvrt_placement *pl = NULL;
    kvrt_cache *ref = fixture_cache(rt, "cpu", layout, &spec, LAYERS, BLOCKS);
    DLManagedTensor *want = NULL;
    if (!ref || kvrt_runtime_bind(rt, "cpu", name, &b) != KVRT_OK ||
        fixture_placement(layout, &spec, LAYERS, BLOCKS, &pl) != KVRT_OK ||
        kvrt_cache_export_layers(ref, KVRT_VIEW_ALL, &want) != KVRT_OK) {
        tap_ok(false, "%s: a reference cache and its 5-D view: %s", name, kvrt_error_message());
        kvrt_cache_destroy(ref);
        kvrt_placement_destroy(pl);
        return;
    }
    const DLTensor *w = &want->dl_tensor;
    uint64_t bytes = kvrt_placement_size(pl);
    float *mem = aligned_alloc(64, bytes);
    memset(mem, 0, bytes);
    struct producer p;
    producer_init(&p, mem, w->dtype, 5, w->shape, w->strides);
    kvrt_cache *c = NULL;
    int rc = kvrt_cache_from_dlpack(b, pl, &p.managed, &c);
    if (!tap_ok(rc == KVRT_OK, "%s: a tensor with the layout's [L, B, H, N, C] shape and strides becomes a cache",
                name))
        tap_diag("  %s", kvrt_error_message());
    /* kvrt writes token slot 6 of layer 2; the producer's view sees it. */
    int64_t slot = 6;
    float k[2 * 8], v[2 * 8];
    for (int i = 0; i < 16; i++)
        k[i] = (float)(i + 1), v[i] = (float)(-i - 1);
    kvrt_buffer *kb = NULL, *vb = NULL;
    kvrt_buffer_create(b, sizeof(k), &kb);
    kvrt_buffer_create(b, sizeof(v), &vb);
    kvrt_buffer_upload(kb, 0, k, sizeof(k));
    kvrt_buffer_upload(vb, 0, v, sizeof(v));
    rc = c ? kvrt_cache_write(c, 2, 1, &slot, kb, 0, vb, 0) : KVRT_ERR_INTERNAL;
    const int64_t *s = w->strides;
    /* Element (l 2, block 1, head 1, state 2, content 0 / 8). */
    const float *at = mem + 2 * s[0] + 1 * s[1] + 1 * s[2] + 2 * s[3];
    tap_ok(rc == KVRT_OK && at[0] == k[8] && at[7] == k[15] && at[8] == v[8] && at[8 * s[4]] == v[8],
           "%s: what kvrt writes is in the producer's view at (layer 2, block 1, head 1, token 2)", name);
    DLManagedTensor *back = NULL;
    struct kvrt_view lv;
    kvrt_placement_layer_view(pl, 0, 2, &lv);
    tap_ok(c && kvrt_cache_export_layer(c, 2, KVRT_VIEW_ALL, &back) == KVRT_OK &&
               back->dl_tensor.data == (char *)mem + lv.offset_bytes,
           "%s: layer 2 exported from it aliases the producer's memory plus the layer's offset", name);
    if (back)
        back->deleter(back);
    kvrt_cache_destroy(c);
    tap_ok(p.deleted == 1, "%s: destroying the cache ran the producer's deleter once", name);

    /* Views that are not the layout's. */
    producer_init(&p, mem, w->dtype, 5, w->shape, w->strides);
    p.shape[2] = 4;
    char axis[64], extent[64];
    snprintf(axis, sizeof(axis), "axis 2 (H) of the tensor has extent 4");
    snprintf(extent, sizeof(extent), "the %s view of the cache has %lld", name, (long long)w->shape[2]);
    expect_refused(kvrt_cache_from_dlpack(b, pl, &p.managed, &c), KVRT_ERR_INVALID, NEEDLES(axis, extent), &p,
                   "a view with 4 head slots (the layout has 2)");
    producer_init(&p, mem, w->dtype, 5, w->shape, w->strides);
    p.strides[3] = w->strides[3] * 2;
    snprintf(axis, sizeof(axis), "axis 3 (N) of the tensor has stride %lld", (long long)p.strides[3]);
    snprintf(extent, sizeof(extent), "the %s view of the cache has %lld", name, (long long)w->strides[3]);
    expect_refused(kvrt_cache_from_dlpack(b, pl, &p.managed, &c), KVRT_ERR_INVALID, NEEDLES(axis, extent), &p,
                   "a view with another N stride");
    producer_init(&p, mem, (DLDataType){kDLFloat, 16, 1}, 5, w->shape, w->strides);
    expect_refused(kvrt_cache_from_dlpack(b, pl, &p.managed, &c), KVRT_ERR_INVALID, NEEDLES("16 bits", "fp32"), &p,
                   "a view of fp16 elements over an fp32 cache");
    want->deleter(want);
    kvrt_cache_destroy(ref);
    kvrt_placement_destroy(pl);
    free(mem);
}

/* What kvrt exported from one runtime is a cache of another: the two are
 * the same memory, and the import holds the export until it goes. */
static void check_round_trip(const char *backend, enum kvrt_layout layout)
{
    kvrt_runtime *one = NULL, *two = NULL;
    kvrt_runtime_open(NULL, &one);
    kvrt_runtime_open(NULL, &two);
    size_t i;
    struct kvrt_plugin_info info;
    char why[600] = "";
    if (!one || !two || kvrt_runtime_find_plugin(one, backend, &i) != KVRT_OK)
        snprintf(why, sizeof(why), "the backend is not built");
    else if (kvrt_runtime_plugin_info(one, i, &info) != KVRT_OK || !info.available)
        snprintf(why, sizeof(why), "no device: %s", info.reason);
    if (why[0]) {
        for (int k = 0; k < 4; k++)
            tap_skip("%s round trip: %s", backend, why);
        kvrt_runtime_close(one);
        kvrt_runtime_close(two);
        return;
    }
    struct kvrt_spec spec = fixture_attention(KVRT_DTYPE_BF16, 4, 2, 8);
    kvrt_cache *a = fixture_cache(one, backend, layout, &spec, LAYERS, BLOCKS);
    kvrt_backend *b = NULL;
    kvrt_placement *pl = NULL;
    DLManagedTensor *t = NULL;
    kvrt_cache *c = NULL;
    uint64_t live = kvrt_dlpack_live_tensors();
    bool ok = a && kvrt_runtime_bind(two, backend, kvrt_layout_name(layout), &b) == KVRT_OK &&
              fixture_placement(layout, &spec, LAYERS, BLOCKS, &pl) == KVRT_OK &&
              kvrt_cache_export_layers(a, KVRT_VIEW_ALL, &t) == KVRT_OK;
    int rc = ok ? kvrt_cache_from_dlpack(b, pl, t, &c) : KVRT_ERR_INTERNAL;
    if (!tap_ok(rc == KVRT_OK, "%s: a 5-D view exported from one runtime becomes a cache of another", backend))
        tap_diag("  %s", kvrt_error_message());
    /* kvrt writes through one cache and reads through the other. */
    int64_t slot = 9;
    uint16_t k[16], got[16];
    for (int e = 0; e < 16; e++)
        k[e] = (uint16_t)(0x3f80 + e);
    kvrt_buffer *kb = NULL, *vb = NULL, *rb = NULL, *rv = NULL;
    kvrt_backend *ba = NULL;
    kvrt_runtime_bind(one, backend, kvrt_layout_name(layout), &ba);
    kvrt_buffer_create(b, sizeof(k), &kb);
    kvrt_buffer_create(b, sizeof(k), &vb);
    kvrt_buffer_create(ba, sizeof(k), &rb);
    kvrt_buffer_create(ba, sizeof(k), &rv);
    kvrt_buffer_upload(kb, 0, k, sizeof(k));
    kvrt_buffer_upload(vb, 0, k, sizeof(k));
    rc = c ? kvrt_cache_write(c, 1, 1, &slot, kb, 0, vb, 0) : KVRT_ERR_INTERNAL;
    if (rc == KVRT_OK)
        rc = kvrt_cache_read(a, 1, 1, &slot, rb, 0, rv, 0);
    if (rc == KVRT_OK)
        rc = kvrt_buffer_download(rb, 0, got, sizeof(got));
    tap_ok(rc == KVRT_OK && memcmp(got, k, sizeof(k)) == 0,
           "%s: written through the imported cache, read back through the exporting one", backend);
    kvrt_cache_destroy(a);
    kvrt_cache_destroy(c);
    tap_ok(kvrt_dlpack_live_tensors() == live, "%s: destroying the importing cache ran the export's deleter", backend);
    kvrt_placement_destroy(pl);
    kvrt_runtime_close(two);
    kvrt_runtime_close(one);

    /* Into the same runtime, the memory is already a cache's. */
    kvrt_runtime_open(NULL, &one);
    a = one ? fixture_cache(one, backend, layout, &spec, LAYERS, BLOCKS) : NULL;
    t = NULL;
    c = NULL;
    ok = a && kvrt_runtime_bind(one, backend, kvrt_layout_name(layout), &b) == KVRT_OK &&
         fixture_placement(layout, &spec, LAYERS, BLOCKS, &pl) == KVRT_OK &&
         kvrt_cache_export_layers(a, KVRT_VIEW_ALL, &t) == KVRT_OK;
    rc = ok ? kvrt_cache_from_dlpack(b, pl, t, &c) : KVRT_ERR_INTERNAL;
    tap_ok(rc == KVRT_ERR_INVALID && !c && strstr(kvrt_error_message(), "overlaps"),
           "%s: a view of a cache imported into its own runtime is refused (it overlaps that cache)", backend);
    if (t)
        t->deleter(t);
    kvrt_placement_destroy(pl);
    kvrt_runtime_close(one);
}

int main(void)
{
    kvrt_runtime *rt = NULL;
    size_t i;
    if (kvrt_runtime_open(NULL, &rt) != KVRT_OK || kvrt_runtime_find_plugin(rt, "cpu", &i) != KVRT_OK) {
        kvrt_runtime_close(rt);
        tap_skip_all("the cpu backend is not built");
    }
    tap_plan_dynamic();
    struct kvrt_spec spec = fixture_attention(KVRT_DTYPE_FP32, 4, 2, 8);
    kvrt_placement *pl = NULL;
    kvrt_backend *b = NULL;
    if (fixture_placement(KVRT_LAYOUT_LBNHC, &spec, LAYERS, BLOCKS, &pl) == KVRT_OK &&
        kvrt_runtime_bind(rt, "cpu", "LBNHC", &b) == KVRT_OK)
        check_flat(b, pl);
    else
        tap_ok(false, "placement and binding: %s", kvrt_error_message());
    kvrt_placement_destroy(pl);
    for (int l = 0; l < KVRT_NUM_LAYOUTS; l++)
        check_view(rt, (enum kvrt_layout)l);
    kvrt_runtime_close(rt);
    check_round_trip("cpu", KVRT_LAYOUT_BLHNC);
    check_round_trip("cuda", KVRT_LAYOUT_LBNHC);
    check_round_trip("rocm", KVRT_LAYOUT_LBNHC);
    TAP_EQ_U64(kvrt_dlpack_live_tensors(), 0, "every exported tensor's deleter ran");
    return tap_done();
}
