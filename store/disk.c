/* The disk tier: an LMDB environment in the store's directory holds the
 * index (which slot of the slot file holds which entry, the free slots,
 * the recency order, the counters); the entries' bytes live in fixed-size
 * slots of slots.dat, written with O_DIRECT straight from the entries'
 * buffers where the file system takes it.  A batch allocates its slots,
 * writes and syncs them, then commits the index in one transaction, so a
 * process killed at any moment leaves every entry either indexed and
 * complete or absent (the slots it wrote were free, and stay so).  Every
 * entry is checked again when read, and a slot that was reused while an
 * older reader read it fails the checks and is a miss.  Several processes
 * share a directory (LMDB's lock file serialises writers; readers never
 * wait).  Least-recently-used order is kept in the database, so every
 * process evicts in one order (docs/store.md "The store directory").
 *
 * This file opens and closes it: LMDB allows one environment per
 * directory per process, so stores of one process that open the same
 * directory share it, counted.  The index is disk_index.c, the slot file
 * disk_slots.c, eviction disk_evict.c, a batch disk_write.c, listing
 * disk_list.c, the tables disk_tables.c, the data file's check
 * disk_check.c, reads ahead disk_ahead.c.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lmdb.h>

#include "disk_parts.h"
#include "record.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct disk_env *registry;

/* LMDB's two meta pages, the least a data file holds */
#define LMDB_METAS_BYTES 8192u

/* Only the store's own files: data.mdb too, which another process
 * creating the store may have made since this one found none. */
static bool only_lmdb_files(const char *path)
{
    DIR *dir = opendir(path);
    if (!dir)
        return false;
    bool only = true;
    for (struct dirent *de; only && (de = readdir(dir));)
        only = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 || strcmp(de->d_name, "lock.mdb") == 0 ||
               strcmp(de->d_name, "data.mdb") == 0 || strcmp(de->d_name, "slots.dat") == 0;
    closedir(dir);
    return only;
}

static int check_dir(const char *path, bool inspect, bool *exists)
{
    struct stat st;
    char data[4200];
    if (snprintf(data, sizeof(data), "%s/data.mdb", path) >= (int)sizeof(data))
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: the path \"%.64s...\" is longer than 4096 bytes", path);
    if (stat(path, &st) != 0) {
        int e = errno;
        if (e != ENOENT)
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt_store_open: cannot use the store folder \"%s\": %s; give a folder, or a path "
                             "whose parent folder exists and is writable",
                             path, strerror(e));
        if (inspect)
            return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-store: there is no store at \"%s\" (no such folder)", path);
        /* another rank may make it at the same moment */
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            e = errno;
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt_store_open: cannot create the store folder \"%s\": %s; give a path whose parent "
                             "folder exists and is writable",
                             path, strerror(e));
        }
    } else if (!S_ISDIR(st.st_mode)) {
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: \"%s\" is not a folder; give a folder for the store",
                         path);
    }
    if (stat(data, &st) != 0) {
        *exists = false;
        if (inspect)
            return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-store: \"%s\" is not a kvrt store: it holds no data.mdb", path);
        if (!only_lmdb_files(path))
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt_store_open: \"%s\" holds other files and no store (no data.mdb); give an empty "
                             "or new folder",
                             path);
    } else {
        *exists = true;
        /* LMDB takes an empty file for a new database and starts afresh
         * (so does another process creating the store right now, which
         * writes both meta pages in one call); an empty one beside entries
         * was cut, and so was one shorter than the two meta pages */
        char slots[4200];
        struct stat sst;
        snprintf(slots, sizeof(slots), "%s/slots.dat", path);
        bool has_entries = stat(slots, &sst) == 0 && sst.st_size > 0;
        if (!S_ISREG(st.st_mode) || (st.st_size == 0 && has_entries) ||
            (st.st_size > 0 && st.st_size < (off_t)LMDB_METAS_BYTES))
            return BASE_FAIL(KVRT_ERR_INVALID,
                             "kvrt-store: \"%s\" is truncated or damaged: %lld bytes, less than LMDB's two meta "
                             "pages (8192 bytes); restore it or remove the folder",
                             data, (long long)st.st_size);
    }
    if (!inspect && access(path, W_OK) != 0) {
        int e = errno;
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: the store folder \"%s\" is not writable: %s", path,
                         strerror(e));
    }
    return KVRT_OK;
}

static void env_free(struct disk_env *e)
{
    if (e->slots_fd >= 0)
        close(e->slots_fd);
    if (e->direct_fd >= 0)
        close(e->direct_fd);
    if (e->read_direct_fd >= 0)
        close(e->read_direct_fd);
    if (e->env)
        mdb_env_close(e->env);
    pthread_rwlock_destroy(&e->txns);
    free(e);
}

static int env_create(const char *path, uint64_t capacity, struct disk_env **out)
{
    struct disk_env *e = calloc(1, sizeof(*e));
    if (!e)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    pthread_rwlock_init(&e->txns, NULL);
    e->slots_fd = e->direct_fd = e->read_direct_fd = -1;
    int rc = mdb_env_create(&e->env);
    if (rc == MDB_SUCCESS)
        rc = mdb_env_set_maxdbs(e->env, 8);
    if (rc == MDB_SUCCESS)
        rc = mdb_env_set_maxreaders(e->env, 1024);
    if (rc == MDB_SUCCESS)
        rc = mdb_env_set_mapsize(e->env, disk_map_size_for(capacity));
    /* an existing file's meta pages before LMDB maps it by them (an empty
     * one is a store another process is making: LMDB starts it afresh) */
    char data[4200];
    struct stat st;
    snprintf(data, sizeof(data), "%s/data.mdb", path);
    if (rc == MDB_SUCCESS && stat(data, &st) == 0 && st.st_size > 0) {
        int crc = disk_check_metas(path);
        if (crc != KVRT_OK) {
            env_free(e);
            return crc;
        }
    }
    if (rc == MDB_SUCCESS)
        rc = mdb_env_open(e->env, path, MDB_NOTLS, 0644);
    if (rc != MDB_SUCCESS) {
        env_free(e);
        return BASE_FAIL(rc == EACCES || rc == EROFS ? KVRT_ERR_INVALID : KVRT_ERR_DEVICE,
                         "kvrt-store: cannot open the database in \"%s\": %s", path, mdb_strerror(rc));
    }
    int dead = 0;
    mdb_reader_check(e->env, &dead);
    /* the snapshot a read transaction holds is checked: no writer of
     * another process reuses its pages meanwhile */
    MDB_txn *txn;
    if ((rc = disk_txn_begin(e, MDB_RDONLY, &txn)) != MDB_SUCCESS) {
        env_free(e);
        return disk_lmdb_fail(path, "cannot begin a read", rc);
    }
    rc = disk_check_file(path, (uint64_t)mdb_txn_id(txn));
    disk_txn_abort(e, txn);
    if (rc != KVRT_OK) {
        env_free(e);
        return rc;
    }
    *out = e;
    return KVRT_OK;
}

/* Inspecting: read the record, build the model it describes. */
static int read_record(struct disk_tier *d, struct store_model *m)
{
    struct disk_env *e = d->env;
    MDB_txn *txn;
    int rc = disk_txn_begin(e, MDB_RDONLY, &txn);
    if (rc != MDB_SUCCESS)
        return disk_lmdb_fail(d->path, "cannot begin a read", rc);
    rc = disk_open_dbis(e, txn, 0);
    if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE) {
        disk_txn_abort(e, txn);
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt-store: \"%s\" is an LMDB database but not a kvrt store (no store record)", d->path);
    }
    if (rc != MDB_SUCCESS) {
        disk_txn_abort(e, txn);
        return disk_lmdb_fail(d->path, "cannot open its tables", rc);
    }
    MDB_val k = {5, "store"}, v;
    rc = mdb_get(txn, e->meta, &k, &v);
    if (rc != MDB_SUCCESS) {
        disk_txn_abort(e, txn);
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-store: \"%s\" is not a kvrt store (no store record)", d->path);
    }
    rc = store_record_model(v.mv_data, v.mv_size, d->path, m);
    /* committed, not aborted: the tables opened here stay open */
    int crc = disk_txn_commit(e, txn);
    if (rc == KVRT_OK && crc != MDB_SUCCESS)
        return disk_lmdb_fail(d->path, "cannot open its tables", crc);
    return rc;
}

/* Opening for a model: create the record, or check it; set the capacity. */
static int write_record(struct disk_tier *d, const struct store_model *m, uint64_t capacity)
{
    struct disk_env *e = d->env;
    MDB_txn *txn;
    int rc = disk_txn_begin(e, 0, &txn);
    if (rc != MDB_SUCCESS)
        return disk_lmdb_fail(d->path, "cannot begin a write", rc);
    rc = disk_open_dbis(e, txn, MDB_CREATE);
    if (rc != MDB_SUCCESS) {
        disk_txn_abort(e, txn);
        if (rc == MDB_INCOMPATIBLE)
            return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: \"%s\" is an LMDB database but not a kvrt store",
                             d->path);
        return disk_lmdb_fail(d->path, "cannot open its tables", rc);
    }
    MDB_val k = {5, "store"}, v;
    rc = mdb_get(txn, e->meta, &k, &v);
    if (rc == MDB_SUCCESS) {
        if ((rc = store_record_compare(v.mv_data, v.mv_size, m, d->path)) != KVRT_OK) {
            disk_txn_abort(e, txn);
            return rc;
        }
    } else {
        char *text = store_record_text(m);
        if (!text) {
            disk_txn_abort(e, txn);
            return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory for the store record");
        }
        v.mv_size = strlen(text);
        v.mv_data = text;
        rc = mdb_put(txn, e->meta, &k, &v, 0);
        free(text);
        if (rc == MDB_SUCCESS)
            rc = disk_meta_put_u64(txn, e, "clock", 0);
        if (rc != MDB_SUCCESS) {
            disk_txn_abort(e, txn);
            return disk_lmdb_fail(d->path, "cannot write the store record", rc);
        }
    }
    uint64_t have = disk_meta_u64(txn, e, "capacity", 0);
    uint64_t want = capacity ? capacity : (have ? have : KVRT_STORE_DEFAULT_DISK_BYTES);
    if (want < d->slot_bytes) {
        disk_txn_abort(e, txn);
        return BASE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_open: disk_bytes %llu cannot hold one entry of this model (%llu bytes on disk); "
                         "give at least that",
                         ULL(want), ULL(d->slot_bytes));
    }
    if (want != have && (rc = disk_meta_put_u64(txn, e, "capacity", want)) != MDB_SUCCESS) {
        disk_txn_abort(e, txn);
        return disk_lmdb_fail(d->path, "cannot record the capacity", rc);
    }
    rc = disk_txn_commit(e, txn);
    if (rc != MDB_SUCCESS)
        return disk_lmdb_fail(d->path, "cannot commit the store record", rc);
    /* a larger capacity than the map was opened for: grow the map */
    MDB_envinfo info;
    if (mdb_env_info(e->env, &info) == MDB_SUCCESS && info.me_mapsize < disk_map_size_for(want)) {
        pthread_rwlock_wrlock(&e->txns);
        rc = mdb_env_set_mapsize(e->env, disk_map_size_for(want));
        pthread_rwlock_unlock(&e->txns);
        if (rc != MDB_SUCCESS)
            return disk_lmdb_fail(d->path, "cannot grow the map", rc);
    }
    return KVRT_OK;
}

int disk_open(struct disk_tier *d, const char *path, struct store_model *m, bool inspect, uint64_t capacity)
{
    memset(d, 0, sizeof(*d));
    if (!path || !path[0])
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: the store path is empty; give a folder");
    bool exists = false;
    int rc = check_dir(path, inspect, &exists);
    if (rc != KVRT_OK)
        return rc;
    struct stat st;
    if (stat(path, &st) != 0)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: cannot read the store folder \"%s\"", path);
    d->path = strdup(path);
    if (!d->path)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    pthread_mutex_lock(&registry_lock);
    struct disk_env *e = registry;
    while (e && !(e->dev == st.st_dev && e->ino == st.st_ino))
        e = e->next;
    bool fresh = !e;
    if (fresh) {
        rc = env_create(path, capacity ? capacity : KVRT_STORE_DEFAULT_DISK_BYTES, &e);
        if (rc == KVRT_OK) {
            e->dev = st.st_dev;
            e->ino = st.st_ino;
        }
    }
    if (rc == KVRT_OK) {
        d->env = e;
        if (inspect) {
            rc = read_record(d, m);
        } else {
            d->value_bytes = STORE_HEADER_BYTES + m->payload_bytes;
            d->slot_bytes = store_slot_bytes(m->payload_bytes);
            rc = write_record(d, m, capacity);
        }
        d->value_bytes = STORE_HEADER_BYTES + m->payload_bytes;
        d->slot_bytes = store_slot_bytes(m->payload_bytes);
    }
    if (rc == KVRT_OK && (e->slots_fd < 0 || (!inspect && !e->slots_writable)))
        rc = disk_open_slots(e, path, inspect, d->slot_bytes);
    if (rc == KVRT_OK) {
        e->refs++;
        if (fresh) {
            e->next = registry;
            registry = e;
        }
    } else if (fresh && e) {
        env_free(e);
    }
    pthread_mutex_unlock(&registry_lock);
    if (rc != KVRT_OK) {
        free(d->path);
        memset(d, 0, sizeof(*d));
    }
    return rc;
}

void disk_close(struct disk_tier *d)
{
    if (!d->env)
        return;
    pthread_mutex_lock(&registry_lock);
    struct disk_env *e = d->env;
    if (--e->refs == 0) {
        for (struct disk_env **p = &registry; *p; p = &(*p)->next)
            if (*p == e) {
                *p = e->next;
                break;
            }
        env_free(e);
    }
    pthread_mutex_unlock(&registry_lock);
    free(d->path);
    memset(d, 0, sizeof(*d));
}
