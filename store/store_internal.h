/* Internal: the store, its tiers, its queue and its requests. */
#ifndef KVRT_STORE_INTERNAL_H
#define KVRT_STORE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include <kvrt/placement.h>
#include <kvrt/runtime.h>
#include <kvrt/store.h>
#include <kvrt/transfer.h>

/* checksum states on the stack or in arrays, not from the heap per entry */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>
/* XXH3 with the widest vectors the CPU has (Debian's libxxhash picks them
 * at run time on x86; the plain functions are built for SSE2) */
#if defined(__x86_64__)
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#define STORE_SUM_UPDATE XXH3_128bits_update_dispatch
#else
#define STORE_SUM_UPDATE XXH3_128bits_update
#endif

/* Set the message and yield `status`, visibly at the call site (as the
 * core's kvrt_fail), so that analysers see a failing helper never returns
 * KVRT_OK. */
#define STORE_FAIL(status, ...) (kvrt_error_report(KVRT_OK, __VA_ARGS__), (status))
#define ULL(x) ((unsigned long long)(x))

struct store_events;      /* events.h */
struct store_event_chunk; /* events.h */

/* ---- the model ------------------------------------------------------------ */

/* One stored layer, in canonical order. */
struct store_layer {
    char *name;
    enum kvrt_spec_kind kind; /* attention or MLA */
    enum kvrt_dtype dtype;
    uint64_t head_size, head_size_v; /* elements; V 0 for MLA */
    uint64_t content;                /* C: bytes of one (head, token) cell */
    uint64_t entry_offset;           /* where this layer starts in an entry's payload */
};

struct store_model {
    char *model_id;
    uint64_t chunk_tokens;
    uint64_t num_heads; /* the model's KV heads (every layer has them) */
    size_t num_layers;
    struct store_layer *layers;
    uint64_t cell_bytes;    /* sum of the layers' C */
    uint64_t payload_bytes; /* chunk_tokens x cell_bytes */
    uint8_t fingerprint[KVRT_STORE_KEY_BYTES];
};

/* Build the model from the groups (checks and refusals) and its
 * fingerprint. */
int store_model_build(const struct kvrt_group *groups, size_t num_groups, const char *model_id, uint64_t chunk_tokens,
                      struct store_model *out);
void store_model_free(struct store_model *m);

/* The store record (record.c): the model a directory is for, as JSON. */
char *store_record_text(const struct store_model *m);
/* KVRT_OK when the record is for m; else a refusal naming the field. */
int store_record_compare(const char *text, size_t len, const struct store_model *m, const char *path);
/* The model a record describes (inspecting a directory). */
int store_record_model(const char *text, size_t len, const char *path, struct store_model *out);

/* ---- keys and entries (key.c, entry.c) ------------------------------------ */

/* An entry's identity: its chunk key and the model head. */
struct store_id {
    uint8_t key[KVRT_STORE_KEY_BYTES];
    uint32_t head;
};

/* The fingerprint of a model (docs/store.md "Fingerprint"). */
int store_fingerprint(struct store_model *m);

/* The keys of the first num_chunks whole chunks of tokens. */
int store_chunk_keys(const struct store_model *m, const int32_t *tokens, uint64_t num_chunks, uint8_t *keys);

/* The database key of an entry: the chunk key, then the head big-endian
 * (so a chunk's heads are neighbours in key order). */
#define STORE_DBKEY_BYTES (KVRT_STORE_KEY_BYTES + 4)
void store_dbkey(const struct store_id *id, uint8_t out[STORE_DBKEY_BYTES]);
void store_id_from_dbkey(const uint8_t in[STORE_DBKEY_BYTES], struct store_id *id);

/* The entry header (docs/store.md "Entry"). */
#define STORE_HEADER_BYTES 128u
#define STORE_CHECKSUM_OFFSET 112u

/* The bytes one entry takes in a buffer or a slot of the disk tier's slot
 * file: header and payload, rounded up to 4 KiB so that a slot can be
 * written with O_DIRECT straight from the buffer. */
#define STORE_SLOT_ALIGN 4096u
static inline uint64_t store_slot_bytes(uint64_t payload_bytes)
{
    return (STORE_HEADER_BYTES + payload_bytes + STORE_SLOT_ALIGN - 1) / STORE_SLOT_ALIGN * STORE_SLOT_ALIGN;
}

/* Fill the header in front of the payload (buf: header + payload). */
void store_entry_seal(const struct store_model *m, const struct store_id *id, uint8_t *buf);
/* The same in two steps around a copy that feeds the payload to *st:
 * begin writes the header (checksum zero) and starts *st on it, end writes
 * the checksum. */
void store_entry_seal_begin(const struct store_model *m, const struct store_id *id, uint8_t *buf, XXH3_state_t *st);
void store_entry_seal_end(uint8_t *buf, XXH3_state_t *st);

/* Check an entry read from a tier: size, magic, version, fingerprint, key,
 * head, sizes, reserved bytes and checksum.  NULL when good, else why (a
 * static or thread-local text). */
const char *store_entry_check(const struct store_model *m, const struct store_id *id, const uint8_t *buf, uint64_t len);

/* The same for an entry found by listing: what it claims, from its
 * header alone (false when the header is unreadable). */
bool store_entry_peek(const uint8_t *buf, uint64_t len, struct store_id *id, uint64_t *payload_bytes);

/* ---- caches in canonical order (canon.c) ---------------------------------- */

/* Where one canonical layer's cells are in the cache: byte offsets. */
struct canon_layer {
    uint64_t offset;        /* of the layer's view */
    uint64_t kblock_stride; /* bytes from one kernel block to the next */
    uint64_t head_stride;   /* bytes from head slot h to h + 1 */
    uint64_t state_stride;  /* bytes from token slot n to n + 1 (in a kernel block) */
    uint64_t content;       /* C */
};

/* A cache seen by the store. */
struct canon_map {
    kvrt_cache *cache;
    const kvrt_placement *placement;
    uint8_t *host;                       /* the cache's first byte when host-addressable */
    uint64_t block_size;                 /* tokens per manager block */
    uint64_t kernel_size, kernel_blocks; /* k and r */
    uint64_t num_blocks;
    uint64_t heads; /* head slots the cache holds */
    size_t num_layers;
    struct canon_layer *layers;
};

/* Map the model's layers to the cache's (by name), checking that each
 * matches the model and holds `heads` heads. */
int canon_map_build(const struct store_model *m, kvrt_cache *cache, uint64_t heads, struct canon_map *out);
void canon_map_free(struct canon_map *map);

/* The cells one request reads or writes: the cache's own memory (host), or
 * a host copy of the byte regions of its blocks (a cache without a host
 * address: downloaded, and uploaded again after a get). */
struct canon_io {
    const struct canon_map *map;
    const int64_t *table; /* the sequence's block table */
    bool staged;
    struct kvrt_region *regions; /* staged: sorted, each copied to copy + at[i] */
    size_t num_regions;
    uint64_t *at;
    uint8_t *copy;
};

/* Prepare the cells of blocks table[0 .. table_len). */
int canon_io_begin(struct canon_io *io, const struct canon_map *map, const int64_t *table, uint64_t table_len);
/* After a get: upload the staged copy (nothing for a host cache). */
int canon_io_commit(struct canon_io *io);
void canon_io_end(struct canon_io *io);

/* The copies of one chunk (tokens [first, first + chunk_tokens), every
 * layer) between the cache's head slots slots[0..n) and n canonical
 * payloads.  sums: NULL, or one checksum state per payload, fed the
 * payload's bytes in order as they are copied out (a put seals an entry
 * without reading it again). */
struct canon_chunk {
    uint64_t first;
    const uint64_t *slots;
    uint64_t n;
    uint8_t *const *payloads;
    XXH3_state_t *sums;
};
void canon_pack(const struct canon_io *io, const struct store_model *m, const struct canon_chunk *ch);
void canon_unpack(const struct canon_io *io, const struct store_model *m, const struct canon_chunk *ch);

/* ---- entry buffers (buffers.c) --------------------------------------------- */

/* Slot-sized buffers from slabs of huge pages, kept once released (not
 * locked: the memory tier's lock guards its pool). */
struct buf_pool {
    uint64_t buf_bytes, per_slab, slab_bytes;
    uint8_t **slabs;
    uint64_t num_slabs;
    uint8_t *carve; /* the next unused buffer of the newest slab */
    uint64_t carve_left;
    uint8_t **spare; /* room for every buffer of every slab */
    uint64_t num_spare;
};

int buf_pool_init(struct buf_pool *p, uint64_t buf_bytes);
void buf_pool_free(struct buf_pool *p);
/* A buffer, 4 KiB-aligned (zero when new); NULL when out of memory. */
uint8_t *buf_pool_get(struct buf_pool *p);
void buf_pool_put(struct buf_pool *p, uint8_t *buf);

/* ---- memory tier (memory.c) ----------------------------------------------- */

/* An entry's bytes in memory: header room, then the payload. */
struct mem_entry {
    struct store_id id;
    uint8_t *buf;     /* STORE_HEADER_BYTES + payload */
    uint32_t refs;    /* the index holds one, each reader and queued job one */
    uint32_t readers; /* gets using it: never evicted while > 0 */
    bool indexed;     /* findable by id */
    bool in_lru;      /* cached: counted in the tier's bytes, evictable */
    bool queued;      /* on its way to the lower tiers: findable until written */
    /* a chunk's lead entry with events on: its parent and tokens (events.h) */
    struct store_event_chunk *chunk;
    struct mem_entry *hnext;
    struct mem_entry *prev, *next; /* LRU: head most recent */
};

struct mem_tier {
    pthread_mutex_t lock;
    uint64_t capacity, bytes, entry_bytes;
    uint64_t entries, evicted; /* cached entries */
    uint64_t indexed;          /* findable ones: cached and queued */
    struct mem_entry **buckets;
    uint64_t num_buckets;
    struct mem_entry *lru_head, *lru_tail;
    /* every entry's buffer, and those of entries gone, for new ones */
    struct buf_pool pool;
    struct store_events *events; /* NULL: off */
};

int mem_tier_init(struct mem_tier *t, uint64_t capacity, uint64_t entry_bytes);
void mem_tier_free(struct mem_tier *t);
/* A new entry (refs 1, not indexed) with a buffer; NULL when out of memory. */
struct mem_entry *mem_entry_new(struct mem_tier *t, const struct store_id *id);
/* Drop a reference; the last frees (or pools) the buffer. */
void mem_entry_unref(struct mem_tier *t, struct mem_entry *e);
/* Index a new entry (the index takes the caller's reference).  cache:
 * keep it in the tier, evicting least-recently-used entries nobody reads
 * (an evicted entry still queued stays findable until it is written).  An
 * entry that does not fit, or with cache false, is indexed only while it
 * is queued.  false when it was not indexed (the caller keeps its
 * reference): it fits nowhere and is not queued, or one is indexed under
 * the id already. */
bool mem_tier_insert(struct mem_tier *t, struct mem_entry *e, bool cache);
/* A queued entry was written (or failed): findable no longer unless
 * cached. */
void mem_tier_written(struct mem_tier *t, struct mem_entry *e);
/* The entry under id, pinned for reading (refs and readers + 1), or NULL. */
struct mem_entry *mem_tier_pin(struct mem_tier *t, const struct store_id *id);
void mem_tier_unpin(struct mem_tier *t, struct mem_entry *e);
bool mem_tier_has(struct mem_tier *t, const struct store_id *id);
/* Which of heads [head, head + n) of a chunk are here (has[i]), under one
 * lock; true when all are. */
bool mem_tier_has_heads(struct mem_tier *t, const uint8_t key[KVRT_STORE_KEY_BYTES], uint32_t head, uint32_t n,
                        bool *has);

/* ---- disk tier (disk.c) --------------------------------------------------- */

struct disk_env; /* one LMDB environment per directory per process */

struct disk_tier {
    struct disk_env *env;
    char *path;
    uint64_t value_bytes; /* header + payload of every entry */
    uint64_t slot_bytes;  /* what one takes in the slot file */
};

/* Open or create the directory for model m; with inspect, open an existing
 * one as it is and fill *m from its record.  capacity 0: the directory's
 * (a new one: the default). */
int disk_open(struct disk_tier *d, const char *path, struct store_model *m, bool inspect, uint64_t capacity);
void disk_close(struct disk_tier *d);
/* The structure of path/data.mdb at transaction txnid (disk_check.c). */
int disk_check_file(const char *path, uint64_t txnid);
/* Its two meta pages alone, before LMDB opens the file (LMDB maps it with
 * the page size they give). */
int disk_check_metas(const char *path);

/* The tables of the disk tier's index and the sizes of their keys and
 * values, which disk_check_file holds a file to: a key of 0 bytes means
 * any size LMDB takes, DISK_ANY a value of any size. */
#define DISK_ANY UINT32_MAX
#define DISK_TABLES 5
#define DISK_LRU_KEY_BYTES (8 + STORE_DBKEY_BYTES)
struct disk_table {
    const char *name;
    uint32_t key_bytes, value_bytes;
};
extern const struct disk_table disk_tables[DISK_TABLES];

/* A read transaction over the disk tier (from any thread). */
struct disk_read;
int disk_read_begin(struct disk_tier *d, struct disk_read **out);
void disk_read_end(struct disk_read *r);
/* A fresh snapshot for the same read (what was committed since). */
int disk_read_refresh(struct disk_read *r);
/* Where the index keeps the entry: *found false when it has no such entry;
 * *slot UINT64_MAX when its record is damaged (a read of it gives 0
 * bytes, which the checks refuse). */
int disk_read_find(struct disk_read *r, const struct store_id *id, bool *found, uint64_t *slot);
/* The slots' bytes into bufs[0..n) (slot-sized entry buffers), with
 * O_DIRECT where the file system takes it, runs of neighbouring slots in
 * one request; lens[i]: the entry bytes buffer i got (fewer when the file
 * is cut short; 0 for slot UINT64_MAX).  Safe from any thread. */
void disk_read_slots(struct disk_tier *d, uint8_t *const *bufs, const uint64_t *slots, uint64_t n, uint64_t *lens);
/* disk_read_find, then the entry's bytes read into buf. */
int disk_read_get(struct disk_read *r, const struct store_id *id, uint8_t *buf, bool *found, uint64_t *slot,
                  uint64_t *len);

/* Reads of a get's next chunks while it copies this one (disk_ahead.c): a
 * thread of the get's own that reads what it is posted, in order, at most
 * STORE_AHEAD_POSTS posts outstanding; without `threaded`, a post reads at
 * once. */
#define STORE_AHEAD_POSTS 3u
struct disk_ahead;
int disk_ahead_begin(struct disk_tier *d, bool threaded, struct disk_ahead **out);
/* Start disk_read_slots(bufs, slots, n, lens); returns the post's number. */
uint64_t disk_ahead_post(struct disk_ahead *a, uint8_t *const *bufs, const uint64_t *slots, uint64_t n, uint64_t *lens);
/* Wait until post `seq` is read. */
void disk_ahead_wait(struct disk_ahead *a, uint64_t seq);
/* Wait for every post, then stop the thread. */
void disk_ahead_end(struct disk_ahead *a);
/* Whether id is still stored in `slot` (a fresh snapshot): an entry that
 * fails its checks may only have been read while its slot was reused. */
bool disk_still_at(struct disk_tier *d, const struct store_id *id, uint64_t slot);
/* Which of heads [head, head + n) of key are present (has[i]). */
int disk_read_has(struct disk_read *r, const uint8_t key[KVRT_STORE_KEY_BYTES], uint32_t head, uint32_t n, bool *has);

/* One write transaction: new entries (sealed buffers), touched ids,
 * dropped ids and counters to add; evicts down to the capacity first. */
struct disk_batch {
    struct mem_entry **puts;
    uint64_t num_puts;
    const struct store_id *touches;
    uint64_t num_touches;
    const struct store_id *drops;
    uint64_t num_drops;
    uint64_t add_hits, add_misses;
    /* results */
    uint64_t written, present, evicted;
    /* after a commit: the entries written (written of them) and the ids
     * evicted or dropped (num_gone); disk_batch_done frees them */
    struct mem_entry **fresh;
    struct store_id *gone;
    uint64_t num_gone;
};
int disk_write(struct disk_tier *d, struct disk_batch *b);
void disk_batch_done(struct disk_batch *b);

struct disk_counts {
    uint64_t entries, bytes, capacity, clock;
    uint64_t hits, misses, writes, evictions;
    uint64_t file_bytes;
};
int disk_counts(struct disk_tier *d, struct disk_counts *out);

/* Each entry in key order: its info and bytes; stops at a non-zero
 * return, which it returns. */
int disk_list(struct disk_tier *d,
              int (*each)(void *user, const struct kvrt_store_entry_info *e, const uint8_t *buf, uint64_t len),
              void *user);
/* Evict least-recently-used entries until at most target_bytes remain;
 * gone (may be NULL) gets *num_gone of their ids (the caller frees them;
 * fewer than evicted when out of memory). */
int disk_gc(struct disk_tier *d, uint64_t target_bytes, uint64_t *evicted, struct store_id **gone, uint64_t *num_gone);

/* ---- shared tier (shared.c) ----------------------------------------------- */

struct shared_conn;

struct shared_tier {
    char url[300];
    char host[256];
    int port;
    double timeout_s;
    kvrt_store *store;       /* for warnings */
    pthread_mutex_t lock;    /* the state below */
    pthread_mutex_t fg_lock; /* the foreground connection */
    struct shared_conn *fg;  /* gets and lookups */
    struct shared_conn *bg;  /* the writer thread's */
    double down_until;       /* monotonic seconds: no attempt before */
    bool warned;
    bool up;
    uint64_t errors;
};

int shared_parse_url(const char *url, char *host, size_t size, int *port);
int shared_init(struct shared_tier *t, kvrt_store *s, const char *url, double timeout_s);
void shared_free(struct shared_tier *t);
/* GETs of ids[0..n) in one pipeline, each value read into bufs[i] (entry
 * buffers of at least value_bytes): got[i] and lens[i] (the value's own
 * size, which may exceed value_bytes: then only value_bytes were kept);
 * got false everywhere when unreachable or the connection fails. */
void shared_get_many(struct shared_tier *t, const struct store_id *ids, uint64_t n, uint64_t value_bytes,
                     uint8_t *const *bufs, uint64_t *lens, bool *got);
/* EXISTS of ids[0..n): has[i]; false everywhere when unreachable. */
void shared_has(struct shared_tier *t, const struct store_id *ids, uint64_t n, bool *has);
/* SET of sealed entries (the writer thread); returns how many went in. */
uint64_t shared_put(struct shared_tier *t, struct mem_entry *const *entries, uint64_t n, uint64_t value_bytes);
/* Delete an entry that failed its checks. */
void shared_drop(struct shared_tier *t, const struct store_id *id);
bool shared_is_up(struct shared_tier *t);

/* Replies of a GET pipeline read off the socket (resp.c). */
struct resp_reader {
    int fd;
    size_t at, end;
    const char *why; /* what went wrong */
    char buf[4096];  /* reply lines, and what came with them */
};
enum resp_value { RESP_VALUE, RESP_ABSENT, RESP_FAILED };
void resp_reader_init(struct resp_reader *rr, int fd);
/* The next reply: a value (its first min(size, cap) bytes into dst, *len
 * its size), absent (nil, or an error for this key), or failed (rr->why). */
enum resp_value resp_read_value(struct resp_reader *rr, uint8_t *dst, uint64_t cap, uint64_t *len);

/* ---- the queue to the lower tiers (writer.c) ------------------------------- */

#define WRITE_DISK 1u
#define WRITE_SHARED 2u

struct writer_job {
    struct mem_entry *entry;
    unsigned where;
};

struct writer {
    pthread_t thread;
    bool started, stop;
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    struct writer_job *ring;
    uint64_t cap, head, count;
    uint64_t bytes, max_bytes, value_bytes;
    uint64_t enqueued, written; /* sequence numbers: a flush waits for written >= enqueued */
    bool flush_now;
    bool busy; /* a batch is being written */
    struct store_id *touches;
    uint64_t num_touches, cap_touches;
    struct store_id *drops;
    uint64_t num_drops, cap_drops;
    uint64_t add_hits, add_misses;
    uint64_t failed_since_flush;
    char failure[512];
};

int writer_start(kvrt_store *s, uint64_t max_bytes);
void writer_stop(kvrt_store *s);
/* Queue a sealed entry (takes a reference) for the tiers in `where`; waits
 * while the queue is full. */
void writer_enqueue(kvrt_store *s, struct mem_entry *e, unsigned where);
/* Record a read (the disk's recency order), a bad entry to delete, and
 * hits and misses for the directory's counters. */
void writer_touch(kvrt_store *s, const struct store_id *id);
void writer_drop(kvrt_store *s, const struct store_id *id);
void writer_count(kvrt_store *s, uint64_t hits, uint64_t misses);
/* Wait until what was queued before the call is written; the failures
 * since the last flush, reported. */
int writer_flush(kvrt_store *s);
void writer_queued(kvrt_store *s, uint64_t *entries, uint64_t *bytes);

/* ---- the store -------------------------------------------------------------- */

struct store_counters {
    uint64_t hits_memory, hits_disk, hits_shared, misses;
    uint64_t put_entries, put_present;
    uint64_t written_disk, written_shared, write_failures, dropped, evicted_disk;
};

struct kvrt_store {
    struct store_model model;
    bool inspect; /* opened without a model */
    struct mem_tier mem;
    bool has_mem;
    struct disk_tier disk;
    bool has_disk;
    struct shared_tier shared;
    bool has_shared;
    struct writer writer;
    void (*log)(void *user, enum kvrt_log_level level, const char *message);
    void *log_user;
    char *description; /* the directory's model record (inspecting) */
    pthread_mutex_t count_lock;
    struct store_counters counts;
    /* asynchronous requests (request.c) */
    pthread_mutex_t req_lock;
    pthread_cond_t req_wake;
    pthread_t worker;
    bool worker_started, worker_stop;
    kvrt_store_request *req_head, *req_tail;
    uint64_t req_open;
    pthread_cond_t req_drained;
    struct store_events *events; /* KV events for routers (events.h); NULL: off */
};

/* One warning line through the store's log. */
void store_warn(kvrt_store *s, const char *fmt, ...) KVRT_PRINTF(2, 3);
void store_count(kvrt_store *s, uint64_t *field, uint64_t n);
double store_now(void);

/* ---- operations (ops.c) and requests (request.c) ---------------------------- */

/* A checked span: the cache map, the keys of its whole chunks and the block
 * table (its own copy for a posted request). */
struct store_op {
    bool is_put;
    kvrt_store *store;
    struct canon_map map;
    const int64_t *table;
    int64_t *table_copy;
    uint64_t table_len;
    uint8_t *keys; /* num_chunks keys */
    uint64_t first_chunk, num_chunks;
    uint64_t head_start, num_heads;
    uint64_t replica;
    /* with events on: the range's tokens (from its first chunk) and the
     * key before it, which BlockStored names */
    const int32_t *tokens;
    int32_t *tokens_copy;
    bool has_parent;
    uint8_t parent[KVRT_STORE_KEY_BYTES];
};

/* Check a span; with copy, the op keeps its own block table. */
int store_op_prepare(kvrt_store *s, const struct kvrt_store_span *span, bool is_put, bool copy, struct store_op *op);
void store_op_free(struct store_op *op);
int store_op_run(struct store_op *op, uint64_t *tokens);

/* Post an op (taken over) to the worker thread. */
int request_post(kvrt_store *s, struct store_op *op, kvrt_store_request **out);
/* Wait for every posted request, then stop the worker. */
void request_shutdown(kvrt_store *s);

#endif
