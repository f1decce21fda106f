/*
 * kvrt — moving KV blocks between engines over UCX (libkvrt-xfer).
 *
 *   kvrt_xfer_agent_create()    register a cache (and a staging pool) with UCX
 *   kvrt_xfer_listen/accept()   the serving side: a UCP listener on ADDR:PORT
 *   kvrt_xfer_connect()         the initiating side; metadata is exchanged and
 *                               checked for compatibility before any byte moves
 *   kvrt_xfer_metadata_export() / kvrt_xfer_peer_load()
 *                               the same without a listener: the engine
 *                               carries the metadata blobs itself
 *   kvrt_xfer_post()            start moving indexed block lists (push or
 *                               pull), with an optional layer range and head
 *                               range, converting between layouts on the way;
 *                               returns a handle at once
 *   kvrt_xfer_test/wait/release()  the handle's state, a bounded wait, its end
 *   kvrt_xfer_transfer()        post + wait + release
 *   kvrt_xfer_progress()        advance every transfer of the agent, both
 *   kvrt_xfer_event_fd/arm()    directions; or sleep on a file descriptor
 *   kvrt_xfer_notification()    messages delivered once a peer's transfer
 *                               into (or pull from) this cache is complete
 *   kvrt_xfer_grant/expect()    which blocks a peer may write and read
 *
 * A listening agent faces its network: every message is checked before it
 * is used, a transfer completes only when every byte it promised arrived
 * exactly once, and with a pre-shared key only peers that prove they hold
 * it connect (docs/security.md).
 *
 * A separate library (link `pkg-config --libs kvrt-xfer`) with its own
 * soname, libkvrt-xfer.so.<KVRT_XFER_API_VERSION_MAJOR>: libkvrt and the
 * backends never depend on UCX.  Every function returns a kvrt status (or
 * KVRT_XFER_PENDING where said) and sets kvrt_error_message() on failure.
 *
 * Progress: nothing moves unless someone calls into the agent.  On both
 * sides, kvrt_xfer_progress() (or kvrt_xfer_wait(), kvrt_xfer_accept(),
 * kvrt_xfer_transfer(), which progress while they wait) must be called until
 * the transfers of interest are complete; an engine that does not want to
 * spin polls kvrt_xfer_event_fd() after kvrt_xfer_arm() returned KVRT_OK.
 *
 * Threads: every function may be called from any thread.  The calls on one
 * agent -- and on its peers and handles -- are serialised by a lock inside
 * the agent; a wait releases it between rounds of progress, so one thread
 * may wait on a handle while others post, test or progress.  Different
 * agents share nothing.  docs/xfer.md describes the protocol, the data
 * paths and what a dying peer does.
 */
#ifndef KVRT_XFER_H
#define KVRT_XFER_H

#include <stdbool.h>
#include <kvrt/common.h>
#include <kvrt/layout.h>
#include <kvrt/parallel.h>
#include <kvrt/runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * libkvrt-xfer's own API version: its soname is
 * libkvrt-xfer.so.<KVRT_XFER_API_VERSION_MAJOR>; the rules are libkvrt's
 * (docs/design.md §12).  meson.build reads both numbers from here.
 */
#define KVRT_XFER_API_VERSION_MAJOR 1
#define KVRT_XFER_API_VERSION_MINOR 4

/* Version of the metadata blob (kvrt_xfer_metadata_export). */
#define KVRT_XFER_METADATA_VERSION 3u

/* The longest notification a transfer carries, in bytes. */
#define KVRT_XFER_MAX_NOTIFICATION (1u << 20)

/* Returned by kvrt_xfer_test() and kvrt_xfer_wait() while a transfer is
 * still under way, and by kvrt_xfer_arm() when there is work to progress:
 * not an error (positive, unlike every kvrt_status error). */
#define KVRT_XFER_PENDING 1

typedef struct kvrt_xfer_agent kvrt_xfer_agent;
typedef struct kvrt_xfer_peer kvrt_xfer_peer;
typedef struct kvrt_xfer_handle kvrt_xfer_handle;

/* kvrt_xfer_agent_options.flags */
enum {
    /* Listen on (or connect to) an address other than loopback without a
     * key: any host that reaches it may then read and write the cache. */
    KVRT_XFER_INSECURE = 1u << 0,
    /* Peers write and read only blocks granted to them (kvrt_xfer_grant). */
    KVRT_XFER_REQUIRE_GRANTS = 1u << 1,
};

struct kvrt_xfer_agent_options {
    size_t size; /* sizeof(struct kvrt_xfer_agent_options) */
    /* Converting transfers (and caches UCX cannot address) go through
     * registered host staging in chunks of chunk_bytes: the sender packs
     * chunk k+1 while chunk k is on the wire and the receiver scatters chunk
     * k-1.  0: 2 MiB.  A chunk always holds at least one block's staging
     * bytes (it grows to that). */
    uint64_t chunk_bytes;
    /* The staging pool, registered once: half of it for chunks being sent,
     * half for chunks being received, at least two chunks each.  0: eight
     * chunks. */
    uint64_t staging_bytes;
    /* Longest wait of a blocking call (accept, connect) and longest time a
     * transfer may go without progress before it fails, in seconds.  0: 30. */
    double timeout_s;
    /* A file holding the pre-shared key (16 to 4096 bytes, readable by its
     * owner only): peers connect only when both prove they hold it.  NULL:
     * KVRT_XFER_KEY_FILE, when set; otherwise no key (docs/security.md). */
    const char *key_file;
    /* Peers may connect only from these IPv4 or IPv6 addresses or
     * networks ("10.0.0.7,10.1.0.0/16,fd00::/64"); NULL or "": from
     * anywhere. */
    const char *allow;
    uint32_t flags; /* KVRT_XFER_INSECURE, KVRT_XFER_REQUIRE_GRANTS */
    uint32_t reserved32;
    /* The agent's warnings (a peer refused, a message that failed a check),
     * one line each; NULL: to stderr. */
    void (*log)(void *user, enum kvrt_log_level level, const char *message);
    void *log_user;
    uint8_t reserved[24]; /* zero (kvrt_xfer_agent_options_default) */
};

KVRT_API void kvrt_xfer_agent_options_default(struct kvrt_xfer_agent_options *options);

/**
 * An agent for `cache` (bound on backend `b`): a UCP context and worker;
 * the cache allocation is registered once when its memory has a host
 * address (kvrt_buffer_address), and so is the staging pool.  A cache over
 * caller memory (kvrt_cache_wrap, kvrt_cache_from_dlpack) is registered
 * like an allocated one.  Every endpoint uses UCX's peer error handling.
 * UCX reads its own environment (UCX_TLS, UCX_NET_DEVICES, ...); where the
 * user has not set them, the agent sets UCX_CMA_MEMORY_INVALIDATE=y (peer
 * error handling keeps zero-copy shared memory with it) for its own
 * context (docs/xfer.md).
 *
 * The agent holds the cache (kvrt_cache_retain) until it is destroyed, so
 * kvrt_cache_destroy and kvrt_runtime_close may come first: the agent
 * goes on working with the cache, its memory stays registered, and a
 * wrapped cache's release callback (or DLPack deleter) and the rest of the
 * runtime's close wait for kvrt_xfer_agent_destroy.
 * @return KVRT_OK; KVRT_ERR_INVALID for bad arguments; KVRT_ERR_STATE for a
 *   cache already destroyed or whose runtime was closed; KVRT_ERR_DEVICE
 *   when UCX fails (its reason in the message).
 */
KVRT_API int kvrt_xfer_agent_create(kvrt_backend *b, kvrt_cache *cache, const struct kvrt_xfer_agent_options *options,
                                    kvrt_xfer_agent **out);
/**
 * Fail every transfer still under way (their handles stay valid until
 * released and report the failure), close every peer abruptly and release
 * UCX resources, then let go of the cache, in this order: UCX unmaps the
 * cache's memory, the agent frees its buffers, and only then is its
 * reference on the cache released.  A cache still alive stays as it was;
 * one destroyed (or whose runtime was closed) meanwhile is freed then: a
 * wrapped cache's release callback runs on this thread, after the agent
 * is gone, and a closed runtime finishes closing.
 */
KVRT_API void kvrt_xfer_agent_destroy(kvrt_xfer_agent *a);

/* What an agent holds and has done (kvrt_xfer_agent_stats). */
struct kvrt_xfer_stats {
    size_t size;               /* sizeof(struct kvrt_xfer_stats) */
    uint64_t peers;            /* peers not yet closed (any state) */
    uint64_t handles;          /* handles not yet released */
    uint64_t outgoing;         /* transfers this agent is sending or serving */
    uint64_t incoming;         /* transfers being received */
    uint64_t ucx_requests;     /* UCX operations not yet complete */
    uint64_t staging_busy;     /* staging chunks in use */
    uint64_t staging_chunks;   /* staging chunks in the pool */
    uint64_t chunk_bytes;      /* bytes of one staging chunk */
    uint64_t registered_bytes; /* cache and staging pool registered with UCX */
    double registration_s;     /* time their registration took (once) */
    uint64_t completed;        /* transfers completed (either role) */
    uint64_t failed;           /* transfers failed (either role) */
    uint64_t bytes_sent;       /* payload bytes whose sending completed */
    uint64_t bytes_received;   /* payload bytes received */
    uint64_t notifications;    /* notifications queued and not yet taken */
    uint64_t refused;          /* connections refused (key, allow list, metadata) */
    uint64_t violations;       /* peers failed for a message that broke the protocol */
    uint64_t strangers;        /* messages dropped: no session has their id and token */
    uint64_t denied;           /* transfers refused for blocks not granted */
    /* 1.1: a refusing handler on every active-message id a peer can name
     * (UCX 1.13 crashes on an id without one); what that cost, once. */
    double handlers_s;      /* time their registration took */
    uint64_t handler_bytes; /* memory they hold, kvrt's and UCX's table */
    /* 1.2: bytes of bytes_received this agent read in its peers' memory
     * (one host: docs/xfer.md, "One host"), and the peers it reads so. */
    uint64_t bytes_read_in_place;
    uint32_t peers_read_in_place;
    uint8_t reserved[4];
    /* 1.4, appended (a caller built against 1.2 or 1.3 passes size 192 and
     * gets the fields above): why transfers failed, each failure counted
     * once under one reason (they add up to `failed`) ... */
    uint64_t failed_timeout;     /* no progress for the agent's timeout */
    uint64_t failed_peer_closed; /* the peer closed, or this side closed the peer */
    uint64_t failed_connection;  /* the connection broke, the peer's process died */
    uint64_t failed_violation;   /* the peer broke the protocol (size, chunk, reference, ...) */
    uint64_t failed_refused;     /* refused: blocks not granted, a limit, or the peer refused */
    uint64_t failed_released;    /* released or given up before it completed, by either side */
    uint64_t failed_other;       /* out of memory, a backend's error */
    /* ... and why connections were refused (they add up to `refused`) and
     * transfers refused past a limit (beside `denied`: not granted). */
    uint64_t refused_auth;      /* key missing on one side, another key, no proof, bad signature */
    uint64_t refused_allow;     /* not in the allow list */
    uint64_t refused_busy;      /* too many handshakes under way */
    uint64_t refused_metadata;  /* metadata that does not fit this cache */
    uint64_t refused_malformed; /* a handshake message that breaks the protocol */
    uint64_t refused_other;     /* out of memory, the data endpoint could not be opened */
    uint64_t refused_limit;     /* transfers refused past a per-peer or notification limit */
    uint8_t reserved_end[64];
};

/* The size of struct kvrt_xfer_stats before 1.4. */
#define KVRT_XFER_STATS_SIZE_1_3 192

/** Fill *stats (stats->size set by the caller: sizeof, 0 for sizeof, or
 * KVRT_XFER_STATS_SIZE_1_3, which fills the fields of 1.3 alone). */
KVRT_API int kvrt_xfer_agent_stats(kvrt_xfer_agent *a, struct kvrt_xfer_stats *stats);

/**
 * 1.3: the agent's stats in Prometheus' text exposition format (0.0.4),
 * each family with HELP and TYPE lines (docs/xfer.md, "Metrics").
 * *needed (may be NULL) gets the bytes of the text with its NUL; buf NULL
 * and size 0 ask for that alone.  The text is written whole or not at all.
 * @return KVRT_OK; KVRT_ERR_INVALID when size is less than *needed (buf
 *   then holds ""); KVRT_ERR_NOMEM.
 */
KVRT_API int kvrt_xfer_agent_metrics(kvrt_xfer_agent *a, char *buf, size_t size, size_t *needed);

/**
 * The metadata a peer needs: magic, version, layout, specs, layers, blocks,
 * the staging chunk size, the agent's identity and the worker address;
 * signed with the agent's key when it has one.  *blob is allocated by
 * kvrt; release it with kvrt_free().
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
    bool cache_addressable; /* false: the peer's transfers stage through host memory */
    uint64_t chunk_bytes;
    bool is_signed; /* signed with its agent's key */
    uint8_t reserved[31];
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
 * tokens per state and state size), check its worker address, then
 * connect to it.  An agent with a key takes only blobs signed with that
 * key (kvrt_xfer_metadata_export signs them); one without takes only
 * unsigned blobs.  Both sides load each other's blob: a message from an
 * agent that is not a peer here is dropped.
 * @return KVRT_OK; KVRT_ERR_INVALID for a bad blob or an incompatible
 *   peer, naming both values; KVRT_ERR_REFUSED for a blob not signed with
 *   this agent's key; KVRT_ERR_DEVICE when UCX fails.
 */
KVRT_API int kvrt_xfer_peer_load(kvrt_xfer_agent *a, const void *blob, size_t len, kvrt_xfer_peer **out);

/**
 * Listen on addr:port (addr NULL: 127.0.0.1; port 0: any free port, returned
 * in *bound_port when not NULL).  addr: an IPv4 or IPv6 literal ("::1",
 * "[fd00::7]", "fe80::1%eth0") or a host name; KVRT_ERR_INVALID naming a
 * text that is none, KVRT_ERR_UNSUPPORTED for an IPv6 address while this
 * agent's UCX tcp interfaces are not all IPv6 (UCX 1.13 carries IPv6 only
 * there: docs/xfer.md, "Connections").  An address other than loopback needs a
 * key (kvrt_xfer_agent_options.key_file, KVRT_XFER_KEY_FILE) or the
 * KVRT_XFER_INSECURE flag: KVRT_ERR_REFUSED otherwise, saying how to add
 * one.  Handshakes then run whenever the agent is progressed, several at
 * once, each bounded by the agent's timeout (docs/xfer.md).
 */
KVRT_API int kvrt_xfer_listen(kvrt_xfer_agent *a, const char *addr, uint16_t port, uint16_t *bound_port);

/**
 * Wait up to timeout_s (0: the agent's timeout) for a handshake to end and
 * report it: the peer, or why it was refused; the agent's other transfers
 * progress meanwhile.  The handshake exchanges and checks metadata and,
 * with a key, has both sides prove they hold it; a peer without the key,
 * from outside the allow list or with incompatible metadata is told why
 * and refused before any byte of the cache moves, and the listener goes
 * on (call again).
 * @return KVRT_OK; KVRT_XFER_PENDING when no handshake ended within the
 *   time (call again); KVRT_ERR_REFUSED for a peer that did not prove the
 *   key; KVRT_ERR_INVALID for an incompatible or malformed peer;
 *   KVRT_ERR_DEVICE for a peer that died or stalled in its handshake.
 */
KVRT_API int kvrt_xfer_accept(kvrt_xfer_agent *a, double timeout_s, kvrt_xfer_peer **out);

/**
 * Connect to a listener, run the handshake (both sides check metadata and,
 * with a key, prove they hold it).  addr as kvrt_xfer_listen takes it.  An
 * address other than loopback needs a key or KVRT_XFER_INSECURE, as
 * kvrt_xfer_listen.
 * @return KVRT_OK; KVRT_ERR_REFUSED when either side did not prove the
 *   key (or their keys differ, or one has none); KVRT_ERR_INVALID for an
 *   incompatible peer; KVRT_ERR_DEVICE when it cannot be reached.
 */
KVRT_API int kvrt_xfer_connect(kvrt_xfer_agent *a, const char *addr, uint16_t port, kvrt_xfer_peer **out);

/**
 * Fail this peer's transfers still under way, tell the peer this side is
 * done (it sees KVRT_XFER_PEER_CLOSED) and close.  The peer's handles stay
 * valid until released.
 */
KVRT_API void kvrt_xfer_peer_close(kvrt_xfer_peer *p);

enum kvrt_xfer_peer_state {
    KVRT_XFER_PEER_CONNECTED = 0,
    KVRT_XFER_PEER_CLOSED = 1, /* the peer said goodbye */
    KVRT_XFER_PEER_FAILED = 2, /* the connection broke; the reason is kept */
};

/** State of a peer; *why (may be NULL) gets the failure, "" otherwise. */
KVRT_API enum kvrt_xfer_peer_state kvrt_xfer_peer_state(const kvrt_xfer_peer *p, const char **why);

/** How messages name the peer: "ADDR:PORT" of a connection, or "peer N". */
KVRT_API const char *kvrt_xfer_peer_name(const kvrt_xfer_peer *p);

/* What a grant lets a peer do with blocks of this agent's cache. */
enum {
    KVRT_XFER_GRANT_READ = 1u << 0,  /* pull them */
    KVRT_XFER_GRANT_WRITE = 1u << 1, /* push into them */
};

/**
 * Let peer p read and/or write (`access`) these blocks of this agent's
 * cache.  An agent created with KVRT_XFER_REQUIRE_GRANTS refuses, before
 * any byte moves, a push into a block the pushing peer may not write and a
 * pull of a block it may not read (counted in stats.denied; the peer's
 * transfer fails with KVRT_ERR_REFUSED naming the block); without that
 * flag grants are kept but not needed.  Grants stay until revoked.
 * @return KVRT_OK; KVRT_ERR_INVALID naming a bad id or access value.
 */
KVRT_API int kvrt_xfer_grant(kvrt_xfer_peer *p, unsigned access, const int64_t *ids, size_t count);
/** Take grants back (ids NULL and count 0: every block). */
KVRT_API int kvrt_xfer_revoke(kvrt_xfer_peer *p, unsigned access, const int64_t *ids, size_t count);
/** The receiving side's name for it: peer p may push into these blocks. */
KVRT_API int kvrt_xfer_expect(kvrt_xfer_peer *p, const int64_t *ids, size_t count);
/**
 * Grants to every peer of agent a, those connected and those to come (a
 * peer is checked against its own grants and the agent's).  For blocks
 * any peer that proved the key may use, and for peers that transfer as
 * soon as their kvrt_xfer_connect returns, before kvrt_xfer_accept has
 * handed them to this side.  Same values and errors as kvrt_xfer_grant.
 */
KVRT_API int kvrt_xfer_agent_grant(kvrt_xfer_agent *a, unsigned access, const int64_t *ids, size_t count);
/** Take agent-wide grants back (ids NULL and count 0: every block). */
KVRT_API int kvrt_xfer_agent_revoke(kvrt_xfer_agent *a, unsigned access, const int64_t *ids, size_t count);

enum kvrt_xfer_direction {
    KVRT_XFER_PUSH = 0, /* local blocks -> remote blocks (write; the default) */
    KVRT_XFER_PULL = 1, /* remote blocks -> local blocks (read) */
};

enum kvrt_xfer_method {
    KVRT_XFER_AUTO = 0,    /* choose per pair (docs/xfer.md) */
    KVRT_XFER_REGIONS = 1, /* same layout: one message per planned region */
    KVRT_XFER_DIRECT = 2,  /* region-to-region messages between two layouts */
    KVRT_XFER_STAGING = 3, /* pipelined staging-order chunks */
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

/*
 * Whole blocks (num_tokens 0): block local_ids[i] moves to remote_ids[i],
 * num_blocks of each; both caches must then hold the same tokens per block
 * in every layer moved.
 *
 * A token range (num_tokens > 0, API 1.2): local_ids and remote_ids are
 * each side's block table for one sequence, its block ids in token order
 * from token 0 (num_blocks and remote_num_blocks long; remote_num_blocks 0:
 * num_blocks).  Token t of [token_start, token_start + num_tokens) moves
 * from local block local_ids[t / bs_local], slot t % bs_local, to remote
 * block remote_ids[t / bs_remote], slot t % bs_remote (the other way for a
 * pull), whatever the two block sizes; other slots are left as they are.
 * Every layer moved must hold one state per token (attention, MLA); state
 * layers move by block id, as whole blocks.
 */
struct kvrt_xfer_request {
    size_t size; /* sizeof(struct kvrt_xfer_request) */
    enum kvrt_xfer_direction direction;
    enum kvrt_xfer_method method; /* KVRT_XFER_AUTO unless forced */
    size_t num_blocks;
    const int64_t *local_ids;  /* num_blocks each; copied by kvrt_xfer_post */
    const int64_t *remote_ids; /* destination ids must not repeat */
    /* Layers [layer_start, layer_start + num_layers), in placement order on
     * both sides; num_layers 0: every layer from layer_start. */
    uint64_t layer_start, num_layers;
    /* Heads [local_head_start, + num_heads) of this side move to/from
     * [remote_head_start, + num_heads) of the peer (tensor parallelism);
     * num_heads 0: all heads, which both sides must then have alike. */
    uint64_t local_head_start, remote_head_start, num_heads;
    /* Delivered to the peer once the data is complete (may be empty;
     * copied by kvrt_xfer_post). */
    const void *notification;
    size_t notification_len;
    /* 1.2: a token range instead of whole blocks (above); 0 tokens: whole
     * blocks. */
    uint64_t token_start, num_tokens;
    uint64_t remote_num_blocks; /* the remote table's length; 0: num_blocks */
    uint8_t reserved[40];       /* zero (kvrt_xfer_request_default) */
};

KVRT_API void kvrt_xfer_request_default(struct kvrt_xfer_request *req);

struct kvrt_xfer_plan {
    size_t size;                  /* sizeof(struct kvrt_xfer_plan) */
    enum kvrt_xfer_method method; /* what was chosen */
    uint64_t regions;             /* planned regions (REGIONS, DIRECT) or staged chunks */
    uint64_t messages;            /* data messages sent (== regions unless split) */
    uint64_t bytes;               /* cache bytes moved (selected pages, unpadded) */
    uint64_t wire_bytes;          /* payload bytes on the wire */
    uint64_t chunks;              /* staging chunks */
    uint64_t chunk_blocks;        /* blocks per staging chunk */
    double seconds;               /* post to completion (kvrt_xfer_handle_plan) */
    char why[160];                /* the reason for the method */
    uint8_t reserved[32];
};

/**
 * Plan a transfer without moving anything: every check of kvrt_xfer_post
 * (ids in range on both sides, ranges, shapes).
 */
KVRT_API int kvrt_xfer_plan(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *req,
                            struct kvrt_xfer_plan *plan);

/**
 * Check the request completely and start it; *out gets a handle at once.
 * The request's arrays and notification are copied.  A refused request
 * moves nothing and gives no handle.  Push: complete when the peer has
 * every byte and has queued the notification (it acknowledges); pull:
 * complete when every byte is here, then the notification goes to the peer.
 * Any number of transfers may be in flight, to one peer or several.
 */
KVRT_API int kvrt_xfer_post(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *req,
                            kvrt_xfer_handle **out);

/**
 * Progress once, then the handle's state: KVRT_OK complete;
 * KVRT_XFER_PENDING under way; otherwise the status it failed with (its
 * message, naming the peer, in kvrt_error_message()).
 */
KVRT_API int kvrt_xfer_test(kvrt_xfer_handle *h);

/**
 * Progress until the transfer ends or timeout_s passes (timeout_s < 0: until
 * it ends, which a stalled transfer does after the agent's timeout).
 * @return as kvrt_xfer_test().
 */
KVRT_API int kvrt_xfer_wait(kvrt_xfer_handle *h, double timeout_s);

/** The plan the handle runs, with seconds from post to completion (0 before). */
KVRT_API int kvrt_xfer_handle_plan(kvrt_xfer_handle *h, struct kvrt_xfer_plan *plan);

/**
 * Give the handle back.  A transfer still under way is abandoned: it fails,
 * the peer is told to drop what arrived, and no notification is delivered.
 * Buffers stay in use inside the agent until UCX is done with them.
 */
KVRT_API void kvrt_xfer_release(kvrt_xfer_handle *h);

/**
 * Post, wait until the transfer ends, release.  plan (may be NULL) gets the
 * plan and its time.  A refused request moves nothing.
 */
KVRT_API int kvrt_xfer_transfer(kvrt_xfer_agent *a, kvrt_xfer_peer *p, const struct kvrt_xfer_request *req,
                                struct kvrt_xfer_plan *plan);

/**
 * Progress every transfer of the agent and serve its peers' requests (the
 * receiving side's staging, pulls from this cache, acknowledgements).
 * @return KVRT_OK, or the first failure of a transfer that has no handle
 *   here (a peer's push that could not be stored): the peer is told.
 */
KVRT_API int kvrt_xfer_progress(kvrt_xfer_agent *a);

/** A file descriptor that becomes readable when the agent has work. */
KVRT_API int kvrt_xfer_event_fd(kvrt_xfer_agent *a, int *fd);

/**
 * Progress, then arm the event fd.  KVRT_OK: armed, nothing to do until
 * the fd is readable (poll it, then call kvrt_xfer_arm or progress again);
 * KVRT_XFER_PENDING: there is work now, call again instead of sleeping.
 */
KVRT_API int kvrt_xfer_arm(kvrt_xfer_agent *a);

/**
 * Take the oldest notification: *msg (kvrt_free it; NUL-terminated for
 * convenience), *len and the peer it came from (from may be NULL; *from is
 * NULL when that peer has been closed since).  None: KVRT_OK, *msg NULL.
 */
KVRT_API int kvrt_xfer_notification(kvrt_xfer_agent *a, kvrt_xfer_peer **from, char **msg, size_t *len);

/*
 * Tensor and pipeline parallelism: which heads and layers a rank's
 * transfers cover.  libkvrt's rules (<kvrt/parallel.h>, docs/parallel.md),
 * here so that a transfer engine finds them beside the requests they fill.
 */

/**
 * kvrt_tp_map: the runs {remote_rank, local_head_start, remote_head_start,
 * num_heads} that move exactly this rank's KV heads between a local
 * tensor-parallel group of local_tp and a remote one of remote_tp, each the
 * head range of one request to that remote rank.  direction is the
 * requests': KVRT_XFER_PULL, where each head this rank holds is read from;
 * KVRT_XFER_PUSH, what this rank sends (KVRT_TP_PULL and KVRT_TP_PUSH
 * have the same values).  spread (a
 * sequence id, say) picks among a replicated head's sources; both sides
 * must use the same.  Heads that cannot be split or replicated that way,
 * a rank out of range and a too-small array are refused by name.
 */
KVRT_API int kvrt_xfer_tp_map(uint64_t kv_heads, uint64_t local_tp, uint64_t local_rank, uint64_t remote_tp,
                              uint64_t spread, enum kvrt_xfer_direction direction, struct kvrt_tp_entry *entries,
                              size_t capacity, size_t *count);

/**
 * kvrt_pp_layers: the layers [*start, *start + *count) pipeline stage rank
 * of pp_size holds, vLLM's split of num_layers (VLLM_PP_LAYER_PARTITION
 * when set): the layer range of that stage's requests.
 */
KVRT_API int kvrt_xfer_pp_layers(uint64_t num_layers, uint64_t pp_size, uint64_t rank, uint64_t *start,
                                 uint64_t *count);

#ifdef __cplusplus
}
#endif
#endif
