/*
 * Bounded reading of Redis protocol (RESP2) replies off a redis_conn.
 * Every reply is bounded before it is read: a value longer than the
 * caller asked for, a negative or non-numeric length, a reply of the
 * wrong type or one cut short fails the connection (resp_* return
 * RESP_FAILED, the reason in conn->why); nothing grows past the caller's
 * buffer plus the connection's 4 KiB line buffer, or, for arrays, the
 * byte budget the caller gives.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_RESP_H
#define KVRT_STORE_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "redis_conn.h"

enum resp_result {
    RESP_VALUE, /* a value, an integer, a status (+OK) */
    RESP_NIL,   /* $-1 / *-1: no such key */
    RESP_ERROR, /* an error reply (-ERR, -WRONGPASS, -LOADING...): in the reply's text */
    RESP_MOVED, /* -MOVED slot host:port */
    RESP_ASK,   /* -ASK slot host:port */
    RESP_FAILED /* the connection failed (conn->why) and is closed */
};

/* What came with an error or a redirection. */
struct resp_reply {
    char text[256];       /* the error line, cut to fit */
    unsigned slot;        /* MOVED/ASK */
    struct redis_addr to; /* MOVED/ASK: host "" means the same host */
};

/* A bulk value into dst (at most cap bytes: a longer one fails the
 * connection), its size in *len. */
enum resp_result resp_read_bulk(struct redis_conn *c, uint8_t *dst, uint64_t cap, uint64_t *len, struct resp_reply *r,
                                double deadline);
/* An integer reply (:N). */
enum resp_result resp_read_integer(struct redis_conn *c, int64_t *v, struct resp_reply *r, double deadline);
/* A status reply (+OK...): its text in r->text. */
enum resp_result resp_read_status(struct resp_reply *r, struct redis_conn *c, double deadline);

/* Any reply as a tree (CLUSTER SLOTS): type '+', '-', ':', '$', '*' or 0
 * for nil; strings at most 1 KiB, nesting at most 8, all of it at most
 * budget bytes of memory. */
struct resp_node {
    char type;
    int64_t integer; /* ':'; '*' and '$': the count */
    char *str;       /* '+', '-', '$': NUL-terminated */
    size_t len;
    struct resp_node *elem; /* '*': integer elements */
};
/* NULL when the connection failed (conn->why); free with resp_tree_free. */
struct resp_node *resp_read_tree(struct redis_conn *c, size_t budget, double deadline);
void resp_tree_free(struct resp_node *n);

#endif
