/* The store's counters in Prometheus' text exposition format (0.0.4), for
 * operators: kvrt_store_metrics renders kvrt_store_stats, the directory's
 * counters (every process that used it) and the events' publisher, each
 * family with its HELP and TYPE lines (docs/store.md "Metrics").
 *
 * Layer 7 of libkvrt-store (docs/store.md, "Layers"): it reads the stats
 * through the public call, beside the API.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/prom.h"
#include "events.h"
#include "handle.h"

/* The shared tier's nodes: what an operator watches in a failover (a
 * node down, the map learnt again, redirections followed).  A single
 * server is one node, with a map learnt once and no redirections. */
static void render_cluster(struct base_prom *p, const struct kvrt_store_stats *st)
{
    base_prom_one(p, "kvrt_store_shared_nodes_down", "gauge",
                  "Shared-tier nodes that failed and have not answered since (each in back-off).",
                  st->shared_nodes_down);
    base_prom_one(p, "kvrt_store_shared_failovers_total", "counter",
                  "Failed shared-tier nodes whose slots the cluster's map gave to another node.", st->shared_failovers);
    base_prom_one(p, "kvrt_store_shared_map_refreshes_total", "counter",
                  "Slot maps learnt from the shared tier (CLUSTER SLOTS answered), the first included.",
                  st->shared_map_refreshes);
    base_prom_family(p, "kvrt_store_shared_redirects_total", "counter",
                     "Redirections the shared tier's client followed, by kind.");
    base_prom_sample(p, "kvrt_store_shared_redirects_total", "kind=\"moved\"", st->shared_moved);
    base_prom_sample(p, "kvrt_store_shared_redirects_total", "kind=\"ask\"", st->shared_ask);
}

static int render(kvrt_store *s, struct base_prom *p)
{
    struct kvrt_store_stats st;
    st.size = sizeof(st);
    int rc = kvrt_store_stats(s, &st);
    if (rc != KVRT_OK)
        return rc;
    const uint64_t E = st.entry_bytes;
    base_prom_family(p, "kvrt_store_info", "gauge", "The store: its model id and chunk size (value 1).");
    base_prom_put(p, "kvrt_store_info{model_id=\"");
    base_prom_label_value(p, s->model.model_id);
    base_prom_put(p, "\",chunk_tokens=\"%llu\",entry_bytes=\"%llu\"} 1\n", ULL(st.chunk_tokens), ULL(E));
    if (!s->inspect) {
        base_prom_family(p, "kvrt_store_hits_total", "counter", "Entries a get found, by the tier it found them in.");
        base_prom_sample(p, "kvrt_store_hits_total", "tier=\"memory\"", st.hits_memory);
        base_prom_sample(p, "kvrt_store_hits_total", "tier=\"disk\"", st.hits_disk);
        base_prom_sample(p, "kvrt_store_hits_total", "tier=\"shared\"", st.hits_shared);
        base_prom_one(p, "kvrt_store_misses_total", "counter", "Entries a get or lookup found in no tier.", st.misses);
        base_prom_family(p, "kvrt_store_loaded_bytes_total", "counter",
                         "Payload bytes gets loaded into caches (out of the store), by tier.");
        base_prom_sample(p, "kvrt_store_loaded_bytes_total", "tier=\"memory\"", st.hits_memory * E);
        base_prom_sample(p, "kvrt_store_loaded_bytes_total", "tier=\"disk\"", st.hits_disk * E);
        base_prom_sample(p, "kvrt_store_loaded_bytes_total", "tier=\"shared\"", st.hits_shared * E);
        base_prom_one(p, "kvrt_store_put_entries_total", "counter", "Entries puts copied out of caches.",
                      st.put_entries);
        base_prom_one(p, "kvrt_store_put_bytes_total", "counter",
                      "Payload bytes puts copied out of caches (into the store).", st.put_entries * E);
        base_prom_one(p, "kvrt_store_put_present_entries_total", "counter", "Entries puts found stored already.",
                      st.put_present);
        base_prom_family(p, "kvrt_store_written_entries_total", "counter", "Entries the queue wrote to a lower tier.");
        base_prom_sample(p, "kvrt_store_written_entries_total", "tier=\"disk\"", st.written_disk);
        base_prom_sample(p, "kvrt_store_written_entries_total", "tier=\"shared\"", st.written_shared);
        base_prom_family(p, "kvrt_store_evictions_total", "counter", "Entries this process evicted, by tier.");
        base_prom_sample(p, "kvrt_store_evictions_total", "tier=\"memory\"", st.evicted_memory);
        base_prom_sample(p, "kvrt_store_evictions_total", "tier=\"disk\"", st.evicted_disk);
        base_prom_one(p, "kvrt_store_write_failures_total", "counter",
                      "Entries a lower tier could not take (rejected).", st.write_failures);
        base_prom_one(p, "kvrt_store_dropped_entries_total", "counter",
                      "Entries that failed their checks and were dropped.", st.dropped);
        base_prom_family(p, "kvrt_store_entries", "gauge",
                         "Entries held, by tier (disk: the directory's, every process).");
        base_prom_sample(p, "kvrt_store_entries", "tier=\"memory\"", st.memory_entries);
        if (s->has_disk)
            base_prom_sample(p, "kvrt_store_entries", "tier=\"disk\"", st.disk_entries);
        base_prom_family(p, "kvrt_store_stored_bytes", "gauge", "Bytes held, by tier (disk: slots, every process).");
        base_prom_sample(p, "kvrt_store_stored_bytes", "tier=\"memory\"", st.memory_bytes);
        if (s->has_disk)
            base_prom_sample(p, "kvrt_store_stored_bytes", "tier=\"disk\"", st.disk_bytes);
        base_prom_family(p, "kvrt_store_capacity_bytes", "gauge", "Capacity, by tier.");
        base_prom_sample(p, "kvrt_store_capacity_bytes", "tier=\"memory\"", st.memory_capacity);
        if (s->has_disk)
            base_prom_sample(p, "kvrt_store_capacity_bytes", "tier=\"disk\"", st.disk_capacity);
        base_prom_one(p, "kvrt_store_queue_entries", "gauge", "Entries on their way to the disk and shared tiers.",
                      st.queued_entries);
        base_prom_one(p, "kvrt_store_queue_bytes", "gauge", "Bytes on their way to the disk and shared tiers.",
                      st.queued_bytes);
        if (s->has_shared) {
            base_prom_one(p, "kvrt_store_shared_up", "gauge", "1 when the shared tier answered last time.",
                          st.shared_up);
            render_cluster(p, &st);
        }
    } else {
        base_prom_family(p, "kvrt_store_entries", "gauge",
                         "Entries held, by tier (disk: the directory's, every process).");
        base_prom_sample(p, "kvrt_store_entries", "tier=\"disk\"", st.disk_entries);
        base_prom_family(p, "kvrt_store_stored_bytes", "gauge", "Bytes held, by tier (disk: slots, every process).");
        base_prom_sample(p, "kvrt_store_stored_bytes", "tier=\"disk\"", st.disk_bytes);
        base_prom_family(p, "kvrt_store_capacity_bytes", "gauge", "Capacity, by tier.");
        base_prom_sample(p, "kvrt_store_capacity_bytes", "tier=\"disk\"", st.disk_capacity);
    }
    if (s->has_disk) {
        struct disk_counts dc;
        if ((rc = disk_counts(&s->disk, &dc)) != KVRT_OK)
            return rc;
        base_prom_one(p, "kvrt_store_directory_hits_total", "counter",
                      "Entries found on disk, as every process that used the directory recorded them.", dc.hits);
        base_prom_one(p, "kvrt_store_directory_misses_total", "counter",
                      "Entries missed, as every process that used the directory recorded them.", dc.misses);
        base_prom_one(p, "kvrt_store_directory_writes_total", "counter",
                      "Entries written to the directory, every process.", dc.writes);
        base_prom_one(p, "kvrt_store_directory_evictions_total", "counter",
                      "Entries evicted from the directory, every process.", dc.evictions);
        base_prom_one(p, "kvrt_store_directory_file_bytes", "gauge", "Bytes of the directory's files.", dc.file_bytes);
    }
    if (s->events) {
        struct store_events_counts ec;
        store_events_counts(s->events, &ec);
        base_prom_one(p, "kvrt_store_events_published_total", "counter", "KV events sent to routers.", ec.published);
        base_prom_one(p, "kvrt_store_events_dropped_total", "counter", "KV events dropped from a full queue.",
                      ec.dropped);
        base_prom_one(p, "kvrt_store_events_batches_total", "counter", "KV event batches sent.", ec.batches);
        base_prom_one(p, "kvrt_store_events_queued", "gauge", "KV events waiting to be sent.", ec.queued);
        base_prom_one(p, "kvrt_store_events_replays_total", "counter", "Replay requests served.", ec.replays);
        base_prom_one(p, "kvrt_store_events_replays_refused_total", "counter", "Malformed replay requests refused.",
                      ec.refused);
    }
    return KVRT_OK;
}

int kvrt_store_metrics(kvrt_store *s, char *buf, size_t size, size_t *needed)
{
    if (needed)
        *needed = 0;
    if (!s || (!buf && size))
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_metrics: the store is required, and buf for size %zu", size);
    struct base_prom p = {NULL, 0, 0, false};
    int rc = render(s, &p);
    if (rc != KVRT_OK) {
        free(p.buf);
        return rc;
    }
    return base_prom_finish(&p, "kvrt_store_metrics", buf, size, needed);
}
