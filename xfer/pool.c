/*
 * The staging pool: one allocation, registered with UCX once, cut into
 * chunk slots -- half for chunks being sent, half for chunks being
 * received -- and the packing of blocks into a slot in kvrt's staging order
 * (per block, per layer, [H, N, C]) through the backend's own gather and
 * scatter, so that any backend and any layout pair works.  A selection of
 * layers or heads is packed: for each block, for each selected layer, the
 * selected heads' contiguous [h, N, C] slice.
 */
#include <stdlib.h>
#include <string.h>

#include "xfer_internal.h"

int xfer_pool_create(kvrt_xfer_agent *a, uint64_t chunk, uint64_t total)
{
    struct xfer_pool *p = &a->pool;
    uint64_t n = total / chunk;
    if (n < 4 || n > 4096)
        return XFER_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_agent_create: staging_bytes %llu holds %llu chunks of %llu bytes; valid are 4 "
                         "(two to send, two to receive) to 4096 chunks",
                         ULL(total), ULL(n), ULL(chunk));
    p->chunk = chunk;
    p->half = (unsigned)(n / 2);
    p->nslots = 2 * p->half;
    uint64_t bytes = (uint64_t)p->nslots * chunk;
    p->free_send = malloc(p->half * sizeof(unsigned));
    p->free_recv = malloc(p->half * sizeof(unsigned));
    if (!p->free_send || !p->free_recv)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for the staging pool");
    for (unsigned i = 0; i < p->half; i++) {
        p->free_send[i] = p->half - 1 - i;
        p->free_recv[i] = p->nslots - 1 - i;
    }
    p->nfree_send = p->nfree_recv = p->half;
    /* Host backends gather straight into the slots; others gather into a
     * device scratch buffer and download into host slots. */
    int rc = kvrt_buffer_create(a->backend, bytes, &p->buf);
    if (rc != KVRT_OK)
        return rc;
    void *addr = NULL;
    enum kvrt_memory_kind kind = KVRT_MEMORY_OPAQUE;
    if (kvrt_buffer_address(p->buf, &addr, &kind) == KVRT_OK && kind == KVRT_MEMORY_HOST && addr) {
        p->host = addr;
        p->host_is_buf = true;
    } else {
        kvrt_buffer_destroy(p->buf);
        p->buf = NULL;
        if (posix_memalign(&p->host_alloc, 4096, bytes) != 0)
            return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a %llu-byte staging pool", ULL(bytes));
        p->host = p->host_alloc;
    }
    kvrt_error_report(KVRT_OK, NULL);
    ucp_mem_map_params_t mp;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = p->host;
    mp.length = bytes;
    double t0 = xfer_now();
    ucs_status_t st = ucp_mem_map(a->ctx, &mp, &p->memh);
    if (st != UCS_OK)
        return xfer_ucx_fail(st, "ucp_mem_map of the staging pool");
    a->registration_s += xfer_now() - t0;
    a->registered_bytes += bytes;
    return KVRT_OK;
}

void xfer_pool_destroy(kvrt_xfer_agent *a)
{
    struct xfer_pool *p = &a->pool;
    if (p->memh)
        ucp_mem_unmap(a->ctx, p->memh);
    kvrt_buffer_destroy(p->buf);
    kvrt_buffer_destroy(p->scratch);
    free(p->host_alloc);
    free(p->free_send);
    free(p->free_recv);
    memset(p, 0, sizeof(*p));
}

int xfer_pool_take(kvrt_xfer_agent *a, bool send)
{
    struct xfer_pool *p = &a->pool;
    if (send)
        return p->nfree_send ? (int)p->free_send[--p->nfree_send] : -1;
    return p->nfree_recv ? (int)p->free_recv[--p->nfree_recv] : -1;
}

void xfer_pool_give(kvrt_xfer_agent *a, int slot)
{
    struct xfer_pool *p = &a->pool;
    if (slot < 0)
        return;
    if ((unsigned)slot < p->half)
        p->free_send[p->nfree_send++] = (unsigned)slot;
    else
        p->free_recv[p->nfree_recv++] = (unsigned)slot;
}

uint8_t *xfer_pool_slot(kvrt_xfer_agent *a, int slot)
{
    return a->pool.host + (uint64_t)slot * a->pool.chunk;
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

uint64_t xfer_chunk_blocks(const kvrt_xfer_agent *a, const kvrt_xfer_peer *p)
{
    /* Each side may gather whole blocks into a chunk-sized scratch buffer,
     * so a chunk holds as many blocks as the larger whole block allows. */
    uint64_t mine = a->pool.chunk / a->local.staging_per_block;
    uint64_t theirs = p->md.chunk_bytes / p->md.cache.staging_per_block;
    uint64_t n = mine < theirs ? mine : theirs;
    return n ? n : 1;
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

static int scratch(kvrt_xfer_agent *a, kvrt_buffer **out)
{
    if (!a->pool.scratch) {
        int rc = kvrt_buffer_create(a->backend, a->pool.chunk, &a->pool.scratch);
        if (rc != KVRT_OK)
            return rc;
    }
    *out = a->pool.scratch;
    return KVRT_OK;
}

/* Copy the selected slices between whole blocks in `full` and the packed
 * slot. */
static int slices(kvrt_xfer_agent *a, kvrt_buffer *full, uint8_t *slot, uint64_t n, const struct xfer_sel *s,
                  bool to_slot)
{
    const struct xfer_cache_desc *d = &a->local;
    uint64_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        for (uint64_t l = s->layer_start; l < s->layer_start + s->num_layers; l++) {
            const struct xfer_layer *L = &d->layers[l];
            uint64_t slice = s->num_heads * L->states * L->content;
            uint64_t off = i * d->staging_per_block + L->staging_offset + s->head_start * L->states * L->content;
            int rc = to_slot ? kvrt_buffer_download(full, off, slot + pos, slice)
                             : kvrt_buffer_upload(full, off, slot + pos, slice);
            if (rc != KVRT_OK)
                return rc;
            pos += slice;
        }
    }
    return KVRT_OK;
}

int xfer_pool_pack(kvrt_xfer_agent *a, int slot, const int64_t *ids, uint64_t n, const struct xfer_sel *s)
{
    struct xfer_pool *p = &a->pool;
    uint64_t off = (uint64_t)slot * p->chunk;
    bool full = sel_full(&a->local, s);
    if (full && p->host_is_buf)
        return kvrt_cache_gather(a->cache, n, ids, p->buf, off);
    kvrt_buffer *tmp;
    int rc = scratch(a, &tmp);
    if (rc == KVRT_OK)
        rc = kvrt_cache_gather(a->cache, n, ids, tmp, 0);
    if (rc == KVRT_OK)
        rc = full ? kvrt_buffer_download(tmp, 0, p->host + off, n * a->local.staging_per_block)
                  : slices(a, tmp, p->host + off, n, s, true);
    return rc;
}

int xfer_pool_unpack(kvrt_xfer_agent *a, int slot, const int64_t *ids, uint64_t n, const struct xfer_sel *s)
{
    struct xfer_pool *p = &a->pool;
    uint64_t off = (uint64_t)slot * p->chunk;
    bool full = sel_full(&a->local, s);
    if (full && p->host_is_buf)
        return kvrt_cache_scatter(a->cache, n, ids, p->buf, off);
    kvrt_buffer *tmp;
    int rc = scratch(a, &tmp);
    if (rc != KVRT_OK)
        return rc;
    if (full) {
        rc = kvrt_buffer_upload(tmp, 0, p->host + off, n * a->local.staging_per_block);
    } else {
        /* Part of each page: read the destination pages, patch the
         * selected slices, write the pages back. */
        rc = kvrt_cache_gather(a->cache, n, ids, tmp, 0);
        if (rc == KVRT_OK)
            rc = slices(a, tmp, p->host + off, n, s, false);
    }
    if (rc == KVRT_OK)
        rc = kvrt_cache_scatter(a->cache, n, ids, tmp, 0);
    return rc;
}
