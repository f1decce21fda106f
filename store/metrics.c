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

#include "events.h"
#include "handle.h"

/* A growing text; `failed` once out of memory or past SIZE_MAX. */
struct prom {
    char *buf;
    size_t len, cap;
    bool failed;
};

static void put(struct prom *p, const char *fmt, ...) KVRT_PRINTF(2, 3);
static void put(struct prom *p, const char *fmt, ...)
{
    if (p->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(p->buf ? p->buf + p->len : NULL, p->buf ? p->cap - p->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            p->failed = true;
            return;
        }
        if (p->buf && (size_t)n < p->cap - p->len) {
            p->len += (size_t)n;
            return;
        }
        size_t want = p->len + (size_t)n + 1;
        if (want < p->len || want > SIZE_MAX / 2) {
            p->failed = true;
            return;
        }
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < want)
            cap *= 2;
        char *b = realloc(p->buf, cap);
        if (!b) {
            p->failed = true;
            return;
        }
        p->buf = b;
        p->cap = cap;
    }
}

static void family(struct prom *p, const char *name, const char *type, const char *help)
{
    put(p, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample(struct prom *p, const char *name, const char *labels, uint64_t v)
{
    if (labels && labels[0])
        put(p, "%s{%s} %llu\n", name, labels, ULL(v));
    else
        put(p, "%s %llu\n", name, ULL(v));
}

/* One family of one sample. */
static void one(struct prom *p, const char *name, const char *type, const char *help, uint64_t v)
{
    family(p, name, type, help);
    sample(p, name, NULL, v);
}

/* A label value as the format escapes it: backslash, quote, newline. */
static void put_label_value(struct prom *p, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '\\')
            put(p, "\\\\");
        else if (*s == '"')
            put(p, "\\\"");
        else if (*s == '\n')
            put(p, "\\n");
        else
            put(p, "%c", *s);
    }
}

/* The shared tier's cluster (nodes down, failovers): its families go here
 * once the tier's stats count them; a single server has neither. */
static void render_cluster(struct prom *p, const struct kvrt_store_stats *st)
{
    (void)p;
    (void)st;
}

static int render(kvrt_store *s, struct prom *p)
{
    struct kvrt_store_stats st;
    st.size = sizeof(st);
    int rc = kvrt_store_stats(s, &st);
    if (rc != KVRT_OK)
        return rc;
    const uint64_t E = st.entry_bytes;
    family(p, "kvrt_store_info", "gauge", "The store: its model id and chunk size (value 1).");
    put(p, "kvrt_store_info{model_id=\"");
    put_label_value(p, s->model.model_id);
    put(p, "\",chunk_tokens=\"%llu\",entry_bytes=\"%llu\"} 1\n", ULL(st.chunk_tokens), ULL(E));
    if (!s->inspect) {
        family(p, "kvrt_store_hits_total", "counter", "Entries a get found, by the tier it found them in.");
        sample(p, "kvrt_store_hits_total", "tier=\"memory\"", st.hits_memory);
        sample(p, "kvrt_store_hits_total", "tier=\"disk\"", st.hits_disk);
        sample(p, "kvrt_store_hits_total", "tier=\"shared\"", st.hits_shared);
        one(p, "kvrt_store_misses_total", "counter", "Entries a get or lookup found in no tier.", st.misses);
        family(p, "kvrt_store_loaded_bytes_total", "counter",
               "Payload bytes gets loaded into caches (out of the store), by tier.");
        sample(p, "kvrt_store_loaded_bytes_total", "tier=\"memory\"", st.hits_memory * E);
        sample(p, "kvrt_store_loaded_bytes_total", "tier=\"disk\"", st.hits_disk * E);
        sample(p, "kvrt_store_loaded_bytes_total", "tier=\"shared\"", st.hits_shared * E);
        one(p, "kvrt_store_put_entries_total", "counter", "Entries puts copied out of caches.", st.put_entries);
        one(p, "kvrt_store_put_bytes_total", "counter", "Payload bytes puts copied out of caches (into the store).",
            st.put_entries * E);
        one(p, "kvrt_store_put_present_entries_total", "counter", "Entries puts found stored already.", st.put_present);
        family(p, "kvrt_store_written_entries_total", "counter", "Entries the queue wrote to a lower tier.");
        sample(p, "kvrt_store_written_entries_total", "tier=\"disk\"", st.written_disk);
        sample(p, "kvrt_store_written_entries_total", "tier=\"shared\"", st.written_shared);
        family(p, "kvrt_store_evictions_total", "counter", "Entries this process evicted, by tier.");
        sample(p, "kvrt_store_evictions_total", "tier=\"memory\"", st.evicted_memory);
        sample(p, "kvrt_store_evictions_total", "tier=\"disk\"", st.evicted_disk);
        one(p, "kvrt_store_write_failures_total", "counter", "Entries a lower tier could not take (rejected).",
            st.write_failures);
        one(p, "kvrt_store_dropped_entries_total", "counter", "Entries that failed their checks and were dropped.",
            st.dropped);
        family(p, "kvrt_store_entries", "gauge", "Entries held, by tier (disk: the directory's, every process).");
        sample(p, "kvrt_store_entries", "tier=\"memory\"", st.memory_entries);
        if (s->has_disk)
            sample(p, "kvrt_store_entries", "tier=\"disk\"", st.disk_entries);
        family(p, "kvrt_store_stored_bytes", "gauge", "Bytes held, by tier (disk: slots, every process).");
        sample(p, "kvrt_store_stored_bytes", "tier=\"memory\"", st.memory_bytes);
        if (s->has_disk)
            sample(p, "kvrt_store_stored_bytes", "tier=\"disk\"", st.disk_bytes);
        family(p, "kvrt_store_capacity_bytes", "gauge", "Capacity, by tier.");
        sample(p, "kvrt_store_capacity_bytes", "tier=\"memory\"", st.memory_capacity);
        if (s->has_disk)
            sample(p, "kvrt_store_capacity_bytes", "tier=\"disk\"", st.disk_capacity);
        one(p, "kvrt_store_queue_entries", "gauge", "Entries on their way to the disk and shared tiers.",
            st.queued_entries);
        one(p, "kvrt_store_queue_bytes", "gauge", "Bytes on their way to the disk and shared tiers.", st.queued_bytes);
        if (s->has_shared)
            one(p, "kvrt_store_shared_up", "gauge", "1 when the shared tier answered last time.", st.shared_up);
        render_cluster(p, &st);
    } else {
        family(p, "kvrt_store_entries", "gauge", "Entries held, by tier (disk: the directory's, every process).");
        sample(p, "kvrt_store_entries", "tier=\"disk\"", st.disk_entries);
        family(p, "kvrt_store_stored_bytes", "gauge", "Bytes held, by tier (disk: slots, every process).");
        sample(p, "kvrt_store_stored_bytes", "tier=\"disk\"", st.disk_bytes);
        family(p, "kvrt_store_capacity_bytes", "gauge", "Capacity, by tier.");
        sample(p, "kvrt_store_capacity_bytes", "tier=\"disk\"", st.disk_capacity);
    }
    if (s->has_disk) {
        struct disk_counts dc;
        if ((rc = disk_counts(&s->disk, &dc)) != KVRT_OK)
            return rc;
        one(p, "kvrt_store_directory_hits_total", "counter",
            "Entries found on disk, as every process that used the directory recorded them.", dc.hits);
        one(p, "kvrt_store_directory_misses_total", "counter",
            "Entries missed, as every process that used the directory recorded them.", dc.misses);
        one(p, "kvrt_store_directory_writes_total", "counter", "Entries written to the directory, every process.",
            dc.writes);
        one(p, "kvrt_store_directory_evictions_total", "counter", "Entries evicted from the directory, every process.",
            dc.evictions);
        one(p, "kvrt_store_directory_file_bytes", "gauge", "Bytes of the directory's files.", dc.file_bytes);
    }
    if (s->events) {
        struct store_events_counts ec;
        store_events_counts(s->events, &ec);
        one(p, "kvrt_store_events_published_total", "counter", "KV events sent to routers.", ec.published);
        one(p, "kvrt_store_events_dropped_total", "counter", "KV events dropped from a full queue.", ec.dropped);
        one(p, "kvrt_store_events_batches_total", "counter", "KV event batches sent.", ec.batches);
        one(p, "kvrt_store_events_queued", "gauge", "KV events waiting to be sent.", ec.queued);
        one(p, "kvrt_store_events_replays_total", "counter", "Replay requests served.", ec.replays);
        one(p, "kvrt_store_events_replays_refused_total", "counter", "Malformed replay requests refused.", ec.refused);
    }
    return KVRT_OK;
}

int kvrt_store_metrics(kvrt_store *s, char *buf, size_t size, size_t *needed)
{
    if (needed)
        *needed = 0;
    if (!s || (!buf && size))
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_metrics: the store is required, and buf for size %zu", size);
    struct prom p = {NULL, 0, 0, false};
    int rc = render(s, &p);
    if (rc == KVRT_OK && p.failed)
        rc = BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_metrics: out of memory");
    if (rc != KVRT_OK) {
        free(p.buf);
        return rc;
    }
    size_t need = p.len + 1;
    if (needed)
        *needed = need;
    if (buf && size >= need)
        memcpy(buf, p.buf ? p.buf : "", need);
    else if (buf) {
        buf[0] = '\0';
        rc = BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_metrics: the text needs %zu bytes (with its NUL); buf has %zu",
                       need, size);
    }
    free(p.buf);
    return rc;
}
