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
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "redis-cli -h %s -p %d %s 2>&1", c->addr[i], c->node[i].port, args);
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
    memset(c, 0, sizeof(*c));
    static const char *const extra[] = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                        "--cluster-node-timeout", "1000", "--cluster-require-full-coverage", "no",
                                        /* a replica may take over however long
                                         * its link was down */
                                        "--cluster-replica-validity-factor", "0", NULL};
    for (int i = 0; i < RC_NODES; i++) {
        snprintf(c->addr[i], sizeof(c->addr[i]), "%s", addrs[i]);
        if (!redis_server_start_with(&c->node[i], addrs[i], netns ? netns[i] : NULL, extra, NULL, why, size)) {
            redis_cluster_stop(c);
            return false;
        }
    }
    char cmd[2048];
    int n = snprintf(cmd, sizeof(cmd), "redis-cli --cluster create");
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
                char link[512];
                snprintf(link, sizeof(link), "redis-cli -h %s -p %d info replication | grep -q 'master_link_status:up'",
                         c->addr[i], c->node[i].port);
                all = system(link) == 0;
            }
        }
        if (all) {
            snprintf(c->url, sizeof(c->url), "redis://%s:%d,%s:%d", c->addr[0], c->node[0].port, c->addr[1],
                     c->node[1].port);
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
