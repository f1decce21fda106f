/*
 * A UCX worker address from a peer, checked before UCX sees it.
 *
 * UCX 1.13 unpacks a worker address (ucp_ep_create with
 * UCP_EP_PARAM_FIELD_REMOTE_ADDRESS) without knowing its length and asserts
 * or reads past the end on malformed input.  This walks the same packed
 * format (UCX's src/ucp/wireup/address.c, versions 1 and 2, non-unified
 * mode) with every length bounded, and holds each transport entry of a
 * kind this process's own address also has to the forms UCX 1.13 packs
 * for that transport on any host (address_forms.c): what UCX is then
 * handed has a shape it produces itself.  An entry of a transport this
 * side lacks is skipped (UCX never unpacks it past its length).  The check
 * cannot vouch for what the bytes mean (an address still names where UCX
 * will connect); only a peer that proved the key (auth.h) is trusted for
 * that (docs/security.md).
 *
 * Layer 1 of libkvrt-xfer: no UCX call, so it is fuzzed on its own.
 */
#ifndef KVRT_XFER_ADDRESS_H
#define KVRT_XFER_ADDRESS_H

#include <stddef.h>
#include <stdint.h>

enum { XFER_ADDR_MAX_ENTRIES = 128 };

/* The transports of an address and their sizes. */
struct xfer_addr_shape {
    unsigned version; /* UCX's address format: 0 (v1) or 1 (v2) */
    unsigned entries;
    struct {
        uint16_t csum; /* UCX's checksum of the transport's name */
        uint16_t dev_len, iface_len;
        uint32_t dev_off, iface_off; /* where they lie in the address */
    } tl[XFER_ADDR_MAX_ENTRIES];
};

/*
 * Parse `addr` (len bytes) into *shape.  0, or -1 with *why set (at most
 * `n` bytes, naming the byte and what was wrong).
 */
int xfer_addr_parse(const uint8_t *addr, size_t len, struct xfer_addr_shape *shape, char *why, size_t n);

/* A peer's address against this process's own shape: the same rules, and
 * every entry of a transport this process also has in a form UCX 1.13
 * packs for it (for a transport address_forms.c does not know, the sizes
 * this process packs). */
int xfer_addr_check(const struct xfer_addr_shape *mine, const uint8_t *addr, size_t len, char *why, size_t n);

/*
 * One transport entry (its name's checksum, device and interface address)
 * against the forms UCX 1.13 packs for that transport (address_forms.c):
 * 1 a form UCX packs, -1 one it never packs (*why says which and what is
 * valid), 0 a transport the table does not know.
 */
int xfer_addr_form(uint16_t csum, const uint8_t *dev, size_t dev_len, const uint8_t *iface, size_t iface_len, char *why,
                   size_t n);

/*
 * The address families of the tcp interfaces in a checked address (this
 * process's own): XFER_ADDR_INET and/or XFER_ADDR_INET6, 0 without tcp.
 * UCX 1.13 gives each NIC the first family of UCX_TCP_AF_PRIO it has an
 * address of; a connection of the other family overflows a buffer in its
 * tcp wire-up (docs/xfer.md, "Connections"), so the caller holds the
 * connection's family to these.
 */
enum { XFER_ADDR_INET = 1u, XFER_ADDR_INET6 = 2u };
unsigned xfer_addr_tcp_families(const struct xfer_addr_shape *s, const uint8_t *addr);

/* Bytes of zeros kept after a copy of a checked address: a transport that
 * reads a fixed-size structure at the end of it reads zeros, not beyond. */
enum { XFER_ADDR_PAD = 256 };

#endif
