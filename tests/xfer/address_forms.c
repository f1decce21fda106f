/*
 * The forms a peer's UCX worker address may take per transport
 * (xfer/address_forms.c): every form UCX 1.13's packing code produces is
 * accepted, whatever this side's own devices are, and a neighbour of each
 * form is refused with a line naming the transport and what is valid.
 * The name checksums are recomputed here (UCX's ucs_crc16_string) and
 * pinned to the one UCX printed for tcp.
 */
#include <stdio.h>
#include <string.h>

#include "address.h"
#include "tap.h"

static uint16_t crc16(const char *s)
{
    uint16_t crc = 0xffff;
    for (; *s; s++) {
        crc ^= (uint8_t)*s;
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)((crc >> 1) ^ ((crc & 1) ? 0x8408u : 0));
    }
    return (uint16_t)~crc;
}

static int form(const char *tl, const uint8_t *dev, size_t dl, const uint8_t *iface, size_t il, char *why)
{
    why[0] = '\0';
    return xfer_addr_form(crc16(tl), dev, dl, iface, il, why, 256);
}

static void accepts(const char *tl, const uint8_t *dev, size_t dl, const uint8_t *iface, size_t il, const char *what)
{
    char why[256];
    int f = form(tl, dev, dl, iface, il, why);
    tap_ok(f == 1, "%s: %s (%zu-byte device, %zu-byte interface) is accepted%s%s", tl, what, dl, il, f ? " " : "", why);
}

static void refuses(const char *tl, const uint8_t *dev, size_t dl, const uint8_t *iface, size_t il, const char *what)
{
    char why[256];
    int f = form(tl, dev, dl, iface, il, why);
    tap_ok(f == -1 && strstr(why, tl) && strstr(why, "valid:") && !strchr(why, '\n'), "%s: %s is refused (\"%s\")", tl,
           what, why);
}

int main(void)
{
    tap_plan_dynamic();
    tap_ok(crc16("tcp") == 0x19cf, "UCX's checksum of \"tcp\" is 0x19cf (as UCX 1.13 packs it)");
    uint8_t z[32] = {0}, d[32];

    /* tcp: flags, family, then in_addr / in6_addr / local ns. */
    uint8_t v4[6] = {0, 2, 10, 0, 0, 7}, v6[18] = {0, 10, 0xfd}, lo[18] = {1, 2}, lo6[18] = {1, 10};
    lo[9] = 0x80; /* a network namespace follows the system id */
    accepts("tcp", v4, 6, z, 2, "an IPv4 NIC");
    accepts("tcp", v6, 18, z, 2, "an IPv6 NIC");
    accepts("tcp", lo, 18, z, 2, "IPv4 loopback with its namespace");
    accepts("tcp", lo6, 18, z, 2, "IPv6 loopback");
    refuses("tcp", v4, 6, z, 0, "an interface without a port");
    memcpy(d, v4, 6);
    d[1] = 10;
    refuses("tcp", d, 6, z, 2, "an IPv6 family with 4 address bytes");
    memcpy(d, v6, 18);
    d[1] = 2;
    refuses("tcp", d, 18, z, 2, "an IPv4 family with 16 address bytes");
    memcpy(d, v4, 6);
    d[0] = 1;
    refuses("tcp", d, 6, z, 2, "a loopback flag with 4 bytes");
    memcpy(d, v4, 6);
    d[0] = 4;
    refuses("tcp", d, 6, z, 2, "an unknown flag");
    refuses("tcp", v4, 5, z, 2, "a device cut short");

    /* Shared memory: the system id, with bit 63 when a namespace follows. */
    uint8_t id[8] = {1, 2, 3, 4, 5, 6, 7, 0}, idns[16] = {1, 2, 3, 4, 5, 6, 7, 0x80, 9};
    accepts("sysv", id, 8, z, 8, "root IPC namespace");
    accepts("sysv", idns, 16, z, 8, "another IPC namespace");
    refuses("sysv", idns, 8, z, 8, "a namespace flag without the namespace");
    refuses("sysv", id, 16, z, 8, "a namespace without its flag");
    accepts("posix", id, 8, z, 8, "shm_open");
    accepts("posix", id, 8, z, 16, "/proc links across pid namespaces");
    uint8_t path[8 + 9] = {0};
    memcpy(path + 8, "/tmp/shm", 9);
    accepts("posix", id, 8, path, sizeof(path), "a backing directory");
    path[sizeof(path) - 1] = 'x';
    refuses("posix", id, 8, path, sizeof(path), "a path without its NUL");
    uint8_t pid[4] = {0x39, 0x30, 0, 0}, pidns[16] = {0x39, 0x30, 0, 0x80};
    accepts("cma", id, 8, pid, 4, "a pid");
    accepts("cma", id, 8, pidns, 16, "a pid and its namespace");
    refuses("cma", id, 8, pidns, 4, "a pid-namespace flag without the namespace");
    refuses("cma", id, 8, z, 8, "8 interface bytes");
    accepts("knem", id, 8, z, 0, "no interface");
    accepts("xpmem", idns, 16, z, 16, "a segment and an xpmem id");
    accepts("self", z, 0, z, 8, "its id");
    refuses("self", id, 8, z, 8, "a device");

    /* InfiniBand and RoCE: flags say which fields follow. */
    uint8_t ib[32] = {0};
    accepts("rc_verbs", ib, 3, z, 0, "a LID");
    ib[0] = 64 | 32 | 2 | 1 | 4; /* interface id, 64-bit subnet, MTU, GID index, pkey */
    accepts("rc_mlx5", ib, 1 + 2 + 8 + 8 + 1 + 1 + 2, z, 1, "a LID with every option");
    ib[0] = 8 | 16; /* RoCE v? over IPv6 */
    accepts("ud_verbs", ib, 17, z, 3, "a RoCE GID");
    accepts("dc_mlx5", ib, 17, z, 5, "a RoCE GID");
    ib[0] = 16 | 32;
    refuses("ud_mlx5", ib, 5, z, 3, "both subnet sizes");
    ib[0] = 0;
    refuses("rc_verbs", ib, 4, z, 0, "a LID with a stray byte");

    char why[256];
    tap_ok(xfer_addr_form(crc16("cuda_ipc"), z, 3, z, 3, why, sizeof(why)) == 0,
           "a transport the table does not know is left to the caller");
    return tap_done();
}
