/*
 * The agent: its lock, options, key and allow list, its UCX transport, the
 * registration of the cache and the staging pool, and its end.
 *
 * Layer 6 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "agent.h"
#include "cma.h"

enum { DEFAULT_CHUNK = 2 << 20, DEFAULT_CHUNKS = 8, MAX_ALLOW = 256 };
#define DEFAULT_TIMEOUT 30.0
#define KNOWN_FLAGS (KVRT_XFER_INSECURE | KVRT_XFER_REQUIRE_GRANTS)

void kvrt_xfer_agent_options_default(struct kvrt_xfer_agent_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
}

static int check_options(const struct kvrt_xfer_agent_options *o)
{
    if (o->size != sizeof(*o))
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_agent_create: options size %zu; expected %zu (call "
                         "kvrt_xfer_agent_options_default)",
                         o->size, sizeof(*o));
    int rc = xfer_check_reserved(o->reserved, sizeof(o->reserved), "kvrt_xfer_agent_options");
    if (rc != KVRT_OK)
        return rc;
    if (o->reserved32 != 0)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_agent_options.reserved32 is %u, but reserved bytes must be 0",
                         (unsigned)o->reserved32);
    if (o->flags & ~(uint32_t)KNOWN_FLAGS)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_agent_create: flags 0x%x; valid are KVRT_XFER_INSECURE (0x1) and "
                         "KVRT_XFER_REQUIRE_GRANTS (0x2)",
                         (unsigned)o->flags);
    if (!(o->timeout_s >= 0) || o->timeout_s > 1e6)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_agent_create: timeout_s %g; valid are 0 (default %g) "
                         "to 1e6 seconds",
                         o->timeout_s, DEFAULT_TIMEOUT);
    if (o->chunk_bytes > XFER_MAX_CHUNK)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_xfer_agent_create: chunk_bytes %llu; valid are 0 (default %d MiB) up to %llu GiB",
                         ULL(o->chunk_bytes), DEFAULT_CHUNK >> 20, ULL(XFER_MAX_CHUNK >> 30));
    return KVRT_OK;
}

/* "10.0.0.7,10.1.0.0/16,fd00::/64" (inet.h) */
static int parse_allow(kvrt_xfer_agent *a, const char *list)
{
    if (!list || !*list)
        return KVRT_OK;
    a->allow = calloc(MAX_ALLOW, sizeof(*a->allow));
    if (!a->allow)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_agent_create: out of memory");
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char item[64];
        if (n == 0 || n >= sizeof(item))
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt_xfer_agent_create: allow list \"%.200s\" has an empty or overlong entry; entries "
                             "are IPv4 or IPv6 addresses or networks (10.0.0.7, 10.1.0.0/16, fd00::/64) separated by "
                             "commas",
                             list);
        memcpy(item, p, n);
        item[n] = '\0';
        if (a->num_allow == MAX_ALLOW)
            return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_agent_create: more than %d allow entries", MAX_ALLOW);
        int rc = xfer_inet_net_parse(item, &a->allow[a->num_allow], "kvrt_xfer_agent_create");
        if (rc != KVRT_OK)
            return rc;
        a->num_allow++;
        p += n;
        if (*p == ',')
            p++;
    }
    return KVRT_OK;
}

static int load_key(kvrt_xfer_agent *a, const char *option)
{
    const char *path = option, *source = "kvrt_xfer_agent_options.key_file";
    if (!path) {
        /* Read once, here: a setuid program ignores it. */
        path = secure_getenv("KVRT_XFER_KEY_FILE");
        source = "KVRT_XFER_KEY_FILE";
        if (!path || !*path)
            return KVRT_OK;
    }
    return xfer_key_load(path, source, &a->key);
}

int kvrt_xfer_agent_create(kvrt_backend *b, kvrt_cache *cache, const struct kvrt_xfer_agent_options *o,
                           kvrt_xfer_agent **out)
{
    if (!b || !cache || !out)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_agent_create: NULL argument");
    *out = NULL;
    struct kvrt_xfer_agent_options def;
    kvrt_xfer_agent_options_default(&def);
    if (!o)
        o = &def;
    int rc = check_options(o);
    if (rc == KVRT_OK)
        rc = xfer_auth_init();
    if (rc != KVRT_OK)
        return rc;
    kvrt_xfer_agent *a = calloc(1, sizeof(*a));
    if (!a)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_agent_create: out of memory");
    if (pthread_mutex_init(&a->lock, NULL) != 0) {
        free(a);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_xfer_agent_create: cannot create its lock");
    }
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
    a->local.cache = cache;
    a->timeout_s = o->timeout_s > 0 ? o->timeout_s : DEFAULT_TIMEOUT;
    a->flags = o->flags;
    a->log = (struct base_log){o->log, o->log_user};
    a->notes_tail = &a->notes;
    a->last_progress = base_now();
    do {
        xfer_random(&a->id, sizeof(a->id));
    } while (a->id == 0);
    xfer_random(a->nonce, sizeof(a->nonce));
    rc = load_key(a, o->key_file);
    if (rc == KVRT_OK)
        rc = parse_allow(a, o->allow);
    const char *no_cma;
    a->cma_allowed = xfer_cma_allowed(&no_cma);
    if (!a->cma_allowed)
        base_log(&a->log, "kvrt-xfer", KVRT_LOG_DEBUG, "peers on this host are not read in place: %s", no_cma);
    struct xt_callbacks cb;
    xfer_dispatch_callbacks(a, &cb);
    if (rc == KVRT_OK)
        rc = xt_create(&cb, WIRE_NUM_IDS, &a->t);
    if (rc == KVRT_OK)
        rc = xfer_local_init(&a->local, a->t, b, cache, &a->registration_s, &a->registered_bytes);
    if (rc == KVRT_OK) {
        uint64_t chunk = o->chunk_bytes ? o->chunk_bytes : DEFAULT_CHUNK;
        if (chunk < a->local.desc.staging_per_block)
            chunk = a->local.desc.staging_per_block;
        uint64_t total = o->staging_bytes;
        if (total == 0 && __builtin_mul_overflow(chunk, (uint64_t)DEFAULT_CHUNKS, &total))
            rc = BASE_FAIL(KVRT_ERR_OVERFLOW, "kvrt_xfer_agent_create: %llu-byte chunks overflow", ULL(chunk));
        if (rc == KVRT_OK)
            rc = xfer_pool_create(&a->pool, a->t, &a->local, chunk, total, &a->registration_s, &a->registered_bytes);
    }
    xfer_streams_init(&a->streams, a->t, &a->local, &a->pool, &a->stats);
    a->streams.deliver = xfer_note_push;
    a->streams.deliver_owner = a;
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

void kvrt_xfer_agent_destroy(kvrt_xfer_agent *a)
{
    if (!a)
        return;
    base_lock(&a->lock);
    for (kvrt_xfer_handle *h = a->handles; h; h = h->next) {
        xfer_handle_end(h, KVRT_ERR_STATE, "kvrt-xfer: the agent was destroyed before the transfer completed");
        h->agent = NULL;
    }
    a->handles = NULL;
    /* Every peer closes abruptly: its endpoints are closed by force, which
     * completes its UCX requests; what arrived stays unreported. */
    while (a->peers)
        xfer_peer_drop(a, a->peers, false);
    if (a->t) {
        xt_quiesce(a->t);
        xfer_streams_release_waiting(&a->streams);
        xfer_pool_destroy(&a->pool, a->t);
        xfer_local_free(&a->local, a->t);
        xt_destroy(a->t);
    } else {
        xfer_desc_free(&a->local.desc);
    }
    xfer_streams_free(&a->streams);
    wire_sessions_free(&a->sessions);
    while (a->notes) {
        struct xfer_note *n = a->notes;
        a->notes = n->next;
        free(n->data);
        free(n);
    }
    xfer_key_free(&a->key);
    free(a->allow);
    xfer_grants_free(&a->grants);
    kvrt_cache *cache = a->local.cache;
    base_unlock(&a->lock);
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
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_agent_stats: NULL argument");
    size_t size = stats->size ? stats->size : sizeof(*stats);
    if (size != sizeof(*stats) && size != KVRT_XFER_STATS_SIZE_1_3)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_agent_stats: stats size %zu; expected %zu, %d (API 1.3) or 0",
                         stats->size, sizeof(*stats), KVRT_XFER_STATS_SIZE_1_3);
    base_lock(&a->lock);
    struct kvrt_xfer_stats s = a->stats;
    s.size = size;
    for (kvrt_xfer_peer *p = a->peers; p; p = p->next) {
        s.peers++;
        s.peers_read_in_place += p->link.reads_peer && p->link.state == KVRT_XFER_PEER_CONNECTED;
    }
    for (kvrt_xfer_handle *h = a->handles; h; h = h->next)
        s.handles++;
    xfer_streams_count(&a->streams, &s.outgoing, &s.incoming);
    s.notifications = a->notes_queued;
    s.ucx_requests = xt_in_flight(a->t);
    s.staging_chunks = a->pool.nslots;
    s.staging_busy = a->pool.nslots - a->pool.nfree_send - a->pool.nfree_recv;
    s.chunk_bytes = a->pool.chunk;
    s.registered_bytes = a->registered_bytes;
    s.registration_s = a->registration_s;
    xt_handler_cost(a->t, &s.handlers_s, &s.handler_bytes);
    base_unlock(&a->lock);
    memcpy(stats, &s, size); /* a 1.3 caller's struct ends at its size */
    kvrt_error_report(KVRT_OK, NULL);
    return KVRT_OK;
}

int kvrt_xfer_metadata_export(kvrt_xfer_agent *a, void **blob, size_t *len)
{
    if (!a || !blob || !len)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_metadata_export: NULL argument");
    uint8_t *b;
    base_lock(&a->lock);
    int rc = xfer_agent_blob(a, &b, len);
    base_unlock(&a->lock);
    if (rc == KVRT_OK)
        *blob = b;
    return rc;
}
