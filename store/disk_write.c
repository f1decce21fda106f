/* A batch written to the disk tier: evict down to the capacity, allocate
 * and write the new entries' slots, then commit the index (entries, ticks,
 * drops, counters) in one transaction: the batch commit, after which its
 * entries are readable by every process.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <lmdb.h>

#include "base/bytes.h"
#include "disk_parts.h"

static int write_batch(struct disk_tier *d, MDB_txn *txn, struct disk_batch *b)
{
    struct disk_env *e = d->env;
    uint64_t clock = disk_meta_u64(txn, e, "clock", 0) + 1;
    uint64_t capacity = disk_meta_u64(txn, e, "capacity", KVRT_STORE_DEFAULT_DISK_BYTES);
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
            rc = disk_set_tick(txn, e, dbkey, clock, false);
            continue;
        }
        fresh[n] = me;
        rc = disk_alloc_slot(txn, e, &slots[n]);
        n++;
    }
    for (uint64_t i = 0; i < b->num_drops && rc == MDB_SUCCESS; i++) {
        store_dbkey(&b->drops[i], dbkey);
        MDB_val k = {sizeof(dbkey), dbkey}, v;
        if (mdb_get(txn, e->entries, &k, &v) == MDB_SUCCESS)
            disk_note_gone(&b->gone, &b->num_gone, dbkey);
        rc = disk_delete_entry(txn, e, dbkey);
    }
    /* reads first: an entry read since the last batch is recent, and the
     * evictions below must see it so (a read that rode with a put was
     * otherwise evicted by that very put) */
    for (uint64_t i = 0; i < b->num_touches && rc == MDB_SUCCESS; i++) {
        store_dbkey(&b->touches[i], dbkey);
        rc = disk_set_tick(txn, e, dbkey, clock, true);
    }
    if (rc == MDB_SUCCESS)
        rc = mdb_stat(txn, e->entries, &st);
    count = st.ms_entries;
    /* room for the new ones, least recently used out first */
    while (rc == MDB_SUCCESS && count + n > limit && count > 0) {
        bool none = false;
        if ((rc = disk_evict_one(txn, e, &none, &b->gone, &b->num_gone)) != MDB_SUCCESS || none)
            break;
        count--;
        b->evicted++;
    }
    for (uint64_t i = 0; i < n && rc == MDB_SUCCESS; i++) {
        uint8_t sb[8];
        base_put_le64(sb, slots[i]);
        store_dbkey(&fresh[i]->id, dbkey);
        MDB_val k = {sizeof(dbkey), dbkey}, v = {8, sb};
        if ((rc = mdb_put(txn, e->entries, &k, &v, MDB_NOOVERWRITE)) == MDB_SUCCESS)
            rc = disk_set_tick(txn, e, dbkey, clock, false);
    }
    b->written = n;
    static const char *const names[] = {"hits", "misses", "writes", "evictions"};
    uint64_t add[] = {b->add_hits, b->add_misses, b->written, b->evicted};
    for (int i = 0; i < 4 && rc == MDB_SUCCESS; i++)
        if (add[i])
            rc = disk_meta_put_u64(txn, e, names[i], disk_meta_u64(txn, e, names[i], 0) + add[i]);
    if (rc == MDB_SUCCESS)
        rc = disk_meta_put_u64(txn, e, "clock", clock);
    if (rc == MDB_SUCCESS)
        rc = disk_write_slots(d, fresh, slots, n);
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
    int rc = disk_txn_begin(d->env, 0, &txn);
    if (rc != MDB_SUCCESS)
        return disk_lmdb_fail(d->path, "cannot begin a write", rc);
    b->fresh = NULL;
    b->gone = NULL;
    b->num_gone = 0;
    rc = write_batch(d, txn, b);
    if (rc != MDB_SUCCESS) {
        disk_txn_abort(d->env, txn);
        disk_batch_done(b);
        b->written = b->present = b->evicted = 0;
        return disk_write_fail(d->path, "cannot write", rc);
    }
    rc = disk_txn_commit(d->env, txn);
    if (rc != MDB_SUCCESS) {
        disk_batch_done(b);
        b->written = b->present = b->evicted = 0;
        return disk_write_fail(d->path, "cannot commit", rc);
    }
    return KVRT_OK;
}
