/*
 * kvrt — a KV store that outlives the engine (libkvrt-store).
 *
 *   kvrt_store_open()        a store for one model: a memory tier, and a
 *                            disk tier (LMDB) and a shared tier (Redis
 *                            protocol) when named
 *   kvrt_store_put()         store the whole chunks of a token range of a
 *                            sequence, read from a cache through its block
 *                            table
 *   kvrt_store_lookup()      how many leading tokens of a sequence are stored
 *                            for every head this rank needs
 *                            (kvrt_store_lookup_layers: and its layers)
 *   kvrt_store_get()         load them into a cache (any layout, block size,
 *                            tensor-parallel slice or pipeline stage)
 *   kvrt_store_put_post() / kvrt_store_get_post()
 *                            the same, asynchronous: test, wait, release
 *   kvrt_store_flush()       wait until every entry put so far is in the
 *                            disk and shared tiers
 *   kvrt_store_close()
 *
 * Entries are chunks of a sequence: chunk_tokens tokens (the store's own
 * size, independent of any cache's block size).  A chunk's key is SHA-256 of
 * the model's fingerprint, the previous chunk's key and the chunk's token
 * ids; an entry holds one chunk of one KV head (or MLA's latent) across
 * every layer (or one group of layers_per_entry layers), in the canonical
 * order docs/store.md gives byte by byte, so a rank at any tensor or
 * pipeline parallelism writes and reads the heads and layers it holds and
 * the keys do not depend on parallelism, layout or block size.
 *
 * Never wrong: every entry written to disk or to the shared tier carries a
 * checksum of its bytes (XXH3-128) and the fingerprint it was written for;
 * one that fails either check is dropped with one warning line, counted as
 * a miss and never loaded into a cache.  A store directory written for
 * another model, chunk size or format version is refused when it is opened,
 * naming the field that differs.
 *
 * A separate library (link `pkg-config --libs kvrt-store`) with its own
 * soname, libkvrt-store.so.<KVRT_STORE_API_VERSION_MAJOR>; it uses libkvrt
 * through its public headers only.  Every function returns a kvrt status
 * (or KVRT_STORE_PENDING where said) and sets kvrt_error_message() on
 * failure.  docs/store.md describes the tiers, the formats and the tool.
 *
 * Threads: a store may be used from any number of threads; calls are
 * serialised where they must be.  A request reads or writes its cache from
 * the store's worker thread: until it is complete, the engine must not
 * write the blocks of its range (a put) or read them (a get), and, for a
 * cache without a host address (OpenCL), must not use the cache at all.
 */
#ifndef KVRT_STORE_H
#define KVRT_STORE_H

#include <stdbool.h>
#include <kvrt/common.h>
#include <kvrt/placement.h>
#include <kvrt/runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * libkvrt-store's own API version: its soname is
 * libkvrt-store.so.<KVRT_STORE_API_VERSION_MAJOR>; the rules are libkvrt's
 * (docs/design.md §12).  meson.build reads both numbers from here.
 */
#define KVRT_STORE_API_VERSION_MAJOR 1
#define KVRT_STORE_API_VERSION_MINOR 2

/* Version of the canonical entry format and of the store directory
 * (docs/store.md); a directory of another version is refused. */
#define KVRT_STORE_FORMAT_VERSION 1u

/* Bytes of a chunk key, of a model fingerprint (SHA-256). */
#define KVRT_STORE_KEY_BYTES 32

/* Defaults of struct kvrt_store_options (kvrt_store_options_default). */
#define KVRT_STORE_DEFAULT_CHUNK_TOKENS 256u
#define KVRT_STORE_DEFAULT_MEMORY_BYTES (1ull << 30)
#define KVRT_STORE_DEFAULT_DISK_BYTES (16ull << 30)
#define KVRT_STORE_DEFAULT_QUEUE_BYTES (256ull << 20)
#define KVRT_STORE_DEFAULT_SHARED_TIMEOUT_S 1.0

/* Returned by kvrt_store_test() and kvrt_store_wait() while a request is
 * still under way: not an error (positive, unlike every kvrt_status error). */
#define KVRT_STORE_PENDING 1

typedef struct kvrt_store kvrt_store;
typedef struct kvrt_store_request kvrt_store_request;

struct kvrt_store_options {
    size_t size; /* sizeof(struct kvrt_store_options) */
    /* The model every entry is for: all its layers and all its KV heads
     * (kvrt_model_get_info()->placement_groups, or groups of one's own).
     * Its attention and MLA layers are stored, in this order; state layers
     * are refused.  NULL (num_groups 0): open an existing directory as it
     * is, to inspect it (stat, ls, verify, gc); put and get are refused. */
    const struct kvrt_group *groups;
    size_t num_groups;
    /* The model's id or revision as the caller names it ("meta-llama/
     * Llama-3.1-8B@5206a32"); part of the fingerprint.  Required with
     * groups. */
    const char *model_id;
    /* Tokens per chunk.  0: the directory's (inspecting), else
     * KVRT_STORE_DEFAULT_CHUNK_TOKENS. */
    uint64_t chunk_tokens;
    /* Memory tier: capacity in bytes (LRU); 0: no memory tier. */
    uint64_t memory_bytes;
    /* Disk tier: a directory (created when absent); NULL: none. */
    const char *path;
    /* Its capacity in bytes (LRU).  0: the directory's own, or
     * KVRT_STORE_DEFAULT_DISK_BYTES for a new one; otherwise recorded as
     * the directory's capacity. */
    uint64_t disk_bytes;
    /* Shared tier: "redis://[USER@]HOST:PORT[,HOST:PORT...]" (a
     * Redis-protocol server, or the seeds of a Redis Cluster), or
     * "rediss://..." for TLS; IPv6 as [ADDR]:PORT.  NULL: none.  Its
     * capacity and eviction are the server's (maxmemory with an
     * allkeys-lru policy). */
    const char *shared;
    /* The deadline of each call to the shared tier (connect, TLS, AUTH,
     * the whole pipeline) in seconds; 0: default. */
    double shared_timeout_s;
    /* Bound of the queue of entries on their way to the disk and shared
     * tiers; a put waits while it is full.  With a tenant key an entry
     * counts twice (its sealed copy waits beside it).  0: default. */
    uint64_t queue_bytes;
    /* Receives warnings (a dropped entry, an unreachable server), one line
     * each.  NULL: "kvrt-store: warning: ..." on stderr. */
    void (*log)(void *user, enum kvrt_log_level level, const char *message);
    void *log_user;
    /* The shared tier's ACL password (AUTH [USER] PASSWORD): a file of
     * one line, owned by this user or root, that group and others cannot
     * read or write (else refused).  NULL: no AUTH. */
    const char *shared_password_file;
    /* rediss:// only: the CA certificates (PEM) the server's certificate
     * must chain to (NULL: the system's), and an optional client
     * certificate (PEM chain) with its key (NULL: in the same file). */
    const char *shared_ca_file;
    const char *shared_cert_file;
    const char *shared_cert_key_file;
    /* The tenant secret shared by the engines that may share entries: a
     * file of 32 to 4096 bytes that only its owner can read (refused
     * otherwise, naming it).  With it, every key is a keyed hash and every
     * entry that leaves the process is sealed (AES-256-GCM): a store
     * without the same secret can neither find, read nor forge an entry.
     * NULL: the env variable KVRT_STORE_KEY_FILE, else no key
     * (docs/security.md, "The store"). */
    const char *key_file;
    /* KV events for routers, as vLLM publishes them (docs/store.md "KV
     * events"): a ZeroMQ PUB endpoint, bound when its host is the
     * wildcard "*" (vLLM's default, port 5557) or "::", or it is ipc:// or
     * inproc://, else connected to a subscriber that binds
     * ("tcp://router:5557"); NULL: no events. */
    const char *events;
    /* A ROUTER endpoint (bound) that resends missed batches; NULL: none.
     * Needs events. */
    const char *events_replay;
    /* 1.2: layers per entry (docs/store.md "Pipeline parallelism"): the
     * model's layers, in canonical order, are cut into consecutive groups
     * of this many (the last may be shorter) and an entry holds one chunk
     * of one head of one group, so that a pipeline stage stores and loads
     * the groups of its layers alone.  0 (or at least the model's layers):
     * one group of every layer, the format without groups.  Recorded in a
     * directory, like chunk_tokens; part of the fingerprint.  0 when
     * inspecting: the directory's. */
    uint64_t layers_per_entry;
};

/** Defaults: chunk_tokens 256, memory 1 GiB, no disk or shared tier,
 *  default disk capacity, timeout and queue, stderr warnings. */
KVRT_API void kvrt_store_options_default(struct kvrt_store_options *options);

/**
 * Open a store.  With a path, the directory is created when absent (its
 * parents must exist); an existing one must be a store of the same format
 * version, model fingerprint and chunk size, else it is refused naming the
 * field and both values.  Several processes (the ranks of one engine,
 * several engines) may open one directory at once.
 * @return KVRT_OK; KVRT_ERR_INVALID for bad options, a foreign or damaged
 *   directory, an unwritable path (each naming the value and what is
 *   valid); KVRT_ERR_UNSUPPORTED for a model with state layers;
 *   KVRT_ERR_DEVICE when the disk fails; KVRT_ERR_NOMEM.  An unreachable
 *   shared tier is not an error: it is warned about and counts as misses.
 */
KVRT_API int kvrt_store_open(const struct kvrt_store_options *options, kvrt_store **out);

/**
 * Wait for every request still under way, flush the queue (as
 * kvrt_store_flush, failures warned about), then close.  Requests not yet
 * released stay valid until released.
 */
KVRT_API void kvrt_store_close(kvrt_store *s);

/**
 * Wait until every entry queued so far is written to the disk and shared
 * tiers.  After KVRT_OK, what was put before the call survives the process
 * (kill -9 included) in the disk tier.
 * @return KVRT_OK; KVRT_ERR_DEVICE naming how many entries could not be
 *   written to the disk tier since the last flush, and why (a full disk).
 *   Writes to an unreachable shared tier are dropped with a warning, not
 *   an error.
 */
KVRT_API int kvrt_store_flush(kvrt_store *s);

/* A token range of one sequence in one cache. */
struct kvrt_store_span {
    size_t size;       /* sizeof(struct kvrt_store_span) */
    kvrt_cache *cache; /* attention/MLA layers named as the model's */
    /* The sequence's block table: token t sits in block
     * block_table[t / block_size], slot t % block_size. */
    const int64_t *block_table;
    uint64_t num_blocks;
    /* The sequence's token ids from its first token (keys chain from it). */
    const int32_t *tokens;
    uint64_t num_tokens;
    /* The range [first, first + count): first a multiple of chunk_tokens;
     * count KVRT_UNSET: to num_tokens.  Only whole chunks are stored or
     * loaded. */
    uint64_t first;
    uint64_t count;
    /* The model's KV heads the cache holds: [head_start, head_start +
     * num_heads); cache head slot i is model head head_start + i.
     * num_heads 0: all of them. */
    uint64_t head_start;
    uint64_t num_heads;
    /* With replicated heads (tensor parallelism above the number of KV
     * heads), which replica of these heads this rank is: only replica 0
     * writes; a put of another replica stores nothing and reports the
     * range stored once replica 0 has stored it. */
    uint64_t replica;
    /* 1.2: the model's layers the cache holds, a pipeline stage's:
     * [layer_start, layer_start + num_layers) in canonical order (the
     * cache names them as the model does).  A range of whole layer groups
     * (layers_per_entry); num_layers 0: all of them. */
    uint64_t layer_start;
    uint64_t num_layers;
    uint8_t reserved[40]; /* zero (kvrt_store_span_default) */
};

/** Defaults: everything 0 or NULL, count KVRT_UNSET. */
KVRT_API void kvrt_store_span_default(struct kvrt_store_span *span);

/**
 * The heads of rank `rank` of a tensor-parallel group of `tp_size`, by
 * libkvrt's rule (kvrt_tp_heads of the model's KV heads, <kvrt/parallel.h>):
 * sets the span's head_start, num_heads and replica.
 * @return KVRT_OK; the refusals of kvrt_tp_heads (a size that neither
 *   divides the heads nor is a multiple of them, a rank out of range).
 */
KVRT_API int kvrt_store_span_tp(const kvrt_store *s, struct kvrt_store_span *span, uint64_t tp_size, uint64_t rank);

/**
 * Store the whole chunks of the span's range, every head the cache holds.
 * Chunks already stored are not written again.  The entries go to the
 * memory tier and, in the background, to the disk and shared tiers
 * (kvrt_store_flush waits for them).  *stored (may be NULL) gets the
 * tokens of the range's whole chunks now in the store.
 * Everything is checked before anything is stored: a token array or block
 * table too short for the range, a first token off a chunk boundary, a
 * block id out of the cache's range, a cache whose layers do not match the
 * model or hold other heads (each naming the value and what is valid).
 */
KVRT_API int kvrt_store_put(kvrt_store *s, const struct kvrt_store_span *span, uint64_t *stored);

/**
 * Load the leading stored chunks of the span's range into the cache,
 * looking in memory, then disk, then the shared tier, and promoting what
 * is found to the tiers above.  It stops at the first chunk missing for
 * any head the cache holds.  *loaded (may be NULL) gets the tokens loaded
 * (a multiple of chunk_tokens, from first); their slots hold the stored
 * K/V, and nothing else of the cache changed.
 */
KVRT_API int kvrt_store_get(kvrt_store *s, const struct kvrt_store_span *span, uint64_t *loaded);

/**
 * How many leading tokens of the sequence (a multiple of chunk_tokens) are
 * stored, in any tier, for every one of the heads [head_start, head_start
 * + num_heads) (num_heads 0: all).  What a get will find, unless entries
 * are evicted in between.
 */
KVRT_API int kvrt_store_lookup(kvrt_store *s, const int32_t *tokens, uint64_t num_tokens, uint64_t head_start,
                               uint64_t num_heads, uint64_t *stored);

/**
 * 1.2: kvrt_store_lookup for the layers [layer_start, layer_start +
 * num_layers) alone (num_layers 0: all), a range of whole layer groups as
 * a span's: what a get of a pipeline stage will find.
 */
KVRT_API int kvrt_store_lookup_layers(kvrt_store *s, const int32_t *tokens, uint64_t num_tokens, uint64_t head_start,
                                      uint64_t num_heads, uint64_t layer_start, uint64_t num_layers, uint64_t *stored);

/**
 * kvrt_store_put and kvrt_store_get, posted: every check is made and *out
 * gets a request at once; the work runs on the store's worker thread.  A
 * refused span gives no request.  The span's arrays are copied.
 */
KVRT_API int kvrt_store_put_post(kvrt_store *s, const struct kvrt_store_span *span, kvrt_store_request **out);
KVRT_API int kvrt_store_get_post(kvrt_store *s, const struct kvrt_store_span *span, kvrt_store_request **out);

/**
 * The request's state: KVRT_OK complete (*tokens, may be NULL, gets the
 * tokens stored or loaded); KVRT_STORE_PENDING under way; otherwise the
 * status it failed with (its message in kvrt_error_message()).
 */
KVRT_API int kvrt_store_test(kvrt_store_request *r, uint64_t *tokens);

/** Wait until the request ends or timeout_s passes (< 0: until it ends).
 *  @return as kvrt_store_test(). */
KVRT_API int kvrt_store_wait(kvrt_store_request *r, double timeout_s, uint64_t *tokens);

/** Give the request back; one still under way is waited for first. */
KVRT_API void kvrt_store_release(kvrt_store_request *r);

/**
 * The keys of the sequence's whole chunks, in order: keys gets up to
 * max_keys of them, KVRT_STORE_KEY_BYTES each; *num_keys (may be NULL) the
 * number of whole chunks.  docs/store.md gives the bytes they hash.
 */
KVRT_API int kvrt_store_keys(kvrt_store *s, const int32_t *tokens, uint64_t num_tokens, uint8_t *keys,
                             uint64_t max_keys, uint64_t *num_keys);

/* What a store holds and has done since it was opened (kvrt_store_stats). */
struct kvrt_store_stats {
    size_t size; /* sizeof(struct kvrt_store_stats) */
    uint64_t chunk_tokens;
    uint64_t num_layers;
    uint64_t num_heads;   /* the model's KV heads */
    uint64_t entry_bytes; /* payload of one entry (one chunk of one head) */
    uint64_t memory_entries, memory_bytes, memory_capacity;
    uint64_t disk_entries, disk_bytes, disk_capacity; /* the directory's, every process */
    uint64_t queued_entries, queued_bytes;            /* on their way down */
    uint64_t hits_memory, hits_disk, hits_shared;     /* entries found (get) */
    uint64_t misses;                                  /* entries a get or lookup did not find */
    uint64_t put_entries;                             /* entries a put copied out of a cache */
    uint64_t put_present;                             /* entries a put found already stored */
    uint64_t evicted_memory, evicted_disk;
    uint64_t written_disk, written_shared;
    uint64_t write_failures; /* entries a tier could not take */
    uint64_t dropped;        /* entries that failed their checks */
    uint32_t shared_up;      /* 1: the shared tier answered last time */
    uint8_t reserved_a[4];
    uint64_t rejected; /* of the dropped, entries refused as not this tenant's: a seal that does not
                          verify, an unsealed entry with a key or a sealed one without */
    /* the shared tier's nodes (a single server is one node) */
    uint64_t shared_nodes_down;    /* nodes that failed and have not answered since (each in back-off) */
    uint64_t shared_failovers;     /* failed nodes the cluster's map left out: another serves their slots */
    uint64_t shared_map_refreshes; /* slot maps learnt (CLUSTER SLOTS answered), the first included */
    uint64_t shared_moved;         /* MOVED redirections followed */
    uint64_t shared_ask;           /* ASK redirections followed */
    uint8_t reserved[8];
};

/** Fill *stats (stats->size set by the caller, or 0). */
KVRT_API int kvrt_store_stats(kvrt_store *s, struct kvrt_store_stats *stats);

/**
 * 1.1: the store's counters in Prometheus' text exposition format (0.0.4):
 * kvrt_store_stats by tier, the directory's counters (every process) and
 * the KV events' publisher, each family with HELP and TYPE lines
 * (docs/store.md "Metrics").  *needed (may be NULL) gets the bytes of the
 * text with its NUL; buf NULL and size 0 ask for that alone.  The text is
 * written whole or not at all.
 * @return KVRT_OK; KVRT_ERR_INVALID when size is less than *needed (buf
 *   then holds ""); KVRT_ERR_NOMEM; a failing disk tier's status.
 */
KVRT_API int kvrt_store_metrics(kvrt_store *s, char *buf, size_t size, size_t *needed);

/* ---- the disk tier as it is (kvrt store stat|ls|verify|gc) ---------------- */

/* One entry of the disk tier. */
struct kvrt_store_entry_info {
    size_t size;
    uint8_t key[KVRT_STORE_KEY_BYTES]; /* the chunk's key */
    uint64_t head;                     /* the model's KV head; with layer groups, the entry's index:
                                          group x the model's KV heads + head */
    uint64_t bytes;                    /* stored bytes (header and payload) */
    uint64_t last_used;                /* the directory's clock when last written or read */
    uint8_t reserved[32];
};

/**
 * The store as one JSON object (what `kvrt store stat --json` prints): the
 * format version, the model it is for (id, fingerprint, layers, heads,
 * types), chunk tokens and entry bytes, and each tier's entries, bytes,
 * capacity, hits and misses (the disk tier's as recorded by every process
 * that used the directory).  *out is the caller's: kvrt_free it.
 */
KVRT_API int kvrt_store_describe_json(kvrt_store *s, char **out);

/**
 * Call each(user, entry) for every entry of the disk tier, in key order,
 * until it returns non-zero (which is returned).  KVRT_ERR_STATE without a
 * disk tier.
 */
KVRT_API int kvrt_store_list(kvrt_store *s, int (*each)(void *user, const struct kvrt_store_entry_info *entry),
                             void *user);

/* What kvrt_store_verify found. */
struct kvrt_store_verify_report {
    size_t size;
    uint64_t entries; /* looked at */
    uint64_t bad;     /* failed a check */
    uint64_t dropped; /* of those, deleted (drop) */
    uint64_t sealed;  /* sealed entries a store without their key could only look at, not check */
    uint8_t reserved[24];
};

/**
 * Check every entry of the disk tier (header, fingerprint, key, size,
 * checksum); each bad one is reported to bad(user, entry, why) (may be
 * NULL) and, with drop, deleted.
 */
KVRT_API int kvrt_store_verify(kvrt_store *s, bool drop,
                               void (*bad)(void *user, const struct kvrt_store_entry_info *entry, const char *why),
                               void *user, struct kvrt_store_verify_report *report);

/**
 * Evict least-recently-used entries of the disk tier until it holds at
 * most target_bytes (0: its capacity).  *evicted (may be NULL) gets the
 * number of entries evicted.
 */
KVRT_API int kvrt_store_gc(kvrt_store *s, uint64_t target_bytes, uint64_t *evicted);

/** Hex of a key or fingerprint (65 bytes with the NUL) into buf. */
KVRT_API void kvrt_store_hex(const uint8_t key[KVRT_STORE_KEY_BYTES], char buf[2 * KVRT_STORE_KEY_BYTES + 1]);

#ifdef __cplusplus
}
#endif
#endif
