/*
 * This side's cache and the staging pool.  Packing of whole blocks goes
 * through the backend's own gather and scatter, so any backend and any
 * layout works; a layer or head selection is cut out of (or patched into)
 * whole blocks gathered into a scratch buffer of one chunk.
 *
 * Layer 3 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "pool.h"

int xfer_local_init(struct xfer_local *l, xt *t, kvrt_backend *b, kvrt_cache *c, double *seconds, uint64_t *bytes)
{
    memset(l, 0, sizeof(*l));
    l->backend = b;
    l->cache = c;
    int rc = xfer_desc_init(&l->desc, (kvrt_placement *)kvrt_cache_placement(c), false);
    if (rc != KVRT_OK)
        return rc;
    void *addr = NULL;
    enum kvrt_memory_kind kind = KVRT_MEMORY_OPAQUE;
    kvrt_buffer *buf = kvrt_cache_buffer(c);
    if (!buf || kvrt_buffer_address(buf, &addr, &kind) != KVRT_OK || kind != KVRT_MEMORY_HOST || !addr) {
        kvrt_error_report(KVRT_OK, NULL);
        return KVRT_OK; /* staged through host memory instead */
    }
    double t0 = base_now();
    rc = xt_mem_map(t, addr, l->desc.bytes, &l->mem);
    if (rc != KVRT_OK)
        return rc;
    *seconds += base_now() - t0;
    *bytes += l->desc.bytes;
    l->addr = addr;
    return KVRT_OK;
}

void xfer_local_free(struct xfer_local *l, xt *t)
{
    xt_mem_unmap(t, l->mem);
    l->mem = NULL;
    xfer_desc_free(&l->desc);
}

int xfer_pool_create(struct xfer_pool *p, xt *t, const struct xfer_local *l, uint64_t chunk, uint64_t total,
                     double *seconds, uint64_t *bytes)
{
    memset(p, 0, sizeof(*p));
    uint64_t n = total / chunk;
    if (n < 4 || n > 4096)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_agent_create: staging_bytes %llu holds %llu chunks of %llu bytes; valid are 4 "
                         "(two to send, two to receive) to 4096 chunks",
                         ULL(total), ULL(n), ULL(chunk));
    p->chunk = chunk;
    p->half = (unsigned)(n / 2);
    p->nslots = 2 * p->half;
    uint64_t size = (uint64_t)p->nslots * chunk;
    p->free_send = malloc(p->half * sizeof(unsigned));
    p->free_recv = malloc(p->half * sizeof(unsigned));
    p->seals = calloc(p->nslots, sizeof(uint64_t));
    if (!p->free_send || !p->free_recv || !p->seals)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for the staging pool");
    for (unsigned i = 0; i < p->half; i++) {
        p->free_send[i] = p->half - 1 - i;
        p->free_recv[i] = p->nslots - 1 - i;
    }
    p->nfree_send = p->nfree_recv = p->half;
    /* Host backends gather straight into the slots; others gather into a
     * device scratch buffer and download into host slots. */
    int rc = kvrt_buffer_create(l->backend, size, &p->buf);
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
        if (posix_memalign(&p->host_alloc, 4096, size) != 0)
            return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a %llu-byte staging pool", ULL(size));
        p->host = p->host_alloc;
    }
    kvrt_error_report(KVRT_OK, NULL);
    double t0 = base_now();
    rc = xt_mem_map(t, p->host, size, &p->mem);
    if (rc != KVRT_OK)
        return rc;
    *seconds += base_now() - t0;
    *bytes += size;
    return KVRT_OK;
}

void xfer_pool_destroy(struct xfer_pool *p, xt *t)
{
    xt_mem_unmap(t, p->mem);
    kvrt_buffer_destroy(p->buf);
    kvrt_buffer_destroy(p->scratch);
    free(p->host_alloc);
    free(p->free_send);
    free(p->free_recv);
    free(p->seals);
    memset(p, 0, sizeof(*p));
}

int xfer_pool_take(struct xfer_pool *p, bool send)
{
    if (send) {
        if (!p->nfree_send)
            return -1;
        int slot = (int)p->free_send[--p->nfree_send];
        /* Broken before a byte changes: a reader of its last contents
         * sees the seal move. */
        __atomic_store_n(&p->seals[slot], 0, __ATOMIC_RELEASE);
        return slot;
    }
    return p->nfree_recv ? (int)p->free_recv[--p->nfree_recv] : -1;
}

uint64_t xfer_pool_seal(struct xfer_pool *p, int slot, const uint64_t **where)
{
    uint64_t v = ++p->last_seal;
    __atomic_store_n(&p->seals[slot], v, __ATOMIC_RELEASE);
    *where = &p->seals[slot];
    return v;
}

void xfer_pool_give(struct xfer_pool *p, int slot)
{
    if (slot < 0)
        return;
    if ((unsigned)slot < p->half)
        p->free_send[p->nfree_send++] = (unsigned)slot;
    else
        p->free_recv[p->nfree_recv++] = (unsigned)slot;
}

uint8_t *xfer_pool_slot(const struct xfer_pool *p, int slot)
{
    return p->host + (uint64_t)slot * p->chunk;
}

static int scratch(struct xfer_pool *p, const struct xfer_local *l, kvrt_buffer **out)
{
    if (!p->scratch) {
        int rc = kvrt_buffer_create(l->backend, p->chunk, &p->scratch);
        if (rc != KVRT_OK)
            return rc;
    }
    *out = p->scratch;
    return KVRT_OK;
}

/* Copy the selected slices between whole blocks in `full` and the packed
 * bytes at `packed`. */
static int slices(const struct xfer_local *l, kvrt_buffer *full, uint8_t *packed, uint64_t n, const struct xfer_sel *s,
                  bool to_packed)
{
    const struct xfer_desc *d = &l->desc;
    uint64_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        for (uint64_t k = s->layer_start; k < s->layer_start + s->num_layers; k++) {
            const struct xfer_layer *L = &d->layers[k];
            uint64_t slice = s->num_heads * L->states * L->content;
            uint64_t off = i * d->staging_per_block + L->staging_offset + s->head_start * L->states * L->content;
            int rc = to_packed ? kvrt_buffer_download(full, off, packed + pos, slice)
                               : kvrt_buffer_upload(full, off, packed + pos, slice);
            if (rc != KVRT_OK)
                return rc;
            pos += slice;
        }
    }
    return KVRT_OK;
}

int xfer_pool_pack(struct xfer_pool *p, const struct xfer_local *l, int slot, const int64_t *ids, uint64_t n,
                   const struct xfer_sel *s)
{
    uint64_t off = (uint64_t)slot * p->chunk;
    bool full = xfer_sel_full(&l->desc, s);
    if (full && p->host_is_buf)
        return kvrt_cache_gather(l->cache, n, ids, p->buf, off);
    kvrt_buffer *tmp;
    int rc = scratch(p, l, &tmp);
    if (rc == KVRT_OK)
        rc = kvrt_cache_gather(l->cache, n, ids, tmp, 0);
    if (rc == KVRT_OK)
        rc = full ? kvrt_buffer_download(tmp, 0, p->host + off, n * l->desc.staging_per_block)
                  : slices(l, tmp, p->host + off, n, s, true);
    return rc;
}

int xfer_pool_unpack(struct xfer_pool *p, const struct xfer_local *l, const uint8_t *src, const int64_t *ids,
                     uint64_t n, const struct xfer_sel *s)
{
    bool full = xfer_sel_full(&l->desc, s);
    uint64_t size = (uint64_t)p->nslots * p->chunk;
    if (full && p->host_is_buf && src >= p->host && src < p->host + size)
        return kvrt_cache_scatter(l->cache, n, ids, p->buf, (uint64_t)(src - p->host));
    kvrt_buffer *tmp;
    int rc = scratch(p, l, &tmp);
    if (rc != KVRT_OK)
        return rc;
    if (full) {
        rc = kvrt_buffer_upload(tmp, 0, src, n * l->desc.staging_per_block);
    } else {
        /* Part of each page: read the destination pages, patch the
         * selected slices, write the pages back. */
        rc = kvrt_cache_gather(l->cache, n, ids, tmp, 0);
        if (rc == KVRT_OK)
            rc = slices(l, tmp, (uint8_t *)src, n, s, false);
    }
    if (rc == KVRT_OK)
        rc = kvrt_cache_scatter(l->cache, n, ids, tmp, 0);
    return rc;
}
