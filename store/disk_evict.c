/* Eviction from the disk tier: least-recently-used entries first (the
 * index's lru table), one at a time inside a batch until it fits the
 * capacity, and down to a target by gc (`kvrt store gc`).
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdlib.h>
#include <string.h>

#include <lmdb.h>

#include "disk_parts.h"

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

void disk_note_gone(struct store_id **gone, uint64_t *num_gone, const uint8_t dbkey[STORE_DBKEY_BYTES])
{
    if (!gone || !gone_room(gone, *num_gone))
        return;
    store_id_from_dbkey(dbkey, &(*gone)[(*num_gone)++]);
}

/* Evict the least recently used entry; *none when there is nothing; its id
 * noted in *gone (KV events: BlockRemoved). */
int disk_evict_one(MDB_txn *txn, struct disk_env *e, bool *none, struct store_id **gone, uint64_t *num_gone)
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
            disk_note_gone(gone, num_gone, dbkey);
        if (one)
            return disk_delete_entry(txn, e, dbkey);
        return rc == MDB_NOTFOUND ? MDB_SUCCESS : rc;
    }
    if (rc != MDB_SUCCESS || !have)
        return rc;
    disk_note_gone(gone, num_gone, dbkey);
    return disk_delete_entry(txn, e, dbkey);
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
    int rc = disk_txn_begin(e, 0, &txn);
    if (rc != MDB_SUCCESS)
        return disk_lmdb_fail(d->path, "cannot begin a write", rc);
    uint64_t target = target_bytes ? target_bytes : disk_meta_u64(txn, e, "capacity", KVRT_STORE_DEFAULT_DISK_BYTES);
    MDB_stat st;
    rc = mdb_stat(txn, e->entries, &st);
    uint64_t count = rc == MDB_SUCCESS ? st.ms_entries : 0;
    while (rc == MDB_SUCCESS && count * d->slot_bytes > target) {
        bool none = false;
        rc = disk_evict_one(txn, e, &none, gone, &num_gone);
        if (none)
            break;
        count--;
        (*evicted)++;
    }
    if (rc == MDB_SUCCESS && *evicted)
        rc = disk_meta_put_u64(txn, e, "evictions", disk_meta_u64(txn, e, "evictions", 0) + *evicted);
    if (rc != MDB_SUCCESS) {
        disk_txn_abort(e, txn);
        *evicted = 0;
        if (gone) {
            free(*gone);
            *gone = NULL;
        }
        return disk_lmdb_fail(d->path, "cannot evict", rc);
    }
    rc = disk_txn_commit(e, txn);
    if (rc != MDB_SUCCESS) {
        *evicted = 0;
        if (gone) {
            free(*gone);
            *gone = NULL;
        }
        return disk_lmdb_fail(d->path, "cannot commit", rc);
    }
    *num_gone_out = num_gone;
    return KVRT_OK;
}
