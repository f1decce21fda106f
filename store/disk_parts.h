/*
 * What the disk tier's files share among themselves (disk.c opens the
 * tier; disk_index.c, disk_slots.c, disk_evict.c, disk_write.c and
 * disk_list.c work on it): the environment, a read, and the index's and
 * slot file's steps.  Not for the layers above: they use disk.h.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_DISK_PARTS_H
#define KVRT_STORE_DISK_PARTS_H

#include <sys/statvfs.h>
#include <sys/types.h>

#include <lmdb.h>

#include "disk.h"

struct disk_env {
    MDB_env *env;
    MDB_dbi meta, entries, lru, ticks, free_slots;
    /* slots.dat: buffered, and with O_DIRECT for writing and for reading
     * (-1 where the file system refuses it: buffered then) */
    int slots_fd, direct_fd, read_direct_fd;
    bool slots_writable;
    uint64_t slot_bytes;
    dev_t dev;
    ino_t ino;
    int refs;
    struct disk_env *next;
    /* Held shared by every transaction of this process, exclusively to
     * adopt a map another process grew (LMDB wants no transaction then). */
    pthread_rwlock_t txns;
};

struct disk_read {
    struct disk_tier *d;
    MDB_txn *txn;
    MDB_cursor *cur;
};

#define LRU_KEY_BYTES DISK_LRU_KEY_BYTES

/* Failures of LMDB and of writes, inline so that analysers see a failing
 * step never returns KVRT_OK (as BASE_FAIL at the call site). */
static inline int disk_lmdb_fail(const char *path, const char *what, int rc)
{
    return BASE_FAIL(KVRT_ERR_DEVICE, "kvrt-store: disk tier \"%s\": %s: %s", path, what, mdb_strerror(rc));
}

/* A failed write: LMDB reports a short write (a full disk, a file size
 * limit) as EIO, so say how much room the file system has left. */
static inline int disk_write_fail(const char *path, const char *what, int rc)
{
    struct statvfs fs;
    if (statvfs(path, &fs) != 0)
        return BASE_FAIL(KVRT_ERR_DEVICE, "kvrt-store: disk tier \"%s\": %s: %s", path, what, mdb_strerror(rc));
    return BASE_FAIL(KVRT_ERR_DEVICE,
                     "kvrt-store: disk tier \"%s\": %s: %s (its file system has %llu bytes free; a full disk or "
                     "a file size limit fails so)",
                     path, what, mdb_strerror(rc), ULL((uint64_t)fs.f_bavail * fs.f_frsize));
}

/* disk_index.c */
int disk_txn_begin(struct disk_env *e, unsigned flags, MDB_txn **txn);
void disk_txn_abort(struct disk_env *e, MDB_txn *txn);
int disk_txn_commit(struct disk_env *e, MDB_txn *txn);
uint64_t disk_meta_u64(MDB_txn *txn, struct disk_env *e, const char *name, uint64_t fallback);
int disk_meta_put_u64(MDB_txn *txn, struct disk_env *e, const char *name, uint64_t value);
/* Delete an entry and its recency records; its slot is free again. */
int disk_delete_entry(MDB_txn *txn, struct disk_env *e, const uint8_t dbkey[STORE_DBKEY_BYTES]);

/* A slot for a new entry: a free one, else one past the end of the file. */
int disk_alloc_slot(MDB_txn *txn, struct disk_env *e, uint64_t *slot);
int disk_set_tick(MDB_txn *txn, struct disk_env *e, const uint8_t dbkey[STORE_DBKEY_BYTES], uint64_t tick,
                  bool must_exist);
/* The slot an index value names. */
bool disk_slot_of(const MDB_val *v, uint64_t *slot);
/* Room for the map, which holds the index only (the entries' bytes are in
 * the slot file): a few hundred bytes an entry at most, and the free pages
 * a batch needs before old ones are reused. */
size_t disk_map_size_for(uint64_t capacity);
int disk_open_dbis(struct disk_env *e, MDB_txn *txn, unsigned flags);

/* disk_slots.c */
/* The entries' bytes into their slots, synced: O_DIRECT from the entries'
 * own buffers where the file system takes it, else through the page cache;
 * runs of neighbouring slots (a growing file) in one call each. */
int disk_write_slots(struct disk_tier *d, struct mem_entry *const *puts, const uint64_t *slots, uint64_t n);
uint64_t disk_read_slot(struct disk_env *e, uint64_t slot, uint8_t *buf, uint64_t bytes);
/* slots.dat, for reading and, unless inspecting, for O_DIRECT writes
 * (buffered where the file system refuses them). */
int disk_open_slots(struct disk_env *e, const char *path, bool inspect, uint64_t slot_bytes);

/* disk_evict.c */
/* Evict the least recently used entry; *none when there is nothing; its id
 * noted in *gone (gone may be NULL: nobody asked). */
int disk_evict_one(MDB_txn *txn, struct disk_env *e, bool *none, struct store_id **gone, uint64_t *num_gone);
/* Add the entry under dbkey to the list *gone of *num_gone ids (gone NULL:
 * nobody asked; out of memory: not added, so a list may fall short). */
void disk_note_gone(struct store_id **gone, uint64_t *num_gone, const uint8_t dbkey[STORE_DBKEY_BYTES]);

#endif
