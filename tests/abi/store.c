/*
 * Locks libkvrt-store's ABI: its own API version (the soname's major), the
 * format version, the structs an engine shares with it (sizes, offsets,
 * reserved bytes last), the "not yet" status and the defaults.  A change to
 * a size or an offset needs a new KVRT_STORE_API_VERSION_MAJOR (a new
 * soname); a field carved from reserved bytes keeps the size and is a new
 * minor.  Offsets are for LP64 targets.
 */
#include <stddef.h>
#include <string.h>

#include <kvrt/store.h>

#include "tap.h"

#define OFF(type, field, want)                                                                                         \
    TAP_EQ_U64(offsetof(struct type, field), want, "offsetof(" #type ", " #field ") == " #want)
#define SIZE(type, want) TAP_EQ_U64(sizeof(struct type), want, "sizeof(struct " #type ") == " #want)
#define VAL(name, want)                                                                                                \
    TAP_EQ_U64((unsigned long long)(long long)(name), (unsigned long long)(long long)(want), #name " == " #want)
#define LAST(type)                                                                                                     \
    tap_ok(offsetof(struct type, reserved) + sizeof(((struct type *)0)->reserved) + 8 > sizeof(struct type),           \
           #type ": reserved bytes last")

static bool zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

int main(void)
{
    tap_plan_dynamic();
    if (sizeof(void *) != 8) {
        tap_skip("offsets are locked for LP64 only");
        return tap_done();
    }
    VAL(KVRT_STORE_API_VERSION_MAJOR, 1);
    VAL(KVRT_STORE_API_VERSION_MINOR, 2);
    VAL(KVRT_STORE_FORMAT_VERSION, 1);
    VAL(KVRT_STORE_KEY_BYTES, 32);
    VAL(KVRT_STORE_PENDING, 1);
    VAL(KVRT_STORE_DEFAULT_CHUNK_TOKENS, 256);

    OFF(kvrt_store_options, size, 0);
    OFF(kvrt_store_options, groups, 8);
    OFF(kvrt_store_options, num_groups, 16);
    OFF(kvrt_store_options, model_id, 24);
    OFF(kvrt_store_options, chunk_tokens, 32);
    OFF(kvrt_store_options, memory_bytes, 40);
    OFF(kvrt_store_options, path, 48);
    OFF(kvrt_store_options, disk_bytes, 56);
    OFF(kvrt_store_options, shared, 64);
    OFF(kvrt_store_options, shared_timeout_s, 72);
    OFF(kvrt_store_options, queue_bytes, 80);
    OFF(kvrt_store_options, log, 88);
    OFF(kvrt_store_options, log_user, 96);
    OFF(kvrt_store_options, shared_password_file, 104);
    OFF(kvrt_store_options, shared_ca_file, 112);
    OFF(kvrt_store_options, shared_cert_file, 120);
    OFF(kvrt_store_options, shared_cert_key_file, 128);
    OFF(kvrt_store_options, key_file, 136);
    OFF(kvrt_store_options, events, 144);
    OFF(kvrt_store_options, events_replay, 152);
    OFF(kvrt_store_options, layers_per_entry, 160);
    SIZE(kvrt_store_options, 168);
    /* 1.2 took its last reserved bytes: a new field grows it at the end */
    tap_ok(offsetof(struct kvrt_store_options, layers_per_entry) + 8 == sizeof(struct kvrt_store_options),
           "kvrt_store_options: layers_per_entry last");

    OFF(kvrt_store_span, size, 0);
    OFF(kvrt_store_span, cache, 8);
    OFF(kvrt_store_span, block_table, 16);
    OFF(kvrt_store_span, num_blocks, 24);
    OFF(kvrt_store_span, tokens, 32);
    OFF(kvrt_store_span, num_tokens, 40);
    OFF(kvrt_store_span, first, 48);
    OFF(kvrt_store_span, count, 56);
    OFF(kvrt_store_span, head_start, 64);
    OFF(kvrt_store_span, num_heads, 72);
    OFF(kvrt_store_span, replica, 80);
    OFF(kvrt_store_span, layer_start, 88);
    OFF(kvrt_store_span, num_layers, 96);
    OFF(kvrt_store_span, reserved, 104);
    SIZE(kvrt_store_span, 144);
    LAST(kvrt_store_span);

    OFF(kvrt_store_stats, size, 0);
    OFF(kvrt_store_stats, chunk_tokens, 8);
    OFF(kvrt_store_stats, entry_bytes, 32);
    OFF(kvrt_store_stats, memory_entries, 40);
    OFF(kvrt_store_stats, disk_entries, 64);
    OFF(kvrt_store_stats, queued_entries, 88);
    OFF(kvrt_store_stats, hits_memory, 104);
    OFF(kvrt_store_stats, misses, 128);
    OFF(kvrt_store_stats, put_entries, 136);
    OFF(kvrt_store_stats, evicted_memory, 152);
    OFF(kvrt_store_stats, written_disk, 168);
    OFF(kvrt_store_stats, write_failures, 184);
    OFF(kvrt_store_stats, dropped, 192);
    OFF(kvrt_store_stats, shared_up, 200);
    OFF(kvrt_store_stats, rejected, 208);
    OFF(kvrt_store_stats, shared_nodes_down, 216);
    OFF(kvrt_store_stats, shared_failovers, 224);
    OFF(kvrt_store_stats, shared_map_refreshes, 232);
    OFF(kvrt_store_stats, shared_moved, 240);
    OFF(kvrt_store_stats, shared_ask, 248);
    OFF(kvrt_store_stats, reserved, 256);
    SIZE(kvrt_store_stats, 264);
    LAST(kvrt_store_stats);

    OFF(kvrt_store_entry_info, size, 0);
    OFF(kvrt_store_entry_info, key, 8);
    OFF(kvrt_store_entry_info, head, 40);
    OFF(kvrt_store_entry_info, bytes, 48);
    OFF(kvrt_store_entry_info, last_used, 56);
    OFF(kvrt_store_entry_info, reserved, 64);
    SIZE(kvrt_store_entry_info, 96);
    LAST(kvrt_store_entry_info);

    OFF(kvrt_store_verify_report, size, 0);
    OFF(kvrt_store_verify_report, entries, 8);
    OFF(kvrt_store_verify_report, bad, 16);
    OFF(kvrt_store_verify_report, dropped, 24);
    OFF(kvrt_store_verify_report, sealed, 32);
    OFF(kvrt_store_verify_report, reserved, 40);
    SIZE(kvrt_store_verify_report, 64);
    LAST(kvrt_store_verify_report);

#ifdef KVRT_ABI_STORE_LINKED
    struct kvrt_store_options o;
    memset(&o, 0xff, sizeof(o));
    kvrt_store_options_default(&o);
    tap_ok(o.size == sizeof(o) && o.chunk_tokens == KVRT_STORE_DEFAULT_CHUNK_TOKENS &&
               o.memory_bytes == KVRT_STORE_DEFAULT_MEMORY_BYTES && o.disk_bytes == 0 && !o.path && !o.shared &&
               o.queue_bytes == KVRT_STORE_DEFAULT_QUEUE_BYTES && !o.groups && !o.log && o.layers_per_entry == 0,
           "kvrt_store_options_default: size, 256 tokens, 1 GiB, no disk or shared tier, every layer per entry");
    struct kvrt_store_span sp;
    memset(&sp, 0xff, sizeof(sp));
    kvrt_store_span_default(&sp);
    tap_ok(sp.size == sizeof(sp) && sp.count == KVRT_UNSET && sp.first == 0 && sp.num_heads == 0 && !sp.cache &&
               sp.replica == 0 && sp.layer_start == 0 && sp.num_layers == 0 && zero(sp.reserved, sizeof(sp.reserved)),
           "kvrt_store_span_default: size, count KVRT_UNSET, the rest zero");
#else
    (void)zero;
    tap_skip("libkvrt-store not built: defaults not checked");
#endif
    return tap_done();
}
