/* The disk tier as it is: the description `kvrt store stat` prints, the
 * entries `ls` lists, the check `verify` makes, the trim `gc` does.
 *
 * Layer 7 of libkvrt-store (docs/store.md, "Layers").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json_text.h>

#include "events.h"
#include "handle.h"
#include "record.h"

/* Paths and URLs go in through kvrt_json_str (any bytes: invalid UTF-8
 * becomes U+FFFD), so that only memory running out or a count refused
 * fails the description. */

/* A count as a JSON integer through libkvrt's writer: one past INT64_MAX
 * is refused with a message naming it (kvrt_json_u64), never clamped. */
static json_t *u64(uint64_t v, const char *what)
{
    return kvrt_json_u64(v, what);
}

static json_t *model_json(const struct store_model *m)
{
    char *text = store_record_text(m);
    json_t *o = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (o) {
        json_object_del(o, "format");
        json_object_del(o, "format_version");
        if (!kvrt_json_put(o, "num_layers", u64(m->num_layers, "model.num_layers")) ||
            !kvrt_json_put(o, "entry_bytes_stored",
                           u64(STORE_HEADER_BYTES + m->payload_bytes, "model.entry_bytes_stored"))) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

int kvrt_store_describe_json(kvrt_store *s, char **out)
{
    if (!s || !out)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_describe_json: the store and out are required");
    *out = NULL;
    struct kvrt_store_stats st = {0};
    int rc = kvrt_store_stats(s, &st);
    if (rc != KVRT_OK)
        return rc;
    kvrt_error_report(KVRT_OK, NULL); /* a message now is a count refused */
    json_t *o = json_object();
    bool ok = o != NULL;
    ok = ok && kvrt_json_put(o, "format_version", json_integer(KVRT_STORE_FORMAT_VERSION));
    ok = ok && kvrt_json_put(o, "model", model_json(&s->model));
    if (!s->inspect) {
        ok = ok && kvrt_json_put(
                       o, "memory",
                       json_pack("{s:o, s:o, s:o, s:o, s:o}", "entries", u64(st.memory_entries, "memory.entries"),
                                 "bytes", u64(st.memory_bytes, "memory.bytes"), "capacity",
                                 u64(st.memory_capacity, "memory.capacity"), "hits", u64(st.hits_memory, "memory.hits"),
                                 "evicted", u64(st.evicted_memory, "memory.evicted")));
    }
    if (s->has_disk) {
        struct disk_counts dc;
        if ((rc = disk_counts(&s->disk, &dc)) != KVRT_OK) {
            json_decref(o);
            return rc;
        }
        ok = ok &&
             kvrt_json_put(o, "disk",
                           json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "path",
                                     kvrt_json_str(s->disk.path), "entries", u64(dc.entries, "disk.entries"), "bytes",
                                     u64(dc.bytes, "disk.bytes"), "capacity", u64(dc.capacity, "disk.capacity"),
                                     "file_bytes", u64(dc.file_bytes, "disk.file_bytes"), "hits",
                                     u64(dc.hits, "disk.hits"), "misses", u64(dc.misses, "disk.misses"), "writes",
                                     u64(dc.writes, "disk.writes"), "evictions", u64(dc.evictions, "disk.evictions")));
    }
    if (s->has_shared)
        ok = ok && kvrt_json_put(o, "shared",
                                 json_pack("{s:o, s:b, s:o, s:o}", "url", kvrt_json_str(s->shared.url), "up",
                                           st.shared_up, "hits", u64(st.hits_shared, "shared.hits"), "written",
                                           u64(st.written_shared, "shared.written")));
    if (!s->inspect)
        ok = ok && kvrt_json_put(o, "process",
                                 json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "hits_memory",
                                           u64(st.hits_memory, "process.hits_memory"), "hits_disk",
                                           u64(st.hits_disk, "process.hits_disk"), "hits_shared",
                                           u64(st.hits_shared, "process.hits_shared"), "misses",
                                           u64(st.misses, "process.misses"), "put_entries",
                                           u64(st.put_entries, "process.put_entries"), "put_present",
                                           u64(st.put_present, "process.put_present"), "queued_entries",
                                           u64(st.queued_entries, "process.queued_entries"), "write_failures",
                                           u64(st.write_failures, "process.write_failures"), "dropped",
                                           u64(st.dropped, "process.dropped")));
    if (!ok && o) {
        json_decref(o);
        o = NULL;
    }
    /* the caller frees with kvrt_free (free) */
    return kvrt_json_dump(o, "kvrt_store_describe_json", out);
}

struct list_ctx {
    int (*each)(void *user, const struct kvrt_store_entry_info *e);
    void *user;
};

static int list_one(void *user, const struct kvrt_store_entry_info *e, const uint8_t *buf, uint64_t len)
{
    (void)buf;
    (void)len;
    struct list_ctx *c = user;
    return c->each(c->user, e);
}

static int need_disk(kvrt_store *s, const char *fn)
{
    if (!s)
        return BASE_FAIL(KVRT_ERR_INVALID, "%s: the store is NULL", fn);
    if (!s->has_disk)
        return BASE_FAIL(KVRT_ERR_STATE, "%s: the store has no disk tier (open it with a path)", fn);
    return KVRT_OK;
}

int kvrt_store_list(kvrt_store *s, int (*each)(void *user, const struct kvrt_store_entry_info *entry), void *user)
{
    int rc = need_disk(s, "kvrt_store_list");
    if (rc != KVRT_OK)
        return rc;
    if (!each)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_store_list: each is required");
    struct list_ctx c = {each, user};
    return disk_list(&s->disk, list_one, &c);
}

struct verify_ctx {
    kvrt_store *s;
    void (*bad)(void *user, const struct kvrt_store_entry_info *e, const char *why);
    void *user;
    struct kvrt_store_verify_report *r;
    struct store_id *ids;
    uint64_t n, cap;
    bool oom;
};

static int verify_one(void *user, const struct kvrt_store_entry_info *e, const uint8_t *buf, uint64_t len)
{
    struct verify_ctx *c = user;
    c->r->entries++;
    struct store_id id;
    memcpy(id.key, e->key, KVRT_STORE_KEY_BYTES);
    id.head = (uint32_t)e->head;
    if (buf && !c->s->model.secret && store_entry_sealed(buf, len)) {
        /* sealed with a key this store was not given: nothing to check it
         * with, and nothing wrong with it */
        c->r->sealed++;
        return 0;
    }
    const char *why = "its key is not an entry key";
    if (buf) {
        /* a sealed entry opens in place: check a copy */
        uint8_t *copy = len ? malloc(len) : NULL;
        if (len && !copy) {
            c->oom = true;
            return 0;
        }
        if (copy)
            memcpy(copy, buf, len);
        why = store_entry_check(&c->s->model, &id, copy, len);
        free(copy);
    }
    if (!why && e->head >= c->s->model.num_groups * c->s->model.num_heads)
        why = "its head is past the model's KV heads (of every layer group)";
    if (!why)
        return 0;
    c->r->bad++;
    if (c->bad)
        c->bad(c->user, e, why);
    if (c->n == c->cap) {
        uint64_t cap = c->cap ? 2 * c->cap : 64;
        struct store_id *g = realloc(c->ids, cap * sizeof(*g));
        if (!g) {
            c->oom = true;
            return 0;
        }
        c->ids = g;
        c->cap = cap;
    }
    c->ids[c->n++] = id;
    return 0;
}

int kvrt_store_verify(kvrt_store *s, bool drop,
                      void (*bad)(void *user, const struct kvrt_store_entry_info *entry, const char *why), void *user,
                      struct kvrt_store_verify_report *report)
{
    int rc = need_disk(s, "kvrt_store_verify");
    if (rc != KVRT_OK)
        return rc;
    struct kvrt_store_verify_report local;
    if (!report)
        report = &local;
    memset(report, 0, sizeof(*report));
    report->size = sizeof(*report);
    struct verify_ctx c = {s, bad, user, report, NULL, 0, 0, false};
    rc = disk_list(&s->disk, verify_one, &c);
    if (rc == KVRT_OK && drop && c.n) {
        struct disk_batch b;
        memset(&b, 0, sizeof(b));
        b.drops = c.ids;
        b.num_drops = c.n;
        if ((rc = disk_write(&s->disk, &b)) == KVRT_OK)
            report->dropped = c.n;
        disk_batch_done(&b); /* the commit's lists of what it wrote and dropped */
    }
    free(c.ids);
    if (rc == KVRT_OK && c.oom)
        rc = BASE_FAIL(KVRT_ERR_NOMEM, "kvrt_store_verify: out of memory for the list of bad entries");
    return rc;
}

int kvrt_store_gc(kvrt_store *s, uint64_t target_bytes, uint64_t *evicted)
{
    int rc = need_disk(s, "kvrt_store_gc");
    if (rc != KVRT_OK)
        return rc;
    uint64_t n = 0;
    struct store_id *gone = NULL;
    uint64_t num_gone = 0;
    rc = disk_gc(&s->disk, target_bytes, &n, s->events ? &gone : NULL, &num_gone);
    for (uint64_t i = 0; i < num_gone; i++)
        store_event_removed(s->events, STORE_TIER_DISK, &gone[i]);
    free(gone);
    if (evicted)
        *evicted = n;
    return rc;
}
