/*
 * One connection to a Redis-protocol server, plain TCP or TLS, that never
 * blocks past a deadline: the socket is non-blocking and every connect,
 * handshake, write and read waits in poll() with the time left until one
 * absolute deadline (base_now's clock) that the caller sets for its whole
 * operation (not one timeout per read: a server sending one byte a second
 * cannot stretch a call).  Replies are read through a 4 KiB buffer for their lines; values
 * go from the socket straight into the caller's memory (resp.h).
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_REDIS_CONN_H
#define KVRT_STORE_REDIS_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <openssl/ssl.h>

#include "redis_url.h"

#define REDIS_CONN_BUF 4096

struct redis_conn {
    int fd; /* -1: closed */
    SSL *ssl;
    size_t at, end;  /* buf[at..end) is read and not yet parsed */
    const char *why; /* what failed last; points at whybuf or a constant */
    char whybuf[256];
    char buf[REDIS_CONN_BUF];
};

void redis_conn_init(struct redis_conn *c);
/* Connect to a (through TLS when tls is not NULL: the server's certificate
 * verified against the context's CAs and its name or address checked
 * against a's host) by the deadline.  false with c->why. */
bool redis_conn_open(struct redis_conn *c, const struct redis_addr *a, SSL_CTX *tls, double deadline);
bool redis_conn_is_open(const struct redis_conn *c);
void redis_conn_close(struct redis_conn *c);
/* Mark the connection failed with why (printf) and close it; returns false. */
bool redis_conn_fail(struct redis_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Write all of iov[0..n) by the deadline (iov is consumed). */
bool redis_conn_writev(struct redis_conn *c, struct iovec *iov, int n, double deadline);
/* Write what a plain TCP socket takes now of (*iov)[0..*n), without
 * waiting: *iov and *n move past what was written (and the first iovec
 * left is advanced within).  false (c->why, the connection closed) on an
 * error, or for a TLS connection, which is written whole. */
bool redis_conn_write_some(struct redis_conn *c, struct iovec **iov, int *n);
/* Read at least one more byte into the buffer (after compacting it);
 * fails when the buffer is full: no reply line is longer. */
bool redis_conn_fill(struct redis_conn *c, double deadline);
/* Exactly n bytes into dst: what is buffered, then from the socket. */
bool redis_conn_read(struct redis_conn *c, uint8_t *dst, uint64_t n, double deadline);

#endif
