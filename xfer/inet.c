/*
 * Socket addresses of either family (inet.h): parsing what a caller
 * gives, naming what a peer connects from, allow-list networks.  Host
 * names go through getaddrinfo once, when the caller names one; literals
 * never touch the resolver (AI_NUMERICHOST first), so an address is never
 * looked up on a name server by accident.
 *
 * Layer 1 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fail.h"
#include "inet.h"

/* The text without brackets ("[::1]" -> "::1"); false when they do not
 * pair up. */
static bool unbracket(const char *text, char *out, size_t size)
{
    size_t n = strlen(text);
    if (text[0] == '[') {
        if (n < 2 || text[n - 1] != ']' || n - 2 >= size)
            return false;
        memcpy(out, text + 1, n - 2);
        out[n - 2] = '\0';
        return strchr(out, '[') == NULL && strchr(out, ']') == NULL;
    }
    if (n >= size || strchr(text, ']'))
        return false;
    memcpy(out, text, n + 1);
    return true;
}

static int lookup(const char *host, const char *port, int flags, int prefer, struct sockaddr_storage *sa,
                  socklen_t *len)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = flags | AI_NUMERICSERV;
    int e = getaddrinfo(host, port, &hints, &res);
    if (e != 0)
        return e;
    int got = EAI_FAMILY;
    for (int pass = 0; pass < 2 && got != 0; pass++)
        for (const struct addrinfo *r = res; r; r = r->ai_next)
            if ((r->ai_family == AF_INET || r->ai_family == AF_INET6) && r->ai_addrlen <= sizeof(*sa) &&
                (pass == 1 || prefer == AF_UNSPEC || r->ai_family == prefer)) {
                memset(sa, 0, sizeof(*sa));
                memcpy(sa, r->ai_addr, r->ai_addrlen);
                *len = (socklen_t)r->ai_addrlen;
                got = 0;
                break;
            }
    freeaddrinfo(res);
    if (got == 0 && sa->ss_family == AF_INET6) {
        /* ::ffff:a.b.c.d is an IPv4 address: UCX takes it as one. */
        struct sockaddr_in6 in6;
        memcpy(&in6, sa, sizeof(in6));
        if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
            struct sockaddr_in in;
            memset(&in, 0, sizeof(in));
            in.sin_family = AF_INET;
            in.sin_port = in6.sin6_port;
            memcpy(&in.sin_addr, in6.sin6_addr.s6_addr + 12, 4);
            memset(sa, 0, sizeof(*sa));
            memcpy(sa, &in, sizeof(in));
            *len = sizeof(in);
        }
    }
    return got;
}

int xfer_inet_parse(const char *text, uint16_t port, int prefer, struct sockaddr_storage *sa, socklen_t *len,
                    const char *fn)
{
    const char *t = text ? text : "127.0.0.1";
    char host[256], serv[8];
    if (!*t || !unbracket(t, host, sizeof(host)) || !*host)
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "%s: address \"%.300s\" is not an address (valid: an IPv4 or IPv6 address, e.g. 127.0.0.1, "
                         "::1, [::1], fe80::1%%eth0, or a host name)",
                         fn, t);
    snprintf(serv, sizeof(serv), "%u", (unsigned)port);
    int e = lookup(host, serv, AI_NUMERICHOST, prefer, sa, len);
    if (e == 0)
        return KVRT_OK;
    /* Not a literal: a host name, unless it looks like a broken literal
     * (a colon is never part of a name). */
    if (strchr(host, ':') == NULL)
        e = lookup(host, serv, AI_ADDRCONFIG, prefer, sa, len);
    if (e == 0)
        return KVRT_OK;
    return BASE_FAIL(KVRT_ERR_INVALID,
                     "%s: address \"%.300s\" is neither an IPv4 nor an IPv6 address nor a host name that resolves "
                     "(%s; valid: e.g. 127.0.0.1, ::1, [::1], fe80::1%%eth0, localhost)",
                     fn, t, gai_strerror(e));
}

bool xfer_inet_of(const struct sockaddr *sa, struct xfer_inet *out)
{
    memset(out, 0, sizeof(*out));
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        out->family = AF_INET;
        memcpy(out->addr, &in->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            out->family = AF_INET;
            memcpy(out->addr, in6->sin6_addr.s6_addr + 12, 4);
        } else {
            out->family = AF_INET6;
            memcpy(out->addr, in6->sin6_addr.s6_addr, 16);
        }
        return true;
    }
    return false;
}

bool xfer_inet_loopback(const struct sockaddr *sa)
{
    struct xfer_inet a;
    if (!xfer_inet_of(sa, &a))
        return false;
    if (a.family == AF_INET)
        return a.addr[0] == 127;
    static const uint8_t one[16] = {[15] = 1};
    return memcmp(a.addr, one, 16) == 0;
}

void xfer_inet_name(const struct sockaddr *sa, bool port, char *out, size_t size)
{
    char host[INET6_ADDRSTRLEN + 64] = "?"; /* room for a zone */
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        if (port)
            snprintf(out, size, "%s:%u", host, (unsigned)ntohs(in->sin_port));
        else
            snprintf(out, size, "%s", host);
        return;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        /* getnameinfo gives the zone too (fe80::1%eth0). */
        if (getnameinfo(sa, sizeof(*in6), host, sizeof(host), NULL, 0, NI_NUMERICHOST) != 0)
            inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        if (port)
            snprintf(out, size, "[%s]:%u", host, (unsigned)ntohs(in6->sin6_port));
        else
            snprintf(out, size, "%s", host);
        return;
    }
    snprintf(out, size, "?");
}

int xfer_inet_net_parse(const char *text, struct xfer_inet_net *out, const char *fn)
{
    char host[64];
    const char *slash = strchr(text, '/');
    size_t n = slash ? (size_t)(slash - text) : strlen(text);
    memset(out, 0, sizeof(*out));
    if (n == 0 || n >= sizeof(host))
        goto bad;
    memcpy(host, text, n);
    host[n] = '\0';
    if (inet_pton(AF_INET, host, out->net.addr) == 1)
        out->net.family = AF_INET;
    else if (inet_pton(AF_INET6, host, out->net.addr) == 1)
        out->net.family = AF_INET6;
    else
        goto bad;
    unsigned max = out->net.family == AF_INET ? 32 : 128;
    out->bits = max;
    if (slash) {
        char *rest = NULL;
        unsigned long b = strtoul(slash + 1, &rest, 10);
        if (!slash[1] || *rest || slash[1] == '-' || slash[1] == '+' || b > max)
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "%s: allow entry \"%.100s\" has prefix length \"%.40s\"; valid are 0..%u", fn, text,
                             slash + 1, max);
        out->bits = (unsigned)b;
    }
    struct xfer_inet probe = out->net;
    if (out->net.family == AF_INET6) {
        /* An IPv4-mapped network is an IPv4 one (clients are compared so). */
        static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
        if (memcmp(probe.addr, mapped, 12) == 0 && out->bits >= 96) {
            memmove(out->net.addr, probe.addr + 12, 4);
            memset(out->net.addr + 4, 0, 12);
            out->net.family = AF_INET;
            out->bits -= 96;
        }
    }
    return KVRT_OK;
bad:
    return BASE_FAIL(KVRT_ERR_INVALID,
                     "%s: allow entry \"%.100s\" is not an IPv4 or IPv6 address or network (e.g. 10.0.0.7, "
                     "10.1.0.0/16, fd00::7, fd00::/64)",
                     fn, text);
}

bool xfer_inet_in(const struct xfer_inet *a, const struct xfer_inet_net *n)
{
    if (a->family != n->net.family)
        return false;
    unsigned whole = n->bits / 8, rest = n->bits % 8;
    if (memcmp(a->addr, n->net.addr, whole) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xffu << (8 - rest));
    return (a->addr[whole] & mask) == (n->net.addr[whole] & mask);
}
