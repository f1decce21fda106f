/*
 * The shared tier on a Redis-protocol server this test starts itself: on
 * loopback in a temporary folder on a free port, and once more across a
 * pair of network namespaces joined by a veth pair (as two hosts would
 * be).  One engine puts; engines with their own (or no) disk find the
 * entries there, load them exactly and promote them; a damaged entry on
 * the server is dropped with one line; a server that is not there, dies,
 * or whose link goes down is a miss with one warning, within the timeout,
 * never a crash or a hang.  Servers and namespaces are removed even when a
 * check fails.
 *
 *   test-store-shared loopback | netns
 *   test-store-shared --client put|get|down URL   (inside a namespace)
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "redis_server.h"
#include "store_test.h"
#include "tap.h"

#define T 32
#define N (4 * T)

static kvrt_runtime *rt;
static struct st_model model;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static kvrt_store *open_store(const char *path, const char *shared, uint64_t memory, double timeout, struct st_log *lg)
{
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.groups = &model.group;
    o.num_groups = 1;
    o.model_id = "shared";
    o.chunk_tokens = T;
    o.memory_bytes = memory;
    o.path = path;
    o.shared = shared;
    o.shared_timeout_s = timeout;
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
    st_tokens(q->tokens, N, 42);
    return true;
}

static struct kvrt_store_span seq_span(struct seq *q)
{
    return st_span(&q->c, q->table, N / q->c.block_size, q->tokens, N, 0, KVRT_UNSET);
}

static bool put_all(kvrt_store *s)
{
    struct seq q;
    if (!seq_make(&q, KVRT_LAYOUT_LBHNC, 16))
        return false;
    struct kvrt_store_span sp = seq_span(&q);
    uint64_t stored = 0;
    bool ok = st_fill(&q.c, q.table, 0, N, 7) && kvrt_store_put(s, &sp, &stored) == KVRT_OK && stored == N &&
              kvrt_store_flush(s) == KVRT_OK;
    st_cache_free(&q.c);
    return ok;
}

/* Get into a new cache: tokens loaded; *exact whether they are right. */
static uint64_t get_all(kvrt_store *s, bool *exact)
{
    struct seq q;
    *exact = false;
    if (!seq_make(&q, KVRT_LAYOUT_BLNHC, 8))
        return 0;
    struct kvrt_store_span sp = seq_span(&q);
    uint64_t loaded = 0;
    if (kvrt_store_get(s, &sp, &loaded) != KVRT_OK)
        tap_diag("get: %s", kvrt_error_message());
    *exact = st_check(&q.c, q.table, 0, loaded, 7, NULL, 0) == 0;
    st_cache_free(&q.c);
    return loaded;
}

static struct kvrt_store_stats stats(kvrt_store *s)
{
    struct kvrt_store_stats st = {0};
    kvrt_store_stats(s, &st);
    return st;
}

/* Flip one byte of the first entry on the server. */
static bool damage_one(int port, char *key, size_t *klen)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err)
        return false;
    redisReply *keys = redisCommand(c, "KEYS kvrt:*");
    bool ok = keys && keys->type == REDIS_REPLY_ARRAY && keys->elements > 0;
    if (ok) {
        *klen = keys->element[0]->len;
        memcpy(key, keys->element[0]->str, *klen);
        redisReply *v = redisCommand(c, "GET %b", key, *klen);
        ok = v && v->type == REDIS_REPLY_STRING && v->len > 300;
        if (ok) {
            v->str[300] ^= 0x40;
            redisReply *r = redisCommand(c, "SET %b %b", key, *klen, v->str, v->len);
            ok = r && r->type == REDIS_REPLY_STATUS;
            freeReplyObject(r);
        }
        freeReplyObject(v);
    }
    freeReplyObject(keys);
    redisFree(c);
    return ok;
}

static bool key_exists(int port, const char *key, size_t klen)
{
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *r = c && !c->err ? redisCommand(c, "EXISTS %b", key, klen) : NULL;
    bool has = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    if (c)
        redisFree(c);
    return has;
}

/* ---- a server that dies in the middle of a pipeline ------------------- */

/* The commands a store sends, by their fixed lengths (a 41-byte key). */
#define EXISTS_BYTES 64u        /* *2 $6 EXISTS $41 key */
#define GET_BYTES 61u           /* *2 $3 GET $41 key */
#define CLUSTER_SLOTS_BYTES 28u /* *2 $7 CLUSTER $5 SLOTS: asked first */

/* The child's loop: answer CLUSTER SLOTS as a server without cluster
 * mode, EXISTS with 0; of the first two GETs, answer
 * the first with `value` whole and the second with half of it, then die. */
static void die_midway(int lfd, const char *value, size_t vlen)
{
    int c = accept(lfd, NULL, NULL);
    char buf[8192];
    size_t have = 0;
    int gets = 0;
    while (c >= 0 && gets < 2) {
        ssize_t n = read(c, buf + have, sizeof(buf) - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        size_t at = 0;
        while (gets < 2) {
            static const char no_cluster[] = "-ERR This instance has cluster support disabled\r\n";
            if (have - at >= CLUSTER_SLOTS_BYTES && memcmp(buf + at + 8, "CLUSTER", 7) == 0) {
                if (write(c, no_cluster, sizeof(no_cluster) - 1) != (ssize_t)sizeof(no_cluster) - 1)
                    _exit(1);
                at += CLUSTER_SLOTS_BYTES;
            } else if (have - at >= EXISTS_BYTES && memcmp(buf + at + 8, "EXISTS", 6) == 0) {
                if (write(c, ":0\r\n", 4) != 4)
                    _exit(1);
                at += EXISTS_BYTES;
            } else if (have - at >= GET_BYTES && memcmp(buf + at + 8, "GET", 3) == 0) {
                char head[32];
                int hl = snprintf(head, sizeof(head), "$%zu\r\n", vlen);
                size_t body = gets == 0 ? vlen : vlen / 2;
                if (write(c, head, (size_t)hl) != hl || write(c, value, body) != (ssize_t)body ||
                    (gets == 0 && write(c, "\r\n", 2) != 2))
                    _exit(1);
                gets++;
                at += GET_BYTES;
            } else {
                break;
            }
        }
        memmove(buf, buf + at, have - at);
        have -= at;
    }
    _exit(0);
}

/* One entry's bytes from the real server: chunk 0, head 0. */
static char *first_value(kvrt_store *s, int port, size_t *vlen)
{
    int32_t tok[N];
    st_tokens(tok, N, 42);
    uint8_t keys[4 * KVRT_STORE_KEY_BYTES];
    char key[5 + KVRT_STORE_KEY_BYTES + 4] = "kvrt:";
    if (kvrt_store_keys(s, tok, N, keys, 4, NULL) != KVRT_OK)
        return NULL;
    memcpy(key + 5, keys, KVRT_STORE_KEY_BYTES);
    memset(key + 5 + KVRT_STORE_KEY_BYTES, 0, 4); /* head 0, big-endian */
    redisContext *c = redisConnect("127.0.0.1", port);
    redisReply *r = c && !c->err ? redisCommand(c, "GET %b", key, sizeof(key)) : NULL;
    char *v = NULL;
    if (r && r->type == REDIS_REPLY_STRING && (v = malloc(r->len))) {
        memcpy(v, r->str, r->len);
        *vlen = r->len;
    }
    freeReplyObject(r);
    if (c)
        redisFree(c);
    return v;
}

/* The store's GETs of a chunk go out as one pipeline, and each value is
 * read off the socket straight into an entry's buffer: a server that
 * sends one whole value, half of the next and dies leaves a miss (nothing
 * of either copied into the cache), one warning, and no hang. */
static void midway(kvrt_store *with_entries, int port)
{
    size_t vlen = 0;
    char *value = first_value(with_entries, port, &vlen);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    bool ok = value && lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(lfd, 4) == 0 &&
              getsockname(lfd, (struct sockaddr *)&a, &al) == 0;
    pid_t pid = ok ? fork() : -1;
    if (pid == 0)
        die_midway(lfd, value, vlen);
    if (lfd >= 0)
        close(lfd);
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", ntohs(a.sin_port));
    struct st_log lg = {.n = 0};
    double t0 = now();
    kvrt_store *s = pid > 0 ? open_store(NULL, url, 16 << 20, 1.0, &lg) : NULL;
    bool exact = false;
    uint64_t loaded = s ? get_all(s, &exact) : N;
    double took = now() - t0;
    struct kvrt_store_stats st = s ? stats(s) : (struct kvrt_store_stats){0};
    tap_ok(s && loaded == 0 && exact && st.dropped == 0 && st.hits_shared == 0 && lg.n == 1 &&
               strstr(lg.lines[0], "is unreachable (the server closed the connection)") && took < 3,
           "a server that dies in the middle of a pipeline of GETs (one value sent whole, half of the next): a miss "
           "in %.2f s, nothing loaded, one warning: %s",
           took, lg.n ? lg.lines[0] : "none");
    kvrt_store_close(s);
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    free(value);
}

static void loopback(void)
{
    char why[512];
    struct redis_server srv;
    if (!redis_server_start(&srv, "127.0.0.1", NULL, why, sizeof(why))) {
        tap_skip("%s", why);
        return;
    }
    tap_diag("redis-server on %s (pid %d)", srv.url, (int)srv.pid);
    char *da = st_tempdir("shared-a"), *db = st_tempdir("shared-b");
    kvrt_store *a = open_store(da, srv.url, 16 << 20, 1.0, NULL);
    bool ok = a && put_all(a);
    struct kvrt_store_stats st = a ? stats(a) : (struct kvrt_store_stats){0};
    tap_ok(ok && st.written_shared == 4 * model.heads && st.shared_up, "engine A puts: %llu entries reach the server",
           (unsigned long long)st.written_shared);
    kvrt_store_close(a);

    /* engine B: its own empty disk; finds everything on the server */
    kvrt_store *b = open_store(db, srv.url, 16 << 20, 1.0, NULL);
    uint64_t hit = 0;
    int32_t tok[N];
    st_tokens(tok, N, 42);
    ok = b && kvrt_store_lookup(b, tok, N, 0, 0, &hit) == KVRT_OK;
    bool exact = false;
    uint64_t loaded = ok ? get_all(b, &exact) : 0;
    st = b ? stats(b) : st;
    tap_ok(ok && hit == N && loaded == N && exact && st.hits_shared == 4 * model.heads,
           "engine B (another disk) finds %llu tokens on the server and loads them exactly", (unsigned long long)hit);
    ok = ok && kvrt_store_flush(b) == KVRT_OK;
    st = b ? stats(b) : st;
    tap_ok(ok && st.disk_entries == 4 * model.heads, "and promotes them to its disk (%llu entries)",
           (unsigned long long)st.disk_entries);
    loaded = get_all(b, &exact);
    st = stats(b);
    tap_ok(loaded == N && exact && st.hits_memory == 4 * model.heads, "and to its memory: the next get hits memory");
    kvrt_store_close(b);

    /* engine C: no disk at all */
    kvrt_store *c = open_store(NULL, srv.url, 16 << 20, 1.0, NULL);
    loaded = c ? get_all(c, &exact) : 0;
    tap_ok(loaded == N && exact, "engine C (memory only) loads them from the server");
    if (c)
        midway(c, srv.port);
    kvrt_store_close(c);

    /* a damaged entry on the server: dropped with one line, deleted there */
    char key[128];
    size_t klen = 0;
    struct st_log lg = {.n = 0};
    kvrt_store *d = open_store(NULL, srv.url, 16 << 20, 1.0, &lg);
    ok = d && damage_one(srv.port, key, &klen);
    loaded = ok ? get_all(d, &exact) : N;
    st = d ? stats(d) : st;
    tap_ok(ok && loaded < N && exact && st.dropped == 1 && lg.n == 1 && strstr(lg.lines[0], "dropped shared entry") &&
               (strstr(lg.lines[0], "checksum mismatch") || strstr(lg.lines[0], "seal does not verify")),
           "a damaged entry on the server is dropped with one line (%s) and never loaded (%llu tokens loaded)",
           lg.n ? lg.lines[0] : "none", (unsigned long long)loaded);
    tap_ok(!key_exists(srv.port, key, klen), "and deleted from the server");
    kvrt_store_close(d);

    /* the server dies: misses, one warning, no hang */
    kvrt_store *e = open_store(NULL, srv.url, 16 << 20, 0.5, &lg);
    redis_server_stop(&srv);
    lg.n = 0;
    double t0 = now();
    loaded = e ? get_all(e, &exact) : N;
    uint64_t hit2 = 9;
    kvrt_store_lookup(e, tok, N, 0, 0, &hit2);
    loaded += e ? get_all(e, &exact) : N;
    double took = now() - t0;
    st = e ? stats(e) : st;
    tap_ok(e && loaded == 0 && hit2 == 0 && lg.n == 1 && strstr(lg.lines[0], "is unreachable") && took < 3 &&
               !st.shared_up,
           "the server killed: two gets and a lookup miss in %.2f s with one warning: %s", took,
           lg.n ? lg.lines[0] : "none");
    kvrt_store_close(e);
    st_rmdir(da);
    st_rmdir(db);
    free(da);
    free(db);
}

static void unreachable(void)
{
    /* a port nobody listens on */
    struct st_log lg = {.n = 0};
    double t0 = now();
    kvrt_store *s = open_store(NULL, "redis://127.0.0.1:1", 16 << 20, 0.5, &lg);
    bool exact = false;
    uint64_t loaded = s ? get_all(s, &exact) : N;
    loaded += s ? get_all(s, &exact) : N;
    double took = now() - t0;
    tap_ok(s && loaded == 0 && lg.n == 1 && strstr(lg.lines[0], "redis://127.0.0.1:1 is unreachable") && took < 2,
           "no server: the store opens, gets miss, one warning in %.2f s: %s", took, lg.n ? lg.lines[0] : "none");
    bool ok = s && put_all(s);
    struct kvrt_store_stats st = s ? stats(s) : (struct kvrt_store_stats){0};
    tap_ok(ok && st.memory_entries == 4 * model.heads && lg.n == 1,
           "puts keep to memory, flush succeeds, no second warning");
    kvrt_store_close(s);
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.groups = &model.group;
    o.num_groups = 1;
    o.model_id = "shared";
    o.shared = "http://127.0.0.1:6379";
    tap_ok(kvrt_store_open(&o, &s) == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "redis://[USER@]HOST:PORT"),
           "a URL of another scheme is refused: %s", kvrt_error_message());
}

/* ---- across two namespaces ----------------------------------------------- */

static char ns_a[64], ns_b[64];
/* The command that removes them, made before any signal can come. */
static char ns_del[256];
static volatile sig_atomic_t ns_made;

static void ns_cleanup(void)
{
    if (!ns_made)
        return;
    if (system(ns_del) != 0)
        tap_diag("removing the namespaces failed");
    ns_made = false;
}

/* A signal: the namespaces go all the same, with what is safe there (fork,
 * exec, wait). */
static void on_signal(int sig)
{
    if (ns_made) {
        pid_t pid = fork();
        if (pid == 0) {
            char *argv[] = {"/bin/sh", "-c", ns_del, NULL};
            execv(argv[0], argv);
            _exit(127);
        }
        if (pid > 0)
            waitpid(pid, NULL, 0);
        ns_made = false;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

/* Run this program as a client inside namespace A; its exit status. */
static int client(const char *self, const char *what, const char *url, char *out, size_t size)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "ip netns exec %s %s --client %s %s 2>&1", ns_a, self, what, url);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, size - 1, p) : 0;
    out[n] = '\0';
    int st = p ? pclose(p) : -1;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        tap_diag("  %s: %s", what, line);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void netns(const char *self)
{
    if (geteuid() != 0) {
        tap_skip("network namespaces need root (ip netns add)");
        return;
    }
    char why[512];
    if (!redis_server_path(why, sizeof(why))) {
        tap_skip("%s", why);
        return;
    }
    int id = (int)(getpid() % 250);
    snprintf(ns_a, sizeof(ns_a), "kvrt-store-a-%d", (int)getpid());
    snprintf(ns_b, sizeof(ns_b), "kvrt-store-b-%d", (int)getpid());
    snprintf(ns_del, sizeof(ns_del), "ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", ns_a, ns_b);
    atexit(ns_cleanup);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (sh("ip netns add %s 2>/dev/null", ns_a) != 0) {
        tap_skip("cannot make a network namespace here (ip netns add failed)");
        return;
    }
    ns_made = true;
    bool ok = sh("ip netns add %s", ns_b) == 0 &&
              sh("ip link add kvs-a%d netns %s type veth peer name kvs-b%d netns %s", id, ns_a, id, ns_b) == 0 &&
              sh("ip -n %s addr add 10.231.%d.1/24 dev kvs-a%d && ip -n %s link set kvs-a%d up && ip -n %s link set "
                 "lo up",
                 ns_a, id, id, ns_a, id, ns_a) == 0 &&
              sh("ip -n %s addr add 10.231.%d.2/24 dev kvs-b%d && ip -n %s link set kvs-b%d up && ip -n %s link set "
                 "lo up",
                 ns_b, id, id, ns_b, id, ns_b) == 0;
    if (!ok) {
        tap_skip("cannot join two namespaces with a veth pair here");
        ns_cleanup();
        return;
    }
    char addr[32];
    snprintf(addr, sizeof(addr), "10.231.%d.2", id);
    struct redis_server srv;
    if (!redis_server_start(&srv, addr, ns_b, why, sizeof(why))) {
        tap_ok(false, "redis-server in namespace %s: %s", ns_b, why);
        ns_cleanup();
        return;
    }
    char out[8192];
    int rc = client(self, "put", srv.url, out, sizeof(out));
    tap_ok(rc == 0, "a client in namespace A puts through the veth to the server in B (%s)%s%s", srv.url,
           rc ? ": " : "", rc ? out : "");
    rc = client(self, "get", srv.url, out, sizeof(out));
    tap_ok(rc == 0, "another client in A, with no disk, loads every token exactly from B%s%s", rc ? ": " : "",
           rc ? out : "");
    /* the server's side of the link down: nothing answers, the connect
     * waits out the timeout */
    sh("ip -n %s link set kvs-b%d down", ns_b, id);
    rc = client(self, "down", srv.url, out, sizeof(out));
    tap_ok(rc == 0, "the server's link down: a client misses after its 0.5 s timeout, with one warning");
    sh("ip -n %s link set kvs-a%d down", ns_a, id);
    rc = client(self, "down", srv.url, out, sizeof(out));
    tap_ok(rc == 0, "the client's link down: a client misses at once, with one warning");
    redis_server_stop(&srv);
    ns_cleanup();
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "ip netns list | grep -q kvrt-store-.-%d", (int)getpid());
    tap_ok(system(cmd) != 0, "the namespaces are gone");
}

/* In namespace A: put, get or get with the link down. */
static int run_client(const char *what, const char *url)
{
    struct kvrt_runtime_options o;
    kvrt_runtime_options_default(&o);
    if (kvrt_runtime_open(&o, &rt) != KVRT_OK)
        return 2;
    struct st_log lg = {.n = 0};
    kvrt_store *s = open_store(NULL, url, 16 << 20, 0.5, &lg);
    if (!s)
        return 3;
    int rc = 0;
    if (strcmp(what, "put") == 0) {
        struct kvrt_store_stats st;
        rc = put_all(s) && (st = stats(s), st.written_shared == 4 * model.heads) ? 0 : 4;
    } else {
        bool exact = false;
        double t0 = now();
        uint64_t loaded = get_all(s, &exact);
        double took = now() - t0;
        if (strcmp(what, "get") == 0)
            rc = loaded == N && exact ? 0 : 5;
        else
            rc = loaded == 0 && lg.n == 1 && took < 2 ? 0 : 6;
        fprintf(stderr, "%s: %llu tokens in %.2f s, %d warnings%s%s\n", what, (unsigned long long)loaded, took, lg.n,
                lg.n ? ": " : "", lg.n ? lg.lines[0] : "");
    }
    kvrt_store_close(s);
    kvrt_runtime_close(rt);
    return rc;
}

int main(int argc, char **argv)
{
    st_model_init(&model, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 2, 16, 16);
    if (argc == 4 && strcmp(argv[1], "--client") == 0)
        return run_client(argv[2], argv[3]);
    tap_plan_dynamic();
    struct kvrt_runtime_options o;
    kvrt_runtime_options_default(&o);
    if (kvrt_runtime_open(&o, &rt) != KVRT_OK)
        tap_skip_all("no runtime: %s", kvrt_error_message());
    const char *what = argc > 1 ? argv[1] : "loopback";
    if (strcmp(what, "netns") == 0) {
        netns(argv[0]);
    } else {
        unreachable();
        loopback();
    }
    kvrt_runtime_close(rt);
    return tap_done();
}
