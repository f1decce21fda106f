/*
 * kvrt — zero-copy DLPack views of a cache, for PyTorch, NumPy, CuPy, JAX
 * or any kernel library that takes a DLManagedTensor (DLPack 0.6, the
 * legacy struct; the header comes from the system's dlpack package).
 *
 *   kvrt_cache_export_layer()   one layer: [blocks, head slots, states, content]
 *   kvrt_cache_export_layers()  every layer: [layers, blocks, head slots, states, content]
 *   kvrt_cache_from_dlpack()    the other way: a cache over a tensor's memory
 *
 * Shapes and strides count elements of the layer's type, in logical order,
 * with the layout's strides: the per-layer view is the one `kvrt plan`
 * prints and vLLM builds (blocks count kernel blocks when the cache splits
 * blocks).  `data` is the address of the view's first element and
 * `byte_offset` is 0, because some consumers ignore byte_offset.
 *
 * Types: fp32, fp16 and bf16 export as kDLFloat 32/16 and kDLBfloat 16;
 * int8 and uint8 as themselves; fp8_e4m3 and fp8_e5m2 as kDLUInt 8 (DLPack
 * 0.6 has no fp8 code: reinterpret the bytes); state layers as kDLUInt 8
 * with content in bytes.
 *
 * Devices: host memory exports as kDLCPU, CUDA memory as kDLCUDA and ROCm
 * memory as kDLROCM, with the backend's device id.  A backend whose memory
 * has no address in this process (OpenCL) cannot export:
 * KVRT_ERR_UNSUPPORTED names it.
 *
 * Lifetime: every tensor holds a reference on its cache.  The caller calls
 * the tensor's deleter exactly once (a consumer such as
 * torch.utils.dlpack.from_dlpack does it for you).  kvrt_cache_destroy with
 * tensors alive keeps the cache's memory until the last deleter runs;
 * kvrt_runtime_close with tensors alive releases everything else it can at
 * once and defers the rest (the caches with live tensors, their backends
 * with the buffers made on them, and plugins) to the last deleter.  Either way the handles are invalid to
 * the caller as soon as the call returns.
 */
#ifndef KVRT_DLPACK_H
#define KVRT_DLPACK_H

#include <dlpack/dlpack.h>

#include <kvrt/common.h>
#include <kvrt/runtime.h>
#include <kvrt/wrap.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which part of each state's content a view covers.  Values are ABI. */
enum kvrt_view_part {
    KVRT_VIEW_ALL = 0, /* the whole content axis: K then V for attention */
    KVRT_VIEW_K = 1,   /* attention and MLA: the first head_size elements */
    KVRT_VIEW_V = 2,   /* attention: the head_size_v elements after K */
};

/**
 * Export layer `layer` (placement order) as a 4-D [B, H, N, C] tensor;
 * with KVRT_VIEW_K / KVRT_VIEW_V, C is head_size / head_size_v.
 * @return KVRT_OK; KVRT_ERR_INVALID for a layer out of range, an invalid
 *   part, K/V of a state layer or V of an MLA layer; KVRT_ERR_UNSUPPORTED
 *   when the backend's memory cannot be addressed from this process;
 *   KVRT_ERR_NOMEM.
 */
KVRT_API int kvrt_cache_export_layer(kvrt_cache *c, uint32_t layer, enum kvrt_view_part part, DLManagedTensor **out);

/**
 * Export every layer as one 5-D [L, B, H, N, C] tensor.  All layers must
 * share their spec and lie evenly spaced in the buffer (layer l at
 * offset(0) + l * stride, the stride a whole number of elements), as a
 * single group of identical layers always does; otherwise
 * KVRT_ERR_INVALID names the first layer that breaks the rule — export
 * layers one by one then.  Other errors as kvrt_cache_export_layer.
 */
KVRT_API int kvrt_cache_export_layers(kvrt_cache *c, enum kvrt_view_part part, DLManagedTensor **out);

/**
 * A cache laid out by `p` on backend `b` over the memory of a DLPack tensor
 * from any producer (PyTorch, NumPy, CuPy, an engine): kvrt_cache_wrap
 * (kvrt/wrap.h) with the tensor's memory, whose bytes are kept.  Taken as
 *  - the view of the whole cache when it has 5 axes (4 for a cache of one
 *    layer): shape, strides and type must be exactly those
 *    kvrt_cache_export_layers (kvrt_cache_export_layer) would give, else
 *    KVRT_ERR_INVALID names the first axis that differs and both values;
 *    the cache's memory starts layer 0's offset before its first element;
 *  - otherwise the cache's bytes: contiguous, of any element type, holding
 *    at least kvrt_placement_size(p) bytes from its first element.
 * The device decides the memory: kDLCPU, kDLCUDAHost and kDLROCMHost are
 * host memory; kDLCUDA and kDLCUDAManaged CUDA memory and kDLROCM ROCm
 * memory of the tensor's device_id.
 * On success the cache holds the tensor: its deleter runs exactly once,
 * when the last reference to the cache goes (the cache itself, tensors
 * exported from it, kvrt_cache_retain).  On failure the tensor is not
 * taken: it is still the caller's, deleter and all.
 * @return KVRT_OK; KVRT_ERR_INVALID for a tensor that is not one of the
 *   above, and every refusal of kvrt_cache_wrap; KVRT_ERR_UNSUPPORTED when
 *   the backend cannot adopt memory.
 */
KVRT_API int kvrt_cache_from_dlpack(kvrt_backend *b, const kvrt_placement *p, DLManagedTensor *tensor,
                                    kvrt_cache **out);

/** Tensors exported in this process whose deleter has not run yet: for
 *  leak checks by bindings and tests (each deleter runs exactly once). */
KVRT_API uint64_t kvrt_dlpack_live_tensors(void);

/**
 * A PyCapsule destructor for bindings that wrap these tensors in Python
 * "dltensor" capsules without compiling an extension (kvrt's Python package
 * does, through ctypes): when the capsule was not consumed (still named
 * "dltensor") it runs the tensor's deleter, else nothing.  Pass it to
 * PyCapsule_New.  C code, so it is safe to run while a consumer that failed
 * has its exception set; it finds the two PyCapsule functions it needs in
 * the running process and does nothing outside a Python process.
 */
KVRT_API void kvrt_dlpack_capsule_destructor(void *capsule);

#ifdef __cplusplus
}
#endif
#endif
