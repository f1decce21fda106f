/*
 * The agent: its lock, the UCP context and worker, the registration of the
 * cache (once per allocation), the staging pool, and its end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "xfer_internal.h"

enum { DEFAULT_CHUNK = 2 << 20, DEFAULT_CHUNKS = 8 };

double xfer_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int xfer_ucx_fail(ucs_status_t st, const char *what)
{
    return XFER_FAIL(KVRT_ERR_DEVICE, "kvrt-xfer: %s failed: %s", what, ucs_status_string(st));
}

/* The rule is libkvrt's (core/reserved.c), which that library keeps
 * internal and which names libkvrt's API version; this one names
 * libkvrt-xfer's, whose structs these are. */
int xfer_check_reserved(const uint8_t *bytes, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (bytes[i] != 0)
            return XFER_FAIL(KVRT_ERR_INVALID,
                             "%s.reserved[%zu] is %u, but reserved bytes must be 0 (this libkvrt-xfer speaks API "
                             "%d.%d); fill the struct with its _default() function or a designated initialiser",
                             what, i, (unsigned)bytes[i], KVRT_XFER_API_VERSION_MAJOR, KVRT_XFER_API_VERSION_MINOR);
    return KVRT_OK;
}

void xfer_lock(kvrt_xfer_agent *a)
{
    pthread_mutex_lock(&a->lock);
}

void xfer_unlock(kvrt_xfer_agent *a)
{
    pthread_mutex_unlock(&a->lock);
}

void kvrt_xfer_agent_options_default(struct kvrt_xfer_agent_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
}

/* UCX 1.13 gives endpoints with peer error handling zero-copy shared memory
 * (cma) only when the cma memory domain claims memory invalidation, which
 * it reads from the environment alone (a ucp_config_modify of it is
 * ignored).  Set once, before the first context, only where the user has
 * not chosen. */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void set_ucx_defaults(void)
{
    if (!getenv("UCX_CMA_MEMORY_INVALIDATE"))
        setenv("UCX_CMA_MEMORY_INVALIDATE", "y", 0);
}

static uint64_t random_id(void)
{
    uint64_t id = 0;
    if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id) || id == 0)
        id = ((uint64_t)getpid() << 32) ^ (uint64_t)(xfer_now() * 1e9) ^ (uint64_t)(uintptr_t)&id;
    return id ? id : 1;
}

static int check_options(const struct kvrt_xfer_agent_options *o)
{
    if (o->size != sizeof(*o))
        return XFER_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_agent_create: options size %zu; expected %zu (call "
                         "kvrt_xfer_agent_options_default)",
                         o->size, sizeof(*o));
    int rc = xfer_check_reserved(o->reserved, sizeof(o->reserved), "kvrt_xfer_agent_options");
    if (rc != KVRT_OK)
        return rc;
    if (!(o->timeout_s >= 0) || o->timeout_s > 1e6)
        return XFER_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_agent_create: timeout_s %g; valid are 0 (default 30) "
                         "to 1e6 seconds",
                         o->timeout_s);
    if (o->chunk_bytes > (1ull << 34))
        return XFER_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_agent_create: chunk_bytes %llu; valid are 0 (default 2 MiB) up to 16 GiB",
                         ULL(o->chunk_bytes));
    return KVRT_OK;
}

static int create_ucx(kvrt_xfer_agent *a)
{
    pthread_once(&env_once, set_ucx_defaults);
    ucp_config_t *config = NULL;
    ucs_status_t st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK)
        return xfer_ucx_fail(st, "ucp_config_read");
    ucp_params_t pp;
    memset(&pp, 0, sizeof(pp));
    pp.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
    /* Active messages only: data moves by rendezvous into the destination,
     * never by RMA (docs/xfer.md, "Choosing the data path"). */
    pp.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    pp.name = "kvrt-xfer";
    st = ucp_init(&pp, config, &a->ctx);
    ucp_config_release(config);
    if (st != UCS_OK)
        return xfer_ucx_fail(st, "ucp_init");
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof(wp));
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    /* The agent's lock serialises every call into the worker. */
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    if ((st = ucp_worker_create(a->ctx, &wp, &a->worker)) != UCS_OK)
        return xfer_ucx_fail(st, "ucp_worker_create");
    if ((st = ucp_worker_get_address(a->worker, &a->worker_addr, &a->worker_addr_len)) != UCS_OK)
        return xfer_ucx_fail(st, "ucp_worker_get_address");
    if ((st = ucp_worker_get_efd(a->worker, &a->efd)) != UCS_OK)
        return xfer_ucx_fail(st, "ucp_worker_get_efd");
    return xfer_set_am_handlers(a);
}

/* The cache's memory, registered once for the whole allocation. */
static int register_cache(kvrt_xfer_agent *a)
{
    void *addr = NULL;
    enum kvrt_memory_kind kind = KVRT_MEMORY_OPAQUE;
    kvrt_buffer *buf = kvrt_cache_buffer(a->cache);
    if (!buf || kvrt_buffer_address(buf, &addr, &kind) != KVRT_OK || kind != KVRT_MEMORY_HOST || !addr) {
        kvrt_error_report(KVRT_OK, NULL);
        return KVRT_OK; /* staged through host memory instead */
    }
    ucp_mem_map_params_t mp;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = addr;
    mp.length = a->local.bytes;
    double t0 = xfer_now();
    ucs_status_t st = ucp_mem_map(a->ctx, &mp, &a->cache_memh);
    if (st != UCS_OK)
        return xfer_ucx_fail(st, "ucp_mem_map of the cache");
    a->registration_s += xfer_now() - t0;
    a->registered_bytes += a->local.bytes;
    a->cache_addr = addr;
    a->addressable = true;
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
    int rc = check_options(o);
    if (rc != KVRT_OK)
        return rc;
    kvrt_xfer_agent *a = calloc(1, sizeof(*a));
    if (!a)
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_agent_create: out of memory");
    if (pthread_mutex_init(&a->lock, NULL) != 0) {
        free(a);
        return XFER_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_agent_create: cannot create its lock");
    }
    a->backend = b;
    /* Held until the agent's end: the cache's memory is registered with
     * UCX and peers read and write it, so neither kvrt_cache_destroy nor
     * kvrt_runtime_close may hand it back (kvrt/wrap.h) meanwhile. */
    rc = kvrt_cache_retain(cache);
    if (rc != KVRT_OK) {
        char why[512];
        snprintf(why, sizeof(why), "%s", kvrt_error_message());
        pthread_mutex_destroy(&a->lock);
        free(a);
        return kvrt_error_report(rc, "kvrt_xfer_agent_create: cannot hold the cache: %s", why);
    }
    a->cache = cache;
    a->timeout_s = o->timeout_s > 0 ? o->timeout_s : 30.0;
    a->id = random_id();
    a->efd = -1;
    a->ready_tail = &a->ready;
    a->deferred_tail = &a->deferred;
    a->notes_tail = &a->notes;
    a->next_xid = 1;
    a->last_progress = xfer_now();
    rc = xfer_desc_local(cache, &a->local);
    if (rc == KVRT_OK)
        rc = create_ucx(a);
    if (rc == KVRT_OK)
        rc = register_cache(a);
    if (rc == KVRT_OK) {
        uint64_t chunk = o->chunk_bytes ? o->chunk_bytes : DEFAULT_CHUNK;
        if (chunk < a->local.staging_per_block)
            chunk = a->local.staging_per_block;
        uint64_t total = o->staging_bytes;
        if (total == 0 && __builtin_mul_overflow(chunk, (uint64_t)DEFAULT_CHUNKS, &total))
            rc = XFER_FAIL(KVRT_ERR_OVERFLOW, "kvrt_xfer_agent_create: %llu-byte chunks overflow", ULL(chunk));
        if (rc == KVRT_OK)
            rc = xfer_pool_create(a, chunk, total);
    }
    if (rc != KVRT_OK) {
        char why[2048];
        snprintf(why, sizeof(why), "%s", kvrt_error_message());
        kvrt_xfer_agent_destroy(a);
        return kvrt_error_report(rc, "%s", why);
    }
    *out = a;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

/* Wait (bounded) until UCX has finished with every request. */
static void drain(kvrt_xfer_agent *a, double seconds)
{
    double deadline = xfer_now() + seconds;
    while (a->ucx_requests > 0 && xfer_now() < deadline)
        ucp_worker_progress(a->worker);
}

void kvrt_xfer_agent_destroy(kvrt_xfer_agent *a)
{
    if (!a)
        return;
    xfer_lock(a);
    for (kvrt_xfer_handle *h = a->handles; h; h = h->next) {
        xfer_handle_finish(h, KVRT_ERR_STATE, "kvrt-xfer: the agent was destroyed before the transfer completed");
        h->agent = NULL;
        h->out = NULL;
        h->in = NULL;
    }
    a->handles = NULL;
    /* Every peer closes abruptly: its eps are closed by force, which
     * completes its UCX requests; what arrived stays unreported. */
    while (a->peers)
        xfer_peer_drop(a, a->peers, false);
    if (a->worker)
        drain(a, 2.0);
    while (a->deferred) {
        struct xfer_deferred *d = a->deferred;
        a->deferred = d->next;
        ucp_am_data_release(a->worker, d->desc);
        free(d);
    }
    while (a->ready) {
        struct xfer_ready *r = a->ready;
        a->ready = r->next;
        free(r);
    }
    for (size_t i = 0; i < a->num_pending_conn; i++)
        ucp_listener_reject(a->listener, a->pending_conn[i]);
    if (a->listener)
        ucp_listener_destroy(a->listener);
    xfer_pool_destroy(a);
    if (a->cache_memh)
        ucp_mem_unmap(a->ctx, a->cache_memh);
    if (a->worker_addr)
        ucp_worker_release_address(a->worker, a->worker_addr);
    if (a->worker)
        ucp_worker_destroy(a->worker);
    if (a->ctx)
        ucp_cleanup(a->ctx);
    /* No callback can run any more: what UCX never completed, and the
     * streams, go. */
    while (a->reqs) {
        struct xfer_req *r = a->reqs;
        xfer_req_done(r);
        xfer_req_free(r);
    }
    while (a->outs) {
        struct xfer_out *o = a->outs;
        a->outs = o->next;
        xfer_out_free(o);
    }
    while (a->ins) {
        struct xfer_in *in = a->ins;
        a->ins = in->next;
        xfer_in_free(in);
    }
    while (a->notes) {
        struct xfer_note *n = a->notes;
        a->notes = n->next;
        free(n->data);
        free(n);
    }
    xfer_desc_free(&a->local, false);
    kvrt_cache *cache = a->cache;
    xfer_unlock(a);
    pthread_mutex_destroy(&a->lock);
    free(a);
    /* Last, once UCX has unmapped the cache and the agent's buffers are
     * gone: a destroyed cache's memory goes back to its owner here (a
     * wrapped cache's release callback, which may call kvrt, so no lock is
     * held) and a closed runtime finishes closing. */
    kvrt_cache_release(cache);
}

int kvrt_xfer_agent_stats(kvrt_xfer_agent *a, struct kvrt_xfer_stats *stats)
{
    if (!a || !stats)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_agent_stats: NULL argument");
    if (stats->size != 0 && stats->size != sizeof(*stats))
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_agent_stats: stats size %zu; expected %zu or 0", stats->size,
                         sizeof(*stats));
    xfer_lock(a);
    struct kvrt_xfer_stats s = a->stats;
    s.size = sizeof(s);
    for (kvrt_xfer_peer *p = a->peers; p; p = p->next)
        s.peers++;
    for (kvrt_xfer_handle *h = a->handles; h; h = h->next)
        s.handles++;
    for (struct xfer_out *o = a->outs; o; o = o->next)
        s.outgoing++;
    for (struct xfer_in *in = a->ins; in; in = in->next)
        s.incoming++;
    for (struct xfer_note *n = a->notes; n; n = n->next)
        s.notifications++;
    s.ucx_requests = a->ucx_requests;
    s.staging_chunks = a->pool.nslots;
    s.staging_busy = a->pool.nslots - a->pool.nfree_send - a->pool.nfree_recv;
    s.chunk_bytes = a->pool.chunk;
    s.registered_bytes = a->registered_bytes;
    s.registration_s = a->registration_s;
    xfer_unlock(a);
    *stats = s;
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

int kvrt_xfer_metadata_export(kvrt_xfer_agent *a, void **blob, size_t *len)
{
    if (!a || !blob || !len)
        return XFER_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_metadata_export: NULL argument");
    uint8_t *b;
    xfer_lock(a);
    int rc = xfer_md_export(a, &b, len);
    xfer_unlock(a);
    if (rc == KVRT_OK)
        *blob = b;
    return rc;
}
