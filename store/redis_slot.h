/*
 * A key's hash slot in a Redis Cluster: CRC16 (XMODEM: polynomial 0x1021,
 * initial 0, no reflection) of the key, or of the part between the first
 * '{' and the next '}' when that part is not empty, modulo 16384, as the
 * cluster specification defines it.  Standalone: the unit tests compile
 * it alone.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_REDIS_SLOT_H
#define KVRT_STORE_REDIS_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define REDIS_SLOTS 16384

uint16_t redis_crc16(const void *buf, size_t n);
unsigned redis_key_slot(const void *key, size_t n);

#endif
