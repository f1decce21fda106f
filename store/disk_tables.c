/* The tables of the disk tier's index and the sizes of their keys and
 * values: disk.c opens them, disk_check.c holds a data file to them before
 * LMDB reads it.  A file of its own, below both, so that neither calls
 * into the other for them.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include "disk.h"

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
