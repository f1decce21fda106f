/* Internal: the store's KV events for routers, published as vLLM's
 * (BlockStored, BlockRemoved, AllBlocksCleared over ZeroMQ; events.c,
 * docs/store.md "KV events").
 *
 * The tiers call one hook where a chunk becomes readable in them or leaves
 * them; a hook copies what it needs into a bounded queue and returns (the
 * oldest queued event is dropped, and counted, rather than the engine
 * kept waiting).  A thread of the publisher's own encodes and sends.
 * Every hook takes NULL for "events are off" and does nothing then.
 *
 * A chunk is reported by its head-0 entry (the lead): a router sees each
 * chunk once, from the process that stores head 0 (tensor-parallel rank 0,
 * as vLLM publishes from rank 0), and entries of other heads publish
 * nothing.
 *
 * Layer 2 of libkvrt-store (docs/store.md, "Layers"): below the tiers and
 * the operations that call its hooks, so it knows ids and chunks, not
 * entries, batches or ops.
 */
#ifndef KVRT_STORE_EVENTS_H
#define KVRT_STORE_EVENTS_H

#include <stdbool.h>

#include "base/log.h"
#include "key.h"

struct store_events; /* the publisher (events.c) */

enum store_tier { STORE_TIER_MEMORY, STORE_TIER_DISK, STORE_TIER_SHARED };

/* What a BlockStored needs beyond the key, carried by a chunk's lead
 * entry from the put or the get that made it (a tier that writes or
 * evicts it later does not know the tokens). */
struct store_event_chunk {
    bool has_parent;
    uint8_t parent[KVRT_STORE_KEY_BYTES];
    uint64_t num_tokens;
    int32_t tokens[];
};

/* Counters of the publisher (metrics). */
struct store_events_counts {
    uint64_t queued;    /* events waiting for the thread */
    uint64_t published; /* events sent */
    uint64_t dropped;   /* events dropped from a full queue */
    uint64_t batches;   /* batches sent (the last sequence number + 1) */
    uint64_t replays;   /* replay requests served */
    uint64_t refused;   /* replay requests refused (malformed) */
};

/* Open the PUB socket on endpoint (bound when it names a wildcard "*" or
 * "::", or is ipc:// or inproc://; else connected: vLLM's rule) and, with
 * replay, the ROUTER socket bound there; start the thread.  The first
 * batch is AllBlocksCleared: whatever an earlier store published at this
 * endpoint is gone with it.  log (the store's, which outlives the
 * publisher) takes its warnings; chunk_tokens is the model's. */
int store_events_open(const struct base_log *log, uint64_t chunk_tokens, const char *endpoint, const char *replay,
                      struct store_events **out);
/* Send what is queued (a bounded wait), then close. */
void store_events_close(struct store_events *ev);
void store_events_counts(struct store_events *ev, struct store_events_counts *out);

/* Give the entry of id whose chunk field is *chunk (still NULL: a chunk is
 * attached once) its parent (NULL: none) and its chunk_tokens tokens;
 * nothing unless id is a lead (head 0). */
void store_event_attach(struct store_events *ev, const struct store_id *id, struct store_event_chunk **chunk,
                        const uint8_t *parent, const int32_t *tokens);
/* The chunk of id is readable in tier; chunk (may be NULL) is its entry's. */
void store_event_stored(struct store_events *ev, enum store_tier tier, const struct store_id *id,
                        const struct store_event_chunk *chunk);
/* The chunk of id left tier. */
void store_event_removed(struct store_events *ev, enum store_tier tier, const struct store_id *id);

#endif
