/*
 * The shared tier (shared.c): entries on a Redis-protocol server, and the
 * replies of a GET pipeline read straight into entry buffers (resp.c).
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_SHARED_H
#define KVRT_STORE_SHARED_H

#include <pthread.h>

#include "base/log.h"
#include "memory.h"

struct shared_conn;

struct shared_tier {
    char url[300];
    char host[256];
    int port;
    double timeout_s;
    const struct base_log *log; /* the store's, for warnings; NULL until init */
    pthread_mutex_t lock;       /* the state below */
    pthread_mutex_t fg_lock;    /* the foreground connection */
    struct shared_conn *fg;     /* gets and lookups */
    struct shared_conn *bg;     /* the writer thread's */
    double down_until;          /* monotonic seconds: no attempt before */
    bool warned;
    bool up;
    uint64_t errors;
    struct store_events *events; /* KV events (events.h); NULL: off */
};

int shared_parse_url(const char *url, char *host, size_t size, int *port);
int shared_init(struct shared_tier *t, const struct base_log *log, const char *url, double timeout_s);
void shared_free(struct shared_tier *t);
/* GETs of ids[0..n) in one pipeline, each value read into bufs[i] (entry
 * buffers of at least value_bytes): got[i] and lens[i] (the value's own
 * size, which may exceed value_bytes: then only value_bytes were kept);
 * got false everywhere when unreachable or the connection fails. */
void shared_get_many(struct shared_tier *t, const struct store_id *ids, uint64_t n, uint64_t value_bytes,
                     uint8_t *const *bufs, uint64_t *lens, bool *got);
/* EXISTS of ids[0..n): has[i]; false everywhere when unreachable. */
void shared_has(struct shared_tier *t, const struct store_id *ids, uint64_t n, bool *has);
/* SET of sealed entries (the writer thread); returns how many went in. */
uint64_t shared_put(struct shared_tier *t, struct mem_entry *const *entries, uint64_t n, uint64_t value_bytes);
/* Delete an entry that failed its checks. */
void shared_drop(struct shared_tier *t, const struct store_id *id);
bool shared_is_up(struct shared_tier *t);

/* Replies of a GET pipeline read off the socket (resp.c). */
struct resp_reader {
    int fd;
    size_t at, end;
    const char *why; /* what went wrong */
    char buf[4096];  /* reply lines, and what came with them */
};
enum resp_value { RESP_VALUE, RESP_ABSENT, RESP_FAILED };
void resp_reader_init(struct resp_reader *rr, int fd);
/* The next reply: a value (its first min(size, cap) bytes into dst, *len
 * its size), absent (nil, or an error for this key), or failed (rr->why). */
enum resp_value resp_read_value(struct resp_reader *rr, uint8_t *dst, uint64_t cap, uint64_t *len);

#endif
