/*
 * Pipeline parallelism: stages that hold a subset of the model's layers
 * share entries through layer groups (docs/store.md "Pipeline
 * parallelism").  An 8-layer model with layers_per_entry 2: a PP 2 writer
 * (stage 0 at TP 2 through head ranges, stage 1 at TP 1) puts, and PP 1
 * and PP 4 readers get token-exact bytes, through memory, a disk directory
 * reopened by another store and a real redis-server read by a store with
 * an empty disk.  Misaligned and out-of-model ranges, a directory opened
 * with another G, lookups per range, a shorter last group and an entry of
 * one group planted under another group's key on the server.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "redis_server.h"
#include "store_test.h"
#include "tap.h"

#define L 8
#define H 4
#define CHUNK 16
#define N 64 /* 4 chunks */
#define BLOCKS 8

static kvrt_runtime *rt;
static struct st_model model;
static int32_t tokens[N];

static kvrt_store *open_g(uint64_t g, uint64_t memory, const char *path, const char *shared, char *err, size_t size)
{
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.groups = &model.group;
    o.num_groups = 1;
    o.model_id = "pp-test";
    o.chunk_tokens = CHUNK;
    o.memory_bytes = memory;
    o.path = path;
    o.shared = shared;
    o.layers_per_entry = g;
    kvrt_store *s = NULL;
    if (kvrt_store_open(&o, &s) != KVRT_OK) {
        if (err)
            snprintf(err, size, "%s", kvrt_error_message());
        else
            tap_diag("kvrt_store_open: %s", kvrt_error_message());
    }
    return s;
}

/* One stage's cache of heads [h0, h0 + nh) and layers [l0, l0 + nl). */
struct rank {
    struct st_cache c;
    int64_t table[BLOCKS];
};

static bool rank_make(struct rank *r, enum kvrt_layout layout, uint64_t bs, uint64_t h0, uint64_t nh, uint64_t l0,
                      uint64_t nl, uint64_t seed)
{
    uint64_t blocks = N / bs + 2;
    if (!st_cache_make_layers(&r->c, rt, "cpu", &model, layout, bs, bs, blocks, h0, nh, l0, nl))
        return false;
    st_table(&r->c, r->table, N / bs, seed);
    return true;
}

static struct kvrt_store_span span_of(const struct rank *r)
{
    return st_span(&r->c, r->table, N / r->c.block_size, tokens, N, 0, KVRT_UNSET);
}

/* The PP 2 writer: stage 0 (layers [0, 4)) at TP 2, stage 1 (layers
 * [4, 8)) at TP 1, each cache filled with the pattern of seed 7. */
static bool write_pp2(kvrt_store *s, bool stage1, uint64_t *stored_total)
{
    struct rank w[3];
    bool ok =
        rank_make(&w[0], KVRT_LAYOUT_LBHNC, 16, 0, 2, 0, 4, 1) && rank_make(&w[1], KVRT_LAYOUT_BLNHC, 8, 2, 2, 0, 4, 2);
    ok = ok && (!stage1 || rank_make(&w[2], KVRT_LAYOUT_LBHNC, 32, 0, H, 4, 4, 3));
    uint64_t total = 0;
    for (int i = 0; ok && i < (stage1 ? 3 : 2); i++) {
        ok = st_fill(&w[i].c, w[i].table, 0, N, 7);
        struct kvrt_store_span sp = span_of(&w[i]);
        uint64_t stored = 0;
        if (ok && kvrt_store_put(s, &sp, &stored) != KVRT_OK) {
            tap_diag("put of writer %d: %s", i, kvrt_error_message());
            ok = false;
        }
        total += stored;
    }
    for (int i = 0; i < (stage1 ? 3 : 2); i++)
        st_cache_free(&w[i].c);
    if (stored_total)
        *stored_total = total;
    return ok;
}

/* A reader of layers [l0, l0 + nl), every head: gets, then checks. */
static bool read_stage(kvrt_store *s, uint64_t l0, uint64_t nl, enum kvrt_layout layout, uint64_t bs, uint64_t *bad)
{
    struct rank r;
    *bad = UINT64_MAX;
    if (!rank_make(&r, layout, bs, 0, H, l0, nl, 11 + l0))
        return false;
    st_fill(&r.c, r.table, 0, N, 99); /* what a miss would leave */
    struct kvrt_store_span sp = span_of(&r);
    uint64_t loaded = 0;
    bool ok = kvrt_store_get(s, &sp, &loaded) == KVRT_OK && loaded == N;
    const unsigned long long from = l0, to = l0 + nl;
    if (!ok)
        tap_diag("get of layers [%llu, %llu): %llu tokens, %s", from, to, (unsigned long long)loaded,
                 kvrt_error_message());
    char where[128] = "";
    *bad = st_check(&r.c, r.table, 0, N, 7, where, sizeof(where));
    if (*bad)
        tap_diag("layers [%llu, %llu): %llu cells differ, first at %s", from, to, (unsigned long long)*bad, where);
    st_cache_free(&r.c);
    return ok && *bad == 0;
}

/* PP 1 and PP 4 readers of s, each in another layout and block size. */
static bool read_pp1_pp4(kvrt_store *s, const char *what)
{
    uint64_t bad;
    bool ok = read_stage(s, 0, L, KVRT_LAYOUT_BLNHC, 16, &bad);
    tap_ok(ok, "%s: a PP 1 reader (every layer) gets token-exact bytes", what);
    bool all = true;
    for (uint64_t st = 0; st < 4; st++)
        all = read_stage(s, 2 * st, 2, st % 2 ? KVRT_LAYOUT_LBHNC : KVRT_LAYOUT_BLNHC, st % 2 ? 8 : 32, &bad) && all;
    tap_ok(all, "%s: PP 4 readers ([0,2) [2,4) [4,6) [6,8)) get token-exact bytes", what);
    return ok && all;
}

static void memory_tier(void)
{
    kvrt_store *s = open_g(2, 64 << 20, NULL, NULL, NULL, 0);
    uint64_t stored = 0;
    bool ok = s && write_pp2(s, true, &stored);
    tap_ok(ok && stored == 3 * N,
           "memory: the PP 2 writer's three ranks put their layers and heads (%llu tokens reported)",
           (unsigned long long)stored);
    struct kvrt_store_stats st;
    memset(&st, 0, sizeof(st));
    st.size = sizeof(st);
    if (s)
        kvrt_store_stats(s, &st);
    tap_ok(st.memory_entries == (N / CHUNK) * H * (L / 2),
           "memory: one entry per chunk, head and layer group (%llu = 4 x 4 x 4)",
           (unsigned long long)st.memory_entries);
    if (s)
        read_pp1_pp4(s, "memory");
    kvrt_store_close(s);
}

static void refusals(void)
{
    kvrt_store *s = open_g(2, 16 << 20, NULL, NULL, NULL, 0);
    struct rank r;
    if (!s || !rank_make(&r, KVRT_LAYOUT_BLNHC, 16, 0, H, 1, 2, 5)) {
        tap_skip("no store or cache");
        kvrt_store_close(s);
        return;
    }
    struct kvrt_store_span sp = span_of(&r);
    int rc = kvrt_store_put(s, &sp, NULL);
    const char *msg = kvrt_error_message();
    tap_ok(rc == KVRT_ERR_INVALID && strstr(msg, "layers [1, 3)") && strstr(msg, "layers_per_entry 2") &&
               strstr(msg, "0, 2, 4, 6, 8"),
           "a range off the groups ([1, 3) with G 2) is refused naming it, G and the boundaries: %s", msg);
    sp.layer_start = 6;
    sp.num_layers = 4;
    rc = kvrt_store_get(s, &sp, NULL);
    msg = kvrt_error_message();
    tap_ok(rc == KVRT_ERR_INVALID && strstr(msg, "layers [6, 10)") && strstr(msg, "8 layers"),
           "a range past the model ([6, 10)) is refused: %s", msg);
    /* the range names layers the cache does not hold */
    sp.layer_start = 4;
    sp.num_layers = 2;
    rc = kvrt_store_put(s, &sp, NULL);
    msg = kvrt_error_message();
    tap_ok(rc == KVRT_ERR_INVALID && strstr(msg, "no layer \"layer.4\""),
           "a range the cache does not hold is refused naming the layer: %s", msg);
    sp.layer_start = 3;
    sp.num_layers = 0;
    rc = kvrt_store_put(s, &sp, NULL);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "layer_start 3 with num_layers 0"),
           "layer_start without num_layers is refused: %s", kvrt_error_message());
    uint64_t hit = 9;
    rc = kvrt_store_lookup_layers(s, tokens, N, 0, 0, 1, 2, &hit);
    tap_ok(rc == KVRT_ERR_INVALID && hit == 0 && strstr(kvrt_error_message(), "not whole layer groups"),
           "a lookup of a range off the groups is refused: %s", kvrt_error_message());
    st_cache_free(&r.c);
    kvrt_store_close(s);

    /* the keys: G >= L is the store without groups, G < L another */
    uint8_t k0[KVRT_STORE_KEY_BYTES], k8[KVRT_STORE_KEY_BYTES], k2[KVRT_STORE_KEY_BYTES];
    kvrt_store *a = open_g(0, 1 << 20, NULL, NULL, NULL, 0), *b = open_g(L, 1 << 20, NULL, NULL, NULL, 0),
               *c = open_g(2, 1 << 20, NULL, NULL, NULL, 0);
    bool ok = a && b && c && kvrt_store_keys(a, tokens, CHUNK, k0, 1, NULL) == KVRT_OK &&
              kvrt_store_keys(b, tokens, CHUNK, k8, 1, NULL) == KVRT_OK &&
              kvrt_store_keys(c, tokens, CHUNK, k2, 1, NULL) == KVRT_OK;
    tap_ok(ok && memcmp(k0, k8, sizeof(k0)) == 0 && memcmp(k0, k2, sizeof(k0)) != 0,
           "keys: layers_per_entry 8 of 8 layers is the store without groups; 2 gives other keys");
    kvrt_store_close(a);
    kvrt_store_close(b);
    kvrt_store_close(c);
}

static void lookups(void)
{
    kvrt_store *s = open_g(2, 64 << 20, NULL, NULL, NULL, 0);
    bool ok = s && write_pp2(s, false, NULL);
    uint64_t s0 = 9, s1 = 9, all = 9, g1 = 9, heads = 9;
    ok = ok && kvrt_store_lookup_layers(s, tokens, N, 0, 0, 0, 4, &s0) == KVRT_OK &&
         kvrt_store_lookup_layers(s, tokens, N, 0, 0, 4, 4, &s1) == KVRT_OK &&
         kvrt_store_lookup(s, tokens, N, 0, 0, &all) == KVRT_OK &&
         kvrt_store_lookup_layers(s, tokens, N, 0, 0, 2, 2, &g1) == KVRT_OK &&
         kvrt_store_lookup_layers(s, tokens, N, 2, 2, 4, 2, &heads) == KVRT_OK;
    tap_ok(ok && s0 == N && s1 == 0 && all == 0 && g1 == N && heads == 0,
           "lookup per range with stage 0 alone written: [0,4) %llu, [4,8) %llu, all %llu, [2,4) %llu, heads 2-3 "
           "of [4,6) %llu",
           (unsigned long long)s0, (unsigned long long)s1, (unsigned long long)all, (unsigned long long)g1,
           (unsigned long long)heads);
    /* a stage-1 get finds nothing and leaves its cache alone */
    struct rank r;
    if (ok && rank_make(&r, KVRT_LAYOUT_BLNHC, 16, 0, H, 4, 4, 3)) {
        st_fill(&r.c, r.table, 0, N, 55);
        struct kvrt_store_span sp = span_of(&r);
        uint64_t loaded = 9;
        ok = kvrt_store_get(s, &sp, &loaded) == KVRT_OK && loaded == 0 &&
             st_check(&r.c, r.table, 0, N, 55, NULL, 0) == 0;
        st_cache_free(&r.c);
    } else {
        ok = false;
    }
    tap_ok(ok, "a get of the unwritten stage loads 0 tokens and changes nothing");
    kvrt_store_close(s);
}

static void disk_tier(void)
{
    char *dir = st_tempdir("pp-disk");
    kvrt_store *w = dir ? open_g(2, 64 << 20, dir, NULL, NULL, 0) : NULL;
    bool ok = w && write_pp2(w, true, NULL) && kvrt_store_flush(w) == KVRT_OK;
    kvrt_store_close(w);
    tap_ok(ok, "disk: the PP 2 writer's entries are flushed to the directory");
    kvrt_store *r = dir ? open_g(2, 0, dir, NULL, NULL, 0) : NULL;
    if (r) {
        read_pp1_pp4(r, "disk (another store, no memory tier)");
        struct kvrt_store_stats st;
        memset(&st, 0, sizeof(st));
        st.size = sizeof(st);
        kvrt_store_stats(r, &st);
        tap_ok(st.hits_disk == 2 * (N / CHUNK) * H * (L / 2) && st.dropped == 0,
               "disk: every read came from the directory (%llu hits), none dropped", (unsigned long long)st.hits_disk);
    } else {
        tap_ok(false, "disk: reopened");
    }
    kvrt_store_close(r);
    char err[1024] = "";
    kvrt_store *other = dir ? open_g(4, 0, dir, NULL, err, sizeof(err)) : NULL;
    tap_ok(!other && strstr(err, "layers_per_entry 2") && strstr(err, "layers_per_entry 4"),
           "a directory opened with another layers_per_entry is refused naming both: %s", err);
    kvrt_store_close(other);
    other = dir ? open_g(0, 0, dir, NULL, err, sizeof(err)) : NULL;
    tap_ok(!other && strstr(err, "layers_per_entry 2") && strstr(err, "layers_per_entry 0 (every layer)"),
           "... and without groups: %s", err);
    kvrt_store_close(other);
    if (dir)
        st_rmdir(dir);
    free(dir);

    /* G 3 of 8 layers: groups [0,3) [3,6) [6,8), the last one padded */
    dir = st_tempdir("pp-g3");
    w = dir ? open_g(3, 64 << 20, dir, NULL, NULL, 0) : NULL;
    struct rank a;
    ok = w && rank_make(&a, KVRT_LAYOUT_LBHNC, 16, 0, H, 0, L, 4);
    if (ok) {
        ok = st_fill(&a.c, a.table, 0, N, 7);
        struct kvrt_store_span sp = span_of(&a);
        ok = ok && kvrt_store_put(w, &sp, NULL) == KVRT_OK && kvrt_store_flush(w) == KVRT_OK;
        st_cache_free(&a.c);
    }
    kvrt_store_close(w);
    r = ok ? open_g(3, 0, dir, NULL, NULL, 0) : NULL;
    uint64_t bad;
    bool exact = r && read_stage(r, 0, 6, KVRT_LAYOUT_BLNHC, 8, &bad) &&
                 read_stage(r, 6, 2, KVRT_LAYOUT_LBHNC, 16, &bad) && read_stage(r, 3, 5, KVRT_LAYOUT_BLNHC, 16, &bad);
    struct kvrt_store_stats st;
    memset(&st, 0, sizeof(st));
    st.size = sizeof(st);
    if (r)
        kvrt_store_stats(r, &st);
    tap_ok(exact && st.dropped == 0,
           "G 3 of 8 layers: a shorter last group; [0,6), [6,8), [3,8) read token-exact from disk");
    kvrt_store_close(r);
    if (dir)
        st_rmdir(dir);
    free(dir);
}

/* Plant group 1's entry of chunk 0, head 0 under group 0's key. */
static bool plant(int port, const uint8_t key[KVRT_STORE_KEY_BYTES])
{
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        tap_diag("hiredis: %s", c ? c->errstr : "no context");
        redisFree(c);
        return false;
    }
    static const uint8_t prefix[5] = {'k', 'v', 'r', 't', ':'};
    uint8_t k1[5 + 36], k0[5 + 36];
    memcpy(k1, prefix, sizeof(prefix));
    memcpy(k1 + 5, key, KVRT_STORE_KEY_BYTES);
    memcpy(k0, k1, sizeof(k1));
    uint32_t g1 = 1 * H + 0; /* the index of group 1's head 0 */
    for (int i = 0; i < 4; i++) {
        k1[5 + KVRT_STORE_KEY_BYTES + i] = (uint8_t)(g1 >> (24 - 8 * i));
        k0[5 + KVRT_STORE_KEY_BYTES + i] = 0;
    }
    redisReply *v = redisCommand(c, "GET %b", k1, sizeof(k1));
    bool ok = v && v->type == REDIS_REPLY_STRING;
    if (ok) {
        redisReply *set = redisCommand(c, "SET %b %b", k0, sizeof(k0), v->str, v->len);
        ok = set && set->type == REDIS_REPLY_STATUS;
        freeReplyObject(set);
    } else {
        tap_diag("group 1's entry is not on the server");
    }
    freeReplyObject(v);
    redisFree(c);
    return ok;
}

static void shared_tier(void)
{
    char why[512];
    struct redis_server srv;
    if (!redis_server_start(&srv, "127.0.0.1", NULL, why, sizeof(why))) {
        tap_skip("shared tier: %s", why);
        tap_skip("shared tier: %s", why);
        tap_skip("shared tier: %s", why);
        tap_skip("shared tier: %s", why);
        tap_skip("shared tier: %s", why);
        return;
    }
    tap_diag("redis-server on %s", srv.url);
    char *da = st_tempdir("pp-shared-a"), *db = st_tempdir("pp-shared-b"), *dc = st_tempdir("pp-shared-c");
    kvrt_store *w = open_g(2, 64 << 20, da, srv.url, NULL, 0);
    bool ok = w && write_pp2(w, true, NULL) && kvrt_store_flush(w) == KVRT_OK;
    struct kvrt_store_stats st;
    memset(&st, 0, sizeof(st));
    st.size = sizeof(st);
    if (w)
        kvrt_store_stats(w, &st);
    tap_ok(ok && st.written_shared == (N / CHUNK) * H * (L / 2),
           "shared: the PP 2 writer's %llu entries reach the server", (unsigned long long)st.written_shared);
    kvrt_store_close(w);
    /* readers with an empty disk: everything from the server */
    kvrt_store *r = open_g(2, 0, db, srv.url, NULL, 0);
    if (r)
        read_pp1_pp4(r, "shared (an empty disk, the server's entries)");
    else
        tap_ok(false, "shared: reader opened");
    kvrt_store_close(r);

    /* hostile: group 1's entry copied under group 0's key */
    uint8_t key[KVRT_STORE_KEY_BYTES];
    kvrt_store *h = open_g(2, 0, dc, srv.url, NULL, 0);
    ok = h && kvrt_store_keys(h, tokens, N, key, 1, NULL) == KVRT_OK && plant(srv.port, key);
    struct rank x;
    if (ok && rank_make(&x, KVRT_LAYOUT_BLNHC, 16, 0, H, 0, 2, 8)) {
        st_fill(&x.c, x.table, 0, N, 55);
        struct kvrt_store_span sp = span_of(&x);
        uint64_t loaded = 9;
        ok = kvrt_store_get(h, &sp, &loaded) == KVRT_OK && loaded == 0 &&
             st_check(&x.c, x.table, 0, N, 55, NULL, 0) == 0;
        struct kvrt_store_stats hs;
        memset(&hs, 0, sizeof(hs));
        hs.size = sizeof(hs);
        kvrt_store_stats(h, &hs);
        ok = ok && hs.dropped == 1;
        tap_ok(ok,
               "hostile: group 1's entry under group 0's key is dropped (%llu), never loaded (0 tokens, cache "
               "unchanged)",
               (unsigned long long)hs.dropped);
        st_cache_free(&x.c);
    } else {
        tap_ok(false, "hostile: the entry planted");
    }
    kvrt_store_close(h);
    redis_server_stop(&srv);
    for (char **d = (char *[]){da, db, dc, NULL}; *d; d++) {
        st_rmdir(*d);
        free(*d);
    }
}

int main(void)
{
    tap_plan_dynamic();
    st_model_init(&model, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, L, H, 16, 16);
    st_tokens(tokens, N, 3);
    struct kvrt_runtime_options o;
    kvrt_runtime_options_default(&o);
    if (kvrt_runtime_open(&o, &rt) != KVRT_OK)
        tap_skip_all("no runtime: %s", kvrt_error_message());
    memory_tier();
    refusals();
    lookups();
    disk_tier();
    shared_tier();
    kvrt_runtime_close(rt);
    return tap_done();
}
