/*
 * The shared tier on real servers the test starts itself, in a temporary
 * folder on free loopback ports:
 *
 *   cluster   a Redis Cluster of 3 primaries and 3 replicas: many
 *             sequences put through one store are spread over the three
 *             primaries and read back exactly by a fresh store (lookups
 *             too); a URL that names no node that answers is a miss
 *   acl       an ACL user with a password file; a wrong password is one
 *             warning and misses; a password file others can read is
 *             refused at open, naming it
 *   tls       rediss:// to a TLS-only server with a CA and a certificate
 *             the test makes with openssl; a server the CA did not sign,
 *             or a name the certificate does not carry, is a miss
 *   hostile   servers that speak the protocol badly (hostile_redis.py):
 *             each costs at most the deadline per call and bounded memory
 *   failover  (slow) a primary killed: its slots miss within the
 *             deadline while the rest serve; once a replica is promoted
 *             the same store hits again, without reopening
 *   reshard   (slow) redis-cli --cluster reshard under load: every get
 *             exact or a miss; afterwards all exact
 *   netns     (slow) the cluster's nodes in three network namespaces,
 *             joined to the test's by veth pairs on a bridge
 *
 *   test-store-cluster MODE [hostile_redis.py]
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "redis_cluster.h"
#include "redis_server.h"
#include "store_test.h"
#include "tap.h"

#define T 32
#define N (4 * T)
#define SEQS 24

static kvrt_runtime *rt;
static struct st_model model;
/* The memory tier of the stores opened next; 0 where every get must ask
 * the servers (failover, resharding). */
static uint64_t memory_bytes = 64 << 20;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

struct files {
    const char *password, *ca, *cert, *key;
};

static kvrt_store *open_store(const char *shared, double timeout, struct st_log *lg, const struct files *f)
{
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.groups = &model.group;
    o.num_groups = 1;
    o.model_id = "cluster";
    o.chunk_tokens = T;
    o.memory_bytes = memory_bytes;
    o.shared = shared;
    o.shared_timeout_s = timeout;
    o.log = lg ? st_log_fn : NULL;
    o.log_user = lg;
    if (f) {
        o.shared_password_file = f->password;
        o.shared_ca_file = f->ca;
        o.shared_cert_file = f->cert;
        o.shared_cert_key_file = f->key;
    }
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

static bool seq_make(struct seq *q, uint64_t seed)
{
    if (!st_cache_make(&q->c, rt, "cpu", &model, KVRT_LAYOUT_BLNHC, 16, 0, N / 16 + 2, 0, model.heads))
        return false;
    st_table(&q->c, q->table, N / 16, seed);
    st_tokens(q->tokens, N, 1000 + seed);
    return true;
}

/* Put sequences [from, to) (pattern seed = sequence), flushed. */
static bool put_seqs(kvrt_store *s, int from, int to)
{
    bool ok = true;
    for (int i = from; i < to && ok; i++) {
        struct seq q;
        if (!seq_make(&q, (uint64_t)i))
            return false;
        struct kvrt_store_span sp = st_span(&q.c, q.table, N / 16, q.tokens, N, 0, KVRT_UNSET);
        uint64_t stored = 0;
        ok = st_fill(&q.c, q.table, 0, N, (uint64_t)i) && kvrt_store_put(s, &sp, &stored) == KVRT_OK && stored == N;
        st_cache_free(&q.c);
    }
    return ok && kvrt_store_flush(s) == KVRT_OK;
}

/* Get sequence i into a new cache: tokens loaded; *wrong counts cells
 * that differ from what was put. */
static uint64_t get_seq(kvrt_store *s, int i, uint64_t *wrong)
{
    struct seq q;
    if (!seq_make(&q, (uint64_t)i)) {
        *wrong += 1;
        return 0;
    }
    struct kvrt_store_span sp = st_span(&q.c, q.table, N / 16, q.tokens, N, 0, KVRT_UNSET);
    uint64_t loaded = 0;
    if (kvrt_store_get(s, &sp, &loaded) != KVRT_OK)
        tap_diag("get: %s", kvrt_error_message());
    uint64_t bad = loaded ? st_check(&q.c, q.table, 0, loaded, (uint64_t)i, NULL, 0) : 0;
    *wrong += bad;
    st_cache_free(&q.c);
    return loaded;
}

/* All sequences [0, n): tokens loaded in all; the slowest call. */
static uint64_t get_seqs(kvrt_store *s, int n, uint64_t *wrong, double *slowest)
{
    uint64_t total = 0;
    *slowest = 0;
    for (int i = 0; i < n; i++) {
        double t0 = now();
        total += get_seq(s, i, wrong);
        double took = now() - t0;
        if (took > *slowest)
            *slowest = took;
    }
    return total;
}

static uint64_t lookup_seqs(kvrt_store *s, int n)
{
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        int32_t tok[N];
        st_tokens(tok, N, 1000 + (uint64_t)i);
        uint64_t hit = 0;
        if (kvrt_store_lookup(s, tok, N, 0, 0, &hit) == KVRT_OK)
            total += hit;
    }
    return total;
}

static struct kvrt_store_stats stats(kvrt_store *s)
{
    struct kvrt_store_stats st = {0};
    kvrt_store_stats(s, &st);
    return st;
}

static const char *const loopback6[RC_NODES] = {"127.0.0.1", "127.0.0.1", "127.0.0.1",
                                                "127.0.0.1", "127.0.0.1", "127.0.0.1"};

static bool cluster_up(struct redis_cluster *c, const char *const addrs[RC_NODES], const char *const ns[RC_NODES])
{
    char why[512];
    if (!redis_server_path(why, sizeof(why))) {
        tap_skip("%s", why);
        return false;
    }
    double t0 = now();
    if (!redis_cluster_start(c, addrs, ns, why, sizeof(why))) {
        tap_ok(false, "a cluster of 6 nodes: %s", why);
        return false;
    }
    tap_diag("cluster %s up in %.1f s", c->url, now() - t0);
    return true;
}

/* ---- a cluster ----------------------------------------------------------- */

static void on_cluster(const struct redis_cluster *c)
{
    struct st_log lg = {.n = 0};
    kvrt_store *a = open_store(c->url, 2.0, &lg, NULL);
    bool ok = a && put_seqs(a, 0, SEQS);
    struct kvrt_store_stats st = a ? stats(a) : (struct kvrt_store_stats){0};
    uint64_t entries = (uint64_t)SEQS * (N / T) * model.heads;
    tap_ok(ok && st.written_shared == entries && st.write_failures == 0 && st.shared_up && lg.n == 0,
           "%d sequences put through seeds %s: %llu of %llu entries written, %d warnings%s%s", SEQS, c->url,
           (unsigned long long)st.written_shared, (unsigned long long)entries, lg.n, lg.n ? ": " : "",
           lg.n ? lg.lines[0] : "");
    uint64_t sum = 0;
    int primaries = 0;
    char spread[256] = "";
    for (int i = 0; i < RC_NODES; i++) {
        char role[64], size[64];
        if (!redis_cluster_cli(c, i, "role", role, sizeof(role)) || strcmp(role, "master") != 0)
            continue;
        redis_cluster_cli(c, i, "dbsize", size, sizeof(size));
        uint64_t k = strtoull(size, NULL, 10);
        sum += k;
        primaries += k > 0;
        size_t l = strlen(spread);
        snprintf(spread + l, sizeof(spread) - l, "%s%llu", l ? " + " : "", (unsigned long long)k);
    }
    tap_ok(sum == entries && primaries == 3, "the entries are spread over the 3 primaries: %s = %llu", spread,
           (unsigned long long)sum);
    kvrt_store_close(a);

    kvrt_store *b = open_store(c->url, 2.0, &lg, NULL);
    uint64_t wrong = 0;
    double slowest = 0;
    uint64_t hit = b ? lookup_seqs(b, SEQS) : 0;
    tap_ok(hit == (uint64_t)SEQS * N, "a fresh store's lookups find %llu of %d tokens", (unsigned long long)hit,
           SEQS * N);
    uint64_t loaded = b ? get_seqs(b, SEQS, &wrong, &slowest) : 0;
    st = b ? stats(b) : st;
    tap_ok(loaded == (uint64_t)SEQS * N && wrong == 0 && st.hits_shared == entries && lg.n == 0,
           "and its gets load every token exactly (%llu tokens, %llu cells wrong, %llu shared hits, slowest %.3f s)",
           (unsigned long long)loaded, (unsigned long long)wrong, (unsigned long long)st.hits_shared, slowest);
    kvrt_store_close(b);

    /* seeds of which only the second answers: it tells the rest */
    char url[256];
    snprintf(url, sizeof(url), "redis://127.0.0.1:1,%s:%d", c->addr[2], c->node[2].port);
    lg.n = 0;
    kvrt_store *d = open_store(url, 1.0, &lg, NULL);
    wrong = 0;
    loaded = d ? get_seqs(d, SEQS, &wrong, &slowest) : 0;
    tap_ok(loaded == (uint64_t)SEQS * N && wrong == 0,
           "seeds %s (the first refuses): the second tells the map, every token loads (%d warnings: %s)", url, lg.n,
           lg.n ? lg.lines[0] : "none");
    kvrt_store_close(d);
}

/* One server on the IPv6 loopback, named in brackets. */
static void ipv6(void)
{
    struct redis_server srv;
    char why[512];
    if (system("ip -6 addr show dev lo 2>/dev/null | grep -q '::1/128'") != 0) {
        tap_skip("no IPv6 loopback address (::1) here");
        return;
    }
    if (!redis_server_start(&srv, "::1", NULL, why, sizeof(why))) {
        tap_ok(false, "redis-server on [::1]: %s", why);
        return;
    }
    char url[128];
    snprintf(url, sizeof(url), "redis://[::1]:%d", srv.port);
    struct st_log lg = {.n = 0};
    kvrt_store *a = open_store(url, 1.0, &lg, NULL);
    bool ok = a && put_seqs(a, 0, 2);
    kvrt_store_close(a);
    kvrt_store *b = open_store(url, 1.0, &lg, NULL);
    uint64_t wrong = 0;
    double slowest;
    uint64_t loaded = ok && b ? get_seqs(b, 2, &wrong, &slowest) : 0;
    tap_ok(loaded == 2 * N && wrong == 0 && lg.n == 0, "%s: puts and gets over IPv6, exact (%d warnings)", url, lg.n);
    kvrt_store_close(b);
    redis_server_stop(&srv);
}

static void mode_cluster(void)
{
    ipv6();
    struct redis_cluster c;
    if (!cluster_up(&c, loopback6, NULL))
        return;
    on_cluster(&c);
    redis_cluster_stop(&c);
}

/* ---- failover ------------------------------------------------------------ */

static void mode_failover(void)
{
    struct redis_cluster c;
    if (!cluster_up(&c, loopback6, NULL))
        return;
    const double timeout = 0.5;
    struct st_log lg = {.n = 0};
    kvrt_store *a = open_store(c.url, 2.0, NULL, NULL);
    bool ok = a && put_seqs(a, 0, SEQS);
    kvrt_store_close(a);
    memory_bytes = 0;
    kvrt_store *b = open_store(c.url, timeout, &lg, NULL);
    uint64_t wrong = 0;
    double slowest = 0;
    uint64_t loaded = ok && b ? get_seqs(b, SEQS, &wrong, &slowest) : 0;
    tap_ok(ok && loaded == (uint64_t)SEQS * N && wrong == 0, "before: every token loads");
    /* a primary dies */
    int victim = -1;
    for (int i = 0; i < RC_NODES && victim < 0; i++) {
        char role[64];
        if (redis_cluster_cli(&c, i, "role", role, sizeof(role)) && strcmp(role, "master") == 0)
            victim = i;
    }
    /* the replicas have what was put (WAIT on the victim) */
    char out[64];
    redis_cluster_cli(&c, victim, "wait 1 2000", out, sizeof(out));
    tap_diag("killing primary %s:%d (WAIT: %s replica has its writes)", c.addr[victim], c.node[victim].port, out);
    kill(c.node[victim].pid, SIGKILL);
    double t0 = now(), recovered = -1, worst = 0;
    uint64_t misses = 0, during = 0, rounds = 0;
    wrong = 0;
    while (now() - t0 < 30) {
        loaded = get_seqs(b, SEQS, &wrong, &slowest);
        rounds++;
        if (slowest > worst)
            worst = slowest;
        if (loaded == (uint64_t)SEQS * N) {
            recovered = now() - t0;
            break;
        }
        misses += (uint64_t)SEQS * N - loaded;
        during += loaded;
        nap(0.1);
    }
    tap_diag("recovered after %.2f s, %llu rounds, %llu tokens missed, %llu loaded meanwhile, slowest get %.3f s",
             recovered, (unsigned long long)rounds, (unsigned long long)misses, (unsigned long long)during, worst);
    tap_ok(wrong == 0, "every get during the failover exact or a miss (%llu cells wrong)", (unsigned long long)wrong);
    tap_ok(worst <= timeout + 0.4, "no get took longer than the %.1f s deadline and a little (slowest %.3f s)", timeout,
           worst);
    tap_ok(recovered < 0 || rounds == 1 || during > 0,
           "while the primary was gone the other nodes kept serving (%llu tokens loaded)", (unsigned long long)during);
    tap_ok(recovered > 0, "after a replica's promotion the same store hits everything again in %.2f s, without "
                          "reopening",
           recovered);
    struct kvrt_store_stats st = stats(b);
    tap_ok(st.shared_up, "and says the tier is up (warnings: %d, first: %s)", lg.n, lg.n ? lg.lines[0] : "none");
    kvrt_store_close(b);
    redis_cluster_stop(&c);
}

/* ---- resharding under load -------------------------------------------------- */

static void mode_reshard(void)
{
    struct redis_cluster c;
    if (!cluster_up(&c, loopback6, NULL))
        return;
    kvrt_store *a = open_store(c.url, 2.0, NULL, NULL);
    bool ok = a && put_seqs(a, 0, SEQS);
    char from[128] = "", to[128] = "", role[64];
    int src = -1, dst = -1;
    for (int i = 0; i < RC_NODES; i++)
        if (redis_cluster_cli(&c, i, "role", role, sizeof(role)) && strcmp(role, "master") == 0) {
            if (src < 0)
                src = i;
            else if (dst < 0)
                dst = i;
        }
    redis_cluster_cli(&c, src, "cluster myid", from, sizeof(from));
    redis_cluster_cli(&c, dst, "cluster myid", to, sizeof(to));
    pid_t pid = fork();
    if (pid == 0) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd),
                 "redis-cli --cluster reshard %s:%d --cluster-from %s --cluster-to %s --cluster-slots 3000 "
                 "--cluster-yes --cluster-pipeline 4 >/dev/null 2>&1",
                 c.addr[src], c.node[src].port, from, to);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    memory_bytes = 0;
    kvrt_store *b = open_store(c.url, 1.0, NULL, NULL);
    uint64_t wrong = 0, rounds = 0, missed = 0;
    double slowest = 0, worst = 0, t0 = now();
    int status = 0;
    for (;;) {
        uint64_t loaded = get_seqs(b, SEQS, &wrong, &slowest);
        missed += (uint64_t)SEQS * N - loaded;
        /* and new puts while the slots move */
        put_seqs(a, SEQS + (int)rounds % 8, SEQS + (int)rounds % 8 + 1);
        rounds++;
        worst = slowest > worst ? slowest : worst;
        if (waitpid(pid, &status, WNOHANG) == pid)
            break;
        if (now() - t0 > 120) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
    }
    tap_diag("reshard of 3000 slots took %.1f s: %llu rounds of %d gets, %llu tokens missed, slowest get %.3f s",
             now() - t0, (unsigned long long)rounds, SEQS, (unsigned long long)missed, worst);
    tap_ok(ok && WIFEXITED(status) && WEXITSTATUS(status) == 0, "redis-cli --cluster reshard moved 3000 slots");
    tap_ok(wrong == 0, "every get under resharding exact or a miss (%llu cells wrong)", (unsigned long long)wrong);
    uint64_t loaded = get_seqs(b, SEQS, &wrong, &slowest);
    tap_ok(loaded == (uint64_t)SEQS * N && wrong == 0, "afterwards the same store loads every token exactly");
    kvrt_store *d = open_store(c.url, 1.0, NULL, NULL);
    loaded = d ? get_seqs(d, SEQS + 8, &wrong, &slowest) : 0;
    tap_ok(loaded == (uint64_t)(SEQS + 8) * N && wrong == 0,
           "and a fresh store finds everything, the puts made while slots moved included (%llu tokens)",
           (unsigned long long)loaded);
    kvrt_store_close(d);
    kvrt_store_close(b);
    kvrt_store_close(a);
    redis_cluster_stop(&c);
}

/* ---- ACL ------------------------------------------------------------------- */

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    chmod(path, mode);
}

static void mode_acl(void)
{
    /* the user docs/security.md suggests: the store's keys and commands */
    static const char *const extra[] = {"--user", "default", "off", "--user", "kvrt", "on", ">s3cret-pass",
                                        "~kvrt:*", "+get", "+set", "+exists", "+del", "+cluster|slots", "+asking",
                                        "+ping", NULL};
    struct redis_server srv;
    char why[512];
    if (!redis_server_path(why, sizeof(why))) {
        tap_skip("%s", why);
        return;
    }
    if (!redis_server_start_with(&srv, "127.0.0.1", NULL, extra, "--user kvrt --pass s3cret-pass --no-auth-warning",
                                 why, sizeof(why))) {
        tap_ok(false, "redis-server with an ACL user: %s", why);
        return;
    }
    char *dir = st_tempdir("acl");
    char good[4200], bad[4200], open_file[4200];
    snprintf(good, sizeof(good), "%s/good", dir);
    snprintf(bad, sizeof(bad), "%s/bad", dir);
    snprintf(open_file, sizeof(open_file), "%s/open", dir);
    write_file(good, "s3cret-pass\n", 0600);
    write_file(bad, "not-the-pass\n", 0600);
    write_file(open_file, "s3cret-pass\n", 0644);
    char url[256];
    snprintf(url, sizeof(url), "redis://kvrt@127.0.0.1:%d", srv.port);
    struct st_log lg = {.n = 0};
    struct files f = {.password = good};
    kvrt_store *a = open_store(url, 1.0, &lg, &f);
    bool ok = a && put_seqs(a, 0, 4);
    struct kvrt_store_stats st = a ? stats(a) : (struct kvrt_store_stats){0};
    tap_ok(ok && st.written_shared == 4 * (N / T) * model.heads && lg.n == 0,
           "user kvrt with its password file: puts reach the server (%llu entries)",
           (unsigned long long)st.written_shared);
    kvrt_store_close(a);
    kvrt_store *b = open_store(url, 1.0, &lg, &f);
    uint64_t wrong = 0;
    double slowest;
    uint64_t loaded = b ? get_seqs(b, 4, &wrong, &slowest) : 0;
    tap_ok(loaded == 4 * N && wrong == 0, "and a fresh store loads them exactly");
    kvrt_store_close(b);
    lg.n = 0;
    f.password = bad;
    double t0 = now();
    kvrt_store *c = open_store(url, 1.0, &lg, &f);
    loaded = c ? get_seqs(c, 4, &wrong, &slowest) : 1;
    tap_ok(c && loaded == 0 && lg.n == 1 && strstr(lg.lines[0], "refused AUTH as user kvrt") && now() - t0 < 2,
           "a wrong password: the store opens, gets miss, one warning: %s", lg.n ? lg.lines[0] : "none");
    kvrt_store_close(c);
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", srv.port);
    lg.n = 0;
    kvrt_store *d = open_store(url, 1.0, &lg, NULL);
    loaded = d ? get_seqs(d, 4, &wrong, &slowest) : 1;
    tap_ok(d && loaded == 0 && lg.n == 1, "no AUTH where the server wants one: misses, one warning: %s",
           lg.n ? lg.lines[0] : "none");
    kvrt_store_close(d);
    f.password = open_file;
    kvrt_store *e = open_store(url, 1.0, NULL, &f);
    tap_ok(!e && strstr(kvrt_error_message(), open_file) && strstr(kvrt_error_message(), "group or others"),
           "a password file others can read is refused at open: %s", kvrt_error_message());
    kvrt_store_close(e);
    f.password = "/nonexistent/pass";
    e = open_store(url, 1.0, NULL, &f);
    tap_ok(!e && strstr(kvrt_error_message(), "/nonexistent/pass"), "a missing one too: %s", kvrt_error_message());
    kvrt_store_close(e);
    st_rmdir(dir);
    free(dir);
    redis_server_stop(&srv);
}

/* ---- TLS ------------------------------------------------------------------- */

/* A CA and a certificate it signs for 127.0.0.1 (IP SAN), in dir. */
static bool make_pki(const char *dir, const char *ca)
{
    return sh("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=%s -keyout %s.key -out %s.pem "
              ">/dev/null 2>&1",
              dir, ca, ca, ca) == 0 &&
           sh("cd %s && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=kvrt-test-server -keyout server.key -out "
              "server.csr >/dev/null 2>&1 && printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && openssl x509 -req "
              "-in server.csr -CA %s.pem -CAkey %s.key -CAcreateserial -days 2 -extfile san.ext -out server.pem "
              ">/dev/null 2>&1",
              dir, ca, ca) == 0 &&
           sh("cd %s && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=kvrt-client -keyout client.key -out client.csr "
              ">/dev/null 2>&1 && openssl x509 -req -in client.csr -CA %s.pem -CAkey %s.key -CAcreateserial -days 2 "
              "-out client.pem >/dev/null 2>&1",
              dir, ca, ca) == 0;
}

static void mode_tls(void)
{
    char why[512];
    if (!redis_server_path(why, sizeof(why))) {
        tap_skip("%s", why);
        return;
    }
    if (system("command -v openssl >/dev/null 2>&1") != 0) {
        tap_skip("the openssl program is not installed (it makes the test's certificates)");
        return;
    }
    char *dir = st_tempdir("tls");
    char *other = st_tempdir("tls-other");
    if (!make_pki(dir, "ca") || !make_pki(other, "ca")) {
        tap_ok(false, "openssl made a CA and certificates");
        return;
    }
    char cert[4200], key[4200], ca[4200], ca_other[4200], ccert[4200], ckey[4200], cli[12800];
    snprintf(cert, sizeof(cert), "%s/server.pem", dir);
    snprintf(key, sizeof(key), "%s/server.key", dir);
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    snprintf(ca_other, sizeof(ca_other), "%s/ca.pem", other);
    snprintf(ccert, sizeof(ccert), "%s/client.pem", dir);
    snprintf(ckey, sizeof(ckey), "%s/client.key", dir);
    snprintf(cli, sizeof(cli), "--tls --cacert %s --cert %s --key %s", ca, ccert, ckey);
    const char *const extra[] = {"--tls-port", "PORT", "--tls-cert-file", cert, "--tls-key-file", key,
                                 "--tls-ca-cert-file", ca, "--tls-auth-clients", "optional", NULL};
    struct redis_server srv;
    if (!redis_server_start_with(&srv, "127.0.0.1", NULL, extra, cli, why, sizeof(why))) {
        tap_ok(false, "redis-server with TLS only: %s", why);
        return;
    }
    char url[256];
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d", srv.port);
    struct st_log lg = {.n = 0};
    struct files f = {.ca = ca};
    kvrt_store *a = open_store(url, 2.0, &lg, &f);
    bool ok = a && put_seqs(a, 0, 4);
    struct kvrt_store_stats st = a ? stats(a) : (struct kvrt_store_stats){0};
    tap_ok(ok && st.written_shared == 4 * (N / T) * model.heads && lg.n == 0,
           "%s with the CA: puts reach the server (%llu entries)%s%s", url, (unsigned long long)st.written_shared,
           lg.n ? ": " : "", lg.n ? lg.lines[0] : "");
    kvrt_store_close(a);
    f = (struct files){.ca = ca, .cert = ccert, .key = ckey};
    kvrt_store *b = open_store(url, 2.0, &lg, &f);
    uint64_t wrong = 0;
    double slowest;
    uint64_t loaded = b ? get_seqs(b, 4, &wrong, &slowest) : 0;
    tap_ok(loaded == 4 * N && wrong == 0 && lg.n == 0,
           "a fresh store with a client certificate loads them exactly over TLS");
    kvrt_store_close(b);
    lg.n = 0;
    f = (struct files){.ca = ca_other};
    kvrt_store *c = open_store(url, 1.0, &lg, &f);
    loaded = c ? get_seqs(c, 4, &wrong, &slowest) : 1;
    tap_ok(c && loaded == 0 && lg.n == 1 && strstr(lg.lines[0], "certificate"),
           "a server another CA signed: misses, one warning: %s", lg.n ? lg.lines[0] : "none");
    kvrt_store_close(c);
    lg.n = 0;
    snprintf(url, sizeof(url), "rediss://localhost:%d", srv.port);
    f = (struct files){.ca = ca};
    kvrt_store *d = open_store(url, 1.0, &lg, &f);
    loaded = d ? get_seqs(d, 4, &wrong, &slowest) : 1;
    tap_ok(d && loaded == 0 && lg.n == 1 && strstr(lg.lines[0], "certificate"),
           "a name the certificate does not carry (localhost): misses, one warning: %s", lg.n ? lg.lines[0] : "none");
    kvrt_store_close(d);
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", srv.port);
    kvrt_store *e = open_store(url, 1.0, NULL, &f);
    tap_ok(!e && strstr(kvrt_error_message(), "rediss://"), "a CA file with redis:// is refused: %s",
           kvrt_error_message());
    snprintf(url, sizeof(url), "rediss://127.0.0.1:%d", srv.port);
    f = (struct files){.ca = "/nonexistent/ca.pem"};
    e = open_store(url, 1.0, NULL, &f);
    tap_ok(!e && strstr(kvrt_error_message(), "/nonexistent/ca.pem"), "a missing CA file is refused: %s",
           kvrt_error_message());
    redis_server_stop(&srv);
    st_rmdir(dir);
    st_rmdir(other);
    free(dir);
    free(other);
}

/* ---- hostile servers ---------------------------------------------------- */

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kib = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

static void mode_hostile(const char *script)
{
    static const char *const modes[] = {"slow",      "endless",   "longline", "negative", "exists",
                                        "wrongtype", "truncated", "slotmap",  "garbage"};
    /* what the one warning must say */
    static const char *const says[] = {"no reply within the timeout",
                                       "a value of 1000000000000 bytes where at most",
                                       "a reply line longer than 4096 bytes",
                                       "a value length \"-5\" that is not a length",
                                       "a reply of type '$' where ':' was expected",
                                       "a reply of type ':' where '$' was expected",
                                       "the server closed the connection",
                                       "an array of 1000000000 elements: larger than its bound",
                                       "" /* whatever the bytes make of it */};
    const double timeout = 0.5;
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        char cmd[4200];
        snprintf(cmd, sizeof(cmd), "exec /usr/bin/python3 %s %s", script, modes[m]);
        int fds[2];
        if (pipe(fds) != 0)
            break;
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fds[1], 1);
            close(fds[0]);
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
            _exit(127);
        }
        close(fds[1]);
        char port[16] = "";
        FILE *pf = fdopen(fds[0], "r");
        if (!pf || !fgets(port, sizeof(port), pf)) {
            tap_ok(false, "hostile server %s started", modes[m]);
            if (pf)
                fclose(pf);
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            continue;
        }
        char url[64];
        snprintf(url, sizeof(url), "redis://127.0.0.1:%d", atoi(port));
        struct st_log lg = {.n = 0};
        long rss0 = rss_kib();
        double t0 = now();
        kvrt_store *s = open_store(url, timeout, &lg, NULL);
        double open_s = now() - t0, worst = 0;
        uint64_t loaded = 0, hit = 0, wrong = 0;
        for (int round = 0; s && round < 2; round++) {
            double t1 = now(), slowest;
            loaded += get_seqs(s, 1, &wrong, &slowest);
            hit += lookup_seqs(s, 1);
            double took = now() - t1;
            worst = took > worst ? took : worst;
            if (round == 0)
                nap(1.05); /* past the back-off: the next round tries the server again */
        }
        long grew = rss_kib() - rss0;
        /* a server that answers some commands well is back each time it
         * does: a warning each way, at most once a back-off */
        for (int i = 1; i < lg.n; i++)
            tap_diag("then: %s", lg.lines[i]);
        tap_ok(s && open_s <= timeout + 0.3 && worst <= 2 * timeout + 0.3 && loaded == 0 && hit == 0 && wrong == 0 &&
                   grew < 32 * 1024 && lg.n >= 1 && lg.n <= 7 && strstr(lg.lines[0], says[m]),
               "a server that answers %s: open %.2f s, each get and lookup %.2f s at most, nothing loaded, memory +%ld "
               "KiB; %s",
               modes[m], open_s, worst, grew, lg.n ? lg.lines[0] : "no warning");
        kvrt_store_close(s);
        fclose(pf);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

/* ---- across network namespaces ------------------------------------------- */

static char ns_del[1024];
static volatile sig_atomic_t ns_made;

static void ns_cleanup(void)
{
    if (ns_made && system(ns_del) != 0)
        tap_diag("removing the namespaces failed");
    ns_made = false;
}

static void on_signal(int sig)
{
    if (ns_made) {
        pid_t pid = fork();
        if (pid == 0) {
            execl("/bin/sh", "sh", "-c", ns_del, (char *)NULL);
            _exit(127);
        }
        if (pid > 0)
            waitpid(pid, NULL, 0);
        ns_made = false;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void mode_netns(void)
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
    int id = (int)(getpid() % 200) + 20;
    char ns[3][64], br[32];
    snprintf(br, sizeof(br), "kvcbr%d", id);
    int n = snprintf(ns_del, sizeof(ns_del), "ip link del %s 2>/dev/null;", br);
    for (int i = 0; i < 3; i++) {
        snprintf(ns[i], sizeof(ns[i]), "kvrt-cl%d-%d", i, (int)getpid());
        n += snprintf(ns_del + n, sizeof(ns_del) - (size_t)n, " ip link del kvc%d-%d 2>/dev/null; ip netns del %s "
                      "2>/dev/null;",
                      id, i, ns[i]);
    }
    atexit(ns_cleanup);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    ns_made = true;
    bool ok = sh("ip link add %s type bridge && ip addr add 10.%d.0.1/24 dev %s && ip link set %s up", br, id, br,
                 br) == 0;
    for (int i = 0; i < 3 && ok; i++)
        ok = sh("ip netns add %s && ip link add kvc%d-%d type veth peer name eth0 netns %s && ip link set kvc%d-%d "
                "master %s up && ip -n %s addr add 10.%d.0.%d/24 dev eth0 && ip -n %s link set eth0 up && ip -n %s "
                "link set lo up",
                ns[i], id, i, ns[i], id, i, br, ns[i], id, 10 + i, ns[i], ns[i]) == 0;
    if (!ok) {
        tap_skip("cannot make namespaces joined by veth pairs to a bridge here");
        ns_cleanup();
        return;
    }
    char addr[3][32];
    for (int i = 0; i < 3; i++)
        snprintf(addr[i], sizeof(addr[i]), "10.%d.0.%d", id, 10 + i);
    /* a primary and another's replica in each namespace */
    const char *addrs[RC_NODES] = {addr[0], addr[1], addr[2], addr[0], addr[1], addr[2]};
    const char *nss[RC_NODES] = {ns[0], ns[1], ns[2], ns[0], ns[1], ns[2]};
    struct redis_cluster c;
    if (cluster_up(&c, addrs, nss)) {
        on_cluster(&c);
        /* namespace 0's link down: its primary's connects wait out the
         * deadline, the other two primaries serve */
        struct st_log lg = {.n = 0};
        memory_bytes = 0;
        kvrt_store *s = open_store(c.url, 0.5, &lg, NULL);
        sh("ip link set kvc%d-0 down", id);
        uint64_t wrong = 0;
        double slowest = 0;
        uint64_t loaded = s ? get_seqs(s, SEQS, &wrong, &slowest) : 0;
        tap_ok(s && wrong == 0 && loaded > 0 && loaded < (uint64_t)SEQS * N && slowest <= 0.5 + 0.4,
               "namespace %s cut off: %llu of %d tokens load from the others, the slowest get %.2f s (deadline 0.5 "
               "s), %d warning(s): %s",
               ns[0], (unsigned long long)loaded, SEQS * N, slowest, lg.n, lg.n ? lg.lines[0] : "none");
        kvrt_store_close(s);
        sh("ip link set kvc%d-0 up", id);
        redis_cluster_stop(&c);
    }
    ns_cleanup();
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "ip netns list | grep -q kvrt-cl.-%d || ip link show %s >/dev/null 2>&1 || ip link show kvc%d-0 >/dev/null 2>&1",
             (int)getpid(), br, id);
    tap_ok(system(cmd) != 0, "the namespaces, the veth pairs and the bridge are gone");
}

int main(int argc, char **argv)
{
    st_model_init(&model, KVRT_SPEC_ATTENTION, KVRT_DTYPE_BF16, 2, 2, 16, 16);
    tap_plan_dynamic();
    struct kvrt_runtime_options o;
    kvrt_runtime_options_default(&o);
    if (kvrt_runtime_open(&o, &rt) != KVRT_OK)
        tap_skip_all("no runtime: %s", kvrt_error_message());
    const char *mode = argc > 1 ? argv[1] : "cluster";
    if (strcmp(mode, "cluster") == 0)
        mode_cluster();
    else if (strcmp(mode, "failover") == 0)
        mode_failover();
    else if (strcmp(mode, "reshard") == 0)
        mode_reshard();
    else if (strcmp(mode, "acl") == 0)
        mode_acl();
    else if (strcmp(mode, "tls") == 0)
        mode_tls();
    else if (strcmp(mode, "hostile") == 0 && argc > 2)
        mode_hostile(argv[2]);
    else if (strcmp(mode, "netns") == 0)
        mode_netns();
    else
        tap_ok(false, "unknown mode %s", mode);
    kvrt_runtime_close(rt);
    return tap_done();
}
