/*
 * The shared tier's client: one server, or a Redis Cluster learnt from
 * any of its nodes (cluster.c says why it is the store's own).  A batch
 * of commands of one kind (GET, EXISTS, SET or DEL of many keys) is
 * routed by key slot, written as one pipeline per node -- every node's
 * before any reply is read, so the nodes work at once -- and read back
 * per node in order.  MOVED is followed once (the map refreshed after),
 * ASK once (ASKING first); a node that fails costs its own keys a miss,
 * not the others', and is not tried again before a back-off.  One
 * deadline bounds the whole batch, discovery included.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_CLUSTER_H
#define KVRT_STORE_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "redis_conn.h"
#include "redis_slot.h"
#include "redis_url.h"
#include "resp.h"

#define CLUSTER_MAX_NODES 128

/* What every client of one tier shares (read-only once set). */
struct cluster_config {
    const struct redis_url *url;
    SSL_CTX *tls;         /* NULL: plain TCP */
    const char *user;     /* ACL user or NULL */
    const char *password; /* NULL: no AUTH */
    double backoff_s;     /* a failed node: no new attempt before */
    /* A node failed (CLUSTER_NODE_DOWN, why), answers again
     * (CLUSTER_NODE_UP) or, down, was left out of a new map
     * (CLUSTER_NODE_RETIRED: another serves its slots); cluster tells
     * whether the client talks to a cluster (or several seeds).  Node ""
     * is the whole tier: no seed answered before a map was known. */
    void (*event)(void *user, const char *node, int what, const char *why, bool cluster);
    void *event_user;
};

enum { CLUSTER_NODE_DOWN, CLUSTER_NODE_UP, CLUSTER_NODE_RETIRED };

enum cluster_cmd { CLUSTER_GET, CLUSTER_EXISTS, CLUSTER_SET, CLUSTER_DEL };

struct cluster_req {
    /* in */
    const char *key;
    size_t key_len;
    uint8_t *dst;       /* GET: the value's room */
    uint64_t cap;       /* GET: at most this many bytes */
    const uint8_t *val; /* SET */
    uint64_t val_len;
    /* out: done true when the server answered with a value (GET), an
     * integer (EXISTS, DEL) or +OK (SET) */
    bool done;
    uint64_t len;    /* GET: the value's size */
    int64_t integer; /* EXISTS, DEL */
    /* the client's */
    int state;
    int node;
    int tries;
    bool ask;
    unsigned slot;
    size_t head_len;
    char head[96];
};

struct cluster_node;

struct cluster {
    const struct cluster_config *cfg;
    bool known;      /* the mode below was learnt */
    bool is_cluster; /* else one server: every slot its */
    int num_nodes;
    struct cluster_node *nodes[CLUSTER_MAX_NODES];
    uint8_t owner[REDIS_SLOTS]; /* node index + 1; 0: no node serves it */
    bool refresh;               /* learn the map again ... */
    double refresh_at;          /* ... not before this */
    char refused[256];          /* the first error reply of the last batch */
    /* since the owner last took them (shared.c sums both clients'):
     * maps learnt, MOVED and ASK followed */
    uint64_t maps, moved, asked;
    /* discovery: seeds that fail before any map is known are one outage
     * of the tier (one event, node ""), not one per seed */
    bool discovering, seeds_down;
    char seeds_why[300];
    /* GET: called as request i's value has arrived, before the next reply
     * is read, so that checking it overlaps the server sending the next
     * (NULL: none).  A value whose node then fails is still a miss. */
    void (*arrived)(void *user, size_t i, uint8_t *value, uint64_t len);
    void *arrived_user;
};

void cluster_init(struct cluster *cl, const struct cluster_config *cfg);
void cluster_free(struct cluster *cl);
/* Run n commands within timeout_s seconds -- the whole batch, or, with
 * per_round, each round of at most 64 commands and 16 MiB of values per
 * node (a batch of puts may hold hundreds of MiB) -- each req's done/len/integer say what came
 * back.  Returns how many nodes failed during the batch. */
int cluster_run(struct cluster *cl, enum cluster_cmd cmd, struct cluster_req *r, size_t n, double timeout_s,
                bool per_round);

#endif
