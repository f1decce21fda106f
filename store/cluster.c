/*
 * The shared tier's Redis client, cluster-aware (cluster.h).
 *
 * Hand-written because Debian 12 has no C cluster client: hiredis 0.14
 * has neither cluster support nor TLS, and hiredis-cluster / libvalkey
 * are not packaged.  What the store needs is small -- GET, EXISTS, SET
 * and DEL of many keys at once, routed by slot -- and it needs it with
 * properties a general client does not give: one deadline per batch,
 * values read straight into entry buffers and bounded by their size,
 * SETs written from the entries' buffers (writev, no copy), and a node
 * that dies costing only its own slots.
 *
 * The map comes from CLUSTER SLOTS (primaries only: a replica's copy may
 * lag, and a stale entry would be refused by its checksum anyway, but a
 * miss is cheaper).  A server that answers CLUSTER SLOTS with "cluster
 * support disabled" (or does not know the command: a proxy) is one
 * server that owns every slot.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include "cluster.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/fail.h"

#define WINDOW 64                /* commands per node per round */
#define WINDOW_BYTES (16u << 20) /* and values (SET): a round's deadline is for this much */
#define MAP_BUDGET (8u << 20)    /* bytes a CLUSTER SLOTS reply may take */

/* A request's state: waiting for a window (again, after a redirection),
 * in a window until its reply is read, or done with. */
enum { REQ_FINISHED = 0, REQ_PENDING = 1, REQ_SENT = 2 };

/* One round's commands to a node. */
struct window {
    size_t at[WINDOW]; /* request indices */
    int n;
    uint64_t bytes;
    bool written; /* and its replies not yet read */
};

struct cluster_node {
    struct redis_addr addr;
    char name[REDIS_HOST_MAX + 10];
    struct redis_conn conn;
    double down_until; /* no attempt before */
    bool down;         /* failed, and said so */
    uint32_t slots;    /* how many slots the map gives it */
    /* two windows: a round's, written while the round before's replies
     * are still to be read, so that the server always has the next
     * commands in hand (it never waits for the client between rounds) */
    struct window win[2];
    struct iovec iov[4 * WINDOW];
    struct iovec *out; /* what is left to write of iov */
    int out_n;
};

static const char ASKING[] = "*1\r\n$6\r\nASKING\r\n";
static const char CRLF[] = "\r\n";

void cluster_init(struct cluster *cl, const struct cluster_config *cfg)
{
    memset(cl, 0, sizeof(*cl));
    cl->cfg = cfg;
}

void cluster_free(struct cluster *cl)
{
    for (int k = 0; k < cl->num_nodes; k++) {
        redis_conn_close(&cl->nodes[k]->conn);
        free(cl->nodes[k]);
    }
    cl->num_nodes = 0;
}

/* The node at a, added when new; -1 when the table is full. */
static int node_at(struct cluster *cl, const struct redis_addr *a)
{
    for (int k = 0; k < cl->num_nodes; k++)
        if (cl->nodes[k]->addr.port == a->port && strcmp(cl->nodes[k]->addr.host, a->host) == 0)
            return k;
    if (cl->num_nodes == CLUSTER_MAX_NODES)
        return -1;
    struct cluster_node *n = calloc(1, sizeof(*n));
    if (!n)
        return -1;
    n->addr = *a;
    redis_addr_format(a, n->name, sizeof(n->name));
    redis_conn_init(&n->conn);
    cl->nodes[cl->num_nodes] = n;
    return cl->num_nodes++;
}

static void node_failed(struct cluster *cl, int k, const char *why)
{
    struct cluster_node *n = cl->nodes[k];
    redis_conn_close(&n->conn);
    double now = base_now();
    n->down_until = now + cl->cfg->backoff_s;
    if (cl->is_cluster) {
        /* a replica may take its slots: ask for the map after the back-off */
        if (!cl->refresh || cl->refresh_at < now)
            cl->refresh_at = now + cl->cfg->backoff_s;
        cl->refresh = true;
    }
    if (cl->discovering) {
        /* said once for every seed, by ensure_map; the node is not marked
         * down, so that once a map names it, its next failure is warned
         * about (and counted) as a node's */
        if (!cl->seeds_why[0])
            snprintf(cl->seeds_why, sizeof(cl->seeds_why), "%s%s%s", cl->cfg->url->num_seeds > 1 ? n->name : "",
                     cl->cfg->url->num_seeds > 1 ? ": " : "", why && why[0] ? why : "no reply");
        return;
    }
    if (!n->down) {
        n->down = true;
        if (cl->cfg->event)
            cl->cfg->event(cl->cfg->event_user, n->name, CLUSTER_NODE_DOWN, why && why[0] ? why : "no reply",
                           cl->is_cluster || cl->cfg->url->num_seeds > 1);
    }
}

/* AUTH [user] password, as the protocol spells it. */
static bool authenticate(struct cluster *cl, struct cluster_node *n, double deadline)
{
    const struct cluster_config *cfg = cl->cfg;
    const char *user = cfg->user && cfg->user[0] ? cfg->user : NULL;
    const char *pass = cfg->password ? cfg->password : "";
    char head[64];
    int hl = user ? snprintf(head, sizeof(head), "*3\r\n$4\r\nAUTH\r\n$%zu\r\n", strlen(user))
                  : snprintf(head, sizeof(head), "*2\r\n$4\r\nAUTH\r\n");
    char plen[32];
    int pl = snprintf(plen, sizeof(plen), "$%zu\r\n", strlen(pass));
    struct iovec iov[] = {{head, (size_t)hl},           {(void *)(user ? user : ""), user ? strlen(user) : 0},
                          {(void *)CRLF, user ? 2 : 0}, {plen, (size_t)pl},
                          {(void *)pass, strlen(pass)}, {(void *)CRLF, 2}};
    if (!redis_conn_writev(&n->conn, iov, 6, deadline))
        return false;
    struct resp_reply r;
    enum resp_result res = resp_read_status(&r, &n->conn, deadline);
    if (res == RESP_VALUE)
        return true;
    if (res != RESP_FAILED)
        redis_conn_fail(&n->conn, "the server refused AUTH%s%s: %s", user ? " as user " : "", user ? user : "",
                        res == RESP_ERROR ? r.text : "a redirection");
    return false;
}

/* Connected (and authenticated) by the deadline, unless in back-off. */
static bool node_ready(struct cluster *cl, int k, double deadline)
{
    struct cluster_node *n = cl->nodes[k];
    if (redis_conn_is_open(&n->conn))
        return true;
    if (base_now() < n->down_until)
        return false;
    if (!redis_conn_open(&n->conn, &n->addr, cl->cfg->tls, deadline) ||
        ((cl->cfg->password || cl->cfg->user) && !authenticate(cl, n, deadline))) {
        node_failed(cl, k, n->conn.why);
        return false;
    }
    return true;
}

/* Node k gave a well-formed reply: if it was down, it is back (a
 * connection alone does not count: a server may accept and then answer
 * nonsense). */
static void node_answered(struct cluster *cl, int k)
{
    struct cluster_node *n = cl->nodes[k];
    if (n->down) {
        n->down = false;
        if (cl->cfg->event)
            cl->cfg->event(cl->cfg->event_user, n->name, CLUSTER_NODE_UP, NULL,
                           cl->is_cluster || cl->cfg->url->num_seeds > 1);
    }
}

/* One entry of CLUSTER SLOTS: [start, end, [host, port, ...], replicas...]
 * into owner; false when it is not that. */
static bool slot_range(struct cluster *cl, int from, const struct resp_node *e, uint8_t *owner)
{
    if (e->type != '*' || e->integer < 3)
        return false;
    const struct resp_node *s = &e->elem[0], *t = &e->elem[1], *p = &e->elem[2];
    if (s->type != ':' || t->type != ':' || s->integer < 0 || t->integer < s->integer || t->integer >= REDIS_SLOTS ||
        p->type != '*' || p->integer < 2 || p->elem[0].type != '$' || p->elem[1].type != ':' ||
        p->elem[1].integer < 1 || p->elem[1].integer > 65535 || p->elem[0].len >= REDIS_HOST_MAX)
        return false;
    struct redis_addr a;
    /* an empty host (or "?"): the node that was asked names itself so */
    if (p->elem[0].len == 0 || strcmp(p->elem[0].str, "?") == 0)
        snprintf(a.host, sizeof(a.host), "%s", cl->nodes[from]->addr.host);
    else
        memcpy(a.host, p->elem[0].str, p->elem[0].len + 1);
    a.port = (int)p->elem[1].integer;
    int k = node_at(cl, &a);
    if (k < 0)
        return false;
    for (int64_t i = s->integer; i <= t->integer; i++)
        owner[i] = (uint8_t)(k + 1);
    return true;
}

/* Ask node k for the map; false when it could not tell. */
static bool learn(struct cluster *cl, int k, double deadline)
{
    if (!node_ready(cl, k, deadline))
        return false;
    struct cluster_node *n = cl->nodes[k];
    static const char cmd[] = "*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";
    struct iovec iov = {(void *)cmd, sizeof(cmd) - 1};
    struct resp_node *t = NULL;
    if (!redis_conn_writev(&n->conn, &iov, 1, deadline) || !(t = resp_read_tree(&n->conn, MAP_BUDGET, deadline))) {
        node_failed(cl, k, n->conn.why);
        return false;
    }
    bool ok = false;
    if (t->type == '-' && (strstr(t->str, "cluster support disabled") || strstr(t->str, "unknown command"))) {
        memset(cl->owner, k + 1, sizeof(cl->owner));
        cl->is_cluster = false;
        ok = true;
    } else if (t->type == '*') {
        uint8_t owner[REDIS_SLOTS];
        memset(owner, 0, sizeof(owner));
        ok = true;
        for (int64_t i = 0; ok && i < t->integer; i++)
            ok = slot_range(cl, k, &t->elem[i], owner);
        if (ok) {
            memcpy(cl->owner, owner, sizeof(owner));
            cl->is_cluster = true;
        }
    }
    if (!ok) {
        char why[300];
        snprintf(why, sizeof(why), "a reply to CLUSTER SLOTS that is not a slot map%s%.200s",
                 t->type == '-' ? ": " : "", t->type == '-' ? t->str : "");
        resp_tree_free(t);
        redis_conn_fail(&n->conn, "%s", why);
        node_failed(cl, k, n->conn.why);
        return false;
    }
    resp_tree_free(t);
    node_answered(cl, k);
    for (int j = 0; j < cl->num_nodes; j++)
        cl->nodes[j]->slots = 0;
    for (int s = 0; s < REDIS_SLOTS; s++)
        if (cl->owner[s])
            cl->nodes[cl->owner[s] - 1]->slots++;
    /* a dead primary whose replica took over: no longer a node of ours */
    for (int j = 0; cl->is_cluster && j < cl->num_nodes; j++)
        if (cl->nodes[j]->down && cl->nodes[j]->slots == 0) {
            cl->nodes[j]->down = false;
            if (cl->cfg->event)
                cl->cfg->event(cl->cfg->event_user, cl->nodes[j]->name, CLUSTER_NODE_RETIRED, NULL, true);
        }
    cl->known = true;
    cl->refresh = false;
    cl->maps++;
    if (cl->seeds_down) {
        cl->seeds_down = false;
        if (cl->cfg->event)
            cl->cfg->event(cl->cfg->event_user, "", CLUSTER_NODE_UP, NULL, false);
    }
    return true;
}

/* The map, learnt or refreshed when due: from nodes that are up, then
 * the URL's seeds. */
static void ensure_map(struct cluster *cl, double deadline)
{
    double now = base_now();
    if (cl->known && !(cl->is_cluster && cl->refresh && now >= cl->refresh_at))
        return;
    int order[CLUSTER_MAX_NODES + REDIS_URL_MAX_SEEDS], m = 0;
    for (int k = 0; cl->known && k < cl->num_nodes; k++)
        if (!cl->nodes[k]->down && (cl->nodes[k]->slots > 0 || !cl->is_cluster))
            order[m++] = k;
    for (int i = 0; i < cl->cfg->url->num_seeds; i++) {
        int k = node_at(cl, &cl->cfg->url->seeds[i]);
        if (k >= 0)
            order[m++] = k;
    }
    cl->discovering = !cl->known;
    cl->seeds_why[0] = '\0';
    bool learnt = false;
    for (int i = 0; i < m && !learnt && base_now() < deadline; i++)
        learnt = learn(cl, order[i], deadline);
    cl->discovering = false;
    if (!cl->known && cl->seeds_why[0] && !cl->seeds_down) {
        /* one line for the tier, naming the first seed's failure */
        char why[340];
        snprintf(why, sizeof(why), "%s%s", cl->cfg->url->num_seeds > 1 ? "no seed answered; " : "", cl->seeds_why);
        cl->seeds_down = true;
        if (cl->cfg->event)
            cl->cfg->event(cl->cfg->event_user, "", CLUSTER_NODE_DOWN, why, false);
    }
    if (!learnt && cl->known)
        cl->refresh_at = base_now() + cl->cfg->backoff_s;
}

static const char *cmd_name(enum cluster_cmd cmd)
{
    switch (cmd) {
    case CLUSTER_GET: return "GET";
    case CLUSTER_EXISTS: return "EXISTS";
    case CLUSTER_SET: return "SET";
    default: return "DEL";
    }
}

/* The command up to the value (SET) or whole (the others). */
static bool make_head(enum cluster_cmd cmd, struct cluster_req *q)
{
    const char *name = cmd_name(cmd);
    size_t nl = strlen(name);
    int len = snprintf(q->head, sizeof(q->head), "*%d\r\n$%zu\r\n%s\r\n$%zu\r\n", cmd == CLUSTER_SET ? 3 : 2, nl, name,
                       q->key_len);
    if (len < 0 || (size_t)len + q->key_len + 2 + 24 > sizeof(q->head))
        return false;
    memcpy(q->head + len, q->key, q->key_len);
    len += (int)q->key_len;
    len += snprintf(q->head + len, sizeof(q->head) - (size_t)len, "\r\n");
    if (cmd == CLUSTER_SET)
        len += snprintf(q->head + len, sizeof(q->head) - (size_t)len, "$%llu\r\n", ULL(q->val_len));
    q->head_len = (size_t)len;
    return true;
}

/* Node k failed: the commands of both its windows miss, even those read
 * already (a batch is one chunk: half of one is no use). */
static void window_failed(struct cluster *cl, int k, struct cluster_req *r)
{
    struct cluster_node *n = cl->nodes[k];
    for (int w = 0; w < 2; w++) {
        for (int j = 0; j < n->win[w].n; j++) {
            r[n->win[w].at[j]].done = false;
            r[n->win[w].at[j]].state = REQ_FINISHED;
        }
        n->win[w].n = 0;
        n->win[w].written = false;
    }
    node_failed(cl, k, n->conn.why);
}

/* The replies to node k's window w, in order. */
static void read_window(struct cluster *cl, int k, int w, enum cluster_cmd cmd, struct cluster_req *r, double deadline)
{
    struct cluster_node *n = cl->nodes[k];
    struct window *win = &n->win[w];
    for (int j = 0; j < win->n; j++) {
        struct cluster_req *q = &r[win->at[j]];
        struct resp_reply rep;
        rep.text[0] = '\0';
        if (q->ask && resp_read_status(&rep, &n->conn, deadline) == RESP_FAILED) {
            window_failed(cl, k, r);
            return;
        }
        enum resp_result res;
        if (cmd == CLUSTER_GET)
            res = resp_read_bulk(&n->conn, q->dst, q->cap, &q->len, &rep, deadline);
        else if (cmd == CLUSTER_SET)
            res = resp_read_status(&rep, &n->conn, deadline);
        else
            res = resp_read_integer(&n->conn, &q->integer, &rep, deadline);
        q->state = REQ_FINISHED;
        if (res != RESP_FAILED)
            node_answered(cl, k);
        switch (res) {
        case RESP_VALUE:
            q->done = true;
            if (cmd == CLUSTER_GET && cl->arrived)
                cl->arrived(cl->arrived_user, win->at[j], q->dst, q->len);
            break;
        case RESP_NIL: break;
        case RESP_ERROR:
            if (!cl->refused[0])
                snprintf(cl->refused, sizeof(cl->refused), "%s", rep.text);
            break;
        case RESP_MOVED:
        case RESP_ASK:
            if (q->tries == 0) {
                if (!rep.to.host[0])
                    snprintf(rep.to.host, sizeof(rep.to.host), "%s", n->addr.host);
                int to = node_at(cl, &rep.to);
                if (to >= 0) {
                    q->node = to;
                    q->ask = res == RESP_ASK;
                    cl->moved += res == RESP_MOVED;
                    cl->asked += res == RESP_ASK;
                    q->tries++;
                    q->state = REQ_PENDING;
                }
            }
            if (res == RESP_MOVED) {
                cl->refresh = true;
                cl->refresh_at = base_now();
            }
            break;
        case RESP_FAILED: window_failed(cl, k, r); return;
        }
    }
    win->n = 0;
    win->written = false;
}

/* Node k's window could not be written: its commands miss. */
static int write_failed(struct cluster *cl, int k, struct cluster_req *r)
{
    cl->nodes[k]->out_n = 0;
    window_failed(cl, k, r);
    return 1;
}

/* Every node's window `cur` out by the deadline, all at once: each socket
 * is given what it takes whenever poll says it has room, so that every
 * server reads while the others do.  Written one node after the other, a
 * window of up to 16 MiB held the writer on one node while the others
 * had only what their socket buffers held (a few MiB on loopback, less
 * across a network with a round trip to wait for).  A TLS connection is
 * written whole, in turn.  The failures, a node each. */
static int write_windows(struct cluster *cl, int cur, struct cluster_req *r, double deadline)
{
    int failures = 0;
    struct pollfd p[CLUSTER_MAX_NODES];
    int at[CLUSTER_MAX_NODES];
    for (;;) {
        int np = 0;
        for (int k = 0; k < cl->num_nodes; k++) {
            struct cluster_node *nd = cl->nodes[k];
            if (!nd->win[cur].written || nd->out_n == 0)
                continue;
            bool ok;
            if (nd->conn.ssl) {
                ok = redis_conn_writev(&nd->conn, nd->out, nd->out_n, deadline);
                nd->out_n = 0;
            } else {
                ok = redis_conn_write_some(&nd->conn, &nd->out, &nd->out_n);
            }
            if (!ok) {
                failures += write_failed(cl, k, r);
            } else if (nd->out_n > 0) {
                p[np] = (struct pollfd){.fd = nd->conn.fd, .events = POLLOUT};
                at[np++] = k;
            }
        }
        if (np == 0)
            return failures;
        double left = deadline - base_now();
        int got = left > 0 ? poll(p, (nfds_t)np, (int)(left * 1000) + 1) : 0;
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            /* out of time (or poll failed): what is not out misses */
            for (int i = 0; i < np; i++) {
                redis_conn_fail(&cl->nodes[at[i]]->conn, "%s",
                                got == 0 ? "could not send within the timeout: the server is not reading"
                                         : "poll failed");
                failures += write_failed(cl, at[i], r);
            }
            return failures;
        }
    }
}

int cluster_run(struct cluster *cl, enum cluster_cmd cmd, struct cluster_req *r, size_t n, double timeout_s,
                bool per_round)
{
    double deadline = base_now() + timeout_s;
    cl->refused[0] = '\0';
    ensure_map(cl, deadline);
    for (size_t i = 0; i < n; i++) {
        struct cluster_req *q = &r[i];
        q->done = false;
        q->len = 0;
        q->integer = 0;
        q->tries = 0;
        q->ask = false;
        q->slot = cl->is_cluster ? redis_key_slot(q->key, q->key_len) : 0;
        q->node = cl->known ? cl->owner[q->slot] - 1 : -1;
        q->state = q->node >= 0 && make_head(cmd, q) ? REQ_PENDING : REQ_FINISHED;
    }
    int failures = 0, rounds = 0, cur = 0;
    for (int k = 0; k < cl->num_nodes; k++)
        memset(cl->nodes[k]->win, 0, sizeof(cl->nodes[k]->win));
    for (;;) {
        int prev = 1 - cur;
        bool any = false, waiting = false;
        for (size_t i = 0; i < n; i++) {
            struct cluster_node *nd = r[i].state == REQ_PENDING ? cl->nodes[r[i].node] : NULL;
            struct window *w = nd ? &nd->win[cur] : NULL;
            if (w && w->n < WINDOW && (w->n == 0 || w->bytes < WINDOW_BYTES)) {
                w->at[w->n++] = i;
                w->bytes += r[i].val_len;
                r[i].state = REQ_SENT;
                any = true;
            }
        }
        for (int k = 0; k < cl->num_nodes; k++)
            waiting = waiting || cl->nodes[k]->win[prev].written;
        if (!any && !waiting)
            break;
        if (any && per_round && rounds++ > 0)
            deadline = base_now() + timeout_s;
        if (any && base_now() >= deadline) {
            /* what is not out yet misses; what is out is read (or times
             * out, failing its node), so that no reply stays behind on a
             * connection */
            for (int k = 0; k < cl->num_nodes; k++) {
                struct window *w = &cl->nodes[k]->win[cur];
                for (int j = 0; j < w->n; j++)
                    r[w->at[j]].state = REQ_FINISHED;
                w->n = 0;
            }
            for (size_t i = 0; i < n; i++)
                if (r[i].state == REQ_PENDING)
                    r[i].state = REQ_FINISHED;
            any = false;
        }
        /* every node's window out, then the replies to the round before */
        for (int k = 0; any && k < cl->num_nodes; k++) {
            struct cluster_node *nd = cl->nodes[k];
            struct window *w = &nd->win[cur];
            if (!w->n)
                continue;
            bool was_down = nd->down;
            if (!node_ready(cl, k, deadline)) {
                failures += !was_down;
                for (int j = 0; j < w->n; j++)
                    r[w->at[j]].state = REQ_FINISHED;
                w->n = 0;
                continue;
            }
            int v = 0;
            for (int j = 0; j < w->n; j++) {
                struct cluster_req *q = &r[w->at[j]];
                if (q->ask)
                    nd->iov[v++] = (struct iovec){(void *)ASKING, sizeof(ASKING) - 1};
                nd->iov[v++] = (struct iovec){q->head, q->head_len};
                if (cmd == CLUSTER_SET) {
                    nd->iov[v++] = (struct iovec){(void *)q->val, q->val_len};
                    nd->iov[v++] = (struct iovec){(void *)CRLF, 2};
                }
            }
            nd->out = nd->iov;
            nd->out_n = v;
            w->written = true;
        }
        if (any)
            failures += write_windows(cl, cur, r, deadline);
        for (int k = 0; k < cl->num_nodes; k++)
            if (cl->nodes[k]->win[prev].written) {
                read_window(cl, k, prev, cmd, r, deadline);
                failures += !redis_conn_is_open(&cl->nodes[k]->conn);
            }
        cur = prev;
    }
    return failures;
}
