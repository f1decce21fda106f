/*
 * The shared tier on a Redis Cluster the test starts itself, in temporary
 * folders on free loopback ports (tests/store/redis_cluster.h): 3
 * primaries and 3 replicas, cluster-node-timeout 1000,
 * cluster-require-full-coverage no.
 *
 *   cluster   many sequences put through one store are spread over the
 *             three primaries and read back exactly by a fresh store
 *             (lookups too); seeds of which the first is dead; and one
 *             server on the IPv6 loopback
 *   failover  (slow) a primary killed: its slots miss within the
 *             deadline while the rest serve; once a replica is promoted
 *             the same store hits again, without reopening
 *   reshard   (slow) redis-cli --cluster reshard under gets and puts:
 *             every get exact or a miss; afterwards all exact
 *   netns     (slow) the nodes in three network namespaces, joined to the
 *             test's by veth pairs on a bridge; one namespace cut off
 *   tls       a cluster that speaks TLS only (clients, bus,
 *             replication; a CA the test makes): CLUSTER SLOTS names TLS
 *             ports; puts and gets exact through rediss://seed1,seed2;
 *             a manual failover's MOVED followed; a server another CA
 *             signed is one warning and misses
 *
 *   test-store-cluster MODE
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redis_cluster.h"
#include "redis_server.h"
#include "shared_seqs.h"
#include "tap.h"

static const char *const loopback6[RC_NODES] = {"127.0.0.1", "127.0.0.1", "127.0.0.1",
                                                "127.0.0.1", "127.0.0.1", "127.0.0.1"};

static bool cluster_up(struct redis_cluster *c, const char *const addrs[RC_NODES], const char *const ns[RC_NODES])
{
    char why[512];
    if (!redis_server_path(why, sizeof(why))) {
        tap_skip("%s", why);
        return false;
    }
    double t0 = sq_now();
    if (!redis_cluster_start(c, addrs, ns, why, sizeof(why))) {
        tap_ok(false, "a cluster of 6 nodes: %s", why);
        return false;
    }
    tap_diag("cluster %s up in %.1f s", c->url, sq_now() - t0);
    return true;
}

/* ---- a cluster ----------------------------------------------------------- */

static void on_cluster(const struct redis_cluster *c)
{
    struct st_log lg = {.n = 0};
    kvrt_store *a = sq_open(c->url, 2.0, &lg, NULL);
    bool ok = a && sq_put(a, 0, SQ_SEQS);
    struct kvrt_store_stats st = a ? sq_stats(a) : (struct kvrt_store_stats){0};
    uint64_t entries = (uint64_t)SQ_SEQS * (SQ_N / SQ_T) * sq_model.heads;
    tap_ok(ok && st.written_shared == entries && st.write_failures == 0 && st.shared_up && lg.n == 0,
           "%d sequences put through seeds %s: %llu of %llu entries written, %d warnings%s%s", SQ_SEQS, c->url,
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

    kvrt_store *b = sq_open(c->url, 2.0, &lg, NULL);
    uint64_t wrong = 0;
    double slowest = 0;
    uint64_t hit = b ? sq_lookup(b, SQ_SEQS) : 0;
    tap_ok(hit == (uint64_t)SQ_SEQS * SQ_N, "a fresh store's lookups find %llu of %d tokens", (unsigned long long)hit,
           SQ_SEQS * SQ_N);
    uint64_t loaded = b ? sq_get_all(b, SQ_SEQS, &wrong, &slowest) : 0;
    st = b ? sq_stats(b) : st;
    tap_ok(loaded == (uint64_t)SQ_SEQS * SQ_N && wrong == 0 && st.hits_shared == entries && lg.n == 0,
           "and its gets load every token exactly (%llu tokens, %llu cells wrong, %llu shared hits, slowest %.3f s)",
           (unsigned long long)loaded, (unsigned long long)wrong, (unsigned long long)st.hits_shared, slowest);
    kvrt_store_close(b);

    /* seeds of which only the second answers: it tells the rest */
    char url[256];
    snprintf(url, sizeof(url), "redis://127.0.0.1:1,%s:%d", c->addr[2], c->node[2].port);
    lg.n = 0;
    kvrt_store *d = sq_open(url, 1.0, &lg, NULL);
    wrong = 0;
    loaded = d ? sq_get_all(d, SQ_SEQS, &wrong, &slowest) : 0;
    tap_ok(loaded == (uint64_t)SQ_SEQS * SQ_N && wrong == 0,
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
    kvrt_store *a = sq_open(url, 1.0, &lg, NULL);
    bool ok = a && sq_put(a, 0, 2);
    kvrt_store_close(a);
    kvrt_store *b = sq_open(url, 1.0, &lg, NULL);
    uint64_t wrong = 0;
    double slowest;
    uint64_t loaded = ok && b ? sq_get_all(b, 2, &wrong, &slowest) : 0;
    tap_ok(loaded == 2 * SQ_N && wrong == 0 && lg.n == 0, "%s: puts and gets over IPv6, exact (%d warnings)", url,
           lg.n);
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

/* The keys the cluster's live primaries hold between them. */
static unsigned long long primaries_keys(const struct redis_cluster *c, int dead)
{
    unsigned long long keys = 0;
    for (int i = 0; i < RC_NODES; i++) {
        char role[64] = "", size[64] = "";
        if (i != dead && redis_cluster_cli(c, i, "role", role, sizeof(role)) && strcmp(role, "master") == 0 &&
            redis_cluster_cli(c, i, "dbsize", size, sizeof(size)))
            keys += strtoull(size, NULL, 10);
    }
    return keys;
}

/* What a live node says of the cluster, line by line as diagnostics: when
 * the store did not recover, whether the cluster itself failed over. */
static void dump_nodes(const struct redis_cluster *c, int i)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "redis-cli -h %s -p %d cluster nodes 2>&1", c->addr[i], c->node[i].port);
    FILE *p = popen(cmd, "r");
    char line[512];
    while (p && fgets(line, sizeof(line), p)) {
        line[strcspn(line, "\r\n")] = '\0';
        tap_diag("  %s", line);
    }
    if (p)
        pclose(p);
}

static void mode_failover(void)
{
    struct redis_cluster c;
    if (!cluster_up(&c, loopback6, NULL))
        return;
    const double timeout = 0.5;
    struct st_log lg = {.n = 0};
    kvrt_store *a = sq_open(c.url, 2.0, NULL, NULL);
    bool ok = a && sq_put(a, 0, SQ_SEQS);
    kvrt_store_close(a);
    sq_memory_bytes = 0;
    kvrt_store *b = sq_open(c.url, timeout, &lg, NULL);
    uint64_t wrong = 0;
    double slowest = 0;
    uint64_t loaded = ok && b ? sq_get_all(b, SQ_SEQS, &wrong, &slowest) : 0;
    tap_ok(ok && loaded == (uint64_t)SQ_SEQS * SQ_N && wrong == 0, "before: every token loads");
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
    struct kvrt_store_stats before = sq_stats(b);
    unsigned long long keys_before = primaries_keys(&c, -1);
    kill(c.node[victim].pid, SIGKILL);
    double t0 = sq_now(), recovered = -1, worst = 0;
    uint64_t misses = 0, during = 0, rounds = 0, most_down = 0;
    wrong = 0;
    while (sq_now() - t0 < 45) {
        loaded = sq_get_all(b, SQ_SEQS, &wrong, &slowest);
        rounds++;
        struct kvrt_store_stats now = sq_stats(b);
        most_down = now.shared_nodes_down > most_down ? now.shared_nodes_down : most_down;
        if (slowest > worst)
            worst = slowest;
        if (loaded == (uint64_t)SQ_SEQS * SQ_N) {
            recovered = sq_now() - t0;
            break;
        }
        misses += (uint64_t)SQ_SEQS * SQ_N - loaded;
        during += loaded;
        sq_nap(0.1);
    }
    tap_diag("recovered after %.2f s, %llu rounds, %llu tokens missed, %llu loaded meanwhile, slowest get %.3f s",
             recovered, (unsigned long long)rounds, (unsigned long long)misses, (unsigned long long)during, worst);
    tap_ok(wrong == 0, "every get during the failover exact or a miss (%llu cells wrong)", (unsigned long long)wrong);
    tap_ok(worst <= timeout + 0.4, "no get took longer than the %.1f s deadline and a little (slowest %.3f s)", timeout,
           worst);
    tap_ok(recovered < 0 || rounds == 1 || during > 0,
           "while the primary was gone the other nodes kept serving (%llu tokens loaded)", (unsigned long long)during);
    /* A replica promoted without its primary's data (a full resync cut by
     * the kill, seen on a loaded machine) leaves nothing to hit: that is
     * the cluster's loss, not the store's, and says nothing of it. */
    unsigned long long keys_after = recovered < 0 ? primaries_keys(&c, victim) : keys_before;
    if (keys_after < keys_before)
        tap_skip("the cluster lost keys in the failover (its primaries hold %llu of the %llu they held before the "
                 "kill): the promoted replica did not have its primary's data, so no store could hit it",
                 keys_after, keys_before);
    else
        tap_ok(recovered > 0,
               "after a replica's promotion the same store hits everything again in %.2f s, without "
               "reopening",
               recovered);
    if (recovered < 0) {
        int live = victim == 0 ? 1 : 0;
        tap_diag("the cluster as node %s:%d sees it:", c.addr[live], c.node[live].port);
        dump_nodes(&c, live);
        /* whether the promoted replica has the keys (a store that cannot
         * find them, or a replica that lost them) */
        for (int i = 0; i < RC_NODES; i++) {
            char size[64] = "", role[64] = "";
            if (i != victim && redis_cluster_cli(&c, i, "dbsize", size, sizeof(size)))
                redis_cluster_cli(&c, i, "role", role, sizeof(role));
            tap_diag("  node %s:%d: %s keys, %s", c.addr[i], c.node[i].port, i == victim ? "-" : size,
                     i == victim ? "killed" : role);
        }
        kvrt_store *fresh = sq_open(c.url, timeout, NULL, NULL);
        uint64_t w = 0;
        double sl = 0;
        tap_diag("a store opened now loads %llu of %llu tokens",
                 (unsigned long long)(fresh ? sq_get_all(fresh, SQ_SEQS, &w, &sl) : 0),
                 (unsigned long long)SQ_SEQS * SQ_N);
        kvrt_store_close(fresh);
    }
    struct kvrt_store_stats st = sq_stats(b);
    tap_ok(st.shared_up, "and says the tier is up (warnings: %d, first: %s)", lg.n, lg.n ? lg.lines[0] : "none");
    tap_ok(before.shared_nodes_down == 0 && most_down == 1 && st.shared_nodes_down == 0,
           "stats: shared_nodes_down 0 before the kill, 1 while the primary was gone, %llu after",
           (unsigned long long)st.shared_nodes_down);
    tap_ok(st.shared_map_refreshes > before.shared_map_refreshes && st.shared_failovers == before.shared_failovers + 1,
           "stats: the map was learnt again (%llu -> %llu times) and one failover counted (%llu)",
           (unsigned long long)before.shared_map_refreshes, (unsigned long long)st.shared_map_refreshes,
           (unsigned long long)st.shared_failovers);
    kvrt_store_close(b);
    redis_cluster_stop(&c);
}

/* ---- resharding under load -------------------------------------------------- */

static void mode_reshard(void)
{
    struct redis_cluster c;
    if (!cluster_up(&c, loopback6, NULL))
        return;
    kvrt_store *a = sq_open(c.url, 2.0, NULL, NULL);
    bool ok = a && sq_put(a, 0, SQ_SEQS);
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
    sq_memory_bytes = 0;
    kvrt_store *b = sq_open(c.url, 1.0, NULL, NULL);
    uint64_t wrong = 0, rounds = 0, missed = 0;
    double slowest = 0, worst = 0, t0 = sq_now();
    int status = 0;
    for (;;) {
        uint64_t loaded = sq_get_all(b, SQ_SEQS, &wrong, &slowest);
        missed += (uint64_t)SQ_SEQS * SQ_N - loaded;
        /* and new puts while the slots move */
        sq_put(a, SQ_SEQS + (int)rounds % 8, SQ_SEQS + (int)rounds % 8 + 1);
        rounds++;
        worst = slowest > worst ? slowest : worst;
        if (waitpid(pid, &status, WNOHANG) == pid)
            break;
        if (sq_now() - t0 > 120) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
    }
    tap_diag("reshard of 3000 slots took %.1f s: %llu rounds of %d gets, %llu tokens missed, slowest get %.3f s",
             sq_now() - t0, (unsigned long long)rounds, SQ_SEQS, (unsigned long long)missed, worst);
    tap_ok(ok && WIFEXITED(status) && WEXITSTATUS(status) == 0, "redis-cli --cluster reshard moved 3000 slots");
    tap_ok(wrong == 0, "every get under resharding exact or a miss (%llu cells wrong)", (unsigned long long)wrong);
    uint64_t loaded = sq_get_all(b, SQ_SEQS, &wrong, &slowest);
    tap_ok(loaded == (uint64_t)SQ_SEQS * SQ_N && wrong == 0, "afterwards the same store loads every token exactly");
    kvrt_store *d = sq_open(c.url, 1.0, NULL, NULL);
    loaded = d ? sq_get_all(d, SQ_SEQS + 8, &wrong, &slowest) : 0;
    tap_ok(loaded == (uint64_t)(SQ_SEQS + 8) * SQ_N && wrong == 0,
           "and a fresh store finds everything, the puts made while slots moved included (%llu tokens)",
           (unsigned long long)loaded);
    kvrt_store_close(d);
    kvrt_store_close(b);
    kvrt_store_close(a);
    redis_cluster_stop(&c);
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
        n += snprintf(ns_del + n, sizeof(ns_del) - (size_t)n,
                      " ip link del kvc%d-%d 2>/dev/null; ip netns del %s "
                      "2>/dev/null;",
                      id, i, ns[i]);
    }
    atexit(ns_cleanup);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    ns_made = true;
    bool ok = sq_sh("ip link add %s type bridge && ip addr add 10.%d.0.1/24 dev %s && ip link set %s up", br, id, br,
                    br) == 0;
    for (int i = 0; i < 3 && ok; i++)
        ok = sq_sh("ip netns add %s && ip link add kvc%d-%d type veth peer name eth0 netns %s && ip link set kvc%d-%d "
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
        sq_memory_bytes = 0;
        kvrt_store *s = sq_open(c.url, 0.5, &lg, NULL);
        sq_sh("ip link set kvc%d-0 down", id);
        uint64_t wrong = 0;
        double slowest = 0;
        uint64_t loaded = s ? sq_get_all(s, SQ_SEQS, &wrong, &slowest) : 0;
        tap_ok(s && wrong == 0 && loaded > 0 && loaded < (uint64_t)SQ_SEQS * SQ_N && slowest <= 0.5 + 0.4,
               "namespace %s cut off: %llu of %d tokens load from the others, the slowest get %.2f s (deadline 0.5 "
               "s), %d warning(s): %s",
               ns[0], (unsigned long long)loaded, SQ_SEQS * SQ_N, slowest, lg.n, lg.n ? lg.lines[0] : "none");
        kvrt_store_close(s);
        sq_sh("ip link set kvc%d-0 up", id);
        redis_cluster_stop(&c);
    }
    ns_cleanup();
    char cmd[256];
    snprintf(cmd, sizeof(cmd),
             "ip netns list | grep -q kvrt-cl.-%d || ip link show %s >/dev/null 2>&1 || ip link show kvc%d-0 "
             ">/dev/null 2>&1",
             (int)getpid(), br, id);
    tap_ok(system(cmd) != 0, "the namespaces, the veth pairs and the bridge are gone");
}

/* ---- TLS ------------------------------------------------------------------- */

/* Whether every port CLUSTER SLOTS names (redis-cli prints the reply flat:
 * an address line, then its port) is one of the nodes' TLS ports (with
 * --port 0 a plain one would read 0); the ports into seen. */
static bool slots_name_tls_ports(const struct redis_cluster *c, char *seen, size_t size)
{
    char cmd[14400];
    snprintf(cmd, sizeof(cmd), "redis-cli %s -h %s -p %d cluster slots 2>&1", c->cli, c->addr[0], c->node[0].port);
    FILE *p = popen(cmd, "r");
    char line[128], prev[128] = "";
    int ports = 0;
    bool all = p != NULL;
    seen[0] = '\0';
    while (p && fgets(line, sizeof(line), p)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strcmp(prev, c->addr[0]) == 0) {
            int port = atoi(line);
            bool known = false;
            for (int i = 0; i < RC_NODES; i++)
                known = known || port == c->node[i].port;
            all = all && known;
            ports++;
            size_t l = strlen(seen);
            snprintf(seen + l, size - l, "%s%s", l ? " " : "", line);
        }
        snprintf(prev, sizeof(prev), "%s", line);
    }
    if (p)
        pclose(p);
    return all && ports >= 3; /* a primary for each range; replicas once gossip names them */
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
    char *dir = st_tempdir("cluster-tls"), *other = st_tempdir("cluster-tls-other");
    char cert[4200], key[4200], ca[4200], ca_other[4200];
    snprintf(cert, sizeof(cert), "%s/server.pem", dir);
    snprintf(key, sizeof(key), "%s/server.key", dir);
    snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
    snprintf(ca_other, sizeof(ca_other), "%s/ca.pem", other);
    struct redis_cluster_tls tls = {cert, key, ca};
    struct redis_cluster c;
    double t0 = sq_now();
    if (!sq_make_pki(dir, "ca") || !sq_make_pki(other, "ca")) {
        tap_ok(false, "openssl made two CAs and their certificates");
    } else if (!redis_cluster_start_with(&c, loopback6, NULL, &tls, why, sizeof(why))) {
        tap_ok(false, "a cluster of 6 nodes speaking TLS only: %s", why);
    } else {
        tap_diag("TLS cluster %s up in %.1f s", c.url, sq_now() - t0);
        char seen[256];
        tap_ok(slots_name_tls_ports(&c, seen, sizeof(seen)),
               "CLUSTER SLOTS (tls-cluster yes, no plain port) names the nodes' TLS ports: %s", seen);
        struct st_log lg = {.n = 0};
        struct sq_files f = {.ca = ca};
        kvrt_store *a = sq_open(c.url, 2.0, &lg, &f);
        bool ok = a && sq_put(a, 0, SQ_SEQS);
        struct kvrt_store_stats st = a ? sq_stats(a) : (struct kvrt_store_stats){0};
        uint64_t entries = (uint64_t)SQ_SEQS * (SQ_N / SQ_T) * sq_model.heads, all = (uint64_t)SQ_SEQS * SQ_N;
        tap_ok(ok && st.written_shared == entries && st.write_failures == 0 && lg.n == 0,
               "%s with shared_ca_file: %llu of %llu entries written, %d warnings%s%s", c.url,
               (unsigned long long)st.written_shared, (unsigned long long)entries, lg.n, lg.n ? ": " : "",
               lg.n ? lg.lines[0] : "");
        kvrt_store_close(a);
        sq_memory_bytes = 0; /* every get asks the servers */
        kvrt_store *b = sq_open(c.url, 2.0, &lg, &f);
        uint64_t wrong = 0;
        double slowest = 0;
        uint64_t loaded = b ? sq_get_all(b, SQ_SEQS, &wrong, &slowest) : 0;
        tap_ok(loaded == all && wrong == 0 && lg.n == 0,
               "a fresh store loads every token exactly over TLS (%llu of %llu, %llu cells wrong)",
               (unsigned long long)loaded, (unsigned long long)all, (unsigned long long)wrong);
        /* a manual failover: a replica takes its primary's slots, the old
         * primary answers MOVED to it (the store's map is now stale) */
        int replica = -1;
        char role[64];
        for (int i = 0; i < RC_NODES && replica < 0; i++)
            if (redis_cluster_cli(&c, i, "role", role, sizeof(role)) && strcmp(role, "slave") == 0)
                replica = i;
        char out[256] = "";
        bool promoted = replica >= 0 && redis_cluster_cli(&c, replica, "cluster failover", out, sizeof(out));
        for (int tries = 0; promoted && tries < 200; tries++) {
            if (redis_cluster_cli(&c, replica, "role", role, sizeof(role)) && strcmp(role, "master") == 0)
                break;
            sq_nap(0.05);
        }
        promoted = promoted && strcmp(role, "master") == 0;
        struct kvrt_store_stats before = b ? sq_stats(b) : st;
        wrong = 0;
        loaded = promoted && b ? sq_get_all(b, SQ_SEQS, &wrong, &slowest) : 0;
        st = b ? sq_stats(b) : st;
        tap_ok(promoted && loaded == all && wrong == 0 && st.shared_moved > before.shared_moved &&
                   st.shared_map_refreshes > before.shared_map_refreshes,
               "after CLUSTER FAILOVER on node %d (%s) the same store follows MOVED over TLS: %llu of %llu tokens "
               "exact, %llu MOVED, map learnt %llu -> %llu times, %d warnings%s%s",
               replica, out, (unsigned long long)loaded, (unsigned long long)all,
               (unsigned long long)(st.shared_moved - before.shared_moved),
               (unsigned long long)before.shared_map_refreshes, (unsigned long long)st.shared_map_refreshes, lg.n,
               lg.n ? ": " : "", lg.n ? lg.lines[0] : "");
        kvrt_store_close(b);
        lg.n = 0;
        f.ca = ca_other;
        t0 = sq_now();
        kvrt_store *d = sq_open(c.url, 1.0, &lg, &f);
        loaded = d ? sq_get_all(d, 4, &wrong, &slowest) : 1;
        st = d ? sq_stats(d) : st;
        tap_ok(
            d && loaded == 0 && lg.n == 1 && strstr(lg.lines[0], "certificate") && !st.shared_up && sq_now() - t0 < 4,
            "nodes another CA signed: every get misses, one warning for both seeds: %s", lg.n ? lg.lines[0] : "none");
        kvrt_store_close(d);
        redis_cluster_stop(&c);
    }
    st_rmdir(dir);
    st_rmdir(other);
    free(dir);
    free(other);
}

int main(int argc, char **argv)
{
    tap_plan_dynamic();
    sq_init();
    const char *mode = argc > 1 ? argv[1] : "cluster";
    if (strcmp(mode, "cluster") == 0)
        mode_cluster();
    else if (strcmp(mode, "failover") == 0)
        mode_failover();
    else if (strcmp(mode, "reshard") == 0)
        mode_reshard();
    else if (strcmp(mode, "netns") == 0)
        mode_netns();
    else if (strcmp(mode, "tls") == 0)
        mode_tls();
    else
        tap_ok(false, "unknown mode %s", mode);
    kvrt_runtime_close(sq_rt);
    return tap_done();
}
