/*
 * Tenants on one shared server and one directory (docs/security.md, "The
 * store"): stores with different keys, or none, neither see nor disturb
 * each other and all work; what the server holds is sealed and names
 * nothing a store without the key can compute; an entry changed on the
 * server, or moved under another name with its header rewritten, is
 * rejected (counted, dropped, never loaded).  The attacks are made with
 * hiredis straight on the server, as whoever reads and writes it would.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis_server.h"
#include "store_test.h"
#include "tap.h"

#define T 32
#define N (4 * T)
#define CHUNKS (N / T)
#define HDR 128

static kvrt_runtime *rt;
static struct st_model model;
static char *dir;
static char key_a[512], key_b[512];

static void write_key(char *path, size_t size, const char *name, unsigned seed, mode_t mode)
{
    snprintf(path, size, "%s/%s", dir, name);
    uint8_t k[32];
    for (int i = 0; i < 32; i++)
        k[i] = (uint8_t)(seed * 131 + (unsigned)i * 7);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, k, sizeof(k)) != (ssize_t)sizeof(k))
        tap_diag("cannot write %s", path);
    if (fd >= 0)
        close(fd);
    chmod(path, mode);
}

static kvrt_store *open_store(const char *key, const char *path, const char *shared, struct st_log *lg)
{
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.groups = &model.group;
    o.num_groups = 1;
    o.model_id = "tenants";
    o.chunk_tokens = T;
    o.memory_bytes = 0; /* every get goes to the tiers below */
    o.path = path;
    o.shared = shared;
    o.key_file = key;
    o.log = lg ? st_log_fn : NULL;
    o.log_user = lg;
    kvrt_store *s = NULL;
    if (kvrt_store_open(&o, &s) != KVRT_OK)
        tap_diag("kvrt_store_open: %s", kvrt_error_message());
    return s;
}

struct seq {
    struct st_cache c;
    int64_t table[32];
    int32_t tokens[N];
};

static bool seq_make(struct seq *q, enum kvrt_layout layout, uint64_t bs)
{
    if (!st_cache_make(&q->c, rt, "cpu", &model, layout, bs, 0, N / bs + 2, 0, model.heads))
        return false;
    st_table(&q->c, q->table, N / bs, bs);
    st_tokens(q->tokens, N, 42); /* one prompt for every tenant */
    return true;
}

static bool put_all(kvrt_store *s, uint64_t seed)
{
    struct seq q;
    if (!seq_make(&q, KVRT_LAYOUT_LBHNC, 16))
        return false;
    struct kvrt_store_span sp = st_span(&q.c, q.table, N / 16, q.tokens, N, 0, KVRT_UNSET);
    uint64_t stored = 0;
    bool ok = st_fill(&q.c, q.table, 0, N, seed) && kvrt_store_put(s, &sp, &stored) == KVRT_OK && stored == N &&
              kvrt_store_flush(s) == KVRT_OK;
    if (!ok)
        tap_diag("put: %s", kvrt_error_message());
    st_cache_free(&q.c);
    return ok;
}

static uint64_t get_all(kvrt_store *s, uint64_t seed, bool *exact)
{
    struct seq q;
    *exact = false;
    if (!seq_make(&q, KVRT_LAYOUT_BLNHC, 8))
        return 0;
    struct kvrt_store_span sp = st_span(&q.c, q.table, N / 8, q.tokens, N, 0, KVRT_UNSET);
    uint64_t loaded = 0;
    if (kvrt_store_get(s, &sp, &loaded) != KVRT_OK)
        tap_diag("get: %s", kvrt_error_message());
    *exact = st_check(&q.c, q.table, 0, loaded, seed, NULL, 0) == 0;
    st_cache_free(&q.c);
    return loaded;
}

static uint64_t lookup(kvrt_store *s)
{
    int32_t tokens[N];
    st_tokens(tokens, N, 42);
    uint64_t hit = UINT64_MAX;
    if (kvrt_store_lookup(s, tokens, N, 0, 0, &hit) != KVRT_OK)
        tap_diag("lookup: %s", kvrt_error_message());
    return hit;
}

/* kvrt_store_verify of the directory at path, opened with key (NULL:
 * none) and nothing else. */
static int verify_dir(const char *path, const char *key, struct kvrt_store_verify_report *r)
{
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.path = path;
    o.key_file = key;
    memset(r, 0, sizeof(*r));
    kvrt_store *ins = NULL;
    int rc = path ? kvrt_store_open(&o, &ins) : KVRT_ERR_STATE;
    rc = rc == KVRT_OK ? kvrt_store_verify(ins, false, NULL, NULL, r) : rc;
    kvrt_store_close(ins);
    return rc;
}

/* The server's name of chunk c, head h, as a store computes it. */
static void server_key(kvrt_store *s, uint64_t c, uint32_t h, char out[5 + 36])
{
    int32_t tokens[N];
    st_tokens(tokens, N, 42);
    uint8_t keys[CHUNKS * KVRT_STORE_KEY_BYTES] = {0};
    kvrt_store_keys(s, tokens, N, keys, CHUNKS, NULL);
    /* a binary key of 41 bytes, not a C string */
    static const char prefix[5] = {'k', 'v', 'r', 't', ':'};
    memcpy(out, prefix, sizeof(prefix));
    memcpy(out + 5, keys + c * KVRT_STORE_KEY_BYTES, 32);
    for (int i = 0; i < 4; i++)
        out[5 + 32 + i] = (char)(h >> (24 - 8 * i));
}

static redisReply *cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    return r;
}

static long long dbsize(redisContext *c)
{
    redisReply *r = cmd(c, "DBSIZE");
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

/* GET a value into buf; its length, or -1. */
static long long get_value(redisContext *c, const char *key, uint8_t *buf, size_t cap)
{
    redisReply *r = cmd(c, "GET %b", key, (size_t)41);
    long long n = -1;
    if (r && r->type == REDIS_REPLY_STRING && (size_t)r->len <= cap) {
        memcpy(buf, r->str, r->len);
        n = (long long)r->len;
    }
    freeReplyObject(r);
    return n;
}

static bool set_value(redisContext *c, const char *key, const uint8_t *buf, size_t len)
{
    redisReply *r = cmd(c, "SET %b %b", key, (size_t)41, buf, len);
    bool ok = r && r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    return ok;
}

static void shared_tenants(const char *url, int port)
{
    redisContext *rc = redisConnect("127.0.0.1", port);
    if (!rc || rc->err) {
        tap_skip("cannot reach the test's own server");
        return;
    }
    struct st_log la = {0};
    kvrt_store *a = open_store(key_a, NULL, url, &la);
    kvrt_store *plain = open_store(NULL, NULL, url, NULL);
    tap_ok(a && plain && put_all(a, 7) && put_all(plain, 7), "a keyed and an unkeyed store put one prompt");
    long long entries = CHUNKS * (long long)model.heads;
    tap_ok(dbsize(rc) == 2 * entries, "the server holds both, apart: %lld keys, %lld each", dbsize(rc), entries);

    /* what the server's reader sees */
    size_t vcap = HDR + (1u << 20);
    uint8_t *sealed = calloc(1, vcap), *clear = calloc(1, vcap);
    char ka[41], kp[41];
    server_key(a, 1, 1, ka);
    server_key(plain, 1, 1, kp);
    long long ls = get_value(rc, ka, sealed, vcap), lp = get_value(rc, kp, clear, vcap);
    tap_ok(ls > HDR && ls == lp && memcmp(sealed, "KVRTSEAL", 8) == 0 && memcmp(clear, "KVRTSENT", 8) == 0,
           "the keyed entry is sealed (%lld bytes), the unkeyed one plain", ls);
    bool leaked = false;
    for (long long at = HDR; ls == lp && at + 16 <= lp && !leaked; at += 16)
        leaked = memmem(sealed + HDR, (size_t)(ls - HDR), clear + at, 16) != NULL;
    tap_ok(ls == lp && !leaked, "no 16 bytes of the KV appear in the sealed value");
    tap_ok(memcmp(ka + 5, kp + 5, 32) != 0, "and its name is not the one the prompt gives without the key");

    /* another tenant: sees nothing, loads nothing, overwrites nothing */
    kvrt_store *b = open_store(key_b, NULL, url, NULL);
    bool exact = false;
    tap_ok(b && lookup(b) == 0 && get_all(b, 8, &exact) == 0, "another key: the lookup finds 0 tokens, a get loads 0");
    tap_ok(put_all(b, 8) && dbsize(rc) == 3 * entries, "its put of the same prompt adds its own %lld entries", entries);
    kvrt_store *a2 = open_store(key_a, NULL, url, NULL);
    uint64_t got = a2 ? get_all(a2, 7, &exact) : 0;
    tap_ok(got == N && exact, "the first tenant still loads its own bytes, exact (%llu of %d tokens)",
           (unsigned long long)got, N);
    got = b ? get_all(b, 8, &exact) : 0;
    tap_ok(got == N && exact, "and the second its own (%llu tokens)", (unsigned long long)got);
    kvrt_store_close(a2);

    /* a shared hit is queued for the keyed store's disk: sealed there by
     * the queue thread (a put's entries come sealed by the put) */
    char *path = st_tempdir("tenants-promote");
    kvrt_store *a5 = path ? open_store(key_a, path, url, NULL) : NULL;
    got = a5 ? get_all(a5, 7, &exact) : 0;
    bool flushed = a5 && kvrt_store_flush(a5) == KVRT_OK;
    tap_ok(got == N && exact && flushed, "a keyed store with a directory loads from the server (%llu tokens)",
           (unsigned long long)got);
    kvrt_store_close(a5);
    struct kvrt_store_verify_report vr;
    int vrc = verify_dir(path, NULL, &vr);
    kvrt_store *a6 = path ? open_store(key_a, path, NULL, NULL) : NULL;
    got = a6 ? get_all(a6, 7, &exact) : 0;
    tap_ok(vrc == KVRT_OK && (long long)vr.entries == entries && vr.sealed == vr.entries && got == N && exact,
           "its disk holds the entries sealed (%llu of %llu) and loads them alone, exact (%llu tokens)",
           (unsigned long long)vr.sealed, (unsigned long long)vr.entries, (unsigned long long)got);
    kvrt_store_close(a6);
    if (path)
        st_rmdir(path);
    free(path);

    /* a value changed on the server: rejected, dropped, never loaded */
    char k2[41];
    server_key(a, 2, 0, k2);
    long long l2 = get_value(rc, k2, sealed, vcap);
    if (l2 > HDR + 100)
        sealed[HDR + 100] ^= 0x01;
    tap_ok(l2 > HDR && set_value(rc, k2, sealed, (size_t)l2), "one bit of chunk 2's sealed payload flipped");
    struct st_log lg = {0};
    kvrt_store *a3 = open_store(key_a, NULL, url, &lg);
    got = a3 ? get_all(a3, 7, &exact) : 0;
    struct kvrt_store_stats st = {0};
    kvrt_store_stats(a3, &st);
    tap_ok(got == 2 * T && exact, "a get stops before it: %llu tokens, exact", (unsigned long long)got);
    tap_ok(st.rejected == 1 && st.dropped == 1 && lg.n >= 1 && strstr(lg.lines[0], "seal"),
           "counted as rejected (%llu) with one line: %s", (unsigned long long)st.rejected, lg.n ? lg.lines[0] : "");
    redisReply *ex = cmd(rc, "EXISTS %b", k2, (size_t)41);
    tap_ok(ex && ex->type == REDIS_REPLY_INTEGER && ex->integer == 0, "and deleted from the server");
    freeReplyObject(ex);

    /* chunk 0's value copied under chunk 3's name, header rewritten */
    kvrt_store *a4 = open_store(key_a, NULL, url, NULL);
    tap_ok(a4 && put_all(a4, 7), "chunk 2 put again");
    char k0[41], k3[41];
    server_key(a, 0, 0, k0);
    server_key(a, 3, 0, k3);
    long long l0 = get_value(rc, k0, sealed, vcap);
    memcpy(sealed + 48, k3 + 5, 32);
    tap_ok(l0 > HDR && set_value(rc, k3, sealed, (size_t)l0),
           "chunk 0 copied under chunk 3's name, its header rewritten to match");
    got = a4 ? get_all(a4, 7, &exact) : 0;
    memset(&st, 0, sizeof(st));
    kvrt_store_stats(a4, &st);
    tap_ok(got == 3 * T && exact && st.rejected == 1, "the moved entry is rejected: %llu tokens load, rejected %llu",
           (unsigned long long)got, (unsigned long long)st.rejected);

    kvrt_store_close(a4);
    kvrt_store_close(a3);
    kvrt_store_close(b);
    kvrt_store_close(plain);
    kvrt_store_close(a);
    free(sealed);
    free(clear);
    redisFree(rc);
}

static void disk_tenants(void)
{
    char *path = st_tempdir("tenants-disk");
    kvrt_store *a = path ? open_store(key_a, path, NULL, NULL) : NULL;
    tap_ok(a && put_all(a, 7), "a keyed store puts to its directory");
    kvrt_store_close(a);
    kvrt_store *plain = open_store(NULL, path, NULL, NULL);
    bool exact = false;
    tap_ok(plain && lookup(plain) == 0 && get_all(plain, 7, &exact) == 0,
           "the same directory without the key: nothing found");
    kvrt_store_close(plain);

    struct kvrt_store_verify_report r;
    int rc = verify_dir(path, NULL, &r);
    tap_ok(rc == KVRT_OK && r.entries == CHUNKS * model.heads && r.sealed == r.entries && r.bad == 0,
           "verify without the key: %llu entries, %llu sealed, %llu bad", (unsigned long long)r.entries,
           (unsigned long long)r.sealed, (unsigned long long)r.bad);
    rc = verify_dir(path, key_a, &r);
    tap_ok(rc == KVRT_OK && r.entries == CHUNKS * model.heads && r.sealed == 0 && r.bad == 0,
           "verify with it: every entry opens (%llu)", (unsigned long long)r.entries);
    kvrt_store *a2 = open_store(key_a, path, NULL, NULL);
    uint64_t got = a2 ? get_all(a2, 7, &exact) : 0;
    tap_ok(got == N && exact, "the key's owner loads it from disk, exact (%llu tokens)", (unsigned long long)got);
    kvrt_store_close(a2);
    if (path)
        st_rmdir(path);
    free(path);
}

static void refusals(void)
{
    char open_key[512];
    write_key(open_key, sizeof(open_key), "open.key", 3, 0640);
    kvrt_store *s = open_store(open_key, NULL, NULL, NULL);
    tap_ok(!s && strstr(kvrt_error_message(), "open.key") && strstr(kvrt_error_message(), "0640"),
           "a key file the group may read is refused, naming it: %s", kvrt_error_message());
    kvrt_store_close(s);
    setenv("KVRT_STORE_KEY_FILE", "/nonexistent/kvrt.key", 1);
    s = open_store(NULL, NULL, NULL, NULL);
    tap_ok(!s && strstr(kvrt_error_message(), "KVRT_STORE_KEY_FILE") && strstr(kvrt_error_message(), "/nonexistent"),
           "KVRT_STORE_KEY_FILE naming no file is refused: %s", kvrt_error_message());
    kvrt_store_close(s);
    unsetenv("KVRT_STORE_KEY_FILE");
}

int main(void)
{
    tap_plan(25);
    unsetenv("KVRT_STORE_KEY_FILE");
    st_model_init(&model, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 3, 2, 16, 16);
    struct kvrt_runtime_options ro;
    kvrt_runtime_options_default(&ro);
    if (kvrt_runtime_open(&ro, &rt) != KVRT_OK) {
        tap_skip_all("no runtime: %s", kvrt_error_message());
        return 0;
    }
    dir = st_tempdir("tenants");
    write_key(key_a, sizeof(key_a), "a.key", 1, 0600);
    write_key(key_b, sizeof(key_b), "b.key", 2, 0600);
    refusals();
    disk_tenants();
    struct redis_server srv;
    char why[256];
    if (redis_server_start(&srv, "127.0.0.1", NULL, why, sizeof(why))) {
        shared_tenants(srv.url, srv.port);
        redis_server_stop(&srv);
    } else {
        for (int i = 0; i < 18; i++)
            tap_skip("no redis-server: %s", why);
    }
    st_rmdir(dir);
    free(dir);
    kvrt_runtime_close(rt);
    return tap_done();
}
