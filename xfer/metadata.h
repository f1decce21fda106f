/*
 * The metadata blob: what a peer needs to address a cache, and nothing
 * more (format: docs/xfer.md, "The metadata blob").  Writing and a complete
 * parse with every length bounded; the placement is rebuilt by kvrt and
 * compared, so a corrupted or forged blob is refused by name instead of
 * steering bytes.  Whether a signed blob's MAC is right is the caller's
 * check (auth.h): this layer only finds it.
 *
 * Layer 1 of libkvrt-xfer: libkvrt only (the fuzz target compiles it
 * alone).
 */
#ifndef KVRT_XFER_METADATA_H
#define KVRT_XFER_METADATA_H

#include <stddef.h>
#include <stdint.h>

#include "desc.h"

enum { XFER_NONCE_BYTES = 32, XFER_MAC_BYTES = 32 };

/* The fields of a blob besides the cache. */
struct xfer_md_fields {
    bool addressable;  /* data can move straight into and out of the cache */
    uint64_t agent_id; /* never 0 */
    uint64_t chunk_bytes;
    uint8_t nonce[XFER_NONCE_BYTES]; /* the agent's, fresh at its creation */
    const uint8_t *worker_addr;      /* points into the blob when parsed */
    uint32_t worker_addr_len;
};

/* A parsed blob (pointers into it). */
struct xfer_md {
    struct xfer_desc cache; /* owns its rebuilt placement */
    struct xfer_md_fields f;
    bool is_signed;
    size_t signed_len;  /* the MAC covers blob[0, signed_len) */
    const uint8_t *mac; /* XFER_MAC_BYTES, when signed */
};

/*
 * Write a blob for `cache` (malloc'd).  With `sign`, room for the MAC is
 * left at *mac_offset (the MAC covers every byte before it), for the
 * caller to fill.
 */
int xfer_md_write(const struct xfer_desc *cache, const struct xfer_md_fields *f, bool sign, uint8_t **blob, size_t *len,
                  size_t *mac_offset);
int xfer_md_parse(const uint8_t *blob, size_t len, struct xfer_md *md);
void xfer_md_free(struct xfer_md *md);

#endif
