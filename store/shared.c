/* The shared tier: entries on a Redis-protocol server (Redis, Valkey, a
 * proxy) or a Redis Cluster, through the store's own client (cluster.c,
 * redis_conn.c, resp.c), so that engines on several hosts share one
 * store.  Values are the entry bytes the disk tier holds (header and
 * checksum included); keys are "kvrt:" and the entry's database key.
 *
 * An unreachable or failing server is a miss, never an error: one
 * deadline (shared_timeout) bounds every call, each node's failure is
 * warned about in one line per outage, and a failed node is not tried
 * again before a back-off (each call would otherwise wait out the
 * deadline).  Two clients: the foreground one (gets, lookups, drops,
 * under fg_lock) and the writer thread's (puts), so that a put never
 * waits behind a get.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>

#include "base/secret_file.h"
#include "events.h"
#include "shared.h"
#include "warn.h"

#define KEY_PREFIX "kvrt:"
#define KEY_BYTES (sizeof(KEY_PREFIX) - 1 + STORE_DBKEY_BYTES)
/* Pause after a node fails before it is tried (and the map asked) again. */
#define RETRY_S 1.0

/* A node failed, answers again or was replaced: one line each, one
 * outage one line however many clients see it. */
static void on_event(void *user, const char *node, int what, const char *why, bool cluster)
{
    struct shared_tier *t = user;
    pthread_mutex_lock(&t->lock);
    int at = -1;
    for (int i = 0; i < t->num_down; i++)
        if (strcmp(t->down[i], node) == 0)
            at = i;
    bool say = false;
    if (what == CLUSTER_NODE_DOWN) {
        t->errors++;
        if (at < 0 && t->num_down < SHARED_DOWN_MAX) {
            snprintf(t->down[t->num_down++], sizeof(t->down[0]), "%s", node);
            say = true;
        }
    } else if (at >= 0) {
        memmove(t->down[at], t->down[at + 1], (size_t)(t->num_down - at - 1) * sizeof(t->down[0]));
        t->num_down--;
        say = true;
        t->failovers += what == CLUSTER_NODE_RETIRED;
    }
    pthread_mutex_unlock(&t->lock);
    if (!say)
        return;
    if (what == CLUSTER_NODE_RETIRED)
        store_warn(t->log, "shared tier %s: node %s is no longer in the cluster's map: another node serves its slots",
                   t->url, node);
    else if (why && cluster)
        store_warn(t->log,
                   "shared tier %s: node %s is unreachable (%s): the slots it serves count as misses until it "
                   "answers or the cluster gives them to another node; trying again every %g s",
                   t->url, node, why, RETRY_S);
    else if (why)
        store_warn(t->log,
                   "shared tier %s is unreachable (%s): its entries count as misses and puts stay in memory and "
                   "on disk; trying again every %g s",
                   t->url, why, RETRY_S);
    else if (cluster)
        store_warn(t->log, "shared tier %s: node %s answers again", t->url, node);
    else
        store_warn(t->log, "shared tier %s answers again", t->url);
}

static int tls_refuse(const char *what, const char *file)
{
    char err[200] = "";
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, err, sizeof(err));
    ERR_clear_error();
    return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: %s \"%s\" cannot be used: %s", what, file,
                     err[0] ? err : "unknown OpenSSL error");
}

/* The TLS context of rediss://: the server verified against the CA file
 * (or the system's CAs), an optional client certificate. */
static int tls_setup(struct shared_tier *t, const struct kvrt_store_options *o)
{
    t->tls = SSL_CTX_new(TLS_client_method());
    if (!t->tls)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: cannot make a TLS context");
    SSL_CTX_set_min_proto_version(t->tls, TLS1_2_VERSION);
    SSL_CTX_set_verify(t->tls, SSL_VERIFY_PEER, NULL);
    if (o->shared_ca_file) {
        if (SSL_CTX_load_verify_locations(t->tls, o->shared_ca_file, NULL) != 1)
            return tls_refuse("shared_ca_file", o->shared_ca_file);
    } else if (SSL_CTX_set_default_verify_paths(t->tls) != 1) {
        return tls_refuse("the system's CA store", "(default)");
    }
    if (o->shared_cert_file) {
        const char *key = o->shared_cert_key_file ? o->shared_cert_key_file : o->shared_cert_file;
        if (SSL_CTX_use_certificate_chain_file(t->tls, o->shared_cert_file) != 1)
            return tls_refuse("shared_cert_file", o->shared_cert_file);
        if (SSL_CTX_use_PrivateKey_file(t->tls, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(t->tls) != 1)
            return tls_refuse("shared_cert_key_file", key);
    } else if (o->shared_cert_key_file) {
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_open: shared_cert_key_file \"%s\" without shared_cert_file; give both or "
                         "neither",
                         o->shared_cert_key_file);
    }
    return KVRT_OK;
}

#define PASSWORD_MAX 512

/* The ACL password from path, refused unless the file is kept as a secret
 * (base/secret_file.h: the rule libkvrt-xfer's key file keeps).  A
 * malloc'd string, trailing newline removed; NULL with the error
 * reported. */
static char *read_password(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        (void)BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: cannot open shared_password_file \"%s\": %s", path,
                        strerror(errno));
        return NULL;
    }
    char why[160];
    const char *bad = base_secret_refusal(fd, "a password", 1, PASSWORD_MAX, why, sizeof(why));
    if (bad) {
        close(fd);
        (void)BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: refusing shared_password_file \"%s\": it %s", path, bad);
        return NULL;
    }
    char *buf = calloc(1, PASSWORD_MAX + 2);
    size_t n = buf ? base_secret_read(fd, buf, PASSWORD_MAX + 1) : 0;
    close(fd);
    if (!buf) {
        (void)BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
        return NULL;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    bool printable = n > 0 && n <= PASSWORD_MAX;
    for (size_t i = 0; i < n; i++)
        printable = printable && buf[i] >= 0x20 && buf[i] != 0x7f;
    if (!printable) {
        OPENSSL_cleanse(buf, PASSWORD_MAX + 2);
        free(buf);
        (void)BASE_FAIL(KVRT_ERR_INVALID,
                        "kvrt_store_open: shared_password_file \"%s\" does not hold one line of 1 to %d printable "
                        "bytes",
                        path, PASSWORD_MAX);
        return NULL;
    }
    return buf;
}

int shared_init(struct shared_tier *t, const struct base_log *log, const struct kvrt_store_options *o)
{
    memset(t, 0, sizeof(*t));
    char why[300];
    if (!redis_url_parse(o->shared, &t->parsed, why, sizeof(why)))
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: shared \"%s\" is not a server address (%s); write %s",
                         o->shared ? o->shared : "(null)", why, REDIS_URL_FORM);
    if (!t->parsed.tls && (o->shared_ca_file || o->shared_cert_file || o->shared_cert_key_file))
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_open: shared_ca_file, shared_cert_file and shared_cert_key_file are for TLS, "
                         "but shared \"%s\" is redis:// (plain); write rediss://",
                         o->shared);
    snprintf(t->url, sizeof(t->url), "%s", o->shared);
    t->timeout_s = o->shared_timeout_s > 0 ? o->shared_timeout_s : KVRT_STORE_DEFAULT_SHARED_TIMEOUT_S;
    t->log = log;
    pthread_mutex_init(&t->lock, NULL);
    pthread_mutex_init(&t->fg_lock, NULL);
    int rc = KVRT_OK;
    if (o->shared_password_file && !(t->password = read_password(o->shared_password_file)))
        rc = KVRT_ERR_INVALID;
    if (rc == KVRT_OK && t->parsed.tls)
        rc = tls_setup(t, o);
    t->cfg = (struct cluster_config){.url = &t->parsed,
                                     .tls = t->tls,
                                     .user = t->parsed.user[0] ? t->parsed.user : NULL,
                                     .password = t->password,
                                     .backoff_s = RETRY_S,
                                     .event = on_event,
                                     .event_user = t};
    if (rc == KVRT_OK) {
        t->fg = malloc(sizeof(*t->fg));
        t->bg = malloc(sizeof(*t->bg));
        if (!t->fg || !t->bg)
            rc = BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
        else {
            cluster_init(t->fg, &t->cfg);
            cluster_init(t->bg, &t->cfg);
        }
    }
    if (rc != KVRT_OK) {
        /* the message is the one reported; freeing reports nothing */
        shared_free(t);
        return rc;
    }
    return KVRT_OK;
}

void shared_free(struct shared_tier *t)
{
    if (t->fg)
        cluster_free(t->fg);
    if (t->bg)
        cluster_free(t->bg);
    free(t->fg);
    free(t->bg);
    if (t->password) {
        OPENSSL_cleanse(t->password, strlen(t->password));
        free(t->password);
    }
    if (t->tls)
        SSL_CTX_free(t->tls);
    if (t->log) {
        pthread_mutex_destroy(&t->lock);
        pthread_mutex_destroy(&t->fg_lock);
    }
    memset(t, 0, sizeof(*t));
}

void shared_counts(struct shared_tier *t, struct kvrt_store_stats *st)
{
    pthread_mutex_lock(&t->lock);
    st->shared_nodes_down = (uint64_t)t->num_down;
    st->shared_failovers = t->failovers;
    st->shared_map_refreshes = t->maps;
    st->shared_moved = t->moved;
    st->shared_ask = t->asked;
    pthread_mutex_unlock(&t->lock);
}

/* A client's counts since the last call into the tier's (the client is
 * the caller's alone until it returns). */
static void take_counts(struct shared_tier *t, struct cluster *cl)
{
    pthread_mutex_lock(&t->lock);
    t->maps += cl->maps;
    t->moved += cl->moved;
    t->asked += cl->asked;
    pthread_mutex_unlock(&t->lock);
    cl->maps = cl->moved = cl->asked = 0;
}

bool shared_is_up(struct shared_tier *t)
{
    pthread_mutex_lock(&t->lock);
    bool up = t->num_down == 0;
    pthread_mutex_unlock(&t->lock);
    return up;
}

/* Requests with their keys, for n ids. */
struct batch {
    struct cluster_req *r;
    char (*keys)[KEY_BYTES];
};

static bool batch_make(struct batch *b, uint64_t n)
{
    b->r = calloc(n ? n : 1, sizeof(*b->r));
    b->keys = calloc(n ? n : 1, sizeof(*b->keys));
    return b->r && b->keys;
}

static void batch_free(struct batch *b)
{
    free(b->r);
    free(b->keys);
}

static void batch_key(struct batch *b, uint64_t i, const struct store_id *id)
{
    memcpy(b->keys[i], KEY_PREFIX, sizeof(KEY_PREFIX) - 1);
    store_dbkey(id, (uint8_t *)b->keys[i] + sizeof(KEY_PREFIX) - 1);
    b->r[i].key = b->keys[i];
    b->r[i].key_len = KEY_BYTES;
}

void shared_get_many(struct shared_tier *t, const struct store_id *ids, uint64_t n, uint64_t value_bytes,
                     uint8_t *const *bufs, uint64_t *lens, bool *got,
                     void (*arrived)(void *user, size_t i, uint8_t *value, uint64_t len), void *user)
{
    for (uint64_t i = 0; i < n; i++) {
        got[i] = false;
        lens[i] = 0;
    }
    struct batch b;
    if (n == 0 || !batch_make(&b, n)) {
        if (n)
            batch_free(&b);
        return;
    }
    for (uint64_t i = 0; i < n; i++) {
        batch_key(&b, i, &ids[i]);
        b.r[i].dst = bufs[i];
        b.r[i].cap = value_bytes;
    }
    pthread_mutex_lock(&t->fg_lock);
    t->fg->arrived = arrived;
    t->fg->arrived_user = user;
    cluster_run(t->fg, CLUSTER_GET, b.r, n, t->timeout_s, false);
    t->fg->arrived = NULL;
    take_counts(t, t->fg);
    pthread_mutex_unlock(&t->fg_lock);
    for (uint64_t i = 0; i < n; i++) {
        got[i] = b.r[i].done;
        lens[i] = b.r[i].len;
    }
    batch_free(&b);
}

void shared_has(struct shared_tier *t, const struct store_id *ids, uint64_t n, bool *has)
{
    for (uint64_t i = 0; i < n; i++)
        has[i] = false;
    struct batch b;
    if (n == 0 || !batch_make(&b, n)) {
        if (n)
            batch_free(&b);
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        batch_key(&b, i, &ids[i]);
    pthread_mutex_lock(&t->fg_lock);
    cluster_run(t->fg, CLUSTER_EXISTS, b.r, n, t->timeout_s, false);
    take_counts(t, t->fg);
    pthread_mutex_unlock(&t->fg_lock);
    for (uint64_t i = 0; i < n; i++)
        has[i] = b.r[i].done && b.r[i].integer > 0;
    batch_free(&b);
}

uint64_t shared_put(struct shared_tier *t, struct mem_entry *const *entries, uint64_t n, uint64_t value_bytes)
{
    /* SETs written as the protocol spells them, each value straight from
     * its entry's buffer (writev): no copy of a value on the way out */
    struct batch b;
    if (n == 0 || !batch_make(&b, n)) {
        if (n)
            batch_free(&b);
        return 0;
    }
    for (uint64_t i = 0; i < n; i++) {
        batch_key(&b, i, &entries[i]->id);
        b.r[i].val = entries[i]->buf;
        b.r[i].val_len = value_bytes;
    }
    cluster_run(t->bg, CLUSTER_SET, b.r, n, t->timeout_s, true);
    take_counts(t, t->bg);
    uint64_t done = 0;
    for (uint64_t i = 0; i < n; i++) {
        done += b.r[i].done;
        /* KV events: each acknowledged SET is a BlockStored in the shared tier (events.h) */
        store_event_stored(b.r[i].done ? t->events : NULL, STORE_TIER_SHARED, &entries[i]->id, entries[i]->chunk);
    }
    if (t->bg->refused[0])
        store_warn(t->log, "shared tier %s refused an entry: %s", t->url, t->bg->refused);
    batch_free(&b);
    return done;
}

void shared_drop(struct shared_tier *t, const struct store_id *id)
{
    struct batch b;
    if (!batch_make(&b, 1)) {
        batch_free(&b);
        return;
    }
    batch_key(&b, 0, id);
    pthread_mutex_lock(&t->fg_lock);
    cluster_run(t->fg, CLUSTER_DEL, b.r, 1, t->timeout_s, false);
    take_counts(t, t->fg);
    pthread_mutex_unlock(&t->fg_lock);
    /* KV events: a DEL that deleted the entry is a BlockRemoved from the shared tier (events.h) */
    store_event_removed(b.r[0].done && b.r[0].integer > 0 ? t->events : NULL, STORE_TIER_SHARED, id);
    batch_free(&b);
}
