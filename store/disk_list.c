/* The disk tier as it is: its counters, and every entry in key order with
 * its info and bytes (`kvrt store ls`, `verify`).
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lmdb.h>

#include "base/bytes.h"
#include "disk_parts.h"

int disk_counts(struct disk_tier *d, struct disk_counts *out)
{
    memset(out, 0, sizeof(*out));
    struct disk_env *e = d->env;
    MDB_txn *txn;
    int rc = disk_txn_begin(e, MDB_RDONLY, &txn);
    if (rc != MDB_SUCCESS)
        return disk_lmdb_fail(d->path, "cannot begin a read", rc);
    MDB_stat st;
    rc = mdb_stat(txn, e->entries, &st);
    if (rc == MDB_SUCCESS) {
        out->entries = st.ms_entries;
        out->bytes = st.ms_entries * d->slot_bytes;
        out->capacity = disk_meta_u64(txn, e, "capacity", 0);
        out->clock = disk_meta_u64(txn, e, "clock", 0);
        out->hits = disk_meta_u64(txn, e, "hits", 0);
        out->misses = disk_meta_u64(txn, e, "misses", 0);
        out->writes = disk_meta_u64(txn, e, "writes", 0);
        out->evictions = disk_meta_u64(txn, e, "evictions", 0);
    }
    disk_txn_abort(e, txn);
    static const char *const files[] = {"data.mdb", "slots.dat"};
    for (int i = 0; i < 2; i++) {
        char data[4200];
        struct stat fst;
        snprintf(data, sizeof(data), "%s/%s", d->path, files[i]);
        if (stat(data, &fst) == 0)
            out->file_bytes += (uint64_t)fst.st_size;
    }
    return rc == MDB_SUCCESS ? KVRT_OK : disk_lmdb_fail(d->path, "cannot count the entries", rc);
}

int disk_list(struct disk_tier *d,
              int (*each)(void *user, const struct kvrt_store_entry_info *e, const uint8_t *buf, uint64_t len),
              void *user)
{
    struct disk_env *e = d->env;
    MDB_txn *txn;
    MDB_cursor *c;
    int rc = disk_txn_begin(e, MDB_RDONLY, &txn);
    if (rc != MDB_SUCCESS)
        return disk_lmdb_fail(d->path, "cannot begin a read", rc);
    if ((rc = mdb_cursor_open(txn, e->entries, &c)) != MDB_SUCCESS) {
        disk_txn_abort(e, txn);
        return disk_lmdb_fail(d->path, "cannot list the entries", rc);
    }
    MDB_val k, v;
    int stop = 0;
    uint8_t *buf = malloc(d->slot_bytes);
    if (!buf) {
        mdb_cursor_close(c);
        disk_txn_abort(e, txn);
        return BASE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
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
            info.last_used = base_get_le64(tv.mv_data);
        uint64_t slot, len = 0;
        bool ok = k.mv_size == STORE_DBKEY_BYTES && disk_slot_of(&v, &slot);
        if (ok)
            len = disk_read_slot(e, slot, buf, d->value_bytes);
        info.bytes = len;
        stop = each(user, &info, ok ? buf : NULL, len);
    }
    free(buf);
    mdb_cursor_close(c);
    disk_txn_abort(e, txn);
    if (stop)
        return stop;
    return rc == MDB_NOTFOUND || rc == MDB_SUCCESS ? KVRT_OK : disk_lmdb_fail(d->path, "cannot list the entries", rc);
}
