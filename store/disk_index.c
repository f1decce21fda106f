/* The disk tier's index (docs/store.md "The store directory"): LMDB's
 * transactions and counters, which slot holds an entry, the recency ticks,
 * slots allocated and given back, entries deleted.  The other disk files
 * reach LMDB through these (disk_parts.h).
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <lmdb.h>

#include "base/bytes.h"
#include "disk_parts.h"

/* Room for the map, which holds the index only (the entries' bytes are in
 * the slot file): a few hundred bytes an entry at most, and the free pages
 * a batch needs before old ones are reused. */
size_t disk_map_size_for(uint64_t capacity)
{
    uint64_t m = capacity / 256 + (256ull << 20);
    return (size_t)((m + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1));
}

int disk_txn_begin(struct disk_env *e, unsigned flags, MDB_txn **txn)
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

void disk_txn_abort(struct disk_env *e, MDB_txn *txn)
{
    mdb_txn_abort(txn);
    pthread_rwlock_unlock(&e->txns);
}

int disk_txn_commit(struct disk_env *e, MDB_txn *txn)
{
    int rc = mdb_txn_commit(txn);
    pthread_rwlock_unlock(&e->txns);
    return rc;
}

uint64_t disk_meta_u64(MDB_txn *txn, struct disk_env *e, const char *name, uint64_t fallback)
{
    MDB_val k = {strlen(name), (void *)name}, v;
    if (mdb_get(txn, e->meta, &k, &v) != MDB_SUCCESS || v.mv_size < 8)
        return fallback;
    return base_get_le64(v.mv_data);
}

int disk_meta_put_u64(MDB_txn *txn, struct disk_env *e, const char *name, uint64_t value)
{
    uint8_t b[8];
    base_put_le64(b, value);
    MDB_val k = {strlen(name), (void *)name}, v = {8, b};
    return mdb_put(txn, e->meta, &k, &v, 0);
}

int disk_open_dbis(struct disk_env *e, MDB_txn *txn, unsigned flags)
{
    MDB_dbi *dbi[DISK_TABLES] = {&e->meta, &e->entries, &e->lru, &e->ticks, &e->free_slots};
    int rc = MDB_SUCCESS;
    for (int i = 0; i < DISK_TABLES && rc == MDB_SUCCESS; i++)
        rc = mdb_dbi_open(txn, disk_tables[i].name, flags, dbi[i]);
    return rc;
}

int disk_read_begin(struct disk_tier *d, struct disk_read **out)
{
    struct disk_read *r = calloc(1, sizeof(*r));
    if (!r)
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
    r->d = d;
    int rc = disk_txn_begin(d->env, MDB_RDONLY, &r->txn);
    if (rc == MDB_SUCCESS && (rc = mdb_cursor_open(r->txn, d->env->entries, &r->cur)) != MDB_SUCCESS)
        disk_txn_abort(d->env, r->txn);
    if (rc != MDB_SUCCESS) {
        free(r);
        return disk_lmdb_fail(d->path, "cannot begin a read", rc);
    }
    *out = r;
    return KVRT_OK;
}

int disk_read_refresh(struct disk_read *r)
{
    struct disk_tier *d = r->d;
    mdb_cursor_close(r->cur);
    disk_txn_abort(d->env, r->txn);
    r->cur = NULL;
    int rc = disk_txn_begin(d->env, MDB_RDONLY, &r->txn);
    if (rc == MDB_SUCCESS && (rc = mdb_cursor_open(r->txn, d->env->entries, &r->cur)) != MDB_SUCCESS)
        disk_txn_abort(d->env, r->txn);
    if (rc != MDB_SUCCESS) {
        r->txn = NULL;
        return disk_lmdb_fail(d->path, "cannot begin a read", rc);
    }
    return KVRT_OK;
}

void disk_read_end(struct disk_read *r)
{
    if (!r)
        return;
    if (r->txn) {
        mdb_cursor_close(r->cur);
        disk_txn_abort(r->d->env, r->txn);
    }
    free(r);
}

/* The slot an index value names. */
bool disk_slot_of(const MDB_val *v, uint64_t *slot)
{
    if (v->mv_size != 8)
        return false;
    *slot = base_get_le64(v->mv_data);
    return true;
}

int disk_read_find(struct disk_read *r, const struct store_id *id, bool *found, uint64_t *slot)
{
    uint8_t key[STORE_DBKEY_BYTES];
    store_dbkey(id, key);
    MDB_val k = {sizeof(key), key}, v;
    *found = false;
    *slot = UINT64_MAX;
    if (!r->txn)
        return BASE_FAIL(KVRT_ERR_DEVICE, "kvrt-store: disk tier \"%s\": no read transaction", r->d->path);
    int rc = mdb_get(r->txn, r->d->env->entries, &k, &v);
    if (rc == MDB_NOTFOUND)
        return KVRT_OK;
    if (rc != MDB_SUCCESS)
        return disk_lmdb_fail(r->d->path, "cannot read the index", rc);
    *found = true;
    if (!disk_slot_of(&v, slot))
        *slot = UINT64_MAX; /* a damaged index record: read as 0 bytes, which the checks refuse */
    return KVRT_OK;
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
    bool same = mdb_get(r->txn, d->env->entries, &k, &v) == MDB_SUCCESS && disk_slot_of(&v, &now_at) && now_at == slot;
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
        return BASE_FAIL(KVRT_ERR_DEVICE, "kvrt-store: disk tier \"%s\": no read transaction", r->d->path);
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
        return disk_lmdb_fail(r->d->path, "cannot look entries up", rc);
    return KVRT_OK;
}

static void lru_key(uint8_t out[LRU_KEY_BYTES], uint64_t tick, const uint8_t dbkey[STORE_DBKEY_BYTES])
{
    base_put_be64(out, tick);
    memcpy(out + 8, dbkey, STORE_DBKEY_BYTES);
}

/* A slot back to the free ones; reused slots are taken lowest first. */
static int free_slot(MDB_txn *txn, struct disk_env *e, uint64_t slot)
{
    uint8_t b[8];
    base_put_be64(b, slot);
    MDB_val k = {8, b}, empty = {0, NULL};
    return mdb_put(txn, e->free_slots, &k, &empty, 0);
}

/* A slot for a new entry: a free one, else one past the end of the file. */
int disk_alloc_slot(MDB_txn *txn, struct disk_env *e, uint64_t *slot)
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
    *slot = disk_meta_u64(txn, e, "slots", 0);
    return disk_meta_put_u64(txn, e, "slots", *slot + 1);
}

/* Delete an entry and its recency records; its slot is free again. */
int disk_delete_entry(MDB_txn *txn, struct disk_env *e, const uint8_t dbkey[STORE_DBKEY_BYTES])
{
    MDB_val k = {STORE_DBKEY_BYTES, (void *)dbkey}, v;
    int rc = mdb_get(txn, e->ticks, &k, &v);
    if (rc == MDB_SUCCESS && v.mv_size == 8) {
        uint8_t lk[LRU_KEY_BYTES];
        lru_key(lk, base_get_le64(v.mv_data), dbkey);
        MDB_val l = {sizeof(lk), lk};
        rc = mdb_del(txn, e->lru, &l, NULL);
        if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND)
            return rc;
    }
    rc = mdb_del(txn, e->ticks, &k, NULL);
    if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND)
        return rc;
    uint64_t slot;
    if (mdb_get(txn, e->entries, &k, &v) == MDB_SUCCESS && disk_slot_of(&v, &slot) &&
        (rc = free_slot(txn, e, slot)) != 0)
        return rc;
    rc = mdb_del(txn, e->entries, &k, NULL);
    return rc == MDB_NOTFOUND ? MDB_SUCCESS : rc;
}

int disk_set_tick(MDB_txn *txn, struct disk_env *e, const uint8_t dbkey[STORE_DBKEY_BYTES], uint64_t tick,
                  bool must_exist)
{
    MDB_val k = {STORE_DBKEY_BYTES, (void *)dbkey}, v;
    int rc = mdb_get(txn, e->ticks, &k, &v);
    if (rc == MDB_SUCCESS && v.mv_size == 8) {
        uint64_t old = base_get_le64(v.mv_data);
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
    base_put_le64(t, tick);
    MDB_val l = {sizeof(lk), lk}, empty = {0, NULL}, tv = {8, t};
    rc = mdb_put(txn, e->lru, &l, &empty, 0);
    if (rc == MDB_SUCCESS)
        rc = mdb_put(txn, e->ticks, &k, &tv, 0);
    return rc;
}
