/* The shared tier: entries on a Redis-protocol server (Redis, Valkey, or a
 * cluster proxy), through hiredis, so that engines on several hosts share
 * one store.  Values are the entry bytes the disk tier holds (header and
 * checksum included); keys are "kvrt:" and the entry's database key.
 *
 * An unreachable or failing server is a miss, never an error: connect and
 * read timeouts bound every call, the first failure is warned about in one
 * line, and no call tries again before a pause has passed (each call would
 * otherwise wait out the timeout).
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <hiredis/hiredis.h>

#include "base/clock.h"
#include "events.h"
#include "shared.h"

#define KEY_PREFIX "kvrt:"
#define KEY_BYTES (sizeof(KEY_PREFIX) - 1 + STORE_DBKEY_BYTES)
/* Pause after a failure before the next attempt, in seconds. */
#define RETRY_S 5.0
/* Commands per pipeline round; iovecs per writev. */
#define PIPELINE 64
#define IOV_BATCH 192

struct shared_conn {
    redisContext *c;
};

int shared_parse_url(const char *url, char *host, size_t size, int *port)
{
    static const char scheme[] = "redis://";
    const char *p = url;
    if (!url || strncmp(url, scheme, sizeof(scheme) - 1) != 0)
        goto bad;
    p += sizeof(scheme) - 1;
    const char *colon = strrchr(p, ':');
    const char *end = colon ? colon : p + strlen(p);
    size_t n = (size_t)(end - p);
    if (*p == '[' && colon && colon > p && colon[-1] == ']') { /* [IPv6]:port */
        p++;
        n = (size_t)(colon - 1 - p);
    }
    if (n == 0 || n >= size)
        goto bad;
    memcpy(host, p, n);
    host[n] = '\0';
    *port = 6379;
    if (colon) {
        char *e;
        long v = strtol(colon + 1, &e, 10);
        if (!colon[1] || *e || v < 1 || v > 65535)
            goto bad;
        *port = (int)v;
    }
    return KVRT_OK;
bad:
    return BASE_FAIL(KVRT_ERR_INVALID,
                     "kvrt_store_open: shared \"%s\" is not a server address; write redis://HOST:PORT (port "
                     "1-65535, default 6379)",
                     url ? url : "(null)");
}

static struct timeval tv_of(double s)
{
    struct timeval tv;
    tv.tv_sec = (time_t)s;
    tv.tv_usec = (suseconds_t)((s - (double)tv.tv_sec) * 1e6);
    return tv;
}

int shared_init(struct shared_tier *t, const struct base_log *log, const char *url, double timeout_s)
{
    memset(t, 0, sizeof(*t));
    int rc = shared_parse_url(url, t->host, sizeof(t->host), &t->port);
    if (rc != KVRT_OK)
        return rc;
    snprintf(t->url, sizeof(t->url), "%s", url);
    t->timeout_s = timeout_s;
    t->log = log;
    pthread_mutex_init(&t->lock, NULL);
    pthread_mutex_init(&t->fg_lock, NULL);
    t->fg = calloc(1, sizeof(*t->fg));
    t->bg = calloc(1, sizeof(*t->bg));
    if (!t->fg || !t->bg) {
        shared_free(t);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    }
    t->up = true;
    return KVRT_OK;
}

static void conn_close(struct shared_conn *c)
{
    if (c && c->c) {
        redisFree(c->c);
        c->c = NULL;
    }
}

void shared_free(struct shared_tier *t)
{
    conn_close(t->fg);
    conn_close(t->bg);
    free(t->fg);
    free(t->bg);
    if (t->log) {
        pthread_mutex_destroy(&t->lock);
        pthread_mutex_destroy(&t->fg_lock);
    }
    memset(t, 0, sizeof(*t));
}

bool shared_is_up(struct shared_tier *t)
{
    pthread_mutex_lock(&t->lock);
    bool up = t->up;
    pthread_mutex_unlock(&t->lock);
    return up;
}

/* A failure: one warning per outage, and a pause before the next try. */
static void failed(struct shared_tier *t, struct shared_conn *c, const char *why)
{
    char msg[256];
    snprintf(msg, sizeof(msg), "%s", why && why[0] ? why : "no reply");
    conn_close(c);
    pthread_mutex_lock(&t->lock);
    bool warn = !t->warned;
    t->warned = true;
    t->up = false;
    t->errors++;
    t->down_until = base_now() + RETRY_S;
    pthread_mutex_unlock(&t->lock);
    if (warn)
        store_warn(t->log,
                   "shared tier %s is unreachable (%s): its entries count as misses and puts stay in memory and "
                   "on disk; trying again every %g s",
                   t->url, msg, RETRY_S);
}

static bool ensure(struct shared_tier *t, struct shared_conn *c)
{
    if (c->c && !c->c->err)
        return true;
    conn_close(c);
    pthread_mutex_lock(&t->lock);
    bool wait = base_now() < t->down_until;
    pthread_mutex_unlock(&t->lock);
    if (wait)
        return false;
    redisContext *rc = redisConnectWithTimeout(t->host, t->port, tv_of(t->timeout_s));
    if (!rc || rc->err) {
        char why[160];
        snprintf(why, sizeof(why), "%s", rc ? rc->errstr : "out of memory");
        if (rc)
            redisFree(rc);
        failed(t, c, why);
        return false;
    }
    redisSetTimeout(rc, tv_of(t->timeout_s));
    c->c = rc;
    pthread_mutex_lock(&t->lock);
    bool was_down = t->warned;
    t->warned = false;
    t->up = true;
    pthread_mutex_unlock(&t->lock);
    if (was_down)
        store_warn(t->log, "shared tier %s answers again", t->url);
    return true;
}

static void redis_key(const struct store_id *id, char out[KEY_BYTES])
{
    memcpy(out, KEY_PREFIX, sizeof(KEY_PREFIX) - 1);
    store_dbkey(id, (uint8_t *)out + sizeof(KEY_PREFIX) - 1);
}

/* Write all of iov[0..n), through short writes. */
static bool write_iov(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n > IOV_BATCH ? IOV_BATCH : n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return true;
}

void shared_get_many(struct shared_tier *t, const struct store_id *ids, uint64_t n, uint64_t value_bytes,
                     uint8_t *const *bufs, uint64_t *lens, bool *got)
{
    for (uint64_t i = 0; i < n; i++) {
        got[i] = false;
        lens[i] = 0;
    }
    pthread_mutex_lock(&t->fg_lock);
    bool ok = ensure(t, t->fg);
    const char *why = NULL;
    /* the replies are read off the socket here, not by hiredis: nothing
     * of an earlier reply may wait in its buffer */
    redisContext *c = ok ? t->fg->c : NULL;
    if (ok && (c->reader->len > c->reader->pos || (c->obuf && c->obuf[0]))) {
        ok = false;
        why = "a reply was left unread";
    }
    struct resp_reader *rr = ok ? malloc(sizeof(*rr)) : NULL;
    if (ok && !rr) {
        ok = false;
        why = "out of memory";
    }
    if (rr)
        resp_reader_init(rr, c->fd);
    /* every GET of a window is sent before the first reply is read: the
     * server sends the next value while this one is received */
    char cmd[PIPELINE][64 + KEY_BYTES];
    struct iovec iov[PIPELINE];
    for (uint64_t at = 0; at < n && ok; at += PIPELINE) {
        uint64_t m = n - at < PIPELINE ? n - at : PIPELINE;
        for (uint64_t i = 0; i < m; i++) {
            char key[KEY_BYTES];
            redis_key(&ids[at + i], key);
            int len = snprintf(cmd[i], sizeof(cmd[i]), "*2\r\n$3\r\nGET\r\n$%zu\r\n", sizeof(key));
            memcpy(cmd[i] + len, key, sizeof(key));
            cmd[i][(size_t)len + sizeof(key)] = '\r';
            cmd[i][(size_t)len + sizeof(key) + 1] = '\n';
            iov[i] = (struct iovec){cmd[i], (size_t)len + sizeof(key) + 2};
        }
        if (!write_iov(c->fd, iov, (int)m)) {
            ok = false;
            why = "could not send";
            break;
        }
        for (uint64_t i = at; i < at + m && ok; i++) {
            enum resp_value v = resp_read_value(rr, bufs[i], value_bytes, &lens[i]);
            got[i] = v == RESP_VALUE;
            ok = v != RESP_FAILED;
            why = rr->why;
        }
    }
    free(rr);
    if (!ok && c) {
        for (uint64_t i = 0; i < n; i++)
            got[i] = false;
        failed(t, t->fg, why);
    }
    pthread_mutex_unlock(&t->fg_lock);
}

void shared_has(struct shared_tier *t, const struct store_id *ids, uint64_t n, bool *has)
{
    for (uint64_t i = 0; i < n; i++)
        has[i] = false;
    pthread_mutex_lock(&t->fg_lock);
    for (uint64_t at = 0; at < n;) {
        if (!ensure(t, t->fg))
            break;
        uint64_t m = n - at < PIPELINE ? n - at : PIPELINE;
        char key[KEY_BYTES];
        size_t lens[] = {6, sizeof(key)};
        bool ok = true;
        for (uint64_t i = 0; i < m && ok; i++) {
            redis_key(&ids[at + i], key);
            const char *argv[] = {"EXISTS", key};
            ok = redisAppendCommandArgv(t->fg->c, 2, argv, lens) == REDIS_OK;
        }
        for (uint64_t i = 0; i < m && ok; i++) {
            redisReply *r = NULL;
            ok = redisGetReply(t->fg->c, (void **)&r) == REDIS_OK && r;
            if (ok)
                has[at + i] = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
            if (r)
                freeReplyObject(r);
        }
        if (!ok) {
            failed(t, t->fg, t->fg->c ? t->fg->c->errstr : NULL);
            break;
        }
        at += m;
    }
    pthread_mutex_unlock(&t->fg_lock);
}

uint64_t shared_put(struct shared_tier *t, struct mem_entry *const *entries, uint64_t n, uint64_t value_bytes)
{
    /* The SETs are written as the protocol spells them, each value straight
     * from its entry's buffer (hiredis would copy every value into one
     * command buffer first); hiredis reads the replies. */
    uint64_t done = 0;
    char heads[PIPELINE][96];
    static const char crlf[] = "\r\n";
    struct iovec iov[3 * PIPELINE];
    for (uint64_t at = 0; at < n;) {
        if (!ensure(t, t->bg))
            break;
        uint64_t m = n - at < PIPELINE ? n - at : PIPELINE;
        int k = 0;
        for (uint64_t i = 0; i < m; i++) {
            char key[KEY_BYTES];
            redis_key(&entries[at + i]->id, key);
            int len = snprintf(heads[i], sizeof(heads[i]), "*3\r\n$3\r\nSET\r\n$%zu\r\n", sizeof(key));
            memcpy(heads[i] + len, key, sizeof(key));
            len += (int)sizeof(key);
            len += snprintf(heads[i] + len, sizeof(heads[i]) - (size_t)len, "\r\n$%llu\r\n", ULL(value_bytes));
            iov[k++] = (struct iovec){heads[i], (size_t)len};
            iov[k++] = (struct iovec){entries[at + i]->buf, value_bytes};
            iov[k++] = (struct iovec){(void *)crlf, 2};
        }
        bool ok = write_iov(t->bg->c->fd, iov, k);
        for (uint64_t i = 0; i < m && ok; i++) {
            redisReply *r = NULL;
            ok = redisGetReply(t->bg->c, (void **)&r) == REDIS_OK && r;
            if (ok && r->type == REDIS_REPLY_STATUS)
                done++;
            else if (ok && r->type == REDIS_REPLY_ERROR && i == 0)
                store_warn(t->log, "shared tier %s refused an entry: %s", t->url, r->str);
            /* KV events: each acknowledged SET is a BlockStored in the shared tier (events.h) */
            store_event_stored(ok && r->type == REDIS_REPLY_STATUS ? t->events : NULL, STORE_TIER_SHARED,
                               &entries[at + i]->id, entries[at + i]->chunk);
            if (r)
                freeReplyObject(r);
        }
        if (!ok) {
            failed(t, t->bg, t->bg->c && t->bg->c->errstr[0] ? t->bg->c->errstr : "could not send");
            break;
        }
        at += m;
    }
    return done;
}

void shared_drop(struct shared_tier *t, const struct store_id *id)
{
    char key[KEY_BYTES];
    redis_key(id, key);
    const char *argv[] = {"DEL", key};
    size_t lens[] = {3, sizeof(key)};
    pthread_mutex_lock(&t->fg_lock);
    if (ensure(t, t->fg)) {
        redisReply *r = redisCommandArgv(t->fg->c, 2, argv, lens);
        /* KV events: a DEL that deleted the entry is a BlockRemoved from the shared tier (events.h) */
        store_event_removed(r && r->type == REDIS_REPLY_INTEGER && r->integer > 0 ? t->events : NULL, STORE_TIER_SHARED,
                            id);
        if (r)
            freeReplyObject(r);
        else
            failed(t, t->fg, t->fg->c ? t->fg->c->errstr : NULL);
    }
    pthread_mutex_unlock(&t->fg_lock);
}
