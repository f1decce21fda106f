/*
 * This side's cache as the streams use it, and the staging pool.
 *
 * The cache's memory is registered once when it has a host address; the
 * streams then copy straight between it and the wire.  The pool is one
 * registered allocation cut into chunk slots, half for chunks being sent
 * and half for chunks being received (so that two agents pushing to each
 * other never hold each other's slots); a chunk that is not one piece of
 * the cache is packed into a slot or scattered from one.  A cache without a
 * host address (OpenCL, GPU backends) moves whole blocks through its
 * backend's gather and scatter in kvrt's staging order.
 *
 * Layer 3 of libkvrt-xfer: transport, the cache description, libkvrt.
 */
#ifndef KVRT_XFER_POOL_H
#define KVRT_XFER_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include <kvrt/runtime.h>

#include "desc.h"
#include "transport.h"

struct xfer_local {
    kvrt_backend *backend;
    kvrt_cache *cache;
    struct xfer_desc desc;
    uint8_t *addr; /* host address of the allocation, or NULL */
    xt_mem *mem;   /* its registration */
};

struct xfer_pool {
    kvrt_buffer *buf; /* backend buffer: the slots themselves (host backends) */
    uint8_t *host;    /* the slots' host bytes */
    bool host_is_buf;
    void *host_alloc; /* host bytes allocated here (other backends) */
    xt_mem *mem;
    uint64_t chunk; /* bytes per slot */
    unsigned nslots, half;
    unsigned *free_send, nfree_send;
    unsigned *free_recv, nfree_recv;
    kvrt_buffer *scratch; /* one chunk of whole blocks, on the backend */
    /* A send slot's seal: 0 while it is taken and being packed, then a
     * value never used before.  A peer that reads a slot by reference
     * checks it before and after (a slot reused meanwhile shows). */
    uint64_t *seals;
    uint64_t last_seal;
};

/* Describe the cache and register its memory (seconds and bytes added). */
int xfer_local_init(struct xfer_local *l, xt *t, kvrt_backend *b, kvrt_cache *c, double *seconds, uint64_t *bytes);
void xfer_local_free(struct xfer_local *l, xt *t);

int xfer_pool_create(struct xfer_pool *p, xt *t, const struct xfer_local *l, uint64_t chunk, uint64_t total,
                     double *seconds, uint64_t *bytes);
void xfer_pool_destroy(struct xfer_pool *p, xt *t);
/* A free slot, or -1. */
int xfer_pool_take(struct xfer_pool *p, bool send);
void xfer_pool_give(struct xfer_pool *p, int slot);
uint8_t *xfer_pool_slot(const struct xfer_pool *p, int slot);
/* Seal a packed send slot: its new value; *where the seal's address. */
uint64_t xfer_pool_seal(struct xfer_pool *p, int slot, const uint64_t **where);
/* Whole blocks of a cache without a host address, their selection packed
 * in staging order, into and out of a slot. */
int xfer_pool_pack(struct xfer_pool *p, const struct xfer_local *l, int slot, const int64_t *ids, uint64_t n,
                   const struct xfer_sel *s);
int xfer_pool_unpack(struct xfer_pool *p, const struct xfer_local *l, const uint8_t *src, const int64_t *ids,
                     uint64_t n, const struct xfer_sel *s);

#endif
