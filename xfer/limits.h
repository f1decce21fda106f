/*
 * What every layer of libkvrt-xfer shares: its limits, and how it fails
 * (BASE_FAIL and ULL, from the base under libkvrt-xfer and libkvrt-store).
 *
 * Layer 0 of libkvrt-xfer: every layer includes it.
 */
#ifndef KVRT_XFER_LIMITS_H
#define KVRT_XFER_LIMITS_H

#include <kvrt/xfer.h>

#include "base/fail.h"

/* The limits, each named once: a staging chunk (and so a data message) is
 * at most 16 GiB; a transfer names at most 2^24 blocks; a reason a peer
 * gives for a failure is cut at 1 KiB (KVRT_XFER_MAX_NOTIFICATION, in the
 * public header, bounds notifications); a token range's order walks
 * segments of at most 2^24 tokens (a block size). */
#define XFER_MAX_CHUNK (1ull << 34)
#define XFER_MAX_BLOCKS (1ull << 24)
#define XFER_MAX_BLOCK_TOKENS (1ull << 24)
#define XFER_MAX_REASON 1024u
/* How long a politely closed endpoint waits for the peer to close its side
 * (xt_ep_linger), the bound the flush it replaces had. */
#define XFER_LINGER_S 2.0

#include <string.h>

/* The bytes of a reason that go on the wire. */
static inline size_t xfer_reason_len(const char *why)
{
    size_t n = strlen(why);
    return n < XFER_MAX_REASON ? n : XFER_MAX_REASON;
}

#endif
