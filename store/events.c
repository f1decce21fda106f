/* The store's KV events, published as vLLM's (vllm/distributed/kv_events.py,
 * its msgpack array form): routers that read vLLM's events (llm-d's KV
 * cache indexer, Dynamo) see which chunks a store holds in which tier.
 *
 * The wire, field by field as vLLM's ZmqEventPublisher sends it:
 *   PUB, three frames: topic (empty), the batch's sequence number (8 bytes,
 *   big-endian, from 0), the payload;
 *   payload: KVEventBatch [ts (float, seconds since the epoch), events,
 *   data_parallel_rank (0)], each event an array whose first element is its
 *   class name (msgspec tag=True, array_like=True):
 *     ["BlockStored", [key], parent key or nil, token ids, block_size,
 *      lora_id nil, medium]
 *     ["BlockRemoved", [key], medium]
 *     ["AllBlocksCleared"]
 *   keys as 32-byte binaries (vLLM's ExternalBlockHash is bytes or int; its
 *   sha256 hashes travel as bytes); medium "CPU" (the memory tier, vLLM's
 *   name for host memory), "DISK", "SHARED";
 *   ROUTER (replay), a request [identity, "", start seq (8 bytes BE)]
 *   answered by [identity, "", seq, payload] for every kept batch from
 *   start on, then [identity, "", -1 (8 bytes BE), ""].
 * Hooks queue events (bounded: the oldest is dropped, and counted, rather
 * than a put kept waiting); the thread takes what is queued every 10 ms
 * at most, sends it as one batch and keeps the batch for replay (the last
 * EV_REPLAY_BATCHES, at most EV_REPLAY_BYTES).
 *
 * Layer 2 of libkvrt-store (docs/store.md, "Layers").
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <msgpack.h>
#include <zmq.h>

#include "events.h"
#include "warn.h"

#define EV_QUEUE 65536u               /* events waiting for the thread */
#define EV_BATCH 4096u                /* most events of one batch */
#define EV_REPLAY_BATCHES 10000u      /* vLLM's buffer_steps */
#define EV_REPLAY_BYTES (64ull << 20) /* and at most these bytes of them */
#define EV_POLL_MS 10                 /* the thread's wait for work */
#define EV_HWM 100000                 /* vLLM's PUB high-water mark */
#define EV_LINGER_MS 500              /* what close waits for unsent frames */

enum ev_type { EV_STORED, EV_REMOVED, EV_CLEARED };

struct ev_item {
    uint8_t type, tier;
    bool has_parent;
    uint8_t key[KVRT_STORE_KEY_BYTES];
    uint8_t parent[KVRT_STORE_KEY_BYTES];
    uint64_t num_tokens;
    int32_t *tokens; /* the item's own */
};

struct ev_kept {
    uint64_t seq;
    void *payload;
    size_t len;
};

struct store_events {
    const struct base_log *log; /* the store's */
    uint64_t chunk_tokens;
    void *ctx, *pub, *router;
    pthread_t thread;
    bool started;
    pthread_mutex_t lock; /* the queue, stop and the counters */
    struct ev_item *ring;
    uint64_t head, count;
    bool stop;
    uint64_t published, dropped, batches, replays, refused;
    /* the thread's own */
    struct ev_kept *kept;
    uint64_t kept_head, kept_count, kept_bytes;
    struct ev_item *taken;
};

static const char *const mediums[] = {"CPU", "DISK", "SHARED"};

static void item_free(struct ev_item *it)
{
    free(it->tokens);
    it->tokens = NULL;
}

/* Queue one event (takes it->tokens); the oldest goes when full. */
static void push(struct store_events *ev, struct ev_item *it)
{
    struct ev_item old = {0};
    pthread_mutex_lock(&ev->lock);
    if (ev->count == EV_QUEUE) {
        old = ev->ring[ev->head];
        ev->head = (ev->head + 1) % EV_QUEUE;
        ev->count--;
        ev->dropped++;
    }
    ev->ring[(ev->head + ev->count) % EV_QUEUE] = *it;
    ev->count++;
    pthread_mutex_unlock(&ev->lock);
    item_free(&old);
}

void store_event_attach(struct store_events *ev, const struct store_id *id, struct store_event_chunk **chunk,
                        const uint8_t *parent, const int32_t *tokens)
{
    if (!ev || !id || id->head != 0 || *chunk || !tokens)
        return;
    uint64_t T = ev->chunk_tokens;
    struct store_event_chunk *ch = malloc(sizeof(*ch) + T * sizeof(int32_t));
    if (!ch)
        return; /* BlockStored then names no tokens */
    ch->has_parent = parent != NULL;
    if (parent)
        memcpy(ch->parent, parent, KVRT_STORE_KEY_BYTES);
    else
        memset(ch->parent, 0, KVRT_STORE_KEY_BYTES);
    ch->num_tokens = T;
    memcpy(ch->tokens, tokens, T * sizeof(int32_t));
    *chunk = ch;
}

void store_event_stored(struct store_events *ev, enum store_tier tier, const struct store_id *id,
                        const struct store_event_chunk *ch)
{
    if (!ev || !id || id->head != 0)
        return;
    struct ev_item it = {.type = EV_STORED, .tier = (uint8_t)tier};
    memcpy(it.key, id->key, KVRT_STORE_KEY_BYTES);
    if (ch) {
        it.has_parent = ch->has_parent;
        memcpy(it.parent, ch->parent, KVRT_STORE_KEY_BYTES);
        it.tokens = malloc(ch->num_tokens * sizeof(int32_t));
        if (it.tokens) {
            memcpy(it.tokens, ch->tokens, ch->num_tokens * sizeof(int32_t));
            it.num_tokens = ch->num_tokens;
        }
    }
    push(ev, &it);
}

void store_event_removed(struct store_events *ev, enum store_tier tier, const struct store_id *id)
{
    if (!ev || !id || id->head != 0)
        return;
    struct ev_item it = {.type = EV_REMOVED, .tier = (uint8_t)tier};
    memcpy(it.key, id->key, KVRT_STORE_KEY_BYTES);
    push(ev, &it);
}

/* ---- the thread ------------------------------------------------------------ */

static void pack_key(msgpack_packer *pk, const uint8_t *key)
{
    msgpack_pack_bin_with_body(pk, key, KVRT_STORE_KEY_BYTES);
}

static void pack_text(msgpack_packer *pk, const char *s)
{
    msgpack_pack_str_with_body(pk, s, strlen(s));
}

static void pack_item(msgpack_packer *pk, const struct ev_item *it, uint64_t chunk_tokens)
{
    switch (it->type) {
    case EV_STORED:
        msgpack_pack_array(pk, 7);
        pack_text(pk, "BlockStored");
        msgpack_pack_array(pk, 1);
        pack_key(pk, it->key);
        if (it->has_parent)
            pack_key(pk, it->parent);
        else
            msgpack_pack_nil(pk);
        msgpack_pack_array(pk, (size_t)it->num_tokens);
        for (uint64_t i = 0; i < it->num_tokens; i++)
            msgpack_pack_int32(pk, it->tokens[i]);
        msgpack_pack_uint64(pk, chunk_tokens);
        msgpack_pack_nil(pk); /* lora_id */
        pack_text(pk, mediums[it->tier]);
        break;
    case EV_REMOVED:
        msgpack_pack_array(pk, 3);
        pack_text(pk, "BlockRemoved");
        msgpack_pack_array(pk, 1);
        pack_key(pk, it->key);
        pack_text(pk, mediums[it->tier]);
        break;
    default:
        msgpack_pack_array(pk, 1);
        pack_text(pk, "AllBlocksCleared");
        break;
    }
}

static void be64(uint8_t out[8], uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        out[i] = (uint8_t)v;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Keep a sent batch for replay, the oldest going past either bound. */
static void keep(struct store_events *ev, uint64_t seq, void *payload, size_t len)
{
    while (ev->kept_count && (ev->kept_count == EV_REPLAY_BATCHES || ev->kept_bytes + len > EV_REPLAY_BYTES)) {
        struct ev_kept *k = &ev->kept[ev->kept_head];
        ev->kept_bytes -= k->len;
        free(k->payload);
        ev->kept_head = (ev->kept_head + 1) % EV_REPLAY_BATCHES;
        ev->kept_count--;
    }
    struct ev_kept *k = &ev->kept[(ev->kept_head + ev->kept_count) % EV_REPLAY_BATCHES];
    *k = (struct ev_kept){seq, payload, len};
    ev->kept_count++;
    ev->kept_bytes += len;
}

/* The payload being encoded: msgpack-c's buffer and whether a write to it
 * failed (out of memory), which its packers report only by return. */
struct ev_buffer {
    msgpack_sbuffer sb;
    bool failed;
};

static int ev_write(void *data, const char *buf, size_t len)
{
    struct ev_buffer *b = data;
    if (b->failed || msgpack_sbuffer_write(&b->sb, buf, len) != 0) {
        b->failed = true;
        return -1;
    }
    return 0;
}

/* Encode taken[0..n) as one batch, send it, keep it. */
static void send_batch(struct store_events *ev, uint64_t n)
{
    struct ev_buffer eb = {.failed = false};
    msgpack_sbuffer_init(&eb.sb);
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &eb, ev_write);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_double(&pk, wall_now());
    msgpack_pack_array(&pk, (size_t)n);
    for (uint64_t i = 0; i < n; i++)
        pack_item(&pk, &ev->taken[i], ev->chunk_tokens);
    msgpack_pack_int32(&pk, 0); /* data_parallel_rank */
    sb = eb.sb;
    if (eb.failed || !sb.data) { /* out of memory: the batch is lost, and counted */
        msgpack_sbuffer_destroy(&sb);
        pthread_mutex_lock(&ev->lock);
        ev->dropped += n;
        pthread_mutex_unlock(&ev->lock);
        return;
    }
    pthread_mutex_lock(&ev->lock);
    uint64_t seq = ev->batches++;
    ev->published += n;
    pthread_mutex_unlock(&ev->lock);
    uint8_t sq[8];
    be64(sq, seq);
    /* PUB never blocks: past its high-water mark a subscriber's frames are
     * dropped, and it recovers them by replay */
    zmq_send(ev->pub, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(ev->pub, sq, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(ev->pub, sb.data, sb.size, ZMQ_DONTWAIT);
    if (ev->router)
        keep(ev, seq, sb.data, sb.size);
    else
        free(sb.data);
}

/* One replay request, if any: bounded frames, a malformed one refused. */
static void serve_replay(struct store_events *ev)
{
    uint8_t frames[3][256] = {{0}};
    int lens[3] = {0, 0, 0}, parts = 0;
    bool too_many = false;
    for (;;) {
        uint8_t sink[256];
        uint8_t *dst = parts < 3 ? frames[parts] : sink;
        int n = zmq_recv(ev->router, dst, sizeof(sink), ZMQ_DONTWAIT);
        if (n < 0)
            return; /* nothing waiting */
        if (parts < 3)
            lens[parts] = n;
        else
            too_many = true;
        parts++;
        int more = 0;
        size_t ml = sizeof(more);
        if (zmq_getsockopt(ev->router, ZMQ_RCVMORE, &more, &ml) != 0 || !more)
            break;
    }
    /* an identity is at most 255 bytes; zmq_recv reports a longer frame's
     * own length, so a start of more than 8 bytes is seen as such */
    if (too_many || parts != 3 || lens[0] > 255 || lens[1] != 0 || lens[2] != 8) {
        pthread_mutex_lock(&ev->lock);
        bool first = ev->refused++ == 0;
        pthread_mutex_unlock(&ev->lock);
        if (first)
            store_warn(ev->log,
                       "events: refused a replay request of %d frames (sizes %d, %d, %d); a request is [identity, "
                       "\"\", the first sequence number as 8 bytes big-endian]",
                       parts, lens[0], lens[1], lens[2]);
        if (lens[0] > 0 && lens[0] <= 255) {
            uint8_t end[8];
            memset(end, 0xff, sizeof(end));
            zmq_send(ev->router, frames[0], (size_t)lens[0], ZMQ_SNDMORE | ZMQ_DONTWAIT);
            zmq_send(ev->router, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
            zmq_send(ev->router, end, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
            zmq_send(ev->router, "", 0, ZMQ_DONTWAIT);
        }
        return;
    }
    uint64_t start = 0;
    for (int i = 0; i < 8; i++)
        start = start << 8 | frames[2][i];
    for (uint64_t i = 0; i < ev->kept_count; i++) {
        const struct ev_kept *k = &ev->kept[(ev->kept_head + i) % EV_REPLAY_BATCHES];
        if (k->seq < start)
            continue;
        uint8_t sq[8];
        be64(sq, k->seq);
        zmq_send(ev->router, frames[0], (size_t)lens[0], ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(ev->router, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(ev->router, sq, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_send(ev->router, k->payload, k->len, ZMQ_DONTWAIT);
    }
    uint8_t end[8];
    memset(end, 0xff, sizeof(end)); /* -1 */
    zmq_send(ev->router, frames[0], (size_t)lens[0], ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(ev->router, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(ev->router, end, 8, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(ev->router, "", 0, ZMQ_DONTWAIT);
    pthread_mutex_lock(&ev->lock);
    ev->replays++;
    pthread_mutex_unlock(&ev->lock);
}

static void *events_main(void *arg)
{
    struct store_events *ev = arg;
    for (;;) {
        zmq_pollitem_t item = {ev->router, 0, ZMQ_POLLIN, 0};
        int ready = zmq_poll(&item, ev->router ? 1 : 0, EV_POLL_MS);
        if (ready > 0)
            for (int i = 0; i < 64 && (item.revents & ZMQ_POLLIN); i++) {
                serve_replay(ev);
                item.revents = 0;
                zmq_poll(&item, 1, 0);
            }
        pthread_mutex_lock(&ev->lock);
        bool stop = ev->stop;
        uint64_t n = 0;
        while (ev->count && n < EV_BATCH) {
            ev->taken[n++] = ev->ring[ev->head];
            ev->head = (ev->head + 1) % EV_QUEUE;
            ev->count--;
        }
        bool more = ev->count > 0;
        pthread_mutex_unlock(&ev->lock);
        if (n)
            send_batch(ev, n);
        for (uint64_t i = 0; i < n; i++)
            item_free(&ev->taken[i]);
        if (stop && !more)
            break;
    }
    return NULL;
}

/* ---- opening and closing ------------------------------------------------------- */

/* vLLM's rule: bind a wildcard, ipc or inproc address; connect the rest. */
static bool binds(const char *endpoint)
{
    return strchr(endpoint, '*') || strstr(endpoint, "::") || strncmp(endpoint, "ipc://", 6) == 0 ||
           strncmp(endpoint, "inproc://", 9) == 0;
}

static void free_events(struct store_events *ev)
{
    if (ev->pub)
        zmq_close(ev->pub);
    if (ev->router)
        zmq_close(ev->router);
    if (ev->ctx)
        zmq_ctx_term(ev->ctx);
    for (uint64_t i = 0; ev->ring && i < ev->count; i++)
        item_free(&ev->ring[(ev->head + i) % EV_QUEUE]);
    for (uint64_t i = 0; ev->kept && i < ev->kept_count; i++)
        free(ev->kept[(ev->kept_head + i) % EV_REPLAY_BATCHES].payload);
    free(ev->ring);
    free(ev->kept);
    free(ev->taken);
    pthread_mutex_destroy(&ev->lock);
    free(ev);
}

static int endpoint_fail(const char *what, const char *endpoint, const char *how)
{
    return BASE_FAIL(KVRT_ERR_INVALID,
                     "kvrt_store_open: %s \"%s\" cannot be %s (%s); give a ZeroMQ endpoint such as "
                     "\"tcp://*:5557\" (bound) or \"tcp://HOST:5557\" (connected to a subscriber that binds)",
                     what, endpoint, how, zmq_strerror(zmq_errno()));
}

int store_events_open(const struct base_log *log, uint64_t chunk_tokens, const char *endpoint, const char *replay,
                      struct store_events **out)
{
    *out = NULL;
    if (!endpoint || !endpoint[0])
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_open: events_replay \"%s\" is given without events; name the events endpoint "
                         "too",
                         replay ? replay : "");
    struct store_events *ev = calloc(1, sizeof(*ev));
    if (!ev)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_open: out of memory");
    pthread_mutex_init(&ev->lock, NULL);
    ev->log = log;
    ev->chunk_tokens = chunk_tokens;
    ev->ring = calloc(EV_QUEUE, sizeof(*ev->ring));
    ev->taken = calloc(EV_BATCH, sizeof(*ev->taken));
    ev->kept = calloc(EV_REPLAY_BATCHES, sizeof(*ev->kept));
    ev->ctx = zmq_ctx_new();
    if (!ev->ring || !ev->taken || !ev->kept || !ev->ctx) {
        free_events(ev);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_open: out of memory for the events' queue");
    }
    int hwm = EV_HWM, linger = EV_LINGER_MS, rc = KVRT_OK;
    ev->pub = zmq_socket(ev->ctx, ZMQ_PUB);
    if (!ev->pub)
        rc = endpoint_fail("events", endpoint, "opened");
    else {
        zmq_setsockopt(ev->pub, ZMQ_SNDHWM, &hwm, sizeof(hwm));
        zmq_setsockopt(ev->pub, ZMQ_LINGER, &linger, sizeof(linger));
        bool bind = binds(endpoint);
        if ((bind ? zmq_bind(ev->pub, endpoint) : zmq_connect(ev->pub, endpoint)) != 0)
            rc = endpoint_fail("events", endpoint, bind ? "bound" : "connected");
    }
    if (rc == KVRT_OK && replay) {
        ev->router = zmq_socket(ev->ctx, ZMQ_ROUTER);
        int zero = 0;
        if (!ev->router)
            rc = endpoint_fail("events_replay", replay, "opened");
        else {
            zmq_setsockopt(ev->router, ZMQ_LINGER, &zero, sizeof(zero));
            zmq_setsockopt(ev->router, ZMQ_SNDHWM, &hwm, sizeof(hwm));
            if (zmq_bind(ev->router, replay) != 0)
                rc = endpoint_fail("events_replay", replay, "bound");
        }
    }
    if (rc == KVRT_OK) {
        /* what an earlier store at this endpoint published is gone */
        struct ev_item cleared = {.type = EV_CLEARED};
        push(ev, &cleared);
        if (pthread_create(&ev->thread, NULL, events_main, ev) != 0)
            rc = BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_open: cannot start the events' thread");
        ev->started = rc == KVRT_OK;
    }
    if (rc != KVRT_OK) {
        free_events(ev);
        return rc;
    }
    *out = ev;
    return KVRT_OK;
}

void store_events_close(struct store_events *ev)
{
    if (!ev)
        return;
    if (ev->started) {
        pthread_mutex_lock(&ev->lock);
        ev->stop = true;
        pthread_mutex_unlock(&ev->lock);
        pthread_join(ev->thread, NULL);
    }
    free_events(ev);
}

void store_events_counts(struct store_events *ev, struct store_events_counts *out)
{
    memset(out, 0, sizeof(*out));
    if (!ev)
        return;
    pthread_mutex_lock(&ev->lock);
    out->queued = ev->count;
    out->published = ev->published;
    out->dropped = ev->dropped;
    out->batches = ev->batches;
    out->replays = ev->replays;
    out->refused = ev->refused;
    pthread_mutex_unlock(&ev->lock);
}
