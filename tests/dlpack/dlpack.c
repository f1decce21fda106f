/*
 * DLPack export on the CPU backend: the tensors are the per-layer views of
 * the cache (shape, strides, address, type), they see what kvrt writes and
 * kvrt sees what is written through them, the 5-D view agrees with the
 * per-layer ones, bad requests fail with a message, and a tensor keeps its
 * memory alive past kvrt_cache_destroy and kvrt_runtime_close (run this
 * under ASan or valgrind to check the "alive" and "freed once" halves).
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
#define BLOCK_SIZE 4
#define HEADS 2
#define HEAD 8
#define HEAD_V 4
#define TOKENS 7

static const int64_t slots[TOKENS] = {0, 5, 6, 13, -1, 19, 8};

static struct kvrt_spec attention_spec(enum kvrt_dtype dtype)
{
    struct kvrt_spec s;
    kvrt_spec_default(&s);
    s.dtype = dtype;
    s.block_size = BLOCK_SIZE;
    s.num_kv_heads = HEADS;
    s.head_size = HEAD;
    s.head_size_v = HEAD_V;
    return s;
}

/* A cache of LAYERS identical layers named l0.. in one group. */
static kvrt_cache *make_cache(kvrt_runtime *rt, const char *backend, enum kvrt_layout layout,
                              const struct kvrt_spec *spec, uint64_t layers)
{
    return fixture_cache(rt, backend, layout, spec, layers, BLOCKS);
}

static void fill(unsigned char *bytes, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        bytes[i] = (unsigned char)((i * 131u + seed * 17u + 7u) >> 1);
}

/* Byte address of element (b, h, n, c) of a 4-D tensor. */
static const unsigned char *elem_at(const DLTensor *t, int64_t b, int64_t h, int64_t n, int64_t c)
{
    size_t es = t->dtype.bits / 8u;
    int64_t i = b * t->strides[0] + h * t->strides[1] + n * t->strides[2] + c * t->strides[3];
    return (const unsigned char *)t->data + t->byte_offset + (size_t)i * es;
}

static bool view_matches(const DLTensor *t, const struct kvrt_view *v, int64_t content)
{
    return t->ndim == 4 && t->shape[0] == (int64_t)v->shape[0] && t->shape[1] == (int64_t)v->shape[1] &&
           t->shape[2] == (int64_t)v->shape[2] && t->shape[3] == content && t->strides[0] == (int64_t)v->strides[0] &&
           t->strides[1] == (int64_t)v->strides[1] && t->strides[2] == (int64_t)v->strides[2] && t->strides[3] == 1 &&
           t->byte_offset == 0;
}

/* kvrt_cache_write lands where the K and V tensors of layer l say, and a
 * write through the tensors comes back from kvrt_cache_read. */
static void check_layout(kvrt_runtime *rt, enum kvrt_layout layout, enum kvrt_dtype dtype)
{
    const char *ln = kvrt_layout_name(layout), *dn = kvrt_dtype_name(dtype);
    struct kvrt_spec spec = attention_spec(dtype);
    kvrt_cache *c = make_cache(rt, "cpu", layout, &spec, LAYERS);
    if (!tap_ok(c != NULL, "%s %s: cache created", ln, dn))
        return;
    size_t es = kvrt_dtype_size(dtype);
    size_t kbytes = TOKENS * HEADS * HEAD * es, vbytes = TOKENS * HEADS * HEAD_V * es;
    unsigned char *k = malloc(kbytes), *v = malloc(vbytes), *k2 = malloc(kbytes), *v2 = malloc(vbytes);
    kvrt_backend *b = NULL;
    kvrt_runtime_bind(rt, "cpu", ln, &b);
    kvrt_buffer *kb = NULL, *vb = NULL;
    kvrt_buffer_create(b, kbytes, &kb);
    kvrt_buffer_create(b, vbytes, &vb);
    const kvrt_placement *p = kvrt_cache_placement(c);
    for (uint32_t layer = 1; layer < LAYERS; layer++) {
        fill(k, kbytes, layer);
        fill(v, vbytes, layer + 10);
        kvrt_buffer_upload(kb, 0, k, kbytes);
        kvrt_buffer_upload(vb, 0, v, vbytes);
        int rc = kvrt_cache_write(c, layer, TOKENS, slots, kb, 0, vb, 0);
        DLManagedTensor *all = NULL, *mk = NULL, *mv = NULL;
        int rca = kvrt_cache_export_layer(c, layer, KVRT_VIEW_ALL, &all);
        int rck = kvrt_cache_export_layer(c, layer, KVRT_VIEW_K, &mk);
        int rcv = kvrt_cache_export_layer(c, layer, KVRT_VIEW_V, &mv);
        if (!tap_ok(rc == KVRT_OK && rca == KVRT_OK && rck == KVRT_OK && rcv == KVRT_OK,
                    "%s %s layer %u: write and export (all, K, V)", ln, dn, layer)) {
            tap_diag("%s", kvrt_error_message());
            continue;
        }
        struct kvrt_view view;
        kvrt_placement_layer_view(p, 0, layer, &view);
        const DLTensor *ta = &all->dl_tensor, *tk = &mk->dl_tensor, *tv = &mv->dl_tensor;
        tap_ok(view_matches(ta, &view, HEAD + HEAD_V) && view_matches(tk, &view, HEAD) &&
                   view_matches(tv, &view, HEAD_V),
               "%s %s layer %u: shape and strides are the placement's layer view (C = D + Dv, D, Dv)", ln, dn, layer);
        tap_ok(tk->data == ta->data && (unsigned char *)tv->data == (unsigned char *)ta->data + HEAD * es,
               "%s %s layer %u: K starts at the view's first element, V %zu bytes later", ln, dn, layer, HEAD * es);
        bool same = true;
        for (int t = 0; t < TOKENS; t++) {
            if (slots[t] < 0)
                continue;
            int64_t blk = slots[t] / BLOCK_SIZE, off = slots[t] % BLOCK_SIZE;
            for (int h = 0; h < HEADS; h++) {
                same = same &&
                       memcmp(elem_at(tk, blk, h, off, 0), k + ((size_t)t * HEADS + h) * HEAD * es, HEAD * es) == 0;
                same = same &&
                       memcmp(elem_at(tv, blk, h, off, 0), v + ((size_t)t * HEADS + h) * HEAD_V * es, HEAD_V * es) == 0;
            }
        }
        tap_ok(same, "%s %s layer %u: the K and V tensors hold what kvrt_cache_write wrote", ln, dn, layer);
        /* Through the tensors, then back with kvrt. */
        for (int t = 0; t < TOKENS; t++) {
            if (slots[t] < 0)
                continue;
            int64_t blk = slots[t] / BLOCK_SIZE, off = slots[t] % BLOCK_SIZE;
            for (int h = 0; h < HEADS; h++) {
                unsigned char *dk = (unsigned char *)elem_at(tk, blk, h, off, 0);
                unsigned char *dv = (unsigned char *)elem_at(tv, blk, h, off, 0);
                for (size_t i = 0; i < HEAD * es; i++)
                    dk[i] ^= 0x5a;
                for (size_t i = 0; i < HEAD_V * es; i++)
                    dv[i] ^= 0xa5;
            }
        }
        kvrt_cache_read(c, layer, TOKENS, slots, kb, 0, vb, 0);
        kvrt_buffer_download(kb, 0, k2, kbytes);
        kvrt_buffer_download(vb, 0, v2, vbytes);
        same = true;
        for (size_t t = 0; t < TOKENS; t++) {
            if (slots[t] < 0)
                continue;
            for (size_t i = t * HEADS * HEAD * es; i < (t + 1) * HEADS * HEAD * es; i++)
                same = same && k2[i] == (k[i] ^ 0x5a);
            for (size_t i = t * HEADS * HEAD_V * es; i < (t + 1) * HEADS * HEAD_V * es; i++)
                same = same && v2[i] == (v[i] ^ 0xa5);
        }
        tap_ok(same, "%s %s layer %u: writes through the tensors come back from kvrt_cache_read", ln, dn, layer);
        all->deleter(all);
        mk->deleter(mk);
        mv->deleter(mv);
    }
    /* The 5-D view: element [l, ...] is element [...] of layer l's view. */
    DLManagedTensor *whole = NULL;
    if (tap_ok(kvrt_cache_export_layers(c, KVRT_VIEW_ALL, &whole) == KVRT_OK, "%s %s: 5-D export", ln, dn)) {
        const DLTensor *w = &whole->dl_tensor;
        bool ok = w->ndim == 5 && w->shape[0] == LAYERS;
        for (uint32_t layer = 0; ok && layer < LAYERS; layer++) {
            DLManagedTensor *one = NULL;
            ok = kvrt_cache_export_layer(c, layer, KVRT_VIEW_ALL, &one) == KVRT_OK;
            const DLTensor *o = ok ? &one->dl_tensor : NULL;
            for (int d = 0; ok && d < 4; d++)
                ok = w->shape[d + 1] == o->shape[d] && w->strides[d + 1] == o->strides[d];
            ok = ok && (unsigned char *)w->data + (size_t)(w->strides[0] * layer) * es == (unsigned char *)o->data;
            if (one)
                one->deleter(one);
        }
        tap_ok(ok, "%s %s: the 5-D view's layer l is layer l's 4-D view", ln, dn);
        whole->deleter(whole);
    }
    kvrt_buffer_destroy(kb);
    kvrt_buffer_destroy(vb);
    free(k);
    free(v);
    free(k2);
    free(v2);
    kvrt_cache_destroy(c);
}

static void check_types(kvrt_runtime *rt)
{
    static const struct {
        enum kvrt_dtype dtype;
        uint8_t code, bits;
    } want[] = {
        {KVRT_DTYPE_FP32, kDLFloat, 32},   {KVRT_DTYPE_FP16, kDLFloat, 16},   {KVRT_DTYPE_BF16, kDLBfloat, 16},
        {KVRT_DTYPE_FP8_E4M3, kDLUInt, 8}, {KVRT_DTYPE_FP8_E5M2, kDLUInt, 8}, {KVRT_DTYPE_INT8, kDLInt, 8},
        {KVRT_DTYPE_UINT8, kDLUInt, 8},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        struct kvrt_spec spec = attention_spec(want[i].dtype);
        kvrt_cache *c = make_cache(rt, "cpu", KVRT_LAYOUT_LBNHC, &spec, 1);
        DLManagedTensor *t = NULL;
        if (!c || kvrt_cache_export_layer(c, 0, KVRT_VIEW_K, &t) != KVRT_OK) {
            tap_ok(false, "%s: export", kvrt_dtype_name(want[i].dtype));
            tap_diag("%s", kvrt_error_message());
            kvrt_cache_destroy(c);
            continue;
        }
        const DLTensor *d = &t->dl_tensor;
        tap_ok(d->dtype.code == want[i].code && d->dtype.bits == want[i].bits && d->dtype.lanes == 1 &&
                   d->device.device_type == kDLCPU && d->device.device_id == 0,
               "%s exports as DLPack code %u, %u bits, on kDLCPU", kvrt_dtype_name(want[i].dtype), want[i].code,
               want[i].bits);
        t->deleter(t);
        kvrt_cache_destroy(c);
    }
}

static void expect_error(int rc, int want, const char *needle, const char *what)
{
    const char *msg = kvrt_error_message();
    if (!tap_ok(rc == want && strstr(msg, needle) != NULL, "%s: %s naming %s", what, kvrt_status_name(want), needle))
        tap_diag("got %s: %s", kvrt_status_name(rc), msg);
}

static void check_errors(kvrt_runtime *rt)
{
    struct kvrt_spec spec = attention_spec(KVRT_DTYPE_FP16);
    kvrt_cache *c = make_cache(rt, "cpu", KVRT_LAYOUT_LBHNC, &spec, 2);
    DLManagedTensor *t = (DLManagedTensor *)&t;
    expect_error(kvrt_cache_export_layer(c, 2, KVRT_VIEW_ALL, &t), KVRT_ERR_INVALID, "layer 2 is out of range",
                 "layer 2 of a 2-layer cache");
    tap_ok(t == NULL, "a failed export sets *out to NULL");
    expect_error(kvrt_cache_export_layer(c, 0, (enum kvrt_view_part)7, &t), KVRT_ERR_INVALID, "view part 7",
                 "an invalid view part");
    expect_error(kvrt_cache_export_layer(NULL, 0, KVRT_VIEW_ALL, &t), KVRT_ERR_INVALID, "NULL", "a NULL cache");
    expect_error(kvrt_cache_export_layer(c, 0, KVRT_VIEW_ALL, NULL), KVRT_ERR_INVALID, "NULL", "a NULL out");
    kvrt_cache_destroy(c);

    struct kvrt_spec mla = spec;
    mla.kind = KVRT_SPEC_MLA;
    mla.num_kv_heads = 1;
    mla.head_size_v = 0;
    c = make_cache(rt, "cpu", KVRT_LAYOUT_LBHNC, &mla, 1);
    expect_error(kvrt_cache_export_layer(c, 0, KVRT_VIEW_V, &t), KVRT_ERR_INVALID, "no separate V",
                 "V of an MLA layer");
    tap_ok(kvrt_cache_export_layer(c, 0, KVRT_VIEW_K, &t) == KVRT_OK && t->dl_tensor.shape[3] == HEAD,
           "K of an MLA layer is its latent vector of head_size elements");
    if (t)
        t->deleter(t);
    kvrt_cache_destroy(c);

    struct kvrt_spec state;
    kvrt_spec_default(&state);
    state.kind = KVRT_SPEC_STATE;
    state.block_size = BLOCK_SIZE;
    state.state_content_bytes = 100;
    c = make_cache(rt, "cpu", KVRT_LAYOUT_LBHNC, &state, 1);
    expect_error(kvrt_cache_export_layer(c, 0, KVRT_VIEW_K, &t), KVRT_ERR_INVALID, "state layer", "K of a state layer");
    tap_ok(kvrt_cache_export_layer(c, 0, KVRT_VIEW_ALL, &t) == KVRT_OK && t->dl_tensor.dtype.code == kDLUInt &&
               t->dl_tensor.dtype.bits == 8 && t->dl_tensor.shape[3] == 100,
           "a state layer exports as its content bytes (uint8, C = 100)");
    if (t)
        t->deleter(t);
    kvrt_cache_destroy(c);

    /* Two groups overlay the same bytes: not one evenly spaced tensor. */
    kvrt_backend *b = NULL;
    kvrt_runtime_bind(rt, "cpu", "LBHNC", &b);
    struct kvrt_layer_entry e1 = {"full", spec}, e2 = {"window", spec};
    struct kvrt_group groups[2] = {{&e1, 1}, {&e2, 1}};
    kvrt_placement *p = NULL;
    c = NULL;
    if (kvrt_placement_create(KVRT_LAYOUT_LBHNC, groups, 2, BLOCKS, 0, &p) == KVRT_OK)
        kvrt_cache_create(b, p, &c);
    kvrt_placement_destroy(p);
    expect_error(kvrt_cache_export_layers(c, KVRT_VIEW_ALL, &t), KVRT_ERR_INVALID, "one by one",
                 "5-D export of two overlaid groups");
    kvrt_cache_destroy(c);
}

/* A tensor outlives kvrt_cache_destroy and kvrt_runtime_close. */
static void check_lifetime(void)
{
    kvrt_runtime *rt = NULL;
    kvrt_runtime_open(NULL, &rt);
    struct kvrt_spec spec = attention_spec(KVRT_DTYPE_FP32);
    kvrt_cache *c = make_cache(rt, "cpu", KVRT_LAYOUT_BLHNC, &spec, 2);
    DLManagedTensor *a = NULL, *b = NULL;
    kvrt_cache_export_layer(c, 1, KVRT_VIEW_K, &a);
    kvrt_cache_export_layers(c, KVRT_VIEW_ALL, &b);
    kvrt_cache_destroy(c);
    if (!tap_ok(a && b, "two tensors exported before kvrt_cache_destroy")) {
        kvrt_runtime_close(rt);
        return;
    }
    float *x = a->dl_tensor.data;
    x[0] = 1.5f;
    x[a->dl_tensor.strides[0] * (BLOCKS - 1)] = 2.5f;
    tap_ok(x[0] == 1.5f, "after kvrt_cache_destroy the memory is still there (ASan/valgrind check it)");
    a->deleter(a);
    float *y = b->dl_tensor.data;
    y[b->dl_tensor.strides[0]] = 3.5f;
    tap_ok(y[b->dl_tensor.strides[0]] == 3.5f, "after the first deleter, the second tensor still has it");
    b->deleter(b);
    tap_ok(true, "the last deleter freed the destroyed cache (a leak or double free fails under ASan)");

    /* A runtime closed with a tensor alive finishes closing at its deleter. */
    c = make_cache(rt, "cpu", KVRT_LAYOUT_LBNHC, &spec, 2);
    kvrt_cache *other = make_cache(rt, "cpu", KVRT_LAYOUT_LBNHC, &spec, 1);
    (void)other;
    kvrt_cache_export_layer(c, 0, KVRT_VIEW_V, &a);
    kvrt_runtime_close(rt);
    if (!tap_ok(a != NULL, "a tensor exported before kvrt_runtime_close"))
        return;
    x = a->dl_tensor.data;
    x[a->dl_tensor.strides[0] * (BLOCKS - 1) + a->dl_tensor.strides[1]] = 4.5f;
    tap_ok(x[a->dl_tensor.strides[0] * (BLOCKS - 1) + a->dl_tensor.strides[1]] == 4.5f,
           "after kvrt_runtime_close the tensor's memory is still there");
    a->deleter(a);
    tap_ok(true, "its deleter finished closing the runtime (leaks fail under ASan/valgrind)");
}

/* OpenCL memory has no address in this process. */
static void check_opencl(kvrt_runtime *rt)
{
    size_t i;
    struct kvrt_plugin_info info;
    if (kvrt_runtime_find_plugin(rt, "opencl", &i) != KVRT_OK || kvrt_runtime_plugin_info(rt, i, &info) != KVRT_OK ||
        !info.available) {
        tap_skip("the opencl backend is not built or has no device here");
        return;
    }
    struct kvrt_spec spec = attention_spec(KVRT_DTYPE_FP32);
    enum kvrt_layout layout = info.num_layouts ? info.layouts[0] : KVRT_LAYOUT_LBNHC;
    kvrt_cache *c = make_cache(rt, "opencl", layout, &spec, 1);
    DLManagedTensor *t = NULL;
    if (!c) {
        tap_skip("no opencl cache: %s", kvrt_error_message());
        return;
    }
    expect_error(kvrt_cache_export_layer(c, 0, KVRT_VIEW_ALL, &t), KVRT_ERR_UNSUPPORTED, "\"opencl\"",
                 "export of an OpenCL cache");
    kvrt_cache_destroy(c);
}

/* GPU caches export as device tensors at the buffer's device address. */
static void check_gpu(kvrt_runtime *rt, const char *backend, DLDeviceType want_type)
{
    size_t i;
    struct kvrt_plugin_info info;
    if (kvrt_runtime_find_plugin(rt, backend, &i) != KVRT_OK) {
        tap_skip("the %s backend is not built", backend);
        return;
    }
    if (kvrt_runtime_plugin_info(rt, i, &info) != KVRT_OK || !info.available) {
        tap_skip("the %s backend has no device: %s", backend, info.reason);
        return;
    }
    struct kvrt_spec spec = attention_spec(KVRT_DTYPE_BF16);
    enum kvrt_layout layout = info.num_layouts ? info.layouts[0] : KVRT_LAYOUT_LBNHC;
    kvrt_cache *c = make_cache(rt, backend, layout, &spec, LAYERS);
    kvrt_backend *b = NULL;
    struct kvrt_device_info dev;
    void *base = NULL;
    enum kvrt_memory_kind kind;
    DLManagedTensor *t = NULL;
    struct kvrt_view view;
    bool ok = c && kvrt_runtime_bind(rt, backend, kvrt_layout_name(layout), &b) == KVRT_OK &&
              kvrt_backend_device_info(b, &dev) == KVRT_OK &&
              kvrt_buffer_address(kvrt_cache_buffer(c), &base, &kind) == KVRT_OK &&
              kvrt_placement_layer_view(kvrt_cache_placement(c), 0, 2, &view) == KVRT_OK &&
              kvrt_cache_export_layer(c, 2, KVRT_VIEW_V, &t) == KVRT_OK;
    if (!tap_ok(ok, "%s: export of layer 2's V", backend)) {
        tap_diag("%s", kvrt_error_message());
    } else {
        const DLTensor *d = &t->dl_tensor;
        tap_ok(d->device.device_type == want_type && d->device.device_id == dev.device_id &&
                   (unsigned char *)d->data == (unsigned char *)base + view.offset_bytes + HEAD * 2 &&
                   view_matches(d, &view, HEAD_V),
               "%s: a device tensor (type %d, device %d) at the buffer's address + the view's offset", backend,
               (int)want_type, (int)dev.device_id);
    }
    if (t)
        t->deleter(t);
    kvrt_cache_destroy(c);
}

int main(void)
{
    kvrt_runtime *rt = NULL;
    if (kvrt_runtime_open(NULL, &rt) != KVRT_OK)
        tap_skip_all("no runtime: %s", kvrt_error_message());
    size_t i;
    if (kvrt_runtime_find_plugin(rt, "cpu", &i) != KVRT_OK) {
        kvrt_runtime_close(rt);
        tap_skip_all("the cpu backend is not built");
    }
    tap_plan_dynamic();
    for (int l = 0; l < KVRT_NUM_LAYOUTS; l++) {
        check_layout(rt, (enum kvrt_layout)l, KVRT_DTYPE_BF16);
        check_layout(rt, (enum kvrt_layout)l, KVRT_DTYPE_FP32);
    }
    check_types(rt);
    check_errors(rt);
    check_opencl(rt);
    check_gpu(rt, "cuda", kDLCUDA);
    check_gpu(rt, "rocm", kDLROCM);
    kvrt_runtime_close(rt);
    check_lifetime();
    TAP_EQ_U64(kvrt_dlpack_live_tensors(), 0, "every exported tensor's deleter ran (live tensor count is 0)");
    kvrt_dlpack_capsule_destructor(NULL);
    tap_ok(true, "the capsule destructor does nothing outside a Python process");
    return tap_done();
}
