/* The store: options, opening the tiers, closing, counters, and the
 * synchronous and posted forms of put and get.
 *
 * Layer 7 of libkvrt-store (docs/store.md, "Layers").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/parallel.h>

#include "events.h"
#include "record.h"
#include "request.h"

void kvrt_store_options_default(struct kvrt_store_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof(*o));
    o->size = sizeof(*o);
    o->chunk_tokens = KVRT_STORE_DEFAULT_CHUNK_TOKENS;
    o->memory_bytes = KVRT_STORE_DEFAULT_MEMORY_BYTES;
    o->shared_timeout_s = KVRT_STORE_DEFAULT_SHARED_TIMEOUT_S;
    o->queue_bytes = KVRT_STORE_DEFAULT_QUEUE_BYTES;
}

void kvrt_store_span_default(struct kvrt_store_span *span)
{
    if (!span)
        return;
    memset(span, 0, sizeof(*span));
    span->size = sizeof(*span);
    span->count = KVRT_UNSET;
}

int kvrt_store_span_tp(const kvrt_store *s, struct kvrt_store_span *span, uint64_t tp_size, uint64_t rank)
{
    if (!s || !span)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_span_tp: the store and the span are required");
    if (s->inspect)
        return BASE_FAIL(KVRT_ERR_STATE,
                         "kvrt_store_span_tp: the store was opened to inspect its directory (no model)");
    struct kvrt_tp_heads h;
    int rc = kvrt_tp_heads(s->model.num_heads, tp_size, rank, &h);
    if (rc != KVRT_OK)
        return rc;
    span->head_start = h.head_start;
    span->num_heads = h.num_heads;
    span->replica = h.replica;
    return KVRT_OK;
}

static int check_options(const struct kvrt_store_options *o)
{
    if (o->size != sizeof(*o))
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_open: options size %zu; expected %zu (call kvrt_store_options_default)", o->size,
                         sizeof(*o));
    if (!(o->shared_timeout_s >= 0) || o->shared_timeout_s > 3600)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_open: shared_timeout_s %g; valid are 0 (default %g) to 3600 seconds",
                         o->shared_timeout_s, KVRT_STORE_DEFAULT_SHARED_TIMEOUT_S);
    if (!o->groups != (o->num_groups == 0))
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_open: groups is %s but num_groups is %zu; give both, or neither to inspect a "
                         "directory",
                         o->groups ? "set" : "NULL", o->num_groups);
    if (o->events_replay && !o->events)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_open: events_replay \"%s\" is given without events; name the events endpoint "
                         "too",
                         o->events_replay);
    if (o->events && !o->groups)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_open: events \"%s\" without a model; a store opened to inspect a folder "
                         "publishes nothing (give the model's groups, or events NULL)",
                         o->events);
    if (o->events && !o->events[0])
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_open: events is \"\"; give a ZeroMQ endpoint (\"tcp://*:5557\") or NULL for "
                         "none");
    if (!o->groups && (!o->path || !o->path[0]))
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_open: no model and no path; give the model's groups, or a store folder to "
                         "inspect");
    return KVRT_OK;
}

static void store_free(kvrt_store *s)
{
    if (s->has_shared)
        shared_free(&s->shared);
    if (s->has_disk)
        disk_close(&s->disk);
    store_workers_stop(s->workers);
    if (s->mem.buckets)
        mem_tier_free(&s->mem);
    /* after the memory tier, whose entries leave with the process */
    store_events_close(s->events);
    store_model_free(&s->model);
    store_secret_wipe(&s->secret);
    pthread_mutex_destroy(&s->count_lock);
    pthread_mutex_destroy(&s->req_lock);
    pthread_cond_destroy(&s->req_wake);
    pthread_cond_destroy(&s->req_drained);
    free(s);
}

int kvrt_store_open(const struct kvrt_store_options *o, kvrt_store **out)
{
    if (!o || !out)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: options and out are required");
    *out = NULL;
    int rc = check_options(o);
    if (rc != KVRT_OK)
        return rc;
    kvrt_store *s = calloc(1, sizeof(*s));
    if (!s)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_open: out of memory");
    pthread_mutex_init(&s->count_lock, NULL);
    pthread_mutex_init(&s->req_lock, NULL);
    pthread_cond_init(&s->req_wake, NULL);
    pthread_cond_init(&s->req_drained, NULL);
    s->log = (struct base_log){o->log, o->log_user};
    s->inspect = !o->groups;
    /* the tenant secret: from the options, else the environment (not for
     * set-user-id programs, as libkvrt-xfer's key) */
    const char *key_file = o->key_file, *key_source = "key_file";
    if (!key_file && (key_file = secure_getenv("KVRT_STORE_KEY_FILE")) && !*key_file)
        key_file = NULL;
    if (!o->key_file)
        key_source = "KVRT_STORE_KEY_FILE";
    if (key_file && (rc = store_secret_load(key_file, key_source, &s->secret)) != KVRT_OK) {
        store_free(s);
        return rc;
    }
    if (s->inspect) {
        rc = disk_open(&s->disk, o->path, &s->model, true, 0);
        if (key_file) /* after the record filled the model */
            s->model.secret = &s->secret;
        s->has_disk = rc == KVRT_OK;
        if (rc == KVRT_OK && o->chunk_tokens && o->chunk_tokens != KVRT_STORE_DEFAULT_CHUNK_TOKENS &&
            o->chunk_tokens != s->model.chunk_tokens)
            rc = BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: the store in \"%s\" has chunk_tokens %llu, not %llu",
                           o->path, ULL(s->model.chunk_tokens), ULL(o->chunk_tokens));
        if (rc == KVRT_OK && o->layers_per_entry && o->layers_per_entry != s->model.group_layers)
            rc = BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: the store in \"%s\" has layers_per_entry %llu, not %llu",
                           o->path, ULL(s->model.layers_per_entry), ULL(o->layers_per_entry));
        if (rc != KVRT_OK) {
            store_free(s);
            return rc;
        }
        *out = s;
        return KVRT_OK;
    }
    uint64_t chunk = o->chunk_tokens ? o->chunk_tokens : KVRT_STORE_DEFAULT_CHUNK_TOKENS;
    if ((rc = store_model_build(o->groups, o->num_groups, o->model_id, chunk, o->layers_per_entry, &s->model)) !=
        KVRT_OK) {
        store_free(s);
        return rc;
    }
    if (key_file)
        s->model.secret = &s->secret;
    uint64_t value = STORE_HEADER_BYTES + s->model.payload_bytes;
    if (o->memory_bytes && o->memory_bytes < s->model.payload_bytes) {
        rc = BASE_FAIL(KVRT_ERR_INVALID,
                       "kvrt_store_open: memory_bytes %llu cannot hold one entry of this model (%llu bytes); give "
                       "0 for no memory tier, or at least that",
                       ULL(o->memory_bytes), ULL(s->model.payload_bytes));
        store_free(s);
        return rc;
    }
    /* initialised even without a memory tier: its buffers serve the queue */
    if ((rc = mem_tier_init(&s->mem, o->memory_bytes, s->model.payload_bytes)) != KVRT_OK) {
        store_free(s);
        return rc;
    }
    s->has_mem = o->memory_bytes > 0;
    const char *bad_threads;
    unsigned threads = store_workers_wanted(&bad_threads);
    if (bad_threads) {
        rc = BASE_FAIL(KVRT_ERR_INVALID,
                       "kvrt_store_open: KVRT_STORE_THREADS is \"%s\"; valid are 1 (the caller's thread only) to %u, "
                       "or unset (the online CPUs)",
                       bad_threads, STORE_WORKERS_MAX);
        store_free(s);
        return rc;
    }
    store_workers_start(threads, &s->workers);
    if (o->events) {
        if ((rc = store_events_open(&s->log, s->model.chunk_tokens, o->events, o->events_replay, &s->events)) !=
            KVRT_OK) {
            store_free(s);
            return rc;
        }
        s->mem.events = s->events;
    }
    if (o->path) {
        rc = disk_open(&s->disk, o->path, &s->model, false, o->disk_bytes);
        s->has_disk = rc == KVRT_OK;
    }
    if (rc == KVRT_OK && o->shared) {
        rc = shared_init(&s->shared, &s->log, o);
        s->has_shared = rc == KVRT_OK;
        s->shared.events = s->events; /* after shared_init, which clears the tier */
    }
    uint64_t queue = o->queue_bytes ? o->queue_bytes : KVRT_STORE_DEFAULT_QUEUE_BYTES;
    if (rc == KVRT_OK && (s->has_disk || s->has_shared))
        rc = writer_start(s, queue < value ? value : queue);
    if (rc != KVRT_OK) {
        store_free(s);
        return rc;
    }
    if (s->has_shared) {
        /* say at once when the server is not there */
        bool has = false;
        struct store_id probe;
        memset(&probe, 0, sizeof(probe));
        shared_has(&s->shared, &probe, 1, &has);
    }
    *out = s;
    return KVRT_OK;
}

void kvrt_store_close(kvrt_store *s)
{
    if (!s)
        return;
    request_shutdown(s);
    if (s->writer.started) {
        if (writer_flush(s) != KVRT_OK)
            store_warn(&s->log, "closing: %s", kvrt_error_message());
        writer_stop(s);
    }
    store_free(s);
}

int kvrt_store_flush(kvrt_store *s)
{
    if (!s)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_flush: the store is NULL");
    return writer_flush(s);
}

int kvrt_store_put(kvrt_store *s, const struct kvrt_store_span *span, uint64_t *stored)
{
    struct store_op op;
    if (stored)
        *stored = 0;
    int rc = store_op_prepare(s, span, "kvrt_store_put", false, &op);
    if (rc != KVRT_OK)
        return rc;
    uint64_t tokens = 0;
    rc = store_put_run(&op, &tokens);
    store_op_free(&op);
    if (stored)
        *stored = tokens;
    return rc;
}

int kvrt_store_get(kvrt_store *s, const struct kvrt_store_span *span, uint64_t *loaded)
{
    struct store_op op;
    if (loaded)
        *loaded = 0;
    int rc = store_op_prepare(s, span, "kvrt_store_get", false, &op);
    if (rc != KVRT_OK)
        return rc;
    uint64_t tokens = 0;
    rc = store_get_run(&op, &tokens);
    store_op_free(&op);
    if (loaded)
        *loaded = tokens;
    return rc;
}

/* A put or a get (run) checked now and posted to the worker thread; fn
 * names it in refusals. */
static int post(kvrt_store *s, const struct kvrt_store_span *span, const char *fn,
                int (*run)(struct store_op *, uint64_t *), kvrt_store_request **out)
{
    if (!out)
        return BASE_FAIL(KVRT_ERR_INVALID, "%s_post: out is required", fn);
    *out = NULL;
    struct store_op op;
    int rc = store_op_prepare(s, span, fn, true, &op);
    if (rc != KVRT_OK)
        return rc;
    op.run = run;
    return request_post(s, &op, out);
}

int kvrt_store_put_post(kvrt_store *s, const struct kvrt_store_span *span, kvrt_store_request **out)
{
    return post(s, span, "kvrt_store_put", store_put_run, out);
}

int kvrt_store_get_post(kvrt_store *s, const struct kvrt_store_span *span, kvrt_store_request **out)
{
    return post(s, span, "kvrt_store_get", store_get_run, out);
}

int kvrt_store_keys(kvrt_store *s, const int32_t *tokens, uint64_t num_tokens, uint8_t *keys, uint64_t max_keys,
                    uint64_t *num_keys)
{
    if (!s || (num_tokens && !tokens) || (max_keys && !keys))
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_keys: the store, tokens and keys (for max_keys > 0) are required");
    uint64_t n = num_tokens / s->model.chunk_tokens;
    if (num_keys)
        *num_keys = n;
    if (n > max_keys)
        n = max_keys;
    if (n == 0)
        return KVRT_OK;
    uint8_t *all = malloc(n * KVRT_STORE_KEY_BYTES);
    if (!all)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_keys: out of memory");
    int rc = store_chunk_keys(&s->model, tokens, n, all);
    if (rc == KVRT_OK)
        memcpy(keys, all, n * KVRT_STORE_KEY_BYTES);
    free(all);
    return rc;
}

int kvrt_store_stats(kvrt_store *s, struct kvrt_store_stats *st)
{
    if (!s || !st)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_stats: the store and stats are required");
    if (st->size != 0 && st->size != sizeof(*st))
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_stats: stats size %zu; expected %zu or 0", st->size,
                         sizeof(*st));
    memset(st, 0, sizeof(*st));
    st->size = sizeof(*st);
    st->chunk_tokens = s->model.chunk_tokens;
    st->num_layers = s->model.num_layers;
    st->num_heads = s->model.num_heads;
    st->entry_bytes = s->model.payload_bytes;
    if (s->has_mem) {
        pthread_mutex_lock(&s->mem.lock);
        st->memory_entries = s->mem.entries;
        st->memory_bytes = s->mem.bytes;
        st->memory_capacity = s->mem.capacity;
        st->evicted_memory = s->mem.evicted;
        pthread_mutex_unlock(&s->mem.lock);
    }
    if (s->has_disk) {
        struct disk_counts dc;
        int rc = disk_counts(&s->disk, &dc);
        if (rc != KVRT_OK)
            return rc;
        st->disk_entries = dc.entries;
        st->disk_bytes = dc.bytes;
        st->disk_capacity = dc.capacity;
    }
    writer_queued(s, &st->queued_entries, &st->queued_bytes);
    pthread_mutex_lock(&s->count_lock);
    st->hits_memory = s->counts.hits_memory;
    st->hits_disk = s->counts.hits_disk;
    st->hits_shared = s->counts.hits_shared;
    st->misses = s->counts.misses;
    st->put_entries = s->counts.put_entries;
    st->put_present = s->counts.put_present;
    st->evicted_disk = s->counts.evicted_disk;
    st->written_disk = s->counts.written_disk;
    st->written_shared = s->counts.written_shared;
    st->write_failures = s->counts.write_failures;
    st->dropped = s->counts.dropped;
    st->rejected = s->counts.rejected;
    pthread_mutex_unlock(&s->count_lock);
    st->shared_up = s->has_shared && shared_is_up(&s->shared);
    if (s->has_shared)
        shared_counts(&s->shared, st);
    return KVRT_OK;
}
