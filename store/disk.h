/*
 * The disk tier: an LMDB index and a slot file in the store's directory
 * (disk.c), its structure checked before LMDB reads it (disk_check.c),
 * and reads ahead of a get (disk_ahead.c).
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_DISK_H
#define KVRT_STORE_DISK_H

#include "memory.h"

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
     * evicted or dropped (num_gone), for KV events; disk_batch_done frees
     * them */
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

#endif
