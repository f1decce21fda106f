/*
 * CRC16-XMODEM and the key -> slot rule of the Redis Cluster
 * specification (redis_slot.h).  Bitwise rather than a 512-byte table:
 * a slot is computed once per key of a pipeline, next to a network round
 * trip, and the loop is easy to check against the specification.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include "redis_slot.h"

uint16_t redis_crc16(const void *buf, size_t n)
{
    const uint8_t *p = buf;
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc;
}

unsigned redis_key_slot(const void *key, size_t n)
{
    const char *k = key;
    size_t s;
    for (s = 0; s < n && k[s] != '{'; s++)
        ;
    if (s < n) {
        size_t e;
        for (e = s + 1; e < n && k[e] != '}'; e++)
            ;
        /* a tag only when '}' follows and something is between */
        if (e < n && e != s + 1)
            return redis_crc16(k + s + 1, e - s - 1) & (REDIS_SLOTS - 1);
    }
    return redis_crc16(k, n) & (REDIS_SLOTS - 1);
}
