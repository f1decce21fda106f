/* The part of the Redis protocol (RESP) the shared tier reads itself: the
 * replies to a pipeline of GETs, each value's bytes received straight
 * into the entry buffer it is for.  hiredis reads a reply 16 KiB at a
 * time into its own buffer, then copies the value into a reply object
 * (and moves the rest of its buffer after each pipelined reply), so a 1
 * MiB value crossed memory three times before the store could check it;
 * here it crosses once, the kernel's copy out of the socket.  Connections,
 * commands and every other reply stay hiredis's.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "shared.h"

/* Read what the socket has, at least one byte, after what is buffered. */
static bool fill(struct resp_reader *rr)
{
    if (rr->at > 0) {
        memmove(rr->buf, rr->buf + rr->at, rr->end - rr->at);
        rr->end -= rr->at;
        rr->at = 0;
    }
    if (rr->end == sizeof(rr->buf)) {
        rr->why = "a reply line longer than 4 KiB";
        return false;
    }
    for (;;) {
        ssize_t n = recv(rr->fd, rr->buf + rr->end, sizeof(rr->buf) - rr->end, 0);
        if (n > 0) {
            rr->end += (size_t)n;
            return true;
        }
        if (n < 0 && errno == EINTR)
            continue;
        rr->why = n == 0                                    ? "the server closed the connection"
                  : errno == EAGAIN || errno == EWOULDBLOCK ? "no reply within the timeout"
                                                            : "the connection failed";
        return false;
    }
}

/* Bytes into dst: what is buffered, then straight from the socket. */
static bool take(struct resp_reader *rr, uint8_t *dst, uint64_t n)
{
    uint64_t have = rr->end - rr->at;
    uint64_t k = have < n ? have : n;
    if (dst)
        memcpy(dst, rr->buf + rr->at, k);
    rr->at += k;
    for (uint64_t got = k; got < n;) {
        if (!dst) { /* skipped: through the buffer */
            if (!fill(rr))
                return false;
            uint64_t m = rr->end - rr->at < n - got ? rr->end - rr->at : n - got;
            rr->at += m;
            got += m;
            continue;
        }
        ssize_t r = recv(rr->fd, dst + got, n - got, MSG_WAITALL);
        if (r > 0) {
            got += (uint64_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        rr->why = r == 0                                    ? "the server closed the connection"
                  : errno == EAGAIN || errno == EWOULDBLOCK ? "no reply within the timeout"
                                                            : "the connection failed";
        return false;
    }
    return true;
}

/* One line, without its CRLF, into line (NUL-terminated). */
static bool line(struct resp_reader *rr, char *out, size_t size)
{
    for (;;) {
        char *nl = memchr(rr->buf + rr->at, '\n', rr->end - rr->at);
        if (nl) {
            size_t len = (size_t)(nl - (rr->buf + rr->at));
            if (len == 0 || nl[-1] != '\r' || len > size) {
                rr->why = "a reply that is not the Redis protocol";
                return false;
            }
            memcpy(out, rr->buf + rr->at, len - 1);
            out[len - 1] = '\0';
            rr->at += len + 1;
            return true;
        }
        if (!fill(rr))
            return false;
    }
}

void resp_reader_init(struct resp_reader *rr, int fd)
{
    rr->fd = fd;
    rr->at = rr->end = 0;
    rr->why = NULL;
}

enum resp_value resp_read_value(struct resp_reader *rr, uint8_t *dst, uint64_t cap, uint64_t *len)
{
    char head[64];
    *len = 0;
    if (!line(rr, head, sizeof(head)))
        return RESP_FAILED;
    if (head[0] == '-')
        return RESP_ABSENT; /* an error for this key (a server loading its data): not there */
    if (head[0] != '$') {
        rr->why = "a reply to GET that is not a value";
        return RESP_FAILED;
    }
    if (strcmp(head + 1, "-1") == 0)
        return RESP_ABSENT;
    char *e;
    errno = 0;
    unsigned long long n = strtoull(head + 1, &e, 10);
    if (head[1] < '0' || head[1] > '9' || *e || errno) {
        rr->why = "a value length that is not a number";
        return RESP_FAILED;
    }
    /* a value of another size is read as far as it fits and skipped past:
     * the checks refuse it by its size */
    uint64_t keep = n < cap ? n : cap;
    uint8_t crlf[2];
    if (!take(rr, dst, keep) || !take(rr, NULL, n - keep) || !take(rr, crlf, 2))
        return RESP_FAILED;
    if (crlf[0] != '\r' || crlf[1] != '\n') {
        rr->why = "a value not followed by CRLF";
        return RESP_FAILED;
    }
    *len = n;
    return RESP_VALUE;
}
