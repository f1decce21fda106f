/* DLPack import: a cache over a producer's tensor (kvrt/dlpack.h), through
 * kvrt_cache_wrap, holding the producer's tensor until its last reference.
 *
 * Layer 8 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/dlpack.h>
#include <kvrt/wrap.h>

#include "checked.h"
#include "dlpack_internal.h"
#include "error.h"
#include "runtime_internal.h"

#define FN "kvrt_cache_from_dlpack"

static const char *const axis_names[5] = {"L", "B", "H", "N", "C"};

static void run_deleter(void *user, void *address)
{
    (void)address;
    DLManagedTensor *t = user;
    if (t->deleter)
        t->deleter(t);
}

static const char *device_text(int type)
{
    switch (type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    case kDLOpenCL: return "opencl";
    case kDLVulkan: return "vulkan";
    case kDLMetal: return "metal";
    case kDLROCM: return "rocm";
    case kDLROCMHost: return "rocm_host";
    case kDLCUDAManaged: return "cuda_managed";
    default: return "another device";
    }
}

/* The DLPack device as kvrt memory: pinned host memory is host memory,
 * managed memory is the device's. */
static int memory_of(const DLDevice *d, struct kvrt_memory *m)
{
    switch ((int)d->device_type) {
    case kDLCPU:
    case kDLCUDAHost:
    case kDLROCMHost: m->kind = KVRT_MEMORY_HOST; return KVRT_OK;
    case kDLCUDA:
    case kDLCUDAManaged:
        m->kind = KVRT_MEMORY_CUDA;
        m->device_id = d->device_id;
        return KVRT_OK;
    case kDLROCM:
        m->kind = KVRT_MEMORY_ROCM;
        m->device_id = d->device_id;
        return KVRT_OK;
    default: break;
    }
    return kvrt_fail(KVRT_ERR_INVALID,
                     FN ": the tensor is on DLPack device type %d (%s); kvrt adopts host (kDLCPU, kDLCUDAHost, "
                        "kDLROCMHost), CUDA (kDLCUDA, kDLCUDAManaged) and ROCm (kDLROCM) memory",
                     (int)d->device_type, device_text((int)d->device_type));
}

/* Elements of the tensor, overflow-checked; negative extents refused. */
static int count_elements(const DLTensor *t, uint64_t *numel)
{
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0)
            return kvrt_fail(KVRT_ERR_INVALID, FN ": axis %d of the tensor has extent %lld", i, (long long)t->shape[i]);
        if (kvrt_mul_overflow(n, (uint64_t)t->shape[i], &n))
            return kvrt_fail(KVRT_ERR_OVERFLOW, FN ": the tensor's element count overflows");
    }
    *numel = n;
    return KVRT_OK;
}

/* Row-major and dense (axes of extent 1 may have any stride). */
static int check_contiguous(const DLTensor *t)
{
    if (!t->strides)
        return KVRT_OK;
    int64_t want = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != want)
            return kvrt_fail(KVRT_ERR_INVALID,
                             FN ": the tensor of %d axes is not contiguous: axis %d has stride %lld, row-major would "
                                "be %lld; pass the contiguous memory (a flat byte tensor, say) or the %s view of "
                                "the whole cache",
                             t->ndim, i, (long long)t->strides[i], (long long)want,
                             t->ndim == 4 ? "[B, H, N, C]" : "[L, B, H, N, C]");
        want *= t->shape[i];
    }
    return KVRT_OK;
}

/* The strided view of the whole cache: shape, strides (in elements) and
 * type must be the layout's, as kvrt_cache_export_layers would give. */
static int check_view(const kvrt_cache *c, const DLTensor *t)
{
    const struct kvrt_plugin_layer *L = &c->layers[0];
    int64_t shape[5], strides[5];
    int first = t->ndim == 5 ? 0 : 1; /* the logical axis of the tensor's axis 0 */
    if (t->ndim == 5) {
        uint64_t stride;
        int status = kvrt_dlpack_layer_stride(c, FN, "pass the cache's memory as a flat tensor", &stride);
        if (status != KVRT_OK)
            return status;
        shape[0] = (int64_t)c->desc.num_layers;
        strides[0] = (int64_t)stride;
    }
    shape[1] = (int64_t)L->num_view_blocks, strides[1] = (int64_t)(L->stride_block / L->elem_size);
    shape[2] = (int64_t)L->head_slots, strides[2] = (int64_t)(L->stride_head / L->elem_size);
    shape[3] = (int64_t)L->states, strides[3] = (int64_t)(L->stride_state / L->elem_size);
    shape[4] = (int64_t)(L->content_bytes / L->elem_size), strides[4] = 1;
    const char *layout = kvrt_layout_name((enum kvrt_layout)c->desc.layout);
    for (int i = 0; i < t->ndim; i++) {
        int axis = first + i;
        if (t->shape[i] != shape[axis])
            return kvrt_fail(KVRT_ERR_INVALID,
                             FN ": axis %d (%s) of the tensor has extent %lld but the %s view of the cache has %lld", i,
                             axis_names[axis], (long long)t->shape[i], layout, (long long)shape[axis]);
    }
    for (int i = 0; i < t->ndim; i++) {
        int axis = first + i;
        /* Strides NULL means row-major. */
        int64_t got = 1;
        if (t->strides)
            got = t->strides[i];
        else
            for (int k = i + 1; k < t->ndim; k++)
                got *= t->shape[k];
        if (got != strides[axis] && shape[axis] != 1)
            return kvrt_fail(KVRT_ERR_INVALID,
                             FN ": axis %d (%s) of the tensor has stride %lld but the %s view of the cache has %lld "
                                "(elements)",
                             i, axis_names[axis], (long long)got, layout, (long long)strides[axis]);
    }
    DLDataType want;
    int status = kvrt_dlpack_dtype(L, &want);
    if (status != KVRT_OK)
        return status;
    if (t->dtype.code != want.code || t->dtype.bits != want.bits)
        return kvrt_fail(KVRT_ERR_INVALID,
                         FN ": the tensor's elements are DLPack type code %u, %u bits, but layer 0 (\"%s\") of the "
                            "cache holds %s (code %u, %u bits)",
                         (unsigned)t->dtype.code, (unsigned)t->dtype.bits, c->layer_names[0],
                         kvrt_dtype_name((enum kvrt_dtype)L->dtype), (unsigned)want.code, (unsigned)want.bits);
    return KVRT_OK;
}

int kvrt_cache_from_dlpack(kvrt_backend *b, const kvrt_placement *p, DLManagedTensor *tensor, kvrt_cache **out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, FN ": out is NULL");
    *out = NULL;
    if (!b || !p || !tensor)
        return kvrt_fail(KVRT_ERR_INVALID, FN ": NULL argument");
    const DLTensor *t = &tensor->dl_tensor;
    if (!t->data)
        return kvrt_fail(KVRT_ERR_INVALID, FN ": the tensor's data is NULL");
    if (t->ndim < 0 || (t->ndim > 0 && !t->shape))
        return kvrt_fail(KVRT_ERR_INVALID, FN ": the tensor has %d axes and %s shape", t->ndim, t->shape ? "a" : "no");
    if (t->dtype.lanes != 1 || t->dtype.bits == 0 || t->dtype.bits % 8 != 0)
        return kvrt_fail(KVRT_ERR_INVALID,
                         FN ": the tensor's elements are %u lanes of %u bits; kvrt takes one lane of whole bytes",
                         (unsigned)t->dtype.lanes, (unsigned)t->dtype.bits);
    struct kvrt_memory m;
    kvrt_memory_default(&m);
    int status = memory_of(&t->device, &m);
    uint64_t numel = 0;
    if (status == KVRT_OK)
        status = count_elements(t, &numel);
    if (status != KVRT_OK)
        return status;
    /* Five axes (four for a cache of one layer) are the view of the whole
     * cache; anything else is taken as the cache's bytes. */
    size_t num_layers = 0;
    for (size_t s = 0; s < kvrt_placement_num_sets(p); s++) {
        struct kvrt_placement_set set;
        if (kvrt_placement_get_set(p, s, &set) == KVRT_OK)
            num_layers += set.num_layers;
    }
    bool view = t->ndim == 5 || (t->ndim == 4 && num_layers == 1);
    unsigned char *first = (unsigned char *)t->data + t->byte_offset;
    if (view) {
        struct kvrt_view v;
        status = kvrt_placement_layer_view(p, 0, 0, &v);
        if (status != KVRT_OK)
            return kvrt_fail_context(status, FN);
        /* The view's first element is layer 0's first; the cache's memory
         * starts that far before it. */
        if ((uintptr_t)first < v.offset_bytes)
            return kvrt_fail(KVRT_ERR_INVALID,
                             FN ": the tensor's first element at %p is less than layer 0's offset "
                                "(%llu bytes) from address 0",
                             (void *)first, ULL(v.offset_bytes));
        m.address = first - v.offset_bytes;
        m.bytes = kvrt_placement_size(p);
    } else {
        status = check_contiguous(t);
        if (status != KVRT_OK)
            return status;
        m.address = first;
        if (kvrt_mul_overflow(numel, t->dtype.bits / 8u, &m.bytes))
            return kvrt_fail(KVRT_ERR_OVERFLOW, FN ": the tensor's byte count overflows");
    }
    kvrt_cache *c = NULL;
    status = kvrt_cache_wrap_internal(b, p, &m, FN, &c);
    if (status == KVRT_OK && view)
        status = check_view(c, t);
    struct kvrt_release *release = NULL;
    if (status == KVRT_OK && !(release = calloc(1, sizeof(*release))))
        status = kvrt_fail(KVRT_ERR_NOMEM, FN ": out of memory");
    if (status != KVRT_OK) {
        /* Not adopted: no release is attached, so the producer's tensor
         * stays the caller's. */
        kvrt_cache_destroy(c);
        return status;
    }
    /* Only now the cache holds the producer's tensor: its deleter runs
     * once, after the last reference. */
    *release = (struct kvrt_release){run_deleter, tensor, m.address, NULL};
    c->release = release;
    *out = c;
    kvrt_clear_error();
    return KVRT_OK;
}
