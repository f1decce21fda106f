/*
 * A deadline-bound connection to a Redis-protocol server (redis_conn.h).
 *
 * Why not hiredis: Debian 12's hiredis 0.14 has no TLS, and its timeout
 * is per read, so a server that trickles bytes holds a call for ever.
 * Here the socket is non-blocking and each wait is poll() with what is
 * left of the caller's one deadline.  TLS is OpenSSL over the same
 * socket: SSL_connect/SSL_read/SSL_write return WANT_READ/WANT_WRITE and
 * the same poll loop waits.  Host names are resolved by getaddrinfo,
 * which cannot be bounded: give addresses where a resolver may hang.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */

#include "redis_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "base/clock.h"

void redis_conn_init(struct redis_conn *c)
{
    c->fd = -1;
    c->ssl = NULL;
    c->at = c->end = 0;
    c->why = NULL;
    c->whybuf[0] = '\0';
}

bool redis_conn_is_open(const struct redis_conn *c)
{
    return c->fd >= 0;
}

void redis_conn_close(struct redis_conn *c)
{
    if (c->ssl) {
        SSL_free(c->ssl); /* no close_notify: the peer may be the reason */
        c->ssl = NULL;
    }
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->at = c->end = 0;
}

bool redis_conn_fail(struct redis_conn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->whybuf, sizeof(c->whybuf), fmt, ap);
    va_end(ap);
    c->why = c->whybuf;
    redis_conn_close(c);
    return false;
}

/* Wait for events on the socket until the deadline; false (c->why) when
 * the time is up or poll fails. */
static bool wait_for(struct redis_conn *c, short events, double deadline)
{
    for (;;) {
        double left = deadline - base_now();
        if (left <= 0)
            return redis_conn_fail(c, "no reply within the timeout");
        struct pollfd p = {.fd = c->fd, .events = events};
        int ms = (int)(left * 1000) + 1;
        int r = poll(&p, 1, ms);
        if (r > 0)
            return true;
        if (r < 0 && errno != EINTR)
            return redis_conn_fail(c, "poll: %s", strerror(errno));
    }
}

/* The first OpenSSL error, or the certificate verification's. */
static bool tls_fail(struct redis_conn *c, const char *what)
{
    long v = c->ssl ? SSL_get_verify_result(c->ssl) : X509_V_OK;
    unsigned long e = ERR_get_error();
    char err[160] = "";
    if (e)
        ERR_error_string_n(e, err, sizeof(err));
    ERR_clear_error();
    if (v != X509_V_OK)
        return redis_conn_fail(c, "TLS %s: the server's certificate: %s", what, X509_verify_cert_error_string(v));
    return redis_conn_fail(c, "TLS %s: %s", what, err[0] ? err : "the connection failed");
}

/* One TLS call's WANT_* answered by waiting; false when it failed. */
static bool tls_retry(struct redis_conn *c, int r, const char *what, double deadline)
{
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ)
        return wait_for(c, POLLIN, deadline);
    if (e == SSL_ERROR_WANT_WRITE)
        return wait_for(c, POLLOUT, deadline);
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 && r == 0))
        return redis_conn_fail(c, "the server closed the connection");
    if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
        return redis_conn_fail(c, "the connection failed: %s", strerror(errno));
    return tls_fail(c, what);
}

static bool tls_start(struct redis_conn *c, const struct redis_addr *a, SSL_CTX *ctx, double deadline)
{
    c->ssl = SSL_new(ctx);
    if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1)
        return tls_fail(c, "setup");
    unsigned char ip[16];
    bool is_ip = inet_pton(AF_INET, a->host, ip) == 1 || inet_pton(AF_INET6, a->host, ip) == 1;
    /* the certificate must name what was dialled: its address as an IP
     * SAN, or its name (then also sent as SNI) */
    if (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), a->host) != 1
              : (SSL_set1_host(c->ssl, a->host) != 1 || SSL_set_tlsext_host_name(c->ssl, a->host) != 1))
        return tls_fail(c, "setup");
    for (;;) {
        int r = SSL_connect(c->ssl);
        if (r == 1)
            return true;
        if (!tls_retry(c, r, "handshake", deadline))
            return false;
    }
}

bool redis_conn_open(struct redis_conn *c, const struct redis_addr *a, SSL_CTX *tls, double deadline)
{
    redis_conn_close(c);
    char port[8];
    snprintf(port, sizeof(port), "%d", a->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(a->host, port, &hints, &res);
    if (g != 0)
        return redis_conn_fail(c, "cannot resolve %s: %s", a->host, gai_strerror(g));
    bool ok = false;
    for (struct addrinfo *ai = res; ai && !ok; ai = ai->ai_next) {
        c->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (c->fd < 0) {
            redis_conn_fail(c, "socket: %s", strerror(errno));
            continue;
        }
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            if (errno != EINPROGRESS) {
                redis_conn_fail(c, "connect: %s", strerror(errno));
                continue;
            }
            if (!wait_for(c, POLLOUT, deadline))
                break; /* the time is up for every address */
            int err = 0;
            socklen_t len = sizeof(err);
            if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
                redis_conn_fail(c, "connect: %s", strerror(err ? err : errno));
                continue;
            }
        }
        ok = true;
    }
    freeaddrinfo(res);
    if (!ok)
        return false;
    c->at = c->end = 0;
    if (tls && !tls_start(c, a, tls, deadline))
        return false;
    return true;
}

/* SSL_write goes through write(): a peer gone would raise SIGPIPE in the
 * engine.  It is blocked for the call and a pending one taken back. */
static int tls_write(SSL *ssl, const void *p, int n)
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    int r = SSL_write(ssl, p, n);
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) && !sigismember(&old, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}

static bool write_tls(struct redis_conn *c, struct iovec *iov, int n, double deadline)
{
    /* small pieces (commands, CRLFs) gathered into one record; values
     * written from where they are */
    char stage[16384];
    for (int i = 0; i < n;) {
        const void *p;
        size_t len;
        if (iov[i].iov_len < sizeof(stage) / 4) {
            len = 0;
            while (i < n && iov[i].iov_len < sizeof(stage) / 4 && len + iov[i].iov_len <= sizeof(stage)) {
                memcpy(stage + len, iov[i].iov_base, iov[i].iov_len);
                len += iov[i].iov_len;
                i++;
            }
            p = stage;
        } else {
            p = iov[i].iov_base;
            len = iov[i].iov_len;
            i++;
        }
        while (len > 0) {
            int chunk = len > (1u << 30) ? 1 << 30 : (int)len;
            int r = tls_write(c->ssl, p, chunk);
            if (r > 0) {
                p = (const char *)p + r;
                len -= (size_t)r;
            } else if (!tls_retry(c, r, "write", deadline)) {
                return false;
            }
        }
    }
    return true;
}

bool redis_conn_write_some(struct redis_conn *c, struct iovec **iovp, int *np)
{
    if (c->fd < 0)
        return redis_conn_fail(c, "not connected");
    if (c->ssl)
        return redis_conn_fail(c, "a TLS connection is written whole (redis_conn_writev)");
    struct iovec *iov = *iovp;
    int n = *np;
    while (n > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)(n > 512 ? 512 : n)};
        ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            return redis_conn_fail(c, "could not send: %s", strerror(errno));
        }
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
    *iovp = iov;
    *np = n;
    return true;
}

bool redis_conn_writev(struct redis_conn *c, struct iovec *iov, int n, double deadline)
{
    if (c->fd < 0)
        return redis_conn_fail(c, "not connected");
    if (c->ssl)
        return write_tls(c, iov, n, deadline);
    while (redis_conn_write_some(c, &iov, &n) && n > 0)
        if (!wait_for(c, POLLOUT, deadline))
            return false;
    return n == 0;
}

/* Up to n bytes from the socket into dst, at least one. */
static ssize_t recv_some(struct redis_conn *c, void *dst, size_t n, double deadline)
{
    if (n > (1u << 30))
        n = 1u << 30;
    for (;;) {
        if (c->fd < 0)
            return -1;
        if (c->ssl) {
            int r = SSL_read(c->ssl, dst, (int)n);
            if (r > 0)
                return r;
            if (!tls_retry(c, r, "read", deadline))
                return -1;
            continue;
        }
        ssize_t r = recv(c->fd, dst, n, MSG_DONTWAIT);
        if (r > 0)
            return r;
        if (r == 0) {
            redis_conn_fail(c, "the server closed the connection");
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            redis_conn_fail(c, "the connection failed: %s", strerror(errno));
            return -1;
        }
        if (!wait_for(c, POLLIN, deadline))
            return -1;
    }
}

bool redis_conn_fill(struct redis_conn *c, double deadline)
{
    if (c->fd < 0)
        return redis_conn_fail(c, "not connected");
    if (c->at > 0) {
        memmove(c->buf, c->buf + c->at, c->end - c->at);
        c->end -= c->at;
        c->at = 0;
    }
    if (c->end == sizeof(c->buf))
        return redis_conn_fail(c, "a reply line longer than %zu bytes", sizeof(c->buf));
    ssize_t r = recv_some(c, c->buf + c->end, sizeof(c->buf) - c->end, deadline);
    if (r < 0)
        return false;
    c->end += (size_t)r;
    return true;
}

bool redis_conn_read(struct redis_conn *c, uint8_t *dst, uint64_t n, double deadline)
{
    uint64_t have = c->end - c->at;
    uint64_t k = have < n ? have : n;
    memcpy(dst, c->buf + c->at, k);
    c->at += k;
    for (uint64_t got = k; got < n;) {
        ssize_t r = recv_some(c, dst + got, n - got, deadline);
        if (r < 0)
            return false;
        got += (uint64_t)r;
    }
    return true;
}
