/*
 * The entry format (entry.c, docs/store.md "Entry"): its header, sealed in
 * front of the payload with an XXH3-128 checksum, and its checks.
 *
 * Layer 1 of libkvrt-store (docs/store.md, "Layers").
 */
#ifndef KVRT_STORE_ENTRY_H
#define KVRT_STORE_ENTRY_H

#include <stdbool.h>

#include "key.h"

/* checksum states on the stack or in arrays, not from the heap per entry */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>
/* XXH3 with the widest vectors the CPU has (Debian's libxxhash picks them
 * at run time on x86; the plain functions are built for SSE2) */
#if defined(__x86_64__)
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#define STORE_SUM_UPDATE XXH3_128bits_update_dispatch
#else
#define STORE_SUM_UPDATE XXH3_128bits_update
#endif

/* The entry header (docs/store.md "Entry"). */
#define STORE_HEADER_BYTES 128u
#define STORE_CHECKSUM_OFFSET 112u

/* The bytes one entry takes in a buffer or a slot of the disk tier's slot
 * file: header and payload, rounded up to 4 KiB so that a slot can be
 * written with O_DIRECT straight from the buffer. */
#define STORE_SLOT_ALIGN 4096u
static inline uint64_t store_slot_bytes(uint64_t payload_bytes)
{
    return (STORE_HEADER_BYTES + payload_bytes + STORE_SLOT_ALIGN - 1) / STORE_SLOT_ALIGN * STORE_SLOT_ALIGN;
}

/* Fill the header in front of the payload (buf: header + payload). */
void store_entry_seal(const struct store_model *m, const struct store_id *id, uint8_t *buf);
/* The same in two steps around a copy that feeds the payload to *st:
 * begin writes the header (checksum zero) and starts *st on it, end writes
 * the checksum. */
void store_entry_seal_begin(const struct store_model *m, const struct store_id *id, uint8_t *buf, XXH3_state_t *st);
void store_entry_seal_end(uint8_t *buf, XXH3_state_t *st);

/* Check an entry read from a tier: size, magic, version, fingerprint, key,
 * head, sizes, reserved bytes and checksum.  NULL when good, else why (a
 * static or thread-local text). */
const char *store_entry_check(const struct store_model *m, const struct store_id *id, uint8_t *buf, uint64_t len);
/* The bytes of an entry as they leave the process of a store with a key
 * (m->secret): a sealed header and the payload of plain (a plain entry)
 * encrypted into out. */
int store_entry_seal_out(const struct store_model *m, const struct store_id *id, const uint8_t *plain, uint8_t *out);
/* Whether buf holds a sealed entry (by its magic alone). */
bool store_entry_sealed(const uint8_t *buf, uint64_t len);

/* The same for an entry found by listing: what it claims, from its
 * header alone (false when the header is unreadable). */
bool store_entry_peek(const uint8_t *buf, uint64_t len, struct store_id *id, uint64_t *payload_bytes);

#endif
