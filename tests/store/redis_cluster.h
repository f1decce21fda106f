/* A Redis Cluster of a test's own: 3 primaries and 3 replicas, each a
 * redis-server (redis_server.h) on a free port of its address, joined by
 * `redis-cli --cluster create --cluster-replicas 1`, with
 * cluster-node-timeout 1000 and cluster-require-full-coverage no; plain
 * TCP, or TLS only (clients, the cluster bus and replication). */
#ifndef KVRT_TESTS_REDIS_CLUSTER_H
#define KVRT_TESTS_REDIS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#include "redis_server.h"

#define RC_NODES 6

struct redis_cluster {
    struct redis_server node[RC_NODES];
    char addr[RC_NODES][64]; /* each node's bind address */
    char url[512];           /* redis:// (or rediss://) with two seeds */
    char cli[13000];         /* what redis-cli needs to reach a node (TLS) */
};

/* Certificate files of a TLS cluster: each node's certificate (it must
 * name the node's address) and key, and the CA that signed them, which
 * clients and nodes verify each other against. */
struct redis_cluster_tls {
    const char *cert, *key, *ca;
};

/* addrs/netns: per node (netns may be NULL, or entries NULL); false with
 * why.  Node i < 3 starts as a primary. */
bool redis_cluster_start(struct redis_cluster *c, const char *const addrs[RC_NODES], const char *const netns[RC_NODES],
                         char *why, size_t size);
/* The same, TLS only when tls is not NULL: --port 0, --tls-port,
 * --tls-cluster yes, --tls-replication yes (clients may present a
 * certificate, need not). */
bool redis_cluster_start_with(struct redis_cluster *c, const char *const addrs[RC_NODES],
                              const char *const netns[RC_NODES], const struct redis_cluster_tls *tls, char *why,
                              size_t size);
void redis_cluster_stop(struct redis_cluster *c);
/* Run redis-cli against node i with args; its first line of output. */
bool redis_cluster_cli(const struct redis_cluster *c, int i, const char *args, char *out, size_t size);

#endif
