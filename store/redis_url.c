/*
 * Parsing of the shared tier's URL (redis_url.h).  Every part is checked
 * here, at open, so that a typo is an error naming the value instead of a
 * store that silently misses: the scheme, the user's characters, each
 * host (brackets for IPv6, no stray ':' or '@'), each port's range.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include "redis_url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
           c == '_';
}

/* One HOST[:PORT] of length n at p. */
static bool parse_addr(const char *p, size_t n, struct redis_addr *a, char *why, size_t size)
{
    const char *host = p, *port = NULL;
    size_t hn;
    if (n > 0 && p[0] == '[') {
        const char *close = memchr(p, ']', n);
        if (!close) {
            snprintf(why, size, "\"%.*s\" opens an IPv6 bracket it does not close", (int)n, p);
            return false;
        }
        host = p + 1;
        hn = (size_t)(close - host);
        for (size_t i = 0; i < hn; i++)
            if (!(host_char(host[i]) || host[i] == ':' || host[i] == '%')) {
                snprintf(why, size, "\"%.*s\" is not an IPv6 address", (int)hn, host);
                return false;
            }
        size_t rest = n - (size_t)(close + 1 - p);
        if (rest > 0) {
            if (close[1] != ':') {
                snprintf(why, size, "\"%.*s\": after ']' comes ':PORT'", (int)n, p);
                return false;
            }
            port = close + 2;
        }
    } else {
        const char *colon = memchr(p, ':', n);
        hn = colon ? (size_t)(colon - p) : n;
        if (colon) {
            port = colon + 1;
            if (memchr(port, ':', n - hn - 1)) {
                snprintf(why, size, "\"%.*s\" has more than one ':' (write an IPv6 address as [ADDR]:PORT)", (int)n, p);
                return false;
            }
        }
        for (size_t i = 0; i < hn; i++)
            if (!host_char(host[i])) {
                snprintf(why, size, "host \"%.*s\" has the character '%c'", (int)hn, host, host[i]);
                return false;
            }
    }
    if (hn >= sizeof(a->host)) {
        snprintf(why, size, "a host of %zu bytes: longer than %zu", hn, sizeof(a->host) - 1);
        return false;
    }
    if (hn == 0) {
        snprintf(why, size, "\"%.*s\" names no host", (int)n, p);
        return false;
    }
    memcpy(a->host, host, hn);
    a->host[hn] = '\0';
    a->port = 6379;
    if (port) {
        size_t pn = n - (size_t)(port - p);
        char digits[8];
        long v = 0;
        bool ok = pn > 0 && pn < sizeof(digits);
        for (size_t i = 0; ok && i < pn; i++)
            ok = port[i] >= '0' && port[i] <= '9';
        if (ok) {
            memcpy(digits, port, pn);
            digits[pn] = '\0';
            v = strtol(digits, NULL, 10);
        }
        if (!ok || v < 1 || v > 65535) {
            snprintf(why, size, "port \"%.*s\" is not a number from 1 to 65535", (int)pn, port);
            return false;
        }
        a->port = (int)v;
    }
    return true;
}

bool redis_url_parse(const char *url, struct redis_url *out, char *why, size_t size)
{
    memset(out, 0, sizeof(*out));
    if (!url) {
        snprintf(why, size, "no URL");
        return false;
    }
    const char *p;
    if (strncmp(url, "redis://", 8) == 0)
        p = url + 8;
    else if (strncmp(url, "rediss://", 9) == 0) {
        p = url + 9;
        out->tls = true;
    } else {
        snprintf(why, size, "the scheme is not redis:// or rediss://");
        return false;
    }
    const char *at = strchr(p, '@');
    if (at) {
        size_t un = (size_t)(at - p);
        if (un == 0 || un >= sizeof(out->user)) {
            snprintf(why, size, "the user before '@' is empty or longer than %zu bytes", sizeof(out->user) - 1);
            return false;
        }
        for (size_t i = 0; i < un; i++)
            if (!host_char(p[i])) {
                snprintf(why, size, "the user \"%.*s\" has the character '%c' (a password goes in a file, not the URL)",
                         (int)un, p, p[i]);
                return false;
            }
        memcpy(out->user, p, un);
        p = at + 1;
        if (strchr(p, '@')) {
            snprintf(why, size, "more than one '@'");
            return false;
        }
    }
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n > 0 && p[n - 1] == '/')
            n--; /* redis://host:port/ */
        if (out->num_seeds == REDIS_URL_MAX_SEEDS) {
            snprintf(why, size, "more than %d addresses", REDIS_URL_MAX_SEEDS);
            return false;
        }
        if (!parse_addr(p, n, &out->seeds[out->num_seeds], why, size))
            return false;
        out->num_seeds++;
        if (!comma)
            break;
        p = comma + 1;
    }
    return true;
}

void redis_addr_format(const struct redis_addr *a, char *out, size_t size)
{
    if (strchr(a->host, ':'))
        snprintf(out, size, "[%s]:%d", a->host, a->port);
    else
        snprintf(out, size, "%s:%d", a->host, a->port);
}
