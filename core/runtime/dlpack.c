/* DLPack export: a cache's layers as DLManagedTensors that share its memory
 * and keep it alive (see kvrt/dlpack.h).
 *
 * Layer 8 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/dlpack.h>

#include "checked.h"
#include "dlpack_internal.h"
#include "error.h"
#include "runtime_internal.h"

/* One allocation per tensor: the DLManagedTensor points into it for its
 * shape and strides, and its deleter frees it. */
struct kvrt_export {
    DLManagedTensor tensor;
    kvrt_cache *cache;
    int64_t shape[5];
    int64_t strides[5];
};

static atomic_uint_fast64_t live_tensors;

uint64_t kvrt_dlpack_live_tensors(void)
{
    return (uint64_t)atomic_load(&live_tensors);
}

static void export_deleter(DLManagedTensor *self)
{
    if (!self)
        return;
    struct kvrt_export *e = self->manager_ctx;
    kvrt_cache *c = e->cache;
    free(e);
    atomic_fetch_sub(&live_tensors, 1);
    kvrt_cache_release(c);
}

int kvrt_dlpack_dtype(const struct kvrt_plugin_layer *L, DLDataType *out)
{
    out->lanes = 1;
    out->bits = (uint8_t)(L->elem_size * 8);
    if (L->kind == KVRT_SPEC_STATE) {
        /* State pages are opaque bytes. */
        out->code = kDLUInt;
        out->bits = 8;
        return KVRT_OK;
    }
    switch ((enum kvrt_dtype)L->dtype) {
    case KVRT_DTYPE_FP32:
    case KVRT_DTYPE_FP16: out->code = kDLFloat; return KVRT_OK;
    case KVRT_DTYPE_BF16: out->code = kDLBfloat; return KVRT_OK;
    case KVRT_DTYPE_INT8: out->code = kDLInt; return KVRT_OK;
    case KVRT_DTYPE_UINT8:
    case KVRT_DTYPE_FP8_E4M3:
    case KVRT_DTYPE_FP8_E5M2:
        /* DLPack 0.6 has no fp8 code; the bytes are exported as they are. */
        out->code = kDLUInt;
        return KVRT_OK;
    }
    return kvrt_fail(KVRT_ERR_INTERNAL, "kvrt DLPack export: layer with unknown element type %d", (int)L->dtype);
}

static int dl_device(kvrt_cache *c, enum kvrt_memory_kind kind, DLDevice *out)
{
    struct kvrt_device_info info;
    int status = kvrt_backend_device_info(c->backend, &info);
    if (status != KVRT_OK)
        return status;
    out->device_id = kind == KVRT_MEMORY_HOST ? 0 : info.device_id;
    switch (kind) {
    case KVRT_MEMORY_HOST: out->device_type = kDLCPU; return KVRT_OK;
    case KVRT_MEMORY_CUDA: out->device_type = kDLCUDA; return KVRT_OK;
    case KVRT_MEMORY_ROCM: out->device_type = kDLROCM; return KVRT_OK;
    case KVRT_MEMORY_OPAQUE: break;
    }
    return kvrt_fail(KVRT_ERR_UNSUPPORTED,
                     "DLPack export: backend \"%s\" keeps the cache in memory with no address in this "
                     "process (memory kind %d), so it cannot be shared as a tensor; use kvrt_cache_read "
                     "or a backend with host, CUDA or ROCm memory",
                     c->backend->plugin->desc->name, (int)kind);
}

/* The content sub-range of `part`: first element and count. */
static int part_range(const kvrt_cache *c, uint32_t layer, enum kvrt_view_part part, uint64_t *first, uint64_t *count)
{
    const struct kvrt_plugin_layer *L = &c->layers[layer];
    uint64_t content = L->content_bytes / L->elem_size;
    const char *name = c->layer_names[layer];
    switch (part) {
    case KVRT_VIEW_ALL:
        *first = 0;
        *count = content;
        return KVRT_OK;
    case KVRT_VIEW_K:
    case KVRT_VIEW_V:
        if (L->kind == KVRT_SPEC_STATE)
            return kvrt_fail(KVRT_ERR_INVALID,
                             "DLPack export: layer %u (\"%s\") is a state layer with no K or V; export "
                             "it with KVRT_VIEW_ALL",
                             layer, name);
        if (part == KVRT_VIEW_V && L->head_size_v == 0)
            return kvrt_fail(KVRT_ERR_INVALID,
                             "DLPack export: layer %u (\"%s\") is an MLA layer with no separate V "
                             "(head_size_v 0); export its latent vector with KVRT_VIEW_K or KVRT_VIEW_ALL",
                             layer, name);
        if (L->head_size + L->head_size_v > content)
            return kvrt_fail(KVRT_ERR_INVALID,
                             "DLPack export: layer %u (\"%s\") has %llu content elements, fewer than head "
                             "size %llu + V head size %llu",
                             layer, name, ULL(content), ULL(L->head_size), ULL(L->head_size_v));
        *first = part == KVRT_VIEW_K ? 0 : L->head_size;
        *count = part == KVRT_VIEW_K ? L->head_size : L->head_size_v;
        return KVRT_OK;
    }
    return kvrt_fail(KVRT_ERR_INVALID,
                     "DLPack export: view part %d is not one of KVRT_VIEW_ALL (0), "
                     "KVRT_VIEW_K (1), KVRT_VIEW_V (2)",
                     (int)part);
}

/* Layer 0's view with its K/V range, the buffer address and the device:
 * everything both exports share.  Takes a reference on success. */
static int export_begin(kvrt_cache *c, uint32_t layer, enum kvrt_view_part part, const char *fn,
                        struct kvrt_export **out)
{
    *out = NULL;
    if (!c)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: the cache is NULL", fn);
    if (layer >= c->desc.num_layers)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: layer %u is out of range: the cache has %llu layers (valid 0..%llu)",
                         fn, layer, ULL(c->desc.num_layers), ULL(c->desc.num_layers - 1));
    uint64_t first, count;
    int status = part_range(c, layer, part, &first, &count);
    if (status != KVRT_OK)
        return kvrt_fail_context(status, "%s", fn);
    void *base = NULL;
    enum kvrt_memory_kind kind;
    status = kvrt_buffer_address(c->buffer, &base, &kind);
    if (status != KVRT_OK)
        return kvrt_fail_context(status, "%s", fn);
    struct kvrt_export *e = calloc(1, sizeof(*e));
    if (!e)
        return kvrt_fail(KVRT_ERR_NOMEM, "%s: out of memory", fn);
    DLTensor *t = &e->tensor.dl_tensor;
    status = dl_device(c, kind, &t->device);
    if (status == KVRT_OK)
        status = kvrt_dlpack_dtype(&c->layers[layer], &t->dtype);
    if (status == KVRT_OK)
        status = kvrt_cache_retain(c);
    if (status != KVRT_OK) {
        free(e);
        return kvrt_fail_context(status, "%s", fn);
    }
    const struct kvrt_plugin_layer *L = &c->layers[layer];
    e->cache = c;
    atomic_fetch_add(&live_tensors, 1);
    /* data is the first element itself and byte_offset stays 0: consumers
     * that ignore byte_offset would otherwise see every layer as layer 0. */
    t->data = (unsigned char *)base + L->offset + first * L->elem_size;
    t->byte_offset = 0;
    t->shape = e->shape;
    t->strides = e->strides;
    e->tensor.manager_ctx = e;
    e->tensor.deleter = export_deleter;
    /* The view's four axes; the caller prepends L for the 5-D export. */
    e->shape[0] = (int64_t)L->num_view_blocks;
    e->shape[1] = (int64_t)L->head_slots;
    e->shape[2] = (int64_t)L->states;
    e->shape[3] = (int64_t)count;
    e->strides[0] = (int64_t)(L->stride_block / L->elem_size);
    e->strides[1] = (int64_t)(L->stride_head / L->elem_size);
    e->strides[2] = (int64_t)(L->stride_state / L->elem_size);
    e->strides[3] = 1;
    *out = e;
    return KVRT_OK;
}

int kvrt_cache_export_layer(kvrt_cache *c, uint32_t layer, enum kvrt_view_part part, DLManagedTensor **out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_cache_export_layer: out is NULL");
    *out = NULL;
    struct kvrt_export *e;
    int status = export_begin(c, layer, part, "kvrt_cache_export_layer", &e);
    if (status != KVRT_OK)
        return status;
    e->tensor.dl_tensor.ndim = 4;
    *out = &e->tensor;
    kvrt_clear_error();
    return KVRT_OK;
}

#define EXPORT_ONE_BY_ONE "export them one by one with kvrt_cache_export_layer"

static bool same_view(const struct kvrt_plugin_layer *a, const struct kvrt_plugin_layer *b)
{
    return a->kind == b->kind && a->dtype == b->dtype && a->elem_size == b->elem_size &&
           a->num_view_blocks == b->num_view_blocks && a->head_slots == b->head_slots && a->states == b->states &&
           a->content_bytes == b->content_bytes && a->head_size == b->head_size && a->head_size_v == b->head_size_v &&
           a->stride_block == b->stride_block && a->stride_head == b->stride_head && a->stride_state == b->stride_state;
}

/* Elements from one layer to the next, when every layer has layer 0's view
 * and they are evenly spaced. */
int kvrt_dlpack_layer_stride(const kvrt_cache *c, const char *fn, const char *advice, uint64_t *stride)
{
    const struct kvrt_plugin_layer *L0 = &c->layers[0];
    uint64_t n = c->desc.num_layers;
    if (n == 1) {
        /* Any stride is right for an axis of extent 1; the page span keeps
         * the tensor's strides distinct. */
        *stride = L0->stride_block * L0->num_view_blocks / L0->elem_size;
        return KVRT_OK;
    }
    const struct kvrt_plugin_layer *L1 = &c->layers[1];
    if (L1->offset <= L0->offset || (L1->offset - L0->offset) % L0->elem_size != 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s: layer 1 (\"%s\") starts at byte %llu and layer 0 at %llu, "
                         "not a positive whole number of %llu-byte elements later, so the layers are not "
                         "one tensor; %s",
                         fn, c->layer_names[1], ULL(L1->offset), ULL(L0->offset), ULL(L0->elem_size), advice);
    uint64_t step = L1->offset - L0->offset;
    for (uint64_t l = 1; l < n; l++) {
        const struct kvrt_plugin_layer *L = &c->layers[l];
        uint64_t want;
        if (!same_view(L0, L))
            return kvrt_fail(KVRT_ERR_INVALID,
                             "%s: layer %llu (\"%s\") does not have layer 0's (\"%s\") "
                             "spec and strides, so the layers are not one tensor; %s",
                             fn, ULL(l), c->layer_names[l], c->layer_names[0], advice);
        if (kvrt_mul_overflow(step, l, &want) || kvrt_add_overflow(want, L0->offset, &want) || L->offset != want)
            return kvrt_fail(KVRT_ERR_INVALID,
                             "%s: layer %llu (\"%s\") starts at byte %llu, not at %llu "
                             "(layers are not evenly spaced by %llu bytes); %s",
                             fn, ULL(l), c->layer_names[l], ULL(L->offset), ULL(L0->offset + l * step), ULL(step),
                             advice);
    }
    *stride = step / L0->elem_size;
    return KVRT_OK;
}

int kvrt_cache_export_layers(kvrt_cache *c, enum kvrt_view_part part, DLManagedTensor **out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_cache_export_layers: out is NULL");
    *out = NULL;
    if (!c)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_cache_export_layers: the cache is NULL");
    uint64_t stride;
    int status = kvrt_dlpack_layer_stride(c, "kvrt_cache_export_layers", EXPORT_ONE_BY_ONE, &stride);
    if (status != KVRT_OK)
        return status;
    struct kvrt_export *e;
    status = export_begin(c, 0, part, "kvrt_cache_export_layers", &e);
    if (status != KVRT_OK)
        return status;
    memmove(&e->shape[1], &e->shape[0], 4 * sizeof(e->shape[0]));
    memmove(&e->strides[1], &e->strides[0], 4 * sizeof(e->strides[0]));
    e->shape[0] = (int64_t)c->desc.num_layers;
    e->strides[0] = (int64_t)stride;
    e->tensor.dl_tensor.ndim = 5;
    *out = &e->tensor;
    kvrt_clear_error();
    return KVRT_OK;
}

typedef int (*capsule_is_valid_fn)(void *capsule, const char *name);
typedef void *(*capsule_get_pointer_fn)(void *capsule, const char *name);

void kvrt_dlpack_capsule_destructor(void *capsule)
{
    /* Looked up, not linked: libkvrt does not depend on Python, and in a
     * Python process the interpreter exports these. */
    capsule_is_valid_fn is_valid = NULL;
    capsule_get_pointer_fn get_pointer = NULL;
    void *sym = dlsym(RTLD_DEFAULT, "PyCapsule_IsValid");
    memcpy(&is_valid, &sym, sizeof(is_valid));
    sym = dlsym(RTLD_DEFAULT, "PyCapsule_GetPointer");
    memcpy(&get_pointer, &sym, sizeof(get_pointer));
    if (!capsule || !is_valid || !get_pointer || !is_valid(capsule, "dltensor"))
        return;
    DLManagedTensor *t = get_pointer(capsule, "dltensor");
    if (t && t->deleter)
        t->deleter(t);
}
