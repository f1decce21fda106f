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
 * LMDB allows one environment per directory per process: stores of one
 * process that open the same directory share it, counted. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <lmdb.h>

#include "store_internal.h"

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

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct disk_env *registry;

#define LRU_KEY_BYTES DISK_LRU_KEY_BYTES
/* LMDB's two meta pages, the least a data file holds */
#define LMDB_METAS_BYTES 8192u

static uint64_t rd64(const void *p)
{
    const uint8_t *b = p;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

static void le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

/* A failed write: LMDB reports a short write (a full disk, a file size
 * limit) as EIO, so say how much room the file system has left. */
static int write_fail(const char *path, const char *what, int rc)
{
    struct statvfs fs;
    if (statvfs(path, &fs) != 0)
        return STORE_FAIL(KVRT_ERR_DEVICE, "kvrt-store: disk tier \"%s\": %s: %s", path, what, mdb_strerror(rc));
    return STORE_FAIL(KVRT_ERR_DEVICE,
                      "kvrt-store: disk tier \"%s\": %s: %s (its file system has %llu bytes free; a full disk or "
                      "a file size limit fails so)",
                      path, what, mdb_strerror(rc), ULL((uint64_t)fs.f_bavail * fs.f_frsize));
}

static int lmdb_fail(const char *path, const char *what, int rc)
{
    return STORE_FAIL(KVRT_ERR_DEVICE, "kvrt-store: disk tier \"%s\": %s: %s", path, what, mdb_strerror(rc));
}

/* Room for the map, which holds the index only (the entries' bytes are in
 * the slot file): a few hundred bytes an entry at most, and the free pages
 * a batch needs before old ones are reused. */
static size_t map_size_for(uint64_t capacity)
{
    uint64_t m = capacity / 256 + (256ull << 20);
    return (size_t)((m + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1));
}

/* ---- transactions --------------------------------------------------------- */

static int txn_begin(struct disk_env *e, unsigned flags, MDB_txn **txn)
{
    for (int tries = 0;; tries++) {
        pthread_rwlock_rdlock(&e->txns);
        int rc = mdb_txn_begin(e->env, NULL, flags, txn);
        if (rc == MDB_SUCCESS)
            return rc;
        pthread_rwlock_unlock(&e->txns);
        if (rc != MDB_MAP_RESIZED || tries == 3)
            return rc;
        /* another process grew the map: adopt its size */
        pthread_rwlock_wrlock(&e->txns);
        mdb_env_set_mapsize(e->env, 0);
        pthread_rwlock_unlock(&e->txns);
    }
}

static void txn_abort(struct disk_env *e, MDB_txn *txn)
{
    mdb_txn_abort(txn);
    pthread_rwlock_unlock(&e->txns);
}

static int txn_commit(struct disk_env *e, MDB_txn *txn)
{
    int rc = mdb_txn_commit(txn);
    pthread_rwlock_unlock(&e->txns);
    return rc;
}

static uint64_t meta_u64(MDB_txn *txn, struct disk_env *e, const char *name, uint64_t fallback)
{
    MDB_val k = {strlen(name), (void *)name}, v;
    if (mdb_get(txn, e->meta, &k, &v) != MDB_SUCCESS || v.mv_size < 8)
        return fallback;
    return rd64(v.mv_data);
}

static int meta_put_u64(MDB_txn *txn, struct disk_env *e, const char *name, uint64_t value)
{
    uint8_t b[8];
    le64(b, value);
    MDB_val k = {strlen(name), (void *)name}, v = {8, b};
    return mdb_put(txn, e->meta, &k, &v, 0);
}

/* ---- opening ----------------------------------------------------------------- */

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
        return STORE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: the path \"%.64s...\" is longer than 4096 bytes", path);
    if (stat(path, &st) != 0) {
        int e = errno;
        if (e != ENOENT)
            return STORE_FAIL(KVRT_ERR_INVALID,
                              "kvrt_store_open: cannot use the store folder \"%s\": %s; give a folder, or a path "
                              "whose parent folder exists and is writable",
                              path, strerror(e));
        if (inspect)
            return STORE_FAIL(KVRT_ERR_INVALID, "kvrt-store: there is no store at \"%s\" (no such folder)", path);
        /* another rank may make it at the same moment */
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            e = errno;
            return STORE_FAIL(KVRT_ERR_INVALID,
                              "kvrt_store_open: cannot create the store folder \"%s\": %s; give a path whose parent "
                              "folder exists and is writable",
                              path, strerror(e));
        }
    } else if (!S_ISDIR(st.st_mode)) {
        return STORE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: \"%s\" is not a folder; give a folder for the store",
                          path);
    }
    if (stat(data, &st) != 0) {
        *exists = false;
        if (inspect)
            return STORE_FAIL(KVRT_ERR_INVALID, "kvrt-store: \"%s\" is not a kvrt store: it holds no data.mdb", path);
        if (!only_lmdb_files(path))
            return STORE_FAIL(KVRT_ERR_INVALID,
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
            return STORE_FAIL(KVRT_ERR_INVALID,
                              "kvrt-store: \"%s\" is truncated or damaged: %lld bytes, less than LMDB's two meta "
                              "pages (8192 bytes); restore it or remove the folder",
                              data, (long long)st.st_size);
    }
    if (!inspect && access(path, W_OK) != 0) {
        int e = errno;
        return STORE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: the store folder \"%s\" is not writable: %s", path,
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
        return STORE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    pthread_rwlock_init(&e->txns, NULL);
    e->slots_fd = e->direct_fd = e->read_direct_fd = -1;
    int rc = mdb_env_create(&e->env);
    if (rc == MDB_SUCCESS)
        rc = mdb_env_set_maxdbs(e->env, 8);
    if (rc == MDB_SUCCESS)
        rc = mdb_env_set_maxreaders(e->env, 1024);
    if (rc == MDB_SUCCESS)
        rc = mdb_env_set_mapsize(e->env, map_size_for(capacity));
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
        return STORE_FAIL(rc == EACCES || rc == EROFS ? KVRT_ERR_INVALID : KVRT_ERR_DEVICE,
                          "kvrt-store: cannot open the database in \"%s\": %s", path, mdb_strerror(rc));
    }
    int dead = 0;
    mdb_reader_check(e->env, &dead);
    /* the snapshot a read transaction holds is checked: no writer of
     * another process reuses its pages meanwhile */
    MDB_txn *txn;
    if ((rc = txn_begin(e, MDB_RDONLY, &txn)) != MDB_SUCCESS) {
        env_free(e);
        return lmdb_fail(path, "cannot begin a read", rc);
    }
    rc = disk_check_file(path, (uint64_t)mdb_txn_id(txn));
    txn_abort(e, txn);
    if (rc != KVRT_OK) {
        env_free(e);
        return rc;
    }
    *out = e;
    return KVRT_OK;
}

/* meta: names to counters and the store record; entries: entry to slot;
 * lru: (tick, entry), oldest first; ticks: entry to its tick; free: slots
 * given back.  In this order in struct disk_env's handles below. */
const struct disk_table disk_tables[DISK_TABLES] = {
    {"meta", 0, DISK_ANY},
    {"entries", STORE_DBKEY_BYTES, 8},
    {"lru", DISK_LRU_KEY_BYTES, 0},
    {"ticks", STORE_DBKEY_BYTES, 8},
    {"free", 8, 0},
};

static int open_dbis(struct disk_env *e, MDB_txn *txn, unsigned flags)
{
    MDB_dbi *dbi[DISK_TABLES] = {&e->meta, &e->entries, &e->lru, &e->ticks, &e->free_slots};
    int rc = MDB_SUCCESS;
    for (int i = 0; i < DISK_TABLES && rc == MDB_SUCCESS; i++)
        rc = mdb_dbi_open(txn, disk_tables[i].name, flags, dbi[i]);
    return rc;
}

/* Inspecting: read the record, build the model it describes. */
static int read_record(struct disk_tier *d, struct store_model *m)
{
    struct disk_env *e = d->env;
    MDB_txn *txn;
    int rc = txn_begin(e, MDB_RDONLY, &txn);
    if (rc != MDB_SUCCESS)
        return lmdb_fail(d->path, "cannot begin a read", rc);
    rc = open_dbis(e, txn, 0);
    if (rc == MDB_NOTFOUND || rc == MDB_INCOMPATIBLE) {
        txn_abort(e, txn);
        return STORE_FAIL(KVRT_ERR_INVALID,
                          "kvrt-store: \"%s\" is an LMDB database but not a kvrt store (no store record)", d->path);
    }
    if (rc != MDB_SUCCESS) {
        txn_abort(e, txn);
        return lmdb_fail(d->path, "cannot open its tables", rc);
    }
    MDB_val k = {5, "store"}, v;
    rc = mdb_get(txn, e->meta, &k, &v);
    if (rc != MDB_SUCCESS) {
        txn_abort(e, txn);
        return STORE_FAIL(KVRT_ERR_INVALID, "kvrt-store: \"%s\" is not a kvrt store (no store record)", d->path);
    }
    rc = store_record_model(v.mv_data, v.mv_size, d->path, m);
    /* committed, not aborted: the tables opened here stay open */
    int crc = txn_commit(e, txn);
    if (rc == KVRT_OK && crc != MDB_SUCCESS)
        return lmdb_fail(d->path, "cannot open its tables", crc);
    return rc;
}

/* Opening for a model: create the record, or check it; set the capacity. */
static int write_record(struct disk_tier *d, const struct store_model *m, uint64_t capacity)
{
    struct disk_env *e = d->env;
    MDB_txn *txn;
    int rc = txn_begin(e, 0, &txn);
    if (rc != MDB_SUCCESS)
        return lmdb_fail(d->path, "cannot begin a write", rc);
    rc = open_dbis(e, txn, MDB_CREATE);
    if (rc != MDB_SUCCESS) {
        txn_abort(e, txn);
        if (rc == MDB_INCOMPATIBLE)
            return STORE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: \"%s\" is an LMDB database but not a kvrt store",
                              d->path);
        return lmdb_fail(d->path, "cannot open its tables", rc);
    }
    MDB_val k = {5, "store"}, v;
    rc = mdb_get(txn, e->meta, &k, &v);
    if (rc == MDB_SUCCESS) {
        if ((rc = store_record_compare(v.mv_data, v.mv_size, m, d->path)) != KVRT_OK) {
            txn_abort(e, txn);
            return rc;
        }
    } else {
        char *text = store_record_text(m);
        if (!text) {
            txn_abort(e, txn);
            return STORE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory for the store record");
        }
        v.mv_size = strlen(text);
        v.mv_data = text;
        rc = mdb_put(txn, e->meta, &k, &v, 0);
        free(text);
        if (rc == MDB_SUCCESS)
            rc = meta_put_u64(txn, e, "clock", 0);
        if (rc != MDB_SUCCESS) {
            txn_abort(e, txn);
            return lmdb_fail(d->path, "cannot write the store record", rc);
        }
    }
    uint64_t have = meta_u64(txn, e, "capacity", 0);
    uint64_t want = capacity ? capacity : (have ? have : KVRT_STORE_DEFAULT_DISK_BYTES);
    if (want < d->slot_bytes) {
        txn_abort(e, txn);
        return STORE_FAIL(KVRT_ERR_INVALID,
                          "kvrt_store_open: disk_bytes %llu cannot hold one entry of this model (%llu bytes on disk); "
                          "give at least that",
                          ULL(want), ULL(d->slot_bytes));
    }
    if (want != have && (rc = meta_put_u64(txn, e, "capacity", want)) != MDB_SUCCESS) {
        txn_abort(e, txn);
        return lmdb_fail(d->path, "cannot record the capacity", rc);
    }
    rc = txn_commit(e, txn);
    if (rc != MDB_SUCCESS)
        return lmdb_fail(d->path, "cannot commit the store record", rc);
    /* a larger capacity than the map was opened for: grow the map */
    MDB_envinfo info;
    if (mdb_env_info(e->env, &info) == MDB_SUCCESS && info.me_mapsize < map_size_for(want)) {
        pthread_rwlock_wrlock(&e->txns);
        rc = mdb_env_set_mapsize(e->env, map_size_for(want));
        pthread_rwlock_unlock(&e->txns);
        if (rc != MDB_SUCCESS)
            return lmdb_fail(d->path, "cannot grow the map", rc);
    }
    return KVRT_OK;
}

/* slots.dat, for reading and, unless inspecting, for O_DIRECT writes
 * (buffered where the file system refuses them). */
static int open_slots(struct disk_env *e, const char *path, bool inspect, uint64_t slot_bytes)
{
    char file[4200];
    snprintf(file, sizeof(file), "%s/slots.dat", path);
    if (e->slots_fd >= 0)
        close(e->slots_fd);
    if (e->direct_fd >= 0)
        close(e->direct_fd);
    if (e->read_direct_fd >= 0)
        close(e->read_direct_fd);
    e->direct_fd = e->read_direct_fd = -1;
    e->slots_writable = !inspect;
    e->slots_fd = open(file, (inspect ? O_RDONLY : O_RDWR | O_CREAT) | O_CLOEXEC, 0644);
    if (e->slots_fd < 0 && inspect && errno == ENOENT)
        e->slots_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* an index without entries yet */
    if (e->slots_fd < 0) {
        int err = errno;
        return STORE_FAIL(KVRT_ERR_INVALID, "kvrt-store: cannot open \"%s\": %s", file, strerror(err));
    }
    if (!inspect)
        e->direct_fd = open(file, O_WRONLY | O_DIRECT | O_CLOEXEC);
    e->read_direct_fd = open(file, O_RDONLY | O_DIRECT | O_CLOEXEC);
    e->slot_bytes = slot_bytes;
    return KVRT_OK;
}

int disk_open(struct disk_tier *d, const char *path, struct store_model *m, bool inspect, uint64_t capacity)
{
    memset(d, 0, sizeof(*d));
    if (!path || !path[0])
        return STORE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: the store path is empty; give a folder");
    bool exists = false;
    int rc = check_dir(path, inspect, &exists);
    if (rc != KVRT_OK)
        return rc;
    struct stat st;
    if (stat(path, &st) != 0)
        return STORE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: cannot read the store folder \"%s\"", path);
    d->path = strdup(path);
    if (!d->path)
        return STORE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
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
        rc = open_slots(e, path, inspect, d->slot_bytes);
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

/* ---- reading ---------------------------------------------------------------- */

struct disk_read {
    struct disk_tier *d;
    MDB_txn *txn;
    MDB_cursor *cur;
};

int disk_read_begin(struct disk_tier *d, struct disk_read **out)
{
    struct disk_read *r = calloc(1, sizeof(*r));
    if (!r)
        return STORE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    r->d = d;
    int rc = txn_begin(d->env, MDB_RDONLY, &r->txn);
    if (rc == MDB_SUCCESS && (rc = mdb_cursor_open(r->txn, d->env->entries, &r->cur)) != MDB_SUCCESS)
        txn_abort(d->env, r->txn);
    if (rc != MDB_SUCCESS) {
        free(r);
        return lmdb_fail(d->path, "cannot begin a read", rc);
    }
    *out = r;
    return KVRT_OK;
}

int disk_read_refresh(struct disk_read *r)
{
    struct disk_tier *d = r->d;
    mdb_cursor_close(r->cur);
    txn_abort(d->env, r->txn);
    r->cur = NULL;
    int rc = txn_begin(d->env, MDB_RDONLY, &r->txn);
    if (rc == MDB_SUCCESS && (rc = mdb_cursor_open(r->txn, d->env->entries, &r->cur)) != MDB_SUCCESS)
        txn_abort(d->env, r->txn);
    if (rc != MDB_SUCCESS) {
        r->txn = NULL;
        return lmdb_fail(d->path, "cannot begin a read", rc);
    }
    return KVRT_OK;
}

void disk_read_end(struct disk_read *r)
{
    if (!r)
        return;
    if (r->txn) {
        mdb_cursor_close(r->cur);
        txn_abort(r->d->env, r->txn);
    }
    free(r);
}

/* The slot an index value names. */
static bool slot_of(const MDB_val *v, uint64_t *slot)
{
    if (v->mv_size != 8)
        return false;
    *slot = rd64(v->mv_data);
    return true;
}

static uint64_t read_slot(struct disk_env *e, uint64_t slot, uint8_t *buf, uint64_t bytes)
{
    uint64_t got = 0;
    while (got < bytes) {
        ssize_t n = pread(e->slots_fd, buf + got, bytes - got, (off_t)(slot * e->slot_bytes + got));
        if (n <= 0)
            break;
        got += (uint64_t)n;
    }
    return got;
}

/* Slots [slot, slot + n) into bufs[0..n) (slot-sized, 4 KiB-aligned), 64
 * at a time in one request: with O_DIRECT straight into the buffers, no
 * copy out of the page cache (buffered where the file system refuses it).
 * lens[i]: the entry bytes buffer i got (fewer where the file is cut). */
static void read_run(struct disk_tier *d, uint8_t *const *bufs, uint64_t slot, uint64_t n, uint64_t *lens)
{
    struct disk_env *e = d->env;
    struct iovec iov[64];
    for (uint64_t done = 0; done < n;) {
        int m = (int)(n - done < 64 ? n - done : 64);
        for (int i = 0; i < m; i++)
            iov[i] = (struct iovec){bufs[done + (uint64_t)i], e->slot_bytes};
        off_t at = (off_t)((slot + done) * e->slot_bytes);
        ssize_t got = -1;
        if (e->read_direct_fd >= 0)
            do
                got = preadv(e->read_direct_fd, iov, m, at);
            while (got < 0 && errno == EINTR);
        if (got < 0)
            do
                got = preadv(e->slots_fd, iov, m, at);
            while (got < 0 && errno == EINTR);
        uint64_t g = got > 0 ? (uint64_t)got : 0;
        for (int i = 0; i < m; i++) {
            uint64_t from = (uint64_t)i * e->slot_bytes, *len = &lens[done + (uint64_t)i];
            *len = g > from ? g - from : 0;
            if (*len > d->value_bytes)
                *len = d->value_bytes;
            /* a read cut short before the end of the file: the rest on its own */
            if (*len < d->value_bytes)
                *len = read_slot(e, slot + done + (uint64_t)i, bufs[done + (uint64_t)i], d->value_bytes);
        }
        done += (uint64_t)m;
    }
}

void disk_read_slots(struct disk_tier *d, uint8_t *const *bufs, const uint64_t *slots, uint64_t n, uint64_t *lens)
{
    /* a slot whose bytes end past the largest file offset is a damaged
     * record: nothing read, which the checks refuse */
    const uint64_t last = (uint64_t)INT64_MAX / d->env->slot_bytes - 1;
    for (uint64_t i = 0; i < n;) {
        if (slots[i] > last) {
            lens[i++] = 0;
            continue;
        }
        uint64_t run = 1;
        while (i + run < n && slots[i] + run <= last && slots[i + run] == slots[i] + run)
            run++;
        read_run(d, bufs + i, slots[i], run, lens + i);
        i += run;
    }
}

int disk_read_find(struct disk_read *r, const struct store_id *id, bool *found, uint64_t *slot)
{
    uint8_t key[STORE_DBKEY_BYTES];
    store_dbkey(id, key);
    MDB_val k = {sizeof(key), key}, v;
    *found = false;
    *slot = UINT64_MAX;
    if (!r->txn)
        return STORE_FAIL(KVRT_ERR_DEVICE, "kvrt-store: disk tier \"%s\": no read transaction", r->d->path);
    int rc = mdb_get(r->txn, r->d->env->entries, &k, &v);
    if (rc == MDB_NOTFOUND)
        return KVRT_OK;
    if (rc != MDB_SUCCESS)
        return lmdb_fail(r->d->path, "cannot read the index", rc);
    *found = true;
    if (!slot_of(&v, slot))
        *slot = UINT64_MAX; /* a damaged index record: read as 0 bytes, which the checks refuse */
    return KVRT_OK;
}

int disk_read_get(struct disk_read *r, const struct store_id *id, uint8_t *buf, bool *found, uint64_t *slot,
                  uint64_t *len)
{
    *len = 0;
    int rc = disk_read_find(r, id, found, slot);
    if (rc == KVRT_OK && *found)
        disk_read_slots(r->d, &buf, slot, 1, len);
    return rc;
}

bool disk_still_at(struct disk_tier *d, const struct store_id *id, uint64_t slot)
{
    struct disk_read *r;
    if (disk_read_begin(d, &r) != KVRT_OK)
        return false;
    uint8_t key[STORE_DBKEY_BYTES];
    store_dbkey(id, key);
    MDB_val k = {sizeof(key), key}, v;
    uint64_t now_at = 0;
    bool same = mdb_get(r->txn, d->env->entries, &k, &v) == MDB_SUCCESS && slot_of(&v, &now_at) && now_at == slot;
    disk_read_end(r);
    return same;
}

int disk_read_has(struct disk_read *r, const uint8_t key[KVRT_STORE_KEY_BYTES], uint32_t head, uint32_t n, bool *has)
{
    struct store_id id;
    memcpy(id.key, key, KVRT_STORE_KEY_BYTES);
    id.head = head;
    uint8_t k0[STORE_DBKEY_BYTES];
    store_dbkey(&id, k0);
    MDB_val k = {sizeof(k0), k0}, v;
    for (uint32_t i = 0; i < n; i++)
        has[i] = false;
    if (!r->cur)
        return STORE_FAIL(KVRT_ERR_DEVICE, "kvrt-store: disk tier \"%s\": no read transaction", r->d->path);
    int rc = mdb_cursor_get(r->cur, &k, &v, MDB_SET_RANGE);
    while (rc == MDB_SUCCESS) {
        if (k.mv_size != STORE_DBKEY_BYTES || memcmp(k.mv_data, key, KVRT_STORE_KEY_BYTES) != 0)
            break;
        store_id_from_dbkey(k.mv_data, &id);
        if (id.head < head || id.head >= head + n)
            break;
        has[id.head - head] = true;
        rc = mdb_cursor_get(r->cur, &k, &v, MDB_NEXT);
    }
    if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND)
        return lmdb_fail(r->d->path, "cannot look entries up", rc);
    return KVRT_OK;
}

/* ---- writing ---------------------------------------------------------------- */

static void lru_key(uint8_t out[LRU_KEY_BYTES], uint64_t tick, const uint8_t dbkey[STORE_DBKEY_BYTES])
{
    be64(out, tick);
    memcpy(out + 8, dbkey, STORE_DBKEY_BYTES);
}

/* A slot back to the free ones; reused slots are taken lowest first. */
static int free_slot(MDB_txn *txn, struct disk_env *e, uint64_t slot)
{
    uint8_t b[8];
    be64(b, slot);
    MDB_val k = {8, b}, empty = {0, NULL};
    return mdb_put(txn, e->free_slots, &k, &empty, 0);
}

/* A slot for a new entry: a free one, else one past the end of the file. */
static int alloc_slot(MDB_txn *txn, struct disk_env *e, uint64_t *slot)
{
    MDB_cursor *c;
    int rc = mdb_cursor_open(txn, e->free_slots, &c);
    if (rc != MDB_SUCCESS)
        return rc;
    MDB_val k, v;
    rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
    if (rc == MDB_SUCCESS && k.mv_size == 8) {
        *slot = 0;
        for (int i = 0; i < 8; i++)
            *slot = (*slot << 8) | ((const uint8_t *)k.mv_data)[i];
        rc = mdb_cursor_del(c, 0);
        mdb_cursor_close(c);
        return rc;
    }
    mdb_cursor_close(c);
    if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND)
        return rc;
    *slot = meta_u64(txn, e, "slots", 0);
    return meta_put_u64(txn, e, "slots", *slot + 1);
}

/* Delete an entry and its recency records; its slot is free again. */
static int delete_entry(MDB_txn *txn, struct disk_env *e, const uint8_t dbkey[STORE_DBKEY_BYTES])
{
    MDB_val k = {STORE_DBKEY_BYTES, (void *)dbkey}, v;
    int rc = mdb_get(txn, e->ticks, &k, &v);
    if (rc == MDB_SUCCESS && v.mv_size == 8) {
        uint8_t lk[LRU_KEY_BYTES];
        lru_key(lk, rd64(v.mv_data), dbkey);
        MDB_val l = {sizeof(lk), lk};
        rc = mdb_del(txn, e->lru, &l, NULL);
        if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND)
            return rc;
    }
    rc = mdb_del(txn, e->ticks, &k, NULL);
    if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND)
        return rc;
    uint64_t slot;
    if (mdb_get(txn, e->entries, &k, &v) == MDB_SUCCESS && slot_of(&v, &slot) && (rc = free_slot(txn, e, slot)) != 0)
        return rc;
    rc = mdb_del(txn, e->entries, &k, NULL);
    return rc == MDB_NOTFOUND ? MDB_SUCCESS : rc;
}

/* Room for one more id in a list of n (its room doubles at each power of
 * two); false when out of memory. */
static bool gone_room(struct store_id **gone, uint64_t n)
{
    if (n & (n - 1))
        return true;
    struct store_id *g = realloc(*gone, (n ? 2 * n : 1) * sizeof(*g));
    if (!g)
        return false;
    *gone = g;
    return true;
}

/* Add the entry under dbkey to *gone (NULL: nobody asked). */
static void note_gone(struct store_id **gone, uint64_t *num_gone, const uint8_t dbkey[STORE_DBKEY_BYTES])
{
    if (!gone || !gone_room(gone, *num_gone))
        return;
    store_id_from_dbkey(dbkey, &(*gone)[(*num_gone)++]);
}

/* Evict the least recently used entry; *none when there is nothing; its id
 * noted in *gone (gone may be NULL). */
static int evict_one(MDB_txn *txn, struct disk_env *e, bool *none, struct store_id **gone, uint64_t *num_gone)
{
    MDB_cursor *c;
    int rc = mdb_cursor_open(txn, e->lru, &c);
    if (rc != MDB_SUCCESS)
        return rc;
    MDB_val k, v;
    rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
    uint8_t dbkey[STORE_DBKEY_BYTES];
    bool have = rc == MDB_SUCCESS && k.mv_size == LRU_KEY_BYTES;
    if (have)
        memcpy(dbkey, (uint8_t *)k.mv_data + 8, STORE_DBKEY_BYTES);
    else if (rc == MDB_SUCCESS)
        rc = mdb_cursor_del(c, 0); /* a record of no use: drop it */
    mdb_cursor_close(c);
    *none = !have;
    if (rc == MDB_NOTFOUND) {
        /* entries without recency records (none are written so): take the
         * first in key order */
        MDB_cursor *ec;
        if ((rc = mdb_cursor_open(txn, e->entries, &ec)) != MDB_SUCCESS)
            return rc;
        rc = mdb_cursor_get(ec, &k, &v, MDB_FIRST);
        bool one = rc == MDB_SUCCESS && k.mv_size == STORE_DBKEY_BYTES;
        if (one)
            memcpy(dbkey, k.mv_data, STORE_DBKEY_BYTES);
        else if (rc == MDB_SUCCESS)
            rc = mdb_cursor_del(ec, 0);
        mdb_cursor_close(ec);
        *none = rc != MDB_SUCCESS;
        if (one)
            note_gone(gone, num_gone, dbkey);
        if (one)
            return delete_entry(txn, e, dbkey);
        return rc == MDB_NOTFOUND ? MDB_SUCCESS : rc;
    }
    if (rc != MDB_SUCCESS || !have)
        return rc;
    note_gone(gone, num_gone, dbkey);
    return delete_entry(txn, e, dbkey);
}

static int set_tick(MDB_txn *txn, struct disk_env *e, const uint8_t dbkey[STORE_DBKEY_BYTES], uint64_t tick,
                    bool must_exist)
{
    MDB_val k = {STORE_DBKEY_BYTES, (void *)dbkey}, v;
    int rc = mdb_get(txn, e->ticks, &k, &v);
    if (rc == MDB_SUCCESS && v.mv_size == 8) {
        uint64_t old = rd64(v.mv_data);
        if (old == tick)
            return MDB_SUCCESS;
        uint8_t lk[LRU_KEY_BYTES];
        lru_key(lk, old, dbkey);
        MDB_val l = {sizeof(lk), lk};
        rc = mdb_del(txn, e->lru, &l, NULL);
        if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND)
            return rc;
    } else if (rc != MDB_NOTFOUND && rc != MDB_SUCCESS) {
        return rc;
    } else if (must_exist) {
        /* touched, but gone meanwhile */
        MDB_val ev;
        if (mdb_get(txn, e->entries, &k, &ev) != MDB_SUCCESS)
            return MDB_SUCCESS;
    }
    uint8_t lk[LRU_KEY_BYTES], t[8];
    lru_key(lk, tick, dbkey);
    le64(t, tick);
    MDB_val l = {sizeof(lk), lk}, empty = {0, NULL}, tv = {8, t};
    rc = mdb_put(txn, e->lru, &l, &empty, 0);
    if (rc == MDB_SUCCESS)
        rc = mdb_put(txn, e->ticks, &k, &tv, 0);
    return rc;
}

static int write_all(int fd, const uint8_t *buf, uint64_t bytes, uint64_t offset)
{
    uint64_t done = 0;
    while (done < bytes) {
        ssize_t n = pwrite(fd, buf + done, bytes - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EIO;
        done += (uint64_t)n;
    }
    return 0;
}

/* Slots [first, first + n) from n buffers in one call where it can. */
static int write_run(int fd, struct mem_entry *const *puts, uint64_t n, uint64_t slot_bytes, uint64_t first)
{
    struct iovec iov[64];
    uint64_t done = 0;
    while (done < n) {
        int m = (int)(n - done < 64 ? n - done : 64);
        for (int i = 0; i < m; i++)
            iov[i] = (struct iovec){puts[done + (uint64_t)i]->buf, slot_bytes};
        ssize_t w = pwritev(fd, iov, m, (off_t)((first + done) * slot_bytes));
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno;
        if ((uint64_t)w != (uint64_t)m * slot_bytes) {
            /* a short write (a full disk): the rest one by one, which says why */
            uint64_t whole = (uint64_t)w / slot_bytes;
            for (uint64_t i = whole; i < (uint64_t)m; i++) {
                int rc = write_all(fd, puts[done + i]->buf, slot_bytes, (first + done + i) * slot_bytes);
                if (rc != 0)
                    return rc;
            }
        }
        done += (uint64_t)m;
    }
    return 0;
}

/* The entries' bytes into their slots, synced: O_DIRECT from the entries'
 * own buffers where the file system takes it, else through the page cache;
 * runs of neighbouring slots (a growing file) in one call each. */
static int write_slots(struct disk_tier *d, struct mem_entry *const *puts, const uint64_t *slots, uint64_t n)
{
    struct disk_env *e = d->env;
    if (n == 0)
        return 0;
    for (uint64_t i = 0; i < n;) {
        uint64_t run = 1;
        while (i + run < n && slots[i + run] == slots[i] + run)
            run++;
        int rc = -1;
        if (e->direct_fd >= 0)
            rc = write_run(e->direct_fd, puts + i, run, d->slot_bytes, slots[i]);
        if (rc == EINVAL || rc == -1) /* no O_DIRECT here: buffered */
            rc = write_run(e->slots_fd, puts + i, run, d->slot_bytes, slots[i]);
        if (rc != 0)
            return rc;
        i += run;
    }
    /* the bytes are on disk before the index that names them */
    return fdatasync(e->slots_fd) == 0 ? 0 : errno;
}

static int write_batch(struct disk_tier *d, MDB_txn *txn, struct disk_batch *b)
{
    struct disk_env *e = d->env;
    uint64_t clock = meta_u64(txn, e, "clock", 0) + 1;
    uint64_t capacity = meta_u64(txn, e, "capacity", KVRT_STORE_DEFAULT_DISK_BYTES);
    uint64_t limit = capacity / d->slot_bytes;
    MDB_stat st;
    int rc = mdb_stat(txn, e->entries, &st);
    if (rc != MDB_SUCCESS)
        return rc;
    uint64_t count;
    uint8_t dbkey[STORE_DBKEY_BYTES];
    /* an array of pointers to entries: sizeof(*fresh) is a pointer's size */
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    struct mem_entry **fresh = malloc((b->num_puts ? b->num_puts : 1) * sizeof(*fresh));
    uint64_t *slots = malloc((b->num_puts ? b->num_puts : 1) * sizeof(*slots));
    if (!fresh || !slots) {
        free(fresh);
        free(slots);
        return ENOMEM;
    }
    /* Slots first, from what was free when this transaction began: a slot
     * freed below (an eviction, a drop) still holds a committed entry until
     * the commit, and must not be written before it. */
    uint64_t n = 0;
    for (uint64_t i = 0; i < b->num_puts && rc == MDB_SUCCESS; i++) {
        struct mem_entry *me = b->puts[i];
        store_dbkey(&me->id, dbkey);
        MDB_val k = {sizeof(dbkey), dbkey}, v;
        bool twice = false;
        for (uint64_t j = 0; j < n && !twice; j++)
            twice = fresh[j]->id.head == me->id.head && memcmp(fresh[j]->id.key, me->id.key, KVRT_STORE_KEY_BYTES) == 0;
        if (twice || mdb_get(txn, e->entries, &k, &v) == MDB_SUCCESS) {
            b->present++;
            rc = set_tick(txn, e, dbkey, clock, false);
            continue;
        }
        fresh[n] = me;
        rc = alloc_slot(txn, e, &slots[n]);
        n++;
    }
    for (uint64_t i = 0; i < b->num_drops && rc == MDB_SUCCESS; i++) {
        store_dbkey(&b->drops[i], dbkey);
        MDB_val k = {sizeof(dbkey), dbkey}, v;
        if (mdb_get(txn, e->entries, &k, &v) == MDB_SUCCESS)
            note_gone(&b->gone, &b->num_gone, dbkey);
        rc = delete_entry(txn, e, dbkey);
    }
    if (rc == MDB_SUCCESS)
        rc = mdb_stat(txn, e->entries, &st);
    count = st.ms_entries;
    /* room for the new ones, least recently used out first */
    while (rc == MDB_SUCCESS && count + n > limit && count > 0) {
        bool none = false;
        if ((rc = evict_one(txn, e, &none, &b->gone, &b->num_gone)) != MDB_SUCCESS || none)
            break;
        count--;
        b->evicted++;
    }
    for (uint64_t i = 0; i < n && rc == MDB_SUCCESS; i++) {
        uint8_t sb[8];
        le64(sb, slots[i]);
        store_dbkey(&fresh[i]->id, dbkey);
        MDB_val k = {sizeof(dbkey), dbkey}, v = {8, sb};
        if ((rc = mdb_put(txn, e->entries, &k, &v, MDB_NOOVERWRITE)) == MDB_SUCCESS)
            rc = set_tick(txn, e, dbkey, clock, false);
    }
    for (uint64_t i = 0; i < b->num_touches && rc == MDB_SUCCESS; i++) {
        store_dbkey(&b->touches[i], dbkey);
        rc = set_tick(txn, e, dbkey, clock, true);
    }
    b->written = n;
    static const char *const names[] = {"hits", "misses", "writes", "evictions"};
    uint64_t add[] = {b->add_hits, b->add_misses, b->written, b->evicted};
    for (int i = 0; i < 4 && rc == MDB_SUCCESS; i++)
        if (add[i])
            rc = meta_put_u64(txn, e, names[i], meta_u64(txn, e, names[i], 0) + add[i]);
    if (rc == MDB_SUCCESS)
        rc = meta_put_u64(txn, e, "clock", clock);
    if (rc == MDB_SUCCESS)
        rc = write_slots(d, fresh, slots, n);
    b->fresh = fresh; /* the caller's: what was written, after the commit */
    free(slots);
    return rc;
}

void disk_batch_done(struct disk_batch *b)
{
    free(b->fresh);
    free(b->gone);
    b->fresh = NULL;
    b->gone = NULL;
    b->num_gone = 0;
}

int disk_write(struct disk_tier *d, struct disk_batch *b)
{
    MDB_txn *txn;
    b->written = b->present = b->evicted = 0;
    int rc = txn_begin(d->env, 0, &txn);
    if (rc != MDB_SUCCESS)
        return lmdb_fail(d->path, "cannot begin a write", rc);
    b->fresh = NULL;
    b->gone = NULL;
    b->num_gone = 0;
    rc = write_batch(d, txn, b);
    if (rc != MDB_SUCCESS) {
        txn_abort(d->env, txn);
        disk_batch_done(b);
        b->written = b->present = b->evicted = 0;
        return write_fail(d->path, "cannot write", rc);
    }
    rc = txn_commit(d->env, txn);
    if (rc != MDB_SUCCESS) {
        disk_batch_done(b);
        b->written = b->present = b->evicted = 0;
        return write_fail(d->path, "cannot commit", rc);
    }
    return KVRT_OK;
}

/* ---- inspecting ---------------------------------------------------------------- */

int disk_counts(struct disk_tier *d, struct disk_counts *out)
{
    memset(out, 0, sizeof(*out));
    struct disk_env *e = d->env;
    MDB_txn *txn;
    int rc = txn_begin(e, MDB_RDONLY, &txn);
    if (rc != MDB_SUCCESS)
        return lmdb_fail(d->path, "cannot begin a read", rc);
    MDB_stat st;
    rc = mdb_stat(txn, e->entries, &st);
    if (rc == MDB_SUCCESS) {
        out->entries = st.ms_entries;
        out->bytes = st.ms_entries * d->slot_bytes;
        out->capacity = meta_u64(txn, e, "capacity", 0);
        out->clock = meta_u64(txn, e, "clock", 0);
        out->hits = meta_u64(txn, e, "hits", 0);
        out->misses = meta_u64(txn, e, "misses", 0);
        out->writes = meta_u64(txn, e, "writes", 0);
        out->evictions = meta_u64(txn, e, "evictions", 0);
    }
    txn_abort(e, txn);
    static const char *const files[] = {"data.mdb", "slots.dat"};
    for (int i = 0; i < 2; i++) {
        char data[4200];
        struct stat fst;
        snprintf(data, sizeof(data), "%s/%s", d->path, files[i]);
        if (stat(data, &fst) == 0)
            out->file_bytes += (uint64_t)fst.st_size;
    }
    return rc == MDB_SUCCESS ? KVRT_OK : lmdb_fail(d->path, "cannot count the entries", rc);
}

int disk_list(struct disk_tier *d,
              int (*each)(void *user, const struct kvrt_store_entry_info *e, const uint8_t *buf, uint64_t len),
              void *user)
{
    struct disk_env *e = d->env;
    MDB_txn *txn;
    MDB_cursor *c;
    int rc = txn_begin(e, MDB_RDONLY, &txn);
    if (rc != MDB_SUCCESS)
        return lmdb_fail(d->path, "cannot begin a read", rc);
    if ((rc = mdb_cursor_open(txn, e->entries, &c)) != MDB_SUCCESS) {
        txn_abort(e, txn);
        return lmdb_fail(d->path, "cannot list the entries", rc);
    }
    MDB_val k, v;
    int stop = 0;
    uint8_t *buf = malloc(d->slot_bytes);
    if (!buf) {
        mdb_cursor_close(c);
        txn_abort(e, txn);
        return STORE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    }
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == MDB_SUCCESS && !stop;
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        struct kvrt_store_entry_info info;
        memset(&info, 0, sizeof(info));
        info.size = sizeof(info);
        struct store_id id = {{0}, 0};
        if (k.mv_size == STORE_DBKEY_BYTES)
            store_id_from_dbkey(k.mv_data, &id);
        memcpy(info.key, id.key, KVRT_STORE_KEY_BYTES);
        info.head = id.head;
        MDB_val tv;
        if (mdb_get(txn, e->ticks, &k, &tv) == MDB_SUCCESS && tv.mv_size == 8)
            info.last_used = rd64(tv.mv_data);
        uint64_t slot, len = 0;
        bool ok = k.mv_size == STORE_DBKEY_BYTES && slot_of(&v, &slot);
        if (ok)
            len = read_slot(e, slot, buf, d->value_bytes);
        info.bytes = len;
        stop = each(user, &info, ok ? buf : NULL, len);
    }
    free(buf);
    mdb_cursor_close(c);
    txn_abort(e, txn);
    if (stop)
        return stop;
    return rc == MDB_NOTFOUND || rc == MDB_SUCCESS ? KVRT_OK : lmdb_fail(d->path, "cannot list the entries", rc);
}

int disk_gc(struct disk_tier *d, uint64_t target_bytes, uint64_t *evicted, struct store_id **gone,
            uint64_t *num_gone_out)
{
    struct disk_env *e = d->env;
    MDB_txn *txn;
    *evicted = 0;
    if (gone)
        *gone = NULL;
    uint64_t num_gone = 0;
    *num_gone_out = 0;
    int rc = txn_begin(e, 0, &txn);
    if (rc != MDB_SUCCESS)
        return lmdb_fail(d->path, "cannot begin a write", rc);
    uint64_t target = target_bytes ? target_bytes : meta_u64(txn, e, "capacity", KVRT_STORE_DEFAULT_DISK_BYTES);
    MDB_stat st;
    rc = mdb_stat(txn, e->entries, &st);
    uint64_t count = rc == MDB_SUCCESS ? st.ms_entries : 0;
    while (rc == MDB_SUCCESS && count * d->slot_bytes > target) {
        bool none = false;
        rc = evict_one(txn, e, &none, gone, &num_gone);
        if (none)
            break;
        count--;
        (*evicted)++;
    }
    if (rc == MDB_SUCCESS && *evicted)
        rc = meta_put_u64(txn, e, "evictions", meta_u64(txn, e, "evictions", 0) + *evicted);
    if (rc != MDB_SUCCESS) {
        txn_abort(e, txn);
        *evicted = 0;
        if (gone) {
            free(*gone);
            *gone = NULL;
        }
        return lmdb_fail(d->path, "cannot evict", rc);
    }
    rc = txn_commit(e, txn);
    if (rc != MDB_SUCCESS) {
        *evicted = 0;
        if (gone) {
            free(*gone);
            *gone = NULL;
        }
        return lmdb_fail(d->path, "cannot commit", rc);
    }
    *num_gone_out = num_gone;
    return KVRT_OK;
}
