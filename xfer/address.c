/*
 * UCX 1.13's packed worker address, walked with bounds.  The constants are
 * UCX's wire format (src/ucp/wireup/address.c and src/ucp/core/ucp_types.h
 * of UCX 1.13.1): a format, not a rule of kvrt's, so they are restated here
 * once, next to the walk that needs them.
 *
 * Layer 1 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "address.h"

enum {
    V1 = 0,
    V2 = 1,
    HDR_DEBUG_INFO = 1u << 0,
    HDR_WORKER_UUID = 1u << 1,
    HDR_CLIENT_ID = 1u << 2,
    HDR_AM_ONLY = 1u << 3,
    NULL_RESOURCE = 0xff,
    FLAG_LAST = 0x80,
    FLAG_HAS_EP_ADDR = 0x40,
    FLAG_NUM_PATHS = 0x40,
    FLAG_SYS_DEVICE = 0x20,
    MD_EMPTY_DEV = 0x80,
    MD_MASK_V1 = 0x1f,
    MD_MASK_V2 = 0x7f,
    DEV_LEN_MASK = 0x1f,
    IFACE_LEN_MASK = 0x3f,
    ATTR_V1 = 16, /* overhead, bandwidth, latency overhead (floats), priority and flags */
    ATTR_V2 = 8,  /* three fp8 values, priority, segment size, flags */
    MAX_MDS = 64,
};

struct walk {
    const uint8_t *p;
    size_t len, pos;
    char *why;
    size_t n;
    bool failed;
};

static bool fail(struct walk *w, const char *what)
{
    if (!w->failed)
        snprintf(w->why, w->n, "%s at byte %zu of %zu", what, w->pos, w->len);
    w->failed = true;
    return false;
}

static bool byte(struct walk *w, uint8_t *out, const char *what)
{
    if (w->failed)
        return false;
    if (w->pos >= w->len)
        return fail(w, what);
    *out = w->p[w->pos++];
    return true;
}

static bool skip(struct walk *w, size_t n, const char *what)
{
    if (w->failed)
        return false;
    if (n > w->len - w->pos)
        return fail(w, what);
    w->pos += n;
    return true;
}

/* A 7- or 5-bit value whose all-ones form says "the value is the next
 * byte" (version 2 only). */
static bool extended(struct walk *w, unsigned version, uint8_t first, uint8_t mask, unsigned *value, const char *what)
{
    *value = first & mask;
    if (version == V2 && *value == mask) {
        uint8_t b = 0;
        if (!byte(w, &b, what))
            return false;
        *value = b;
    }
    return true;
}

/* Version 1's overhead, bandwidth and latency overhead: UCX scores lanes
 * with them and asserts on a negative score.  A negative bandwidth is
 * UCX's own (older peers send "dedicated - shared"); the other two are
 * never negative. */
static bool sane_figures(const uint8_t *attr)
{
    float f[3];
    memcpy(f, attr, sizeof(f));
    return isfinite(f[0]) && isfinite(f[1]) && isfinite(f[2]) && f[0] >= 0 && f[1] != 0 && f[2] >= 0;
}

/* Version 2's segment size (bytes / 256 in the packed form): UCX divides
 * by it. */
static bool sane_v2(const uint8_t *attr)
{
    uint16_t seg;
    memcpy(&seg, attr + 4, sizeof(seg));
    return seg != 0;
}

int xfer_addr_parse(const uint8_t *addr, size_t len, struct xfer_addr_shape *shape, char *why, size_t n)
{
    struct walk w = {addr, len, 0, why, n, false};
    memset(shape, 0, sizeof(*shape));
    uint8_t h, flags;
    if (!addr || !byte(&w, &h, "an empty address"))
        return fail(&w, "an empty address"), -1;
    unsigned version = h & 0x0f;
    if (version == V1) {
        flags = (uint8_t)(h >> 4);
    } else if (version == V2) {
        if (!byte(&w, &flags, "a header cut short"))
            return -1;
    } else {
        char m[64];
        snprintf(m, sizeof(m), "address format version %u (UCX knows 0 and 1)", version);
        return fail(&w, m), -1;
    }
    shape->version = version;
    if (flags & HDR_AM_ONLY)
        return fail(&w, "an active-message-only address (not a worker's)"), -1;
    /* Version 1 always carries the worker's uuid (UCX 1.13 unpacks it so). */
    if ((version == V1 || (flags & HDR_WORKER_UUID)) && !skip(&w, 8, "a worker uuid cut short"))
        return -1;
    if ((flags & HDR_CLIENT_ID) && !skip(&w, 8, "a client id cut short"))
        return -1;
    if (flags & HDR_DEBUG_INFO) {
        uint8_t nlen;
        if (!byte(&w, &nlen, "a worker name cut short") || !skip(&w, nlen, "a worker name cut short"))
            return -1;
    }
    uint8_t b;
    if (!byte(&w, &b, "no device list"))
        return -1;
    if (b == NULL_RESOURCE)
        return fail(&w, "an address without transports"), -1;
    w.pos--;
    for (bool last_dev = false; !last_dev;) {
        uint8_t mb, lb;
        unsigned md, dev_len;
        if (!byte(&w, &mb, "a device cut short") ||
            !extended(&w, version, mb, version == V1 ? MD_MASK_V1 : MD_MASK_V2, &md, "a device cut short"))
            return -1;
        if (md >= MAX_MDS)
            return fail(&w, "a memory domain index past UCX's 64"), -1;
        bool empty = (mb & MD_EMPTY_DEV) != 0;
        if (!byte(&w, &lb, "a device length cut short") ||
            !extended(&w, version, lb, DEV_LEN_MASK, &dev_len, "a device length cut short"))
            return -1;
        last_dev = (lb & FLAG_LAST) != 0;
        if (lb & FLAG_NUM_PATHS) {
            uint8_t paths;
            if (!byte(&w, &paths, "a path count cut short"))
                return -1;
            if (paths == 0)
                return fail(&w, "a device with 0 paths"), -1;
        }
        /* A system device index names a local device table entry: an
         * address from elsewhere has no business naming one here. */
        if (lb & FLAG_SYS_DEVICE)
            return fail(&w, "a system device index (this UCX build packs none)"), -1;
        size_t dev_off = w.pos;
        if (!skip(&w, dev_len, "a device address cut short"))
            return -1;
        for (bool last_tl = empty; !last_tl;) {
            if (shape->entries == XFER_ADDR_MAX_ENTRIES)
                return fail(&w, "more than 128 transport entries"), -1;
            uint8_t cs[2], fl;
            unsigned iface_len;
            if (!byte(&w, &cs[0], "a transport cut short") || !byte(&w, &cs[1], "a transport cut short"))
                return -1;
            const uint8_t *attr = w.p + w.pos;
            if (!skip(&w, version == V1 ? ATTR_V1 : ATTR_V2, "transport attributes cut short"))
                return -1;
            if (version == V1 ? !sane_figures(attr) : !sane_v2(attr))
                return fail(&w, "a transport's performance figures are out of range"), -1;
            if (!byte(&w, &fl, "an interface length cut short") ||
                !extended(&w, version, fl, IFACE_LEN_MASK, &iface_len, "an interface length cut short"))
                return -1;
            last_tl = (fl & FLAG_LAST) != 0;
            /* Endpoint addresses belong to an endpoint's wire-up, never to a
             * worker's address. */
            if (fl & FLAG_HAS_EP_ADDR)
                return fail(&w, "endpoint addresses in a worker address"), -1;
            size_t iface_off = w.pos;
            if (!skip(&w, iface_len, "an interface address cut short"))
                return -1;
            unsigned e = shape->entries++;
            shape->tl[e].csum = (uint16_t)(cs[0] | (cs[1] << 8));
            shape->tl[e].dev_len = (uint16_t)dev_len;
            shape->tl[e].iface_len = (uint16_t)iface_len;
            shape->tl[e].dev_off = (uint32_t)dev_off;
            shape->tl[e].iface_off = (uint32_t)iface_off;
        }
    }
    /* Devices flagged empty carry no transport: such an address names no
     * way to reach its worker. */
    if (shape->entries == 0)
        return fail(&w, "an address whose devices carry no transport"), -1;
    if (w.pos != len) {
        char m[64];
        snprintf(m, sizeof(m), "%zu stray bytes after the address", len - w.pos);
        return fail(&w, m), -1;
    }
    return 0;
}

int xfer_addr_check(const struct xfer_addr_shape *mine, const uint8_t *addr, size_t len, char *why, size_t n)
{
    struct xfer_addr_shape theirs;
    if (xfer_addr_parse(addr, len, &theirs, why, n) != 0)
        return -1;
    /* A transport this side also has must come in a form UCX packs for it
     * (on any host: another's device list differs from this one's); one it
     * lacks UCX never uses. */
    for (unsigned i = 0; i < theirs.entries; i++) {
        bool known = false, match = false;
        uint16_t dev = 0, iface = 0;
        for (unsigned j = 0; j < mine->entries && !match; j++) {
            if (theirs.tl[i].csum != mine->tl[j].csum)
                continue;
            known = true;
            dev = mine->tl[j].dev_len;
            iface = mine->tl[j].iface_len;
            match = theirs.tl[i].dev_len == dev && theirs.tl[i].iface_len == iface;
        }
        if (!known)
            continue;
        char form[200];
        int f = xfer_addr_form(theirs.tl[i].csum, addr + theirs.tl[i].dev_off, theirs.tl[i].dev_len,
                               addr + theirs.tl[i].iface_off, theirs.tl[i].iface_len, form, sizeof(form));
        if (f < 0) {
            snprintf(why, n, "transport entry %u (name checksum 0x%04x) is %s", i, theirs.tl[i].csum, form);
            return -1;
        }
        /* A transport UCX 1.13 has none of: the sizes this side packs. */
        if (f == 0 && !match) {
            snprintf(why, n,
                     "transport entry %u (name checksum 0x%04x) has a %u-byte device and %u-byte interface "
                     "address; this UCX packs %u and %u for it",
                     i, theirs.tl[i].csum, theirs.tl[i].dev_len, theirs.tl[i].iface_len, dev, iface);
            return -1;
        }
    }
    return 0;
}
