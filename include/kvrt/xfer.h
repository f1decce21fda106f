/*
 * kvrt — moving KV blocks between engines over UCX (libkvrt-xfer).
 *
 *   kvrt_xfer_agent_create()    register a cache (and a staging area) with UCX
 *   kvrt_xfer_listen/accept()   the serving side: a UCP listener on ADDR:PORT
 *   kvrt_xfer_connect()         the initiating side; metadata is exchanged and
 *                               checked for compatibility before any byte moves
 *   kvrt_xfer_transfer()        move indexed block lists (push or pull), with an
 *                               optional layer range and head range, converting
 *                               between layouts on the way
 *   kvrt_xfer_progress()        the serving side's loop: RMA targets must keep
 *                               progressing, and staged transfers are scattered
 *                               here
 *   kvrt_xfer_notification()    messages delivered when a transfer is complete
 *
 * A separate library (link `pkg-config --libs kvrt-xfer`): libkvrt and the
 * backends never depend on UCX.  Every function returns a kvrt status and
 * sets kvrt_error_message() on failure.  One agent is used by one thread at
 * a time.  docs/xfer.md describes the protocol and the choice of method.
 */
#ifndef KVRT_XFER_H
#define KVRT_XFER_H

#include <stdbool.h>
#include <kvrt/common.h>
#include <kvrt/layout.h>
#include <kvrt/runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kvrt_xfer_agent kvrt_xfer_agent;
typedef struct kvrt_xfer_peer kvrt_xfer_peer;

/* Version of the metadata blob (kvrt_xfer_metadata_export). */
#define KVRT_XFER_METADATA_VERSION 1u

struct kvrt_xfer_agent_options {
    size_t size; /* sizeof(struct kvrt_xfer_agent_options) */
    /* Registered host staging area for layout conversion and for caches
     * whose memory UCX cannot register.  0: the staging bytes of every block
     * of the cache, at most 64 MiB.  Larger transfers go in batches. */
    uint64_t staging_bytes;
    /* Longest wait of any call (accept, connect, a transfer, an
     * acknowledgement), in seconds.  0: 30. */
    double timeout_s;
    uint8_t reserved[64];
};

KVRT_API void kvrt_xfer_agent_options_default(struct kvrt_xfer_agent_options *options);

/**
 * An agent for `cache` (bound on backend `b`): a UCP context (RMA and active
 * messages) and worker; the cache allocation registered once when its memory
 * has a host address (kvrt_buffer_address), else transfers use host staging
 * through the backend's gather/scatter.  UCX reads its own environment
 * (UCX_TLS, UCX_NET_DEVICES).
 * @return KVRT_OK; KVRT_ERR_INVALID for bad arguments; KVRT_ERR_DEVICE when
 *   UCX fails (its reason in the message).
 */
KVRT_API int kvrt_xfer_agent_create(kvrt_backend *b, kvrt_cache *cache, const struct kvrt_xfer_agent_options *options,
                                    kvrt_xfer_agent **out);
/** Close every peer (abruptly) and release UCX resources; the cache stays. */
KVRT_API void kvrt_xfer_agent_destroy(kvrt_xfer_agent *a);

/**
 * The metadata a peer needs: magic, version, layout, specs, layers, blocks,
 * the registered allocations with their remote keys, and the worker address.
 * *blob is allocated by kvrt; release it with kvrt_free().
 */
KVRT_API int kvrt_xfer_metadata_export(kvrt_xfer_agent *a, void **blob, size_t *len);

/* What a metadata blob describes (kvrt_xfer_metadata_parse). */
struct kvrt_xfer_metadata_info {
    size_t size; /* sizeof(struct kvrt_xfer_metadata_info) */
    uint32_t version;
    enum kvrt_layout layout;
    uint64_t num_blocks;
    uint64_t num_layers;
    uint64_t num_sets;
    uint64_t cache_bytes;
    bool cache_registered; /* false: the peer's transfers use host staging */
    uint64_t staging_bytes;
};

/**
 * Validate a blob completely (bounds, magic, version, specs, a placement
 * that kvrt rebuilds and compares) without a UCX context.
 * @return KVRT_OK; KVRT_ERR_INVALID naming the field, its value and what is
 *   valid for a truncated, corrupted or foreign blob.
 */
KVRT_API int kvrt_xfer_metadata_parse(const void *blob, size_t len, struct kvrt_xfer_metadata_info *info);

/**
 * Load a peer's metadata: check it against this agent's cache (number of
 * layers and, per layer, kind, element type, block size, head size(s),
 * tokens per state and state size), then connect to its worker address.
 * @return KVRT_OK; KVRT_ERR_INVALID for a bad blob or an incompatible
 *   peer, naming both values; KVRT_ERR_DEVICE when UCX fails.
 */
KVRT_API int kvrt_xfer_peer_load(kvrt_xfer_agent *a, const void *blob, size_t len, kvrt_xfer_peer **out);

/**
 * Listen on addr:port (addr NULL: 127.0.0.1; port 0: any free port, returned
 * in *bound_port when not NULL).
 */
KVRT_API int kvrt_xfer_listen(kvrt_xfer_agent *a, const char *addr, uint16_t port, uint16_t *bound_port);

/**
 * Wait up to timeout_s (0: the agent's) for a peer to connect, then exchange
 * and check metadata.  An incompatible peer is told why and refused.
 * @return KVRT_OK; KVRT_ERR_DEVICE on a timeout or a transport failure;
 *   KVRT_ERR_INVALID for an incompatible peer.
 */
KVRT_API int kvrt_xfer_accept(kvrt_xfer_agent *a, double timeout_s, kvrt_xfer_peer **out);

/** Connect to a listener, exchange and check metadata (both sides check). */
KVRT_API int kvrt_xfer_connect(kvrt_xfer_agent *a, const char *addr, uint16_t port, kvrt_xfer_peer **out);

/** Tell the peer this side is done (it sees KVRT_XFER_PEER_CLOSED), then close. */
KVRT_API void kvrt_xfer_peer_close(kvrt_xfer_peer *p);

enum kvrt_xfer_peer_state {
    KVRT_XFER_PEER_CONNECTED = 0,
    KVRT_XFER_PEER_CLOSED = 1, /* the peer said goodbye */
    KVRT_XFER_PEER_FAILED = 2, /* the connection broke; the reason is kept */
};

/** State of a peer; *why (may be NULL) gets the failure, "" otherwise. */
KVRT_API enum kvrt_xfer_peer_state kvrt_xfer_peer_state(const kvrt_xfer_peer *p, const char **why);

enum kvrt_xfer_direction {
    KVRT_XFER_PUSH = 0, /* local blocks -> remote blocks (write; the default) */
    KVRT_XFER_PULL = 1, /* remote blocks -> local blocks (read) */
};

enum kvrt_xfer_method {
    KVRT_XFER_AUTO = 0,    /* choose per pair (docs/xfer.md) */
    KVRT_XFER_REGIONS = 1, /* same layout: one RMA per planned region */
    KVRT_XFER_DIRECT = 2,  /* region-to-region RMA between two layouts */
    KVRT_XFER_STAGING = 3, /* staging order through registered host areas */
};

/** Method name ("auto", "regions", "direct", "staging"), or NULL. */
KVRT_API const char *kvrt_xfer_method_name(enum kvrt_xfer_method method);

/**
 * Parse a method name, exact and case-sensitive.
 * @return KVRT_OK, or KVRT_ERR_INVALID with a message that quotes the value
 *         and lists the valid names.
 */
KVRT_API int kvrt_xfer_method_parse(const char *name, enum kvrt_xfer_method *out);

/** The comma-separated method names in enum order, for messages and help. */
KVRT_API const char *kvrt_xfer_method_valid_names(void);

struct kvrt_xfer_request {
    size_t size; /* sizeof(struct kvrt_xfer_request) */
    enum kvrt_xfer_direction direction;
    enum kvrt_xfer_method method; /* KVRT_XFER_AUTO unless forced */
    size_t num_blocks;
    const int64_t *local_ids;  /* num_blocks each */
    const int64_t *remote_ids; /* destination ids must not repeat */
    /* Layers [layer_start, layer_start + num_layers), in placement order on
     * both sides; num_layers 0: every layer from layer_start. */
    uint64_t layer_start, num_layers;
    /* Heads [local_head_start, + num_heads) of this side move to/from
     * [remote_head_start, + num_heads) of the peer (tensor parallelism);
     * num_heads 0: all heads, which both sides must then have alike. */
    uint64_t local_head_start, remote_head_start, num_heads;
    /* Delivered to the peer once the data is complete (may be empty). */
    const void *notification;
    size_t notification_len;
    uint8_t reserved[64];
};

KVRT_API void kvrt_xfer_request_default(struct kvrt_xfer_request *req);

struct kvrt_xfer_plan {
    size_t size;                  /* sizeof(struct kvrt_xfer_plan) */
    enum kvrt_xfer_method method; /* what was chosen */
    uint64_t regions;             /* planned RMA regions (REGIONS, DIRECT) or staged runs */
    uint64_t rma_ops;             /* RMA operations issued (== regions for REGIONS) */
    uint64_t bytes;               /* cache bytes moved (selected pages, unpadded) */
    uint64_t wire_bytes;          /* bytes carried by RMA */
    uint64_t batches;             /* staging rounds */
    double seconds;               /* wall time of kvrt_xfer_transfer */
    char why[160];                /* the reason for the method */
};

/**
 * Plan a transfer without moving anything: every check of
 * kvrt_xfer_transfer (ids in range on both sides, ranges, shapes).
 */
KVRT_API int kvrt_xfer_plan(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *req,
                            struct kvrt_xfer_plan *plan);

/**
 * Move the blocks and return when the data is complete at the destination
 * and the notification is sent (or on an error or after the timeout).  A
 * refused request moves nothing.  plan may be NULL.
 */
KVRT_API int kvrt_xfer_transfer(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *req,
                                struct kvrt_xfer_plan *plan);

/** Progress the worker once and serve pending peer requests. */
KVRT_API int kvrt_xfer_progress(kvrt_xfer_agent *a);

/**
 * Take the oldest notification: *msg (kvrt_free it; NUL-terminated for
 * convenience), *len and the peer it came from.  None: KVRT_OK, *msg NULL.
 */
KVRT_API int kvrt_xfer_notification(kvrt_xfer_agent *a, kvrt_xfer_peer **from, char **msg, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
