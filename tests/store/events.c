/*
 * The store's KV events from C, where the sanitizers see them
 * (docs/store.md "KV events"): four threads put at once into a store whose
 * memory tier is too small for them, each chunk's lead entry queued as
 * BlockStored and evicted as BlockRemoved from any thread; a replay from
 * sequence 0, decoded with msgpack-c, must rebuild exactly the chunks whose
 * head-0 entry the memory tier holds (a get of that head alone, chunk by
 * chunk, finds each), each BlockStored the tokens of a chunk that was put.
 * A malformed replay request gets the end marker alone.  The live PUB
 * socket is the Python test's (tests/store/events.py); here every batch
 * comes by replay, so no subscription race can lose one.
 * Skipped under ThreadSanitizer: Debian's libzmq is not instrumented, and
 * its lock-free queues would be reported.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <msgpack.h>
#include <zmq.h>

#include "store_test.h"
#include "tap.h"

#define CHUNK 16u
#define HEADS 2u
#define SEQS 4u
#define CHUNKS 4u /* per sequence */
#define MAX_KEYS 64u

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

struct worker {
    kvrt_store *store;
    struct st_cache *cache;
    int64_t table[CHUNKS];
    int32_t tokens[CHUNKS * CHUNK];
    int rc;
};

static void *put_one(void *arg)
{
    struct worker *w = arg;
    struct kvrt_store_span sp = st_span(w->cache, w->table, CHUNKS, w->tokens, CHUNKS * CHUNK, 0, KVRT_UNSET);
    kvrt_store_request *r = NULL;
    w->rc = kvrt_store_put_post(w->store, &sp, &r);
    if (w->rc == KVRT_OK)
        w->rc = kvrt_store_wait(r, 30.0, NULL);
    kvrt_store_release(r);
    return NULL;
}

/* What a router keeps for the CPU medium, and what the events said. */
struct router {
    uint8_t held[MAX_KEYS][KVRT_STORE_KEY_BYTES];
    int n;
    int stored, removed, cleared, bad;
    char why[256];
};

static bool is_str(const msgpack_object *o, const char *s)
{
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) && memcmp(o->via.str.ptr, s, strlen(s)) == 0;
}

static bool is_key(const msgpack_object *o)
{
    return o->type == MSGPACK_OBJECT_BIN && o->via.bin.size == KVRT_STORE_KEY_BYTES;
}

/* The key's place among the sequences' chunks: tokens must be its chunk's. */
static bool tokens_match(const uint8_t *key, const msgpack_object *toks, uint8_t keys[][KVRT_STORE_KEY_BYTES],
                         int32_t tokens[][CHUNKS * CHUNK])
{
    for (unsigned q = 0; q < SEQS * CHUNKS; q++) {
        if (memcmp(keys[q], key, KVRT_STORE_KEY_BYTES) != 0)
            continue;
        const int32_t *want = tokens[q / CHUNKS] + (q % CHUNKS) * CHUNK;
        if (toks->type != MSGPACK_OBJECT_ARRAY || toks->via.array.size != CHUNK)
            return false;
        for (unsigned i = 0; i < CHUNK; i++)
            if (toks->via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
                toks->via.array.ptr[i].via.u64 != (uint64_t)want[i])
                return false;
        return true;
    }
    return false;
}

static void apply(struct router *r, const msgpack_object *batch, uint8_t keys[][KVRT_STORE_KEY_BYTES],
                  int32_t tokens[][CHUNKS * CHUNK])
{
    if (batch->type != MSGPACK_OBJECT_ARRAY || batch->via.array.size != 3 ||
        batch->via.array.ptr[0].type != MSGPACK_OBJECT_FLOAT64 ||
        batch->via.array.ptr[1].type != MSGPACK_OBJECT_ARRAY ||
        batch->via.array.ptr[2].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        r->bad++;
        snprintf(r->why, sizeof(r->why), "a batch is not [ts, events, data_parallel_rank]");
        return;
    }
    const msgpack_object_array *evs = &batch->via.array.ptr[1].via.array;
    for (uint32_t i = 0; i < evs->size; i++) {
        const msgpack_object *e = &evs->ptr[i];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size == 0) {
            r->bad++;
            continue;
        }
        const msgpack_object *f = e->via.array.ptr;
        uint32_t nf = e->via.array.size;
        if (is_str(&f[0], "BlockStored") && nf == 7 && f[1].type == MSGPACK_OBJECT_ARRAY && f[1].via.array.size == 1 &&
            is_key(&f[1].via.array.ptr[0]) && (f[2].type == MSGPACK_OBJECT_NIL || is_key(&f[2])) &&
            f[4].via.u64 == CHUNK && f[5].type == MSGPACK_OBJECT_NIL && is_str(&f[6], "CPU")) {
            const uint8_t *key = (const uint8_t *)f[1].via.array.ptr[0].via.bin.ptr;
            if (!tokens_match(key, &f[3], keys, tokens)) {
                r->bad++;
                snprintf(r->why, sizeof(r->why), "a BlockStored names tokens of no chunk put");
            }
            if (r->n < (int)MAX_KEYS)
                memcpy(r->held[r->n++], key, KVRT_STORE_KEY_BYTES);
            r->stored++;
        } else if (is_str(&f[0], "BlockRemoved") && nf == 3 && f[1].type == MSGPACK_OBJECT_ARRAY &&
                   f[1].via.array.size == 1 && is_key(&f[1].via.array.ptr[0]) && is_str(&f[2], "CPU")) {
            const char *key = f[1].via.array.ptr[0].via.bin.ptr;
            for (int k = 0; k < r->n; k++)
                if (memcmp(r->held[k], key, KVRT_STORE_KEY_BYTES) == 0) {
                    memmove(r->held[k], r->held[k + 1], (size_t)(r->n - k - 1) * KVRT_STORE_KEY_BYTES);
                    r->n--;
                    break;
                }
            r->removed++;
        } else if (is_str(&f[0], "AllBlocksCleared") && nf == 1) {
            r->n = 0;
            r->cleared++;
        } else {
            r->bad++;
            snprintf(r->why, sizeof(r->why), "event %u of a batch is not one of vLLM's", i);
        }
    }
}

/* Replay from `start`: each batch into r; the number of batches, -1 when
 * the answer broke the protocol or did not come. */
static int replay(void *ctx, const char *endpoint, uint64_t start, struct router *r,
                  uint8_t keys[][KVRT_STORE_KEY_BYTES], int32_t tokens[][CHUNKS * CHUNK])
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, timeout = 5000, n = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
    zmq_connect(s, endpoint);
    uint8_t sq[8];
    for (int i = 0; i < 8; i++)
        sq[i] = (uint8_t)(start >> (56 - 8 * i));
    zmq_send(s, "", 0, ZMQ_SNDMORE);
    zmq_send(s, sq, 8, 0);
    for (uint64_t want = start;; want++) {
        zmq_msg_t f[3];
        int parts = 0;
        bool ok = true;
        for (; parts < 3; parts++) {
            zmq_msg_init(&f[parts]);
            if (zmq_msg_recv(&f[parts], s, 0) < 0) {
                ok = false;
                parts++;
                break;
            }
            if (!zmq_msg_more(&f[parts]))
                break;
        }
        ok = ok && parts == 2 && zmq_msg_size(&f[0]) == 0 && zmq_msg_size(&f[1]) == 8;
        uint64_t seq = 0;
        for (size_t i = 0; ok && i < 8; i++)
            seq = seq << 8 | ((uint8_t *)zmq_msg_data(&f[1]))[i];
        bool end = ok && seq == UINT64_MAX;
        if (ok && !end) {
            msgpack_unpacked u;
            msgpack_unpacked_init(&u);
            ok = seq == want &&
                 msgpack_unpack_next(&u, zmq_msg_data(&f[2]), zmq_msg_size(&f[2]), NULL) == MSGPACK_UNPACK_SUCCESS;
            if (ok)
                apply(r, &u.data, keys, tokens);
            msgpack_unpacked_destroy(&u);
            n++;
        }
        for (int i = 0; i <= parts && i < 3; i++)
            zmq_msg_close(&f[i]);
        if (!ok || end) {
            zmq_close(s);
            return ok ? n : -1;
        }
    }
}

int main(void)
{
    tap_plan_dynamic();
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifdef UNDER_TSAN
    tap_skip_all("Debian's libzmq is not built for ThreadSanitizer; its lock-free queues would be reported");
#endif
    kvrt_runtime *rt = NULL;
    struct kvrt_runtime_options ro;
    kvrt_runtime_options_default(&ro);
    if (kvrt_runtime_open(&ro, &rt) != KVRT_OK)
        tap_skip_all("no runtime: %s", kvrt_error_message());
    struct st_model m;
    st_model_init(&m, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, HEADS, 16, 16);
    struct st_cache c;
    if (!st_cache_make(&c, rt, "cpu", &m, KVRT_LAYOUT_LBHNC, CHUNK, CHUNK, SEQS * CHUNKS, 0, HEADS))
        return tap_ok(false, "a cache"), tap_done();
    int pub_port = free_port(), replay_port = free_port();
    char pub[64], rep[64];
    snprintf(pub, sizeof(pub), "tcp://*:%d", pub_port);
    snprintf(rep, sizeof(rep), "tcp://127.0.0.1:%d", replay_port);
    const uint64_t entry = CHUNK * 2 * (16 + 16) * 2;
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.groups = &m.group;
    o.num_groups = 1;
    o.model_id = "events@c";
    o.chunk_tokens = CHUNK;
    o.memory_bytes = 5 * HEADS * entry; /* 5 of the 16 chunks */
    o.events = pub;
    o.events_replay = rep;
    kvrt_store *s = NULL;
    tap_ok(kvrt_store_open(&o, &s) == KVRT_OK, "a store publishing on %s, replaying on %s: %s", pub, rep,
           kvrt_error_message());
    if (!s)
        return tap_done();

    static struct worker w[SEQS];
    static int32_t tokens[SEQS][CHUNKS * CHUNK];
    static uint8_t keys[SEQS * CHUNKS][KVRT_STORE_KEY_BYTES];
    pthread_t th[SEQS];
    for (unsigned i = 0; i < SEQS; i++) {
        w[i] = (struct worker){.store = s, .cache = &c};
        for (unsigned b = 0; b < CHUNKS; b++)
            w[i].table[b] = i * CHUNKS + b;
        st_tokens(w[i].tokens, CHUNKS * CHUNK, 100 + i);
        memcpy(tokens[i], w[i].tokens, sizeof(tokens[i]));
        kvrt_store_keys(s, tokens[i], CHUNKS * CHUNK, keys[i * CHUNKS], CHUNKS, NULL);
        st_fill(&c, w[i].table, 0, CHUNKS * CHUNK, i);
    }
    for (unsigned i = 0; i < SEQS; i++)
        pthread_create(&th[i], NULL, put_one, &w[i]);
    bool all = true;
    for (unsigned i = 0; i < SEQS; i++) {
        pthread_join(th[i], NULL);
        all = all && w[i].rc == KVRT_OK;
    }
    tap_ok(all, "four threads put four sequences at once");
    usleep(100 * 1000); /* the publisher's thread takes the queue every 10 ms */

    void *ctx = zmq_ctx_new();
    struct router r;
    memset(&r, 0, sizeof(r));
    int batches = replay(ctx, rep, 0, &r, keys, tokens);
    struct kvrt_store_stats st = {.size = sizeof(st)};
    kvrt_store_stats(s, &st);
    tap_ok(batches > 0 && r.bad == 0, "replay from 0: %d batches, every event by vLLM's schema%s%s", batches,
           r.bad ? ": " : "", r.why);
    tap_ok(r.cleared == 1 && r.stored == (int)(SEQS * CHUNKS) && r.removed == (int)(SEQS * CHUNKS) - r.n,
           "one AllBlocksCleared, %d BlockStored, %d BlockRemoved", r.stored, r.removed);
    /* chunk by chunk, head 0 alone: found in memory exactly when the events
     * say it is there (a get touches, it does not insert: nothing moves) */
    struct st_cache one;
    if (!st_cache_make(&one, rt, "cpu", &m, KVRT_LAYOUT_LBHNC, CHUNK, CHUNK, SEQS * CHUNKS, 0, 1))
        return tap_ok(false, "a cache of one head"), tap_done();
    int agree = 0, in_memory = 0;
    for (unsigned q = 0; q < SEQS * CHUNKS; q++) {
        bool said = false;
        for (int k = 0; k < r.n; k++)
            said = said || memcmp(r.held[k], keys[q], KVRT_STORE_KEY_BYTES) == 0;
        struct kvrt_store_span sp =
            st_span(&one, w[q / CHUNKS].table, CHUNKS, tokens[q / CHUNKS], CHUNKS * CHUNK, (q % CHUNKS) * CHUNK, CHUNK);
        sp.num_heads = 1;
        uint64_t loaded = 0;
        bool found = kvrt_store_get(s, &sp, &loaded) == KVRT_OK && loaded == CHUNK;
        agree += found == said;
        in_memory += found;
    }
    st_cache_free(&one);
    tap_ok(agree == (int)(SEQS * CHUNKS) && in_memory == r.n && st.evicted_memory > 0,
           "the events leave %d chunks in memory; %d of %u chunks agree with a get of head 0 (%llu evicted)", r.n,
           agree, SEQS * CHUNKS, (unsigned long long)st.evicted_memory);

    /* a malformed request: the end marker alone, and the store goes on */
    void *bad = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, timeout = 5000;
    zmq_setsockopt(bad, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(bad, ZMQ_RCVTIMEO, &timeout, sizeof(timeout));
    zmq_connect(bad, rep);
    zmq_send(bad, "", 0, ZMQ_SNDMORE);
    zmq_send(bad, "xyz", 3, ZMQ_SNDMORE);
    zmq_send(bad, "0123456789", 10, 0);
    uint8_t f[3][16];
    int l0 = zmq_recv(bad, f[0], 16, 0), l1 = l0 >= 0 ? zmq_recv(bad, f[1], 16, 0) : -1,
        l2 = l1 >= 0 ? zmq_recv(bad, f[2], 16, 0) : -1;
    static const uint8_t end[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    tap_ok(l0 == 0 && l1 == 8 && memcmp(f[1], end, 8) == 0 && l2 == 0,
           "a replay request of four frames gets the end marker alone (%d, %d, %d)", l0, l1, l2);
    zmq_close(bad);
    memset(&r, 0, sizeof(r));
    tap_ok(replay(ctx, rep, 0, &r, keys, tokens) == batches && r.bad == 0, "and the replay still answers");

    size_t need = 0;
    tap_ok(kvrt_store_metrics(s, NULL, 0, &need) == KVRT_OK && need > 1, "metrics: the size asked alone");
    char *text = malloc(need);
    tap_ok(text && kvrt_store_metrics(s, text, need, NULL) == KVRT_OK &&
               strstr(text, "kvrt_store_events_replays_refused_total 1\n") != NULL,
           "the refused request is counted");
    char small[8];
    tap_ok(kvrt_store_metrics(s, small, sizeof(small), &need) == KVRT_ERR_INVALID && small[0] == '\0',
           "a short buffer gets \"\" and a refusal naming the size: %s", kvrt_error_message());
    free(text);
    zmq_ctx_term(ctx);
    kvrt_store_close(s);
    st_cache_free(&c);
    kvrt_runtime_close(rt);
    return tap_done();
}
