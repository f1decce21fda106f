/*
 * The forms UCX 1.13 packs for each transport's device and interface
 * address, restated from its packing code (docs/xfer.md, "Faults", lists
 * them with the UCX function that defines each).  A peer's entry is held
 * to every form UCX can produce for that transport, on any host and with
 * any device list -- not to what this side happens to pack for its own
 * devices, which refused a peer whose NIC differs from this side's (an
 * 18-byte loopback tcp address against a 6-byte IPv4 one).
 *
 * Layer 1 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "address.h"

/* ucs_crc16_string (src/ucs/algorithm/crc.c): UCX names a transport in an
 * address by this checksum of its name. */
static uint16_t crc16(const char *s)
{
    uint16_t crc = UINT16_MAX;
    for (; *s; s++) {
        crc ^= (uint8_t)*s;
        for (int bit = 0; bit < 8; bit++)
            crc = (uint16_t)((crc >> 1) ^ ((crc & 1) ? 0x8408u : 0));
    }
    return (uint16_t)~crc;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* uct_iface_local_addr_base_t / _ns_t (src/uct/base/uct_iface.c,
 * uct_iface_get_local_address): the host's system id, bit 63 set when a
 * namespace id follows.  8 or 16 bytes. */
static bool local_addr(const uint8_t *a, size_t len)
{
    bool ns = len >= 8 && (le64(a) >> 63) != 0;
    return (len == 8 && !ns) || (len == 16 && ns);
}

/* Shared memory transports' device address (src/uct/sm/base/sm_iface.c,
 * uct_sm_iface_get_device_address / _get_device_addr_len). */
static bool sm_dev(const uint8_t *d, size_t len)
{
    return local_addr(d, len);
}

/* tcp (src/uct/tcp/tcp_iface.c, uct_tcp_iface_get_device_address and
 * _length): flags (bit 0: loopback) and the address family, then the
 * in_addr (4 bytes) or in6_addr (16), or for loopback of either family a
 * uct_iface_local_addr_ns_t (16: the system id and the network namespace,
 * so one host's loopback is told from another's). */
static bool tcp_dev(const uint8_t *d, size_t len)
{
    if (len != 6 && len != 18)
        return false;
    uint8_t flags = d[0], family = d[1];
    if ((flags & ~1u) || (family != 2 && family != 10)) /* AF_INET, AF_INET6 */
        return false;
    if (flags & 1)
        return len == 18;
    return len == (family == 2 ? 6u : 18u);
}

/* InfiniBand and RoCE (src/uct/ib/base/ib_iface.c, uct_ib_address_pack and
 * uct_ib_address_size; flags in ib_device.h): a flags byte, then a raw GID
 * (Ethernet) or a LID with an optional interface id and a 16- or 64-bit
 * subnet prefix (InfiniBand), then an optional path MTU, GID index and
 * pkey. */
static bool ib_dev(const uint8_t *d, size_t len)
{
    enum { GID_INDEX = 1, PATH_MTU = 2, PKEY = 4, ETH = 8, SUBNET16 = 16, SUBNET64 = 32, IF_ID = 64 };
    if (len < 1)
        return false;
    uint8_t f = d[0];
    size_t want = 1;
    if (f & ETH) {
        want += 16; /* bits 4..7: RoCE's IPv6 flag and version */
    } else {
        if ((f & 0x80) || ((f & SUBNET16) && (f & SUBNET64)))
            return false;
        want += 2 + ((f & IF_ID) ? 8 : 0) + ((f & SUBNET16) ? 2 : 0) + ((f & SUBNET64) ? 8 : 0);
    }
    want += ((f & PATH_MTU) ? 1 : 0) + ((f & GID_INDEX) ? 1 : 0) + ((f & PKEY) ? 2 : 0);
    return len == want;
}

static bool no_dev(const uint8_t *d, size_t len)
{
    (void)d;
    return len == 0;
}

/* posix (src/uct/sm/mm/posix/mm_posix.c, uct_posix_iface_addr_length, after
 * the 8-byte segment id of uct_mm_iface_addr_t): nothing (shm_open), the
 * pid namespace (8, /proc/<pid>/fd links from another pid namespace), or
 * the backing directory's path and its NUL. */
static bool posix_iface(const uint8_t *a, size_t len)
{
    return len == 8 || len == 16 || (len >= 10 && a[8] == '/' && a[len - 1] == '\0');
}

/* cma (src/uct/sm/scopy/cma/cma_iface.c, uct_cma_iface_get_address): the
 * pid (4 bytes), or with bit 31 set the pid and its namespace (a 16-byte
 * struct). */
static bool cma_iface(const uint8_t *a, size_t len)
{
    bool ns = len >= 4 && (a[3] & 0x80) != 0;
    return (len == 4 && !ns) || (len == 16 && ns);
}

#define FIXED_IFACE(name, n)                                                                                           \
    static bool name(const uint8_t *a, size_t len)                                                                     \
    {                                                                                                                  \
        (void)a;                                                                                                       \
        return len == (n);                                                                                             \
    }
FIXED_IFACE(tcp_iface, 2)     /* uct_tcp_iface_addr_t: the port */
FIXED_IFACE(seg_iface, 8)     /* sysv: uct_mm_iface_addr_t alone (mm_sysv.c) */
FIXED_IFACE(xpmem_iface, 16)  /* uct_mm_iface_addr_t and an xpmem_segid_t (mm_xpmem.c) */
FIXED_IFACE(empty_iface, 0)   /* knem (knem_iface.c), rc_verbs (rc_iface.c) */
FIXED_IFACE(self_iface, 8)    /* uct_self_iface_addr_t (self.c) */
FIXED_IFACE(rc_mlx5_iface, 1) /* rc_mlx5_iface.c: one byte */
FIXED_IFACE(ud_iface, 3)      /* uct_ud_iface_addr_t: a 24-bit QP number (ud_iface.c) */
FIXED_IFACE(dc_iface, 5)      /* uct_dc_mlx5_iface_addr_t (dc_mlx5.h) */

static const struct form {
    const char *name;
    bool (*dev)(const uint8_t *, size_t);
    bool (*iface)(const uint8_t *, size_t);
    const char *valid; /* for messages */
} forms[] = {
    {"tcp", tcp_dev, tcp_iface, "a 6-byte IPv4 or 18-byte IPv6 or loopback device, a 2-byte interface"},
    {"posix", sm_dev, posix_iface, "an 8- or 16-byte device, an 8- or 16-byte interface or one ending in a path"},
    {"sysv", sm_dev, seg_iface, "an 8- or 16-byte device, an 8-byte interface"},
    {"xpmem", sm_dev, xpmem_iface, "an 8- or 16-byte device, a 16-byte interface"},
    {"cma", sm_dev, cma_iface, "an 8- or 16-byte device, a 4- or 16-byte interface"},
    {"knem", sm_dev, empty_iface, "an 8- or 16-byte device, no interface"},
    {"self", no_dev, self_iface, "no device, an 8-byte interface"},
    {"rc_verbs", ib_dev, empty_iface, "an InfiniBand or RoCE device, no interface"},
    {"rc_mlx5", ib_dev, rc_mlx5_iface, "an InfiniBand or RoCE device, a 1-byte interface"},
    {"ud_verbs", ib_dev, ud_iface, "an InfiniBand or RoCE device, a 3-byte interface"},
    {"ud_mlx5", ib_dev, ud_iface, "an InfiniBand or RoCE device, a 3-byte interface"},
    {"dc_mlx5", ib_dev, dc_iface, "an InfiniBand or RoCE device, a 5-byte interface"},
};

int xfer_addr_form(uint16_t csum, const uint8_t *dev, size_t dev_len, const uint8_t *iface, size_t iface_len, char *why,
                   size_t n)
{
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        if (crc16(forms[i].name) != csum)
            continue;
        if (forms[i].dev(dev, dev_len) && forms[i].iface(iface, iface_len))
            return 1;
        snprintf(why, n,
                 "%s with a %zu-byte device and %zu-byte interface address in a form UCX 1.13 never packs "
                 "(valid: %s)",
                 forms[i].name, dev_len, iface_len, forms[i].valid);
        return -1;
    }
    return 0;
}

unsigned xfer_addr_tcp_families(const struct xfer_addr_shape *s, const uint8_t *addr)
{
    unsigned got = 0;
    uint16_t tcp = crc16("tcp");
    for (unsigned i = 0; i < s->entries; i++)
        if (s->tl[i].csum == tcp && s->tl[i].dev_len >= 2) {
            uint8_t family = addr[s->tl[i].dev_off + 1]; /* after the flags (tcp_dev) */
            got |= family == 2 ? XFER_ADDR_INET : family == 10 ? XFER_ADDR_INET6 : 0u;
        }
    return got;
}
