/*
 * The agent: UCP context and worker, and the registration of the cache and
 * of the staging area.  Peers are in peer.c, connections in connect.c,
 * messages and waits in messages.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_internal.h"

enum { DEFAULT_AREA_MAX = 64 << 20 };

void kvrt_xfer_agent_options_default(struct kvrt_xfer_agent_options *o)
{
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
}

static int register_mem(kvrt_xfer_agent *a, void *addr, uint64_t len, ucp_mem_h *memh, void **rkey, size_t *rkey_len,
                        const char *what)
{
    ucp_mem_map_params_t mp;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = addr;
    mp.length = len;
    ucs_status_t st = ucp_mem_map(a->ctx, &mp, memh);
    if (st != UCS_OK)
        return xfer_ucx_fail(st, what);
    void *packed;
    st = ucp_rkey_pack(a->ctx, *memh, &packed, rkey_len);
    if (st != UCS_OK)
        return xfer_ucx_fail(st, "ucp_rkey_pack");
    *rkey = malloc(*rkey_len);
    if (*rkey)
        memcpy(*rkey, packed, *rkey_len);
    ucp_rkey_buffer_release(packed);
    if (!*rkey)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a remote key");
    return KVRT_OK;
}

/* The staging area is allocated by UCX (UCP_MEM_MAP_ALLOCATE): over shared
 * memory such memory is mapped by the peer, so a put is one memcpy that
 * completes without the target's help; memory registered after the fact
 * goes through UCX's active-message emulation of RMA instead.  The backend
 * buffer beside it is what gather and scatter address. */
static int make_area(kvrt_xfer_agent *a, uint64_t want)
{
    uint64_t all;
    if (want == 0) {
        if (__builtin_mul_overflow(a->local.staging_per_block, a->local.num_blocks, &all))
            all = UINT64_MAX;
        want = all < DEFAULT_AREA_MAX ? all : DEFAULT_AREA_MAX;
    }
    if (want < a->local.staging_per_block)
        return XFER_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_agent_create: staging_bytes %llu is smaller than one "
                         "block's staging bytes (%llu)",
                         ULL(want), ULL(a->local.staging_per_block));
    a->area_bytes = want;
    int rc = kvrt_buffer_create(a->backend, want, &a->area_buf);
    if (rc != KVRT_OK)
        return rc;
    ucp_mem_map_params_t mp;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = NULL;
    mp.length = want;
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    ucs_status_t st = ucp_mem_map(a->ctx, &mp, &a->area_memh);
    if (st != UCS_OK)
        return xfer_ucx_fail(st, "ucp_mem_map (allocate) of the staging area");
    ucp_mem_attr_t attr;
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    if ((st = ucp_mem_query(a->area_memh, &attr)) != UCS_OK)
        return xfer_ucx_fail(st, "ucp_mem_query of the staging area");
    a->area_host = attr.address;
    a->area_shared = false;
    void *packed;
    if ((st = ucp_rkey_pack(a->ctx, a->area_memh, &packed, &a->area_rkey_len)) != UCS_OK)
        return xfer_ucx_fail(st, "ucp_rkey_pack");
    a->area_rkey = malloc(a->area_rkey_len);
    if (a->area_rkey)
        memcpy(a->area_rkey, packed, a->area_rkey_len);
    ucp_rkey_buffer_release(packed);
    if (!a->area_rkey)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt-xfer: out of memory for a remote key");
    return KVRT_OK;
}

int kvrt_xfer_agent_create(kvrt_backend *b, kvrt_cache *cache, const struct kvrt_xfer_agent_options *o,
                           kvrt_xfer_agent **out)
{
    if (!b || !cache || !out)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_agent_create: NULL argument");
    *out = NULL;
    struct kvrt_xfer_agent_options def;
    kvrt_xfer_agent_options_default(&def);
    if (!o)
        o = &def;
    if (o->size < sizeof(*o))
        return XFER_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_agent_create: options size %zu; expected %zu (call "
                         "kvrt_xfer_agent_options_default)",
                         o->size, sizeof(*o));
    if (!(o->timeout_s >= 0) || o->timeout_s > 1e6)
        return XFER_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_agent_create: timeout_s %g; valid are 0 (default 30) "
                         "to 1e6 seconds",
                         o->timeout_s);
    kvrt_xfer_agent *a = calloc(1, sizeof(*a));
    if (!a)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_agent_create: out of memory");
    a->backend = b;
    a->cache = cache;
    a->timeout_s = o->timeout_s > 0 ? o->timeout_s : 30.0;
    a->inbox_tail = &a->inbox;
    a->notes_tail = &a->notes;
    a->next_xid = 1;
    int rc = xfer_desc_local(cache, &a->local);

    ucp_config_t *config = NULL;
    ucs_status_t st = UCS_OK;
    if (rc == KVRT_OK && (st = ucp_config_read(NULL, NULL, &config)) != UCS_OK)
        rc = xfer_ucx_fail(st, "ucp_config_read");
    if (rc == KVRT_OK) {
        ucp_params_t pp;
        memset(&pp, 0, sizeof(pp));
        pp.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
        pp.features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
        pp.name = "kvrt-xfer";
        st = ucp_init(&pp, config, &a->ctx);
        ucp_config_release(config);
        if (st != UCS_OK)
            rc = xfer_ucx_fail(st, "ucp_init");
    }
    if (rc == KVRT_OK) {
        ucp_worker_params_t wp;
        memset(&wp, 0, sizeof(wp));
        wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wp.thread_mode = UCS_THREAD_MODE_SINGLE;
        if ((st = ucp_worker_create(a->ctx, &wp, &a->worker)) != UCS_OK)
            rc = xfer_ucx_fail(st, "ucp_worker_create");
    }
    if (rc == KVRT_OK && (st = ucp_worker_get_address(a->worker, &a->worker_addr, &a->worker_addr_len)) != UCS_OK)
        rc = xfer_ucx_fail(st, "ucp_worker_get_address");
    if (rc == KVRT_OK)
        rc = xfer_set_am_handlers(a);
    if (rc == KVRT_OK) {
        /* Registered once for the whole allocation, never per block. */
        a->cache_addr = xfer_buffer_host_address(kvrt_cache_buffer(cache));
        if (a->cache_addr) {
            rc = register_mem(a, a->cache_addr, a->local.bytes, &a->cache_memh, &a->cache_rkey, &a->cache_rkey_len,
                              "ucp_mem_map of the cache");
            a->cache_registered = rc == KVRT_OK;
        }
    }
    if (rc == KVRT_OK)
        rc = make_area(a, o->staging_bytes);
    if (rc != KVRT_OK) {
        kvrt_xfer_agent_destroy(a);
        return rc;
    }
    *out = a;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

static void free_queue(struct xfer_queued *q)
{
    while (q) {
        struct xfer_queued *n = q->next;
        free(q->data);
        free(q);
        q = n;
    }
}

void kvrt_xfer_agent_destroy(kvrt_xfer_agent *a)
{
    if (!a)
        return;
    while (a->peers) {
        kvrt_xfer_peer *p = a->peers;
        xfer_peer_unlink(a, p);
        xfer_peer_free(p, false);
    }
    for (size_t i = 0; i < a->num_pending_conn; i++)
        ucp_listener_reject(a->listener, a->pending_conn[i]);
    if (a->listener)
        ucp_listener_destroy(a->listener);
    free_queue(a->inbox);
    free_queue(a->notes);
    if (a->cache_memh)
        ucp_mem_unmap(a->ctx, a->cache_memh);
    if (a->area_memh)
        ucp_mem_unmap(a->ctx, a->area_memh);
    free(a->cache_rkey);
    free(a->area_rkey);
    if (a->worker_addr)
        ucp_worker_release_address(a->worker, a->worker_addr);
    if (a->worker)
        ucp_worker_destroy(a->worker);
    if (a->ctx)
        ucp_cleanup(a->ctx);
    kvrt_buffer_destroy(a->area_buf);
    xfer_desc_free(&a->local, false);
    free(a);
}

int kvrt_xfer_metadata_export(kvrt_xfer_agent *a, void **blob, size_t *len)
{
    if (!a || !blob || !len)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_metadata_export: NULL argument");
    uint8_t *b;
    int rc = xfer_md_export(a, &b, len);
    if (rc == KVRT_OK)
        *blob = b;
    return rc;
}
