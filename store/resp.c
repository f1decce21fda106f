/*
 * The store's reader of Redis protocol replies (resp.h): the replies of
 * its pipelines of GET, EXISTS, SET and DEL, AUTH's and the cluster's
 * slot map.  Values are received straight into the entry buffer they are
 * for (one copy, the kernel's), and only after their length was checked
 * against what that buffer holds: a server, broken or hostile, cannot
 * make the store allocate or wait more than it chose to.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include "resp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fail.h"

#define STRING_MAX 1024
#define DEPTH_MAX 8

/* The next line, without CRLF, in place in the buffer (NUL-terminated
 * there); its length in *n. */
static char *line(struct redis_conn *c, size_t *n, double deadline)
{
    for (;;) {
        char *start = c->buf + c->at;
        char *nl = memchr(start, '\n', c->end - c->at);
        if (nl) {
            size_t len = (size_t)(nl - start);
            if (len == 0 || nl[-1] != '\r') {
                redis_conn_fail(c, "a reply that is not the Redis protocol (a line without CRLF)");
                return NULL;
            }
            nl[-1] = '\0';
            c->at += len + 1;
            *n = len - 1;
            return start;
        }
        if (!redis_conn_fill(c, deadline))
            return NULL;
    }
}

/* A decimal of the protocol: an optional '-', 1 to 19 digits. */
static bool number(const char *s, int64_t *v)
{
    bool neg = *s == '-';
    s += neg;
    size_t n = strlen(s);
    if (n == 0 || n > 18)
        return false;
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (s[i] - '0');
    }
    *v = neg ? -x : x;
    return true;
}

/* An error line: MOVED and ASK parsed, others kept as text. */
static enum resp_result error_reply(const char *text, struct resp_reply *r)
{
    snprintf(r->text, sizeof(r->text), "%s", text);
    bool moved = strncmp(text, "MOVED ", 6) == 0, ask = strncmp(text, "ASK ", 4) == 0;
    if (!moved && !ask)
        return RESP_ERROR;
    const char *p = text + (moved ? 6 : 4);
    char *e;
    errno = 0;
    unsigned long slot = strtoul(p, &e, 10);
    const char *addr = e + 1;
    const char *colon = strrchr(addr, ':');
    if (e == p || *e != ' ' || errno || slot >= 16384 || !colon)
        return RESP_ERROR;
    size_t hn = (size_t)(colon - addr);
    if (hn >= 2 && addr[0] == '[' && addr[hn - 1] == ']') {
        addr++;
        hn -= 2;
    }
    int64_t port;
    if (hn >= sizeof(r->to.host) || !number(colon + 1, &port) || port < 1 || port > 65535)
        return RESP_ERROR;
    memcpy(r->to.host, addr, hn);
    r->to.host[hn] = '\0';
    r->to.port = (int)port;
    r->slot = (unsigned)slot;
    return moved ? RESP_MOVED : RESP_ASK;
}

/* The head of a reply: its type, or the error/redirect it is. */
static enum resp_result head(struct redis_conn *c, char want, char **rest, struct resp_reply *r, double deadline)
{
    size_t n;
    char *l = line(c, &n, deadline);
    if (!l)
        return RESP_FAILED;
    if (l[0] == '-')
        return error_reply(l + 1, r);
    if (l[0] != want) {
        redis_conn_fail(c, "a reply of type '%c' where '%c' was expected", l[0], want);
        return RESP_FAILED;
    }
    *rest = l + 1;
    return RESP_VALUE;
}

enum resp_result resp_read_bulk(struct redis_conn *c, uint8_t *dst, uint64_t cap, uint64_t *len, struct resp_reply *r,
                                double deadline)
{
    char *rest = NULL;
    *len = 0;
    enum resp_result h = head(c, '$', &rest, r, deadline);
    if (h != RESP_VALUE)
        return h;
    int64_t n;
    if (!number(rest, &n) || n < -1) {
        redis_conn_fail(c, "a value length \"%.32s\" that is not a length", rest);
        return RESP_FAILED;
    }
    if (n == -1)
        return RESP_NIL;
    if ((uint64_t)n > cap) {
        redis_conn_fail(c, "a value of %lld bytes where at most %llu were asked for", (long long)n, ULL(cap));
        return RESP_FAILED;
    }
    uint8_t crlf[2];
    if (!redis_conn_read(c, dst, (uint64_t)n, deadline) || !redis_conn_read(c, crlf, 2, deadline))
        return RESP_FAILED;
    if (crlf[0] != '\r' || crlf[1] != '\n') {
        redis_conn_fail(c, "a value not followed by CRLF");
        return RESP_FAILED;
    }
    *len = (uint64_t)n;
    return RESP_VALUE;
}

enum resp_result resp_read_integer(struct redis_conn *c, int64_t *v, struct resp_reply *r, double deadline)
{
    char *rest = NULL;
    enum resp_result h = head(c, ':', &rest, r, deadline);
    if (h != RESP_VALUE)
        return h;
    if (!number(rest, v)) {
        redis_conn_fail(c, "an integer reply \"%.32s\" that is not a number", rest);
        return RESP_FAILED;
    }
    return RESP_VALUE;
}

enum resp_result resp_read_status(struct resp_reply *r, struct redis_conn *c, double deadline)
{
    char *rest = NULL;
    enum resp_result h = head(c, '+', &rest, r, deadline);
    if (h == RESP_VALUE)
        snprintf(r->text, sizeof(r->text), "%s", rest);
    return h;
}

static bool tree(struct redis_conn *c, struct resp_node *out, size_t *budget, int depth, double deadline)
{
    size_t n;
    char *l = line(c, &n, deadline);
    if (!l)
        return false;
    memset(out, 0, sizeof(*out));
    out->type = l[0];
    switch (l[0]) {
    case '+':
    case '-':
        if (n - 1 > STRING_MAX)
            return redis_conn_fail(c, "a reply line of %zu bytes; at most %d", n - 1, STRING_MAX);
        if (*budget < n)
            return redis_conn_fail(c, "a reply larger than %s", "its bound");
        *budget -= n;
        out->str = strdup(l + 1);
        out->len = n - 1;
        return out->str || redis_conn_fail(c, "out of memory");
    case ':':
        return number(l + 1, &out->integer) || redis_conn_fail(c, "an integer \"%.32s\" that is not a number", l + 1);
    case '$':
    case '*':
        if (!number(l + 1, &out->integer) || out->integer < -1)
            return redis_conn_fail(c, "a length \"%.32s\" that is not a length", l + 1);
        break;
    default:
        return redis_conn_fail(c, "a reply of type '%c' (0x%02x): not the Redis protocol", l[0] > 31 ? l[0] : '?',
                               (unsigned char)l[0]);
    }
    if (out->integer == -1) {
        out->type = 0;
        return true;
    }
    if (out->type == '$') {
        if (out->integer > STRING_MAX)
            return redis_conn_fail(c, "a string of %lld bytes in a reply; at most %d", (long long)out->integer,
                                   STRING_MAX);
        size_t len = (size_t)out->integer;
        if (*budget < len + 1)
            return redis_conn_fail(c, "a reply larger than its bound");
        *budget -= len + 1;
        uint8_t crlf[2];
        out->str = malloc(len + 1);
        if (!out->str)
            return redis_conn_fail(c, "out of memory");
        out->len = len;
        if (!redis_conn_read(c, (uint8_t *)out->str, len, deadline) || !redis_conn_read(c, crlf, 2, deadline))
            return false;
        out->str[len] = '\0';
        return (crlf[0] == '\r' && crlf[1] == '\n') || redis_conn_fail(c, "a string not followed by CRLF");
    }
    if (depth >= DEPTH_MAX)
        return redis_conn_fail(c, "arrays nested deeper than %d", DEPTH_MAX);
    uint64_t count = (uint64_t)out->integer;
    if (count > *budget / sizeof(struct resp_node))
        return redis_conn_fail(c, "an array of %llu elements: larger than its bound", ULL(count));
    *budget -= count * sizeof(struct resp_node);
    out->elem = count ? calloc(count, sizeof(struct resp_node)) : NULL;
    if (count && !out->elem)
        return redis_conn_fail(c, "out of memory");
    for (uint64_t i = 0; i < count; i++)
        if (!tree(c, &out->elem[i], budget, depth + 1, deadline)) {
            out->integer = (int64_t)i + 1; /* what resp_tree_free walks */
            return false;
        }
    return true;
}

static void tree_free(struct resp_node *n)
{
    if (n->type == '*' && n->elem)
        for (int64_t i = 0; i < n->integer; i++)
            tree_free(&n->elem[i]);
    free(n->elem);
    free(n->str);
}

struct resp_node *resp_read_tree(struct redis_conn *c, size_t budget, double deadline)
{
    struct resp_node *n = calloc(1, sizeof(*n));
    if (!n) {
        redis_conn_fail(c, "out of memory");
        return NULL;
    }
    if (!tree(c, n, &budget, 0, deadline)) {
        resp_tree_free(n);
        return NULL;
    }
    return n;
}

void resp_tree_free(struct resp_node *n)
{
    if (!n)
        return;
    tree_free(n);
    free(n);
}
