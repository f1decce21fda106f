/*
 * Staging: blocks between the cache and the registered area, in kvrt's
 * staging order (per block, per layer, [H, N, C]) through the backend's own
 * gather and scatter, so any backend and any layout pair works.  A
 * selection of layers or heads is packed: for each block, for each selected
 * layer, the selected heads' contiguous [h, N, C] slice.
 */
#include <stdlib.h>
#include <string.h>

#include "xfer_internal.h"

/* Host memory only: every other kind (OpenCL's opaque buffers, CUDA and
 * ROCm device memory, which Debian's UCX has no transport for) is moved
 * through host staging with the backend's own gather and scatter. */
void *xfer_buffer_host_address(kvrt_buffer *buf)
{
    void *addr = NULL;
    enum kvrt_memory_kind kind = KVRT_MEMORY_OPAQUE;
    if (!buf || kvrt_buffer_address(buf, &addr, &kind) != KVRT_OK)
        return NULL;
    return kind == KVRT_MEMORY_HOST ? addr : NULL;
}

static bool sel_full(const struct xfer_cache_desc *d, const struct xfer_sel *s)
{
    if (s->layer_start != 0 || s->num_layers != d->num_layers)
        return false;
    for (uint64_t l = 0; l < d->num_layers; l++)
        if (s->head_start != 0 || s->num_heads != d->layers[l].heads)
            return false;
    return true;
}

uint64_t xfer_sel_block_bytes(const struct xfer_cache_desc *d, const struct xfer_sel *s)
{
    uint64_t total = 0;
    for (uint64_t l = s->layer_start; l < s->layer_start + s->num_layers; l++) {
        const struct xfer_layer *L = &d->layers[l];
        total += s->num_heads * L->states * L->content;
    }
    return total;
}

/* Copy the selected slices between a full staging buffer and the packed area. */
static int pack(kvrt_xfer_agent *a, kvrt_buffer *full, uint64_t n, const struct xfer_sel *s, bool to_area)
{
    const struct xfer_cache_desc *d = &a->local;
    uint64_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        for (uint64_t l = s->layer_start; l < s->layer_start + s->num_layers; l++) {
            const struct xfer_layer *L = &d->layers[l];
            uint64_t slice = s->num_heads * L->states * L->content;
            uint64_t off = i * d->staging_per_block + L->staging_offset + s->head_start * L->states * L->content;
            int rc = to_area ? kvrt_buffer_download(full, off, a->area_host + pos, slice)
                             : kvrt_buffer_upload(full, off, a->area_host + pos, slice);
            if (rc != KVRT_OK)
                return rc;
            pos += slice;
        }
    }
    return KVRT_OK;
}

static int temp_buffer(kvrt_xfer_agent *a, uint64_t n, kvrt_buffer **out)
{
    uint64_t bytes;
    if (__builtin_mul_overflow(n, a->local.staging_per_block, &bytes))
        return XFER_FAIL(KVRT_ERR_OVERFLOW, "kvrt-xfer: %llu blocks of staging overflow", ULL(n));
    return kvrt_buffer_create(a->backend, bytes, out);
}

int xfer_stage_out(kvrt_xfer_agent *a, const int64_t *ids, uint64_t n, const struct xfer_sel *s)
{
    if (sel_full(&a->local, s)) {
        int rc = kvrt_cache_gather(a->cache, n, ids, a->area_buf, 0);
        if (rc == KVRT_OK && !a->area_shared)
            rc = kvrt_buffer_download(a->area_buf, 0, a->area_host, n * a->local.staging_per_block);
        return rc;
    }
    kvrt_buffer *full = NULL;
    int rc = temp_buffer(a, n, &full);
    if (rc != KVRT_OK)
        return rc;
    rc = kvrt_cache_gather(a->cache, n, ids, full, 0);
    if (rc == KVRT_OK)
        rc = pack(a, full, n, s, true);
    kvrt_buffer_destroy(full);
    return rc;
}

int xfer_stage_in(kvrt_xfer_agent *a, const int64_t *ids, uint64_t n, const struct xfer_sel *s)
{
    if (sel_full(&a->local, s)) {
        int rc = KVRT_OK;
        if (!a->area_shared)
            rc = kvrt_buffer_upload(a->area_buf, 0, a->area_host, n * a->local.staging_per_block);
        if (rc == KVRT_OK)
            rc = kvrt_cache_scatter(a->cache, n, ids, a->area_buf, 0);
        return rc;
    }
    /* Part of each page: read the destination pages, patch the selected
     * slices, write the pages back. */
    kvrt_buffer *full = NULL;
    int rc = temp_buffer(a, n, &full);
    if (rc != KVRT_OK)
        return rc;
    rc = kvrt_cache_gather(a->cache, n, ids, full, 0);
    if (rc == KVRT_OK)
        rc = pack(a, full, n, s, false);
    if (rc == KVRT_OK)
        rc = kvrt_cache_scatter(a->cache, n, ids, full, 0);
    kvrt_buffer_destroy(full);
    return rc;
}
