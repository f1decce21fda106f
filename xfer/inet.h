/*
 * Socket addresses of either family, as the API takes them: an agent
 * listens on and connects to IPv4 and IPv6 addresses ("127.0.0.1",
 * "::1", "[::1]", "fe80::1%eth0") and host names (resolved once, the
 * first address getaddrinfo gives); a peer's address is named
 * "10.0.0.7:4000" or "[fd00::7]:4000"; an allow list holds networks of
 * either family ("10.1.0.0/16,fd00::/64"), and an IPv4 client seen
 * through an IPv6 socket (::ffff:10.0.0.7) is held to the IPv4 entries.
 *
 * Layer 1 of libkvrt-xfer: the C library's resolver only.
 */
#ifndef KVRT_XFER_INET_H
#define KVRT_XFER_INET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* An address of either family, compared without its port: IPv4 (also an
 * IPv4-mapped IPv6 one) in the first 4 bytes, IPv6 in 16. */
struct xfer_inet {
    int family; /* AF_INET or AF_INET6 */
    uint8_t addr[16];
};

/* A network of an allow list. */
struct xfer_inet_net {
    struct xfer_inet net;
    unsigned bits;
};

/*
 * Parse `text` (NULL: 127.0.0.1) with `port` into *sa and *len: an IPv4 or
 * IPv6 literal, an IPv6 one in brackets, with a zone (%eth0) or not, or a
 * host name, whose first address of a family in `prefer` (AF_INET,
 * AF_INET6 or AF_UNSPEC) is taken, else its first.  An IPv4-mapped IPv6
 * literal (::ffff:10.0.0.7) gives the IPv4 address.  KVRT_OK;
 * KVRT_ERR_INVALID naming the text, for `fn`.
 */
int xfer_inet_parse(const char *text, uint16_t port, int prefer, struct sockaddr_storage *sa, socklen_t *len,
                    const char *fn);

/* Its address without the port (an IPv4-mapped IPv6 address as IPv4):
 * false for another family. */
bool xfer_inet_of(const struct sockaddr *sa, struct xfer_inet *out);

/* A loopback address (127.0.0.0/8, ::1, ::ffff:127.x.y.z). */
bool xfer_inet_loopback(const struct sockaddr *sa);

/* "10.0.0.7:4000", "[fd00::7]:4000" (the port left out when `port` is
 * false); "?" for another family. */
void xfer_inet_name(const struct sockaddr *sa, bool port, char *out, size_t size);

/*
 * An allow entry: "10.0.0.7", "10.1.0.0/16", "fd00::7", "fd00::/64".
 * KVRT_OK; KVRT_ERR_INVALID naming the entry and what is valid, for `fn`.
 */
int xfer_inet_net_parse(const char *text, struct xfer_inet_net *out, const char *fn);

/* The address lies in the network. */
bool xfer_inet_in(const struct xfer_inet *a, const struct xfer_inet_net *n);

#endif
