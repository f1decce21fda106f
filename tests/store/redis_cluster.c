/* Starting and stopping a test's own Redis Cluster (redis_cluster.h). */
#include "redis_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tap.h"

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

bool redis_cluster_cli(const struct redis_cluster *c, int i, const char *args, char *out, size_t size)
{
    char cmd[14400];
    snprintf(cmd, sizeof(cmd), "redis-cli %s -h %s -p %d %s 2>&1", c->cli, c->addr[i], c->node[i].port, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return false;
    out[0] = '\0';
    bool got = fgets(out, (int)size, p) != NULL;
    char sink[4096];
    while (fgets(sink, sizeof(sink), p))
        ;
    int st = pclose(p);
    out[strcspn(out, "\r\n")] = '\0';
    return got && st == 0;
}

bool redis_cluster_start(struct redis_cluster *c, const char *const addrs[RC_NODES], const char *const netns[RC_NODES],
                         char *why, size_t size)
{
    return redis_cluster_start_with(c, addrs, netns, NULL, why, size);
}

bool redis_cluster_start_with(struct redis_cluster *c, const char *const addrs[RC_NODES],
                              const char *const netns[RC_NODES], const struct redis_cluster_tls *tls, char *why,
                              size_t size)
{
    memset(c, 0, sizeof(*c));
    const char *extra[32] = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                             "--cluster-node-timeout", "1000", "--cluster-require-full-coverage", "no",
                             /* a replica may take over however long its
                              * link was down */
                             "--cluster-replica-validity-factor", "0", NULL};
    if (tls) {
        /* "--tls-port PORT" makes redis_server_start_with turn the plain
         * port off; the bus and replication speak TLS too, and each node
         * presents its certificate to the others as a client */
        const char *more[] = {"--tls-port",
                              "PORT",
                              "--tls-cert-file",
                              tls->cert,
                              "--tls-key-file",
                              tls->key,
                              "--tls-ca-cert-file",
                              tls->ca,
                              "--tls-auth-clients",
                              "optional",
                              "--tls-cluster",
                              "yes",
                              "--tls-replication",
                              "yes",
                              NULL};
        int n = 10;
        for (int i = 0; more[i]; i++)
            extra[n++] = more[i];
        extra[n] = NULL;
        snprintf(c->cli, sizeof(c->cli), "--tls --cacert %s", tls->ca);
    }
    for (int i = 0; i < RC_NODES; i++) {
        snprintf(c->addr[i], sizeof(c->addr[i]), "%s", addrs[i]);
        if (!redis_server_start_with(&c->node[i], addrs[i], netns ? netns[i] : NULL, extra, tls ? c->cli : NULL, why,
                                     size)) {
            redis_cluster_stop(c);
            return false;
        }
    }
    char cmd[16384];
    int n = snprintf(cmd, sizeof(cmd), "redis-cli %s --cluster create", c->cli);
    for (int i = 0; i < RC_NODES; i++)
        n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, " %s:%d", c->addr[i], c->node[i].port);
    snprintf(cmd + n, sizeof(cmd) - (size_t)n, " --cluster-replicas 1 --cluster-yes >/dev/null 2>&1");
    if (system(cmd) != 0) {
        snprintf(why, size, "redis-cli --cluster create failed");
        redis_cluster_stop(c);
        return false;
    }
    /* every node sees the whole cluster and every slot served, and every
     * replica has its primary's data (else it cannot take over) */
    for (int tries = 0; tries < 200; tries++) {
        bool all = true;
        for (int i = 0; i < RC_NODES && all; i++) {
            char out[256];
            all = redis_cluster_cli(c, i, "cluster info", out, sizeof(out)) && strstr(out, "cluster_state:ok");
            if (all && redis_cluster_cli(c, i, "role", out, sizeof(out)) && strcmp(out, "slave") == 0) {
                char link[14400];
                snprintf(link, sizeof(link),
                         "redis-cli %s -h %s -p %d info replication | grep -q 'master_link_status:up'", c->cli,
                         c->addr[i], c->node[i].port);
                all = system(link) == 0;
            }
        }
        if (all) {
            snprintf(c->url, sizeof(c->url), "%s://%s:%d,%s:%d", tls ? "rediss" : "redis", c->addr[0], c->node[0].port,
                     c->addr[1], c->node[1].port);
            return true;
        }
        nap(0.05);
    }
    snprintf(why, size, "the cluster did not reach cluster_state:ok in 10 s");
    redis_cluster_stop(c);
    return false;
}

void redis_cluster_stop(struct redis_cluster *c)
{
    for (int i = 0; i < RC_NODES; i++)
        redis_server_stop(&c->node[i]);
}
