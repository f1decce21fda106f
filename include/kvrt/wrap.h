/*
 * kvrt — caches over memory the caller owns.
 *
 * Engines allocate their KV caches themselves (vLLM allocates one raw int8
 * tensor per KV-cache tensor); kvrt_cache_wrap() lays a placement over such
 * memory instead of allocating, so kvrt's operations, its DLPack views and
 * transfer registrations work on the engine's own bytes.  kvrt never frees
 * the memory: an optional release callback tells the owner when kvrt is done
 * with it.
 *
 *   struct kvrt_memory m;
 *   kvrt_memory_default(&m);
 *   m.kind = KVRT_MEMORY_HOST;          // or KVRT_MEMORY_CUDA + m.device_id
 *   m.address = engine_buffer;
 *   m.bytes = engine_buffer_bytes;      // >= kvrt_placement_size(p)
 *   kvrt_cache_wrap(backend, p, &m, &cache);
 *
 * Checked before anything uses the memory, each refusal naming the value
 * and what is valid: the backend can adopt memory (plugin ABI 1.2
 * buffer_import; others, OpenCL among them, are refused by name); the kind
 * and device are the backend's (kvrt_backend_device_info); the address is
 * not NULL and aligned as the backend declares; the bytes cover the
 * placement; the range overlaps no buffer or cache of this runtime; and the
 * backend's own check (host memory mapped in this process for cpu, a device
 * pointer of that device by the driver's pointer attributes for CUDA/ROCm).
 *
 * Lifetime: the cache, every DLPack tensor exported from it and every
 * reference taken with kvrt_cache_retain (a transfer registration) hold the
 * memory.  When the last of them goes, the release callback runs exactly
 * once, on the thread that dropped it, with no kvrt lock held (it may call
 * kvrt).  When kvrt_cache_wrap fails, the memory was never adopted and the
 * callback does not run.
 */
#ifndef KVRT_WRAP_H
#define KVRT_WRAP_H

#include <stdint.h>

#include <kvrt/common.h>
#include <kvrt/device.h>
#include <kvrt/runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Memory the caller owns.  Fill it with kvrt_memory_default() or a
 * designated initialiser, which leave the reserved bytes zero. */
struct kvrt_memory {
    enum kvrt_memory_kind kind; /* host, CUDA or ROCm: what `address` points to */
    int32_t device_id;          /* the CUDA/ROCm device ordinal; 0 for host memory */
    void *address;              /* the first byte */
    uint64_t bytes;             /* its size; at least the placement's */
    /* Run once when kvrt drops its last reference (NULL: none). */
    void (*release)(void *user, void *address);
    void *release_user;
    uint8_t reserved[32];
};

/** Defaults: host memory, device 0, NULL address, 0 bytes, no callback. */
KVRT_API void kvrt_memory_default(struct kvrt_memory *memory);

/**
 * A cache laid out by `p` (whose layout must be the backend's) over
 * `memory`, which must hold at least kvrt_placement_size(p) bytes.  The
 * bytes are left as they are (not zeroed).  Everything else is as
 * kvrt_cache_create: the placement is copied, layers are numbered in
 * placement order, every operation, export and query works the same, and
 * kvrt_cache_buffer's address and size are the memory's address and the
 * placement's size.
 * @return KVRT_OK; KVRT_ERR_UNSUPPORTED when the backend cannot adopt
 *   memory; KVRT_ERR_INVALID for a NULL address, a kind or device that is
 *   not the backend's, a misaligned address, too few bytes, an overlap, or
 *   memory the backend's device API does not recognise; KVRT_ERR_NOMEM.
 */
KVRT_API int kvrt_cache_wrap(kvrt_backend *b, const kvrt_placement *p, const struct kvrt_memory *memory,
                             kvrt_cache **out);

/** Whether `c` is over caller memory (kvrt_cache_wrap, kvrt_cache_from_dlpack). */
KVRT_API bool kvrt_cache_is_wrapped(const kvrt_cache *c);

#ifdef __cplusplus
}
#endif
#endif
