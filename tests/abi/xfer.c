/*
 * Locks libkvrt-xfer's ABI: its own API version (the soname's major), the
 * structs an engine shares with it (sizes, offsets, reserved bytes last),
 * the enum values and the "not yet" status.  Header only: it builds (and
 * locks the header) whether or not UCX is there; with the library, the
 * defaults are checked too (KVRT_ABI_XFER_LINKED).  A change to a size or
 * an offset needs a new KVRT_XFER_API_VERSION_MAJOR (a new soname); a field
 * carved from reserved bytes keeps the size and is a new minor.  Offsets
 * are for LP64 targets.
 */
#include <stddef.h>
#include <string.h>

#include <kvrt/xfer.h>

#include "tap.h"

#define OFF(type, field, want)                                                                                         \
    TAP_EQ_U64(offsetof(struct type, field), want, "offsetof(" #type ", " #field ") == " #want)
#define SIZE(type, want) TAP_EQ_U64(sizeof(struct type), want, "sizeof(struct " #type ") == " #want)
#define VAL(name, want)                                                                                                \
    TAP_EQ_U64((unsigned long long)(long long)(name), (unsigned long long)(long long)(want), #name " == " #want)
/* The reserved bytes end the struct (nothing after them but padding). */
#define LAST(type)                                                                                                     \
    tap_ok(offsetof(struct type, reserved) + sizeof(((struct type *)0)->reserved) + 8 > sizeof(struct type),           \
           #type ": reserved bytes last")

/* The same for a struct that grew past its first reserved bytes. */
#define LAST_AT(type, field)                                                                                           \
    tap_ok(offsetof(struct type, field) + sizeof(((struct type *)0)->field) + 8 > sizeof(struct type),                 \
           #type ": reserved bytes (" #field ") last")

int main(void)
{
    tap_plan_dynamic();
    if (sizeof(void *) != 8) {
        tap_skip("offsets are locked for LP64 only");
        return tap_done();
    }
    VAL(KVRT_XFER_API_VERSION_MAJOR, 1);
    VAL(KVRT_XFER_API_VERSION_MINOR, 4);
    VAL(KVRT_XFER_METADATA_VERSION, 3);
    VAL(KVRT_XFER_MAX_NOTIFICATION, 1 << 20);
    VAL(KVRT_XFER_INSECURE, 1);
    VAL(KVRT_XFER_REQUIRE_GRANTS, 2);
    VAL(KVRT_XFER_GRANT_READ, 1);
    VAL(KVRT_XFER_GRANT_WRITE, 2);
    VAL(KVRT_XFER_PENDING, 1);
    tap_ok(KVRT_XFER_PENDING > 0, "KVRT_XFER_PENDING is positive: no kvrt_status error");
    VAL(KVRT_XFER_PEER_CONNECTED, 0);
    VAL(KVRT_XFER_PEER_CLOSED, 1);
    VAL(KVRT_XFER_PEER_FAILED, 2);
    VAL(KVRT_XFER_PUSH, 0);
    VAL(KVRT_XFER_PULL, 1);
    VAL(KVRT_XFER_AUTO, 0);
    VAL(KVRT_XFER_REGIONS, 1);
    VAL(KVRT_XFER_DIRECT, 2);
    VAL(KVRT_XFER_STAGING, 3);

    OFF(kvrt_xfer_agent_options, size, 0);
    OFF(kvrt_xfer_agent_options, chunk_bytes, 8);
    OFF(kvrt_xfer_agent_options, staging_bytes, 16);
    OFF(kvrt_xfer_agent_options, timeout_s, 24);
    /* 1.1: carved from the reserved bytes */
    OFF(kvrt_xfer_agent_options, key_file, 32);
    OFF(kvrt_xfer_agent_options, allow, 40);
    OFF(kvrt_xfer_agent_options, flags, 48);
    OFF(kvrt_xfer_agent_options, reserved32, 52);
    OFF(kvrt_xfer_agent_options, log, 56);
    OFF(kvrt_xfer_agent_options, log_user, 64);
    OFF(kvrt_xfer_agent_options, reserved, 72);
    SIZE(kvrt_xfer_agent_options, 96);
    LAST(kvrt_xfer_agent_options);

    OFF(kvrt_xfer_stats, size, 0);
    OFF(kvrt_xfer_stats, peers, 8);
    OFF(kvrt_xfer_stats, handles, 16);
    OFF(kvrt_xfer_stats, outgoing, 24);
    OFF(kvrt_xfer_stats, incoming, 32);
    OFF(kvrt_xfer_stats, ucx_requests, 40);
    OFF(kvrt_xfer_stats, staging_busy, 48);
    OFF(kvrt_xfer_stats, staging_chunks, 56);
    OFF(kvrt_xfer_stats, chunk_bytes, 64);
    OFF(kvrt_xfer_stats, registered_bytes, 72);
    OFF(kvrt_xfer_stats, registration_s, 80);
    OFF(kvrt_xfer_stats, completed, 88);
    OFF(kvrt_xfer_stats, failed, 96);
    OFF(kvrt_xfer_stats, bytes_sent, 104);
    OFF(kvrt_xfer_stats, bytes_received, 112);
    OFF(kvrt_xfer_stats, notifications, 120);
    /* 1.1 */
    OFF(kvrt_xfer_stats, refused, 128);
    OFF(kvrt_xfer_stats, violations, 136);
    OFF(kvrt_xfer_stats, strangers, 144);
    OFF(kvrt_xfer_stats, denied, 152);
    OFF(kvrt_xfer_stats, handlers_s, 160);
    OFF(kvrt_xfer_stats, handler_bytes, 168);
    OFF(kvrt_xfer_stats, bytes_read_in_place, 176); /* 1.2 */
    OFF(kvrt_xfer_stats, peers_read_in_place, 184);
    OFF(kvrt_xfer_stats, reserved, 188);
    OFF(kvrt_xfer_stats, failed_timeout, 192); /* 1.4 */
    OFF(kvrt_xfer_stats, failed_peer_closed, 200);
    OFF(kvrt_xfer_stats, failed_connection, 208);
    OFF(kvrt_xfer_stats, failed_violation, 216);
    OFF(kvrt_xfer_stats, failed_refused, 224);
    OFF(kvrt_xfer_stats, failed_released, 232);
    OFF(kvrt_xfer_stats, failed_other, 240);
    OFF(kvrt_xfer_stats, refused_auth, 248);
    OFF(kvrt_xfer_stats, refused_allow, 256);
    OFF(kvrt_xfer_stats, refused_busy, 264);
    OFF(kvrt_xfer_stats, refused_metadata, 272);
    OFF(kvrt_xfer_stats, refused_malformed, 280);
    OFF(kvrt_xfer_stats, refused_other, 288);
    OFF(kvrt_xfer_stats, refused_limit, 296);
    OFF(kvrt_xfer_stats, reserved_end, 304);
    SIZE(kvrt_xfer_stats, 368);
    VAL(KVRT_XFER_STATS_SIZE_1_3, 192);
    LAST_AT(kvrt_xfer_stats, reserved_end);

    OFF(kvrt_xfer_metadata_info, size, 0);
    OFF(kvrt_xfer_metadata_info, version, 8);
    OFF(kvrt_xfer_metadata_info, layout, 12);
    OFF(kvrt_xfer_metadata_info, num_blocks, 16);
    OFF(kvrt_xfer_metadata_info, num_layers, 24);
    OFF(kvrt_xfer_metadata_info, num_sets, 32);
    OFF(kvrt_xfer_metadata_info, cache_bytes, 40);
    OFF(kvrt_xfer_metadata_info, cache_addressable, 48);
    OFF(kvrt_xfer_metadata_info, chunk_bytes, 56);
    OFF(kvrt_xfer_metadata_info, is_signed, 64); /* 1.1 */
    OFF(kvrt_xfer_metadata_info, reserved, 65);
    SIZE(kvrt_xfer_metadata_info, 96);
    LAST(kvrt_xfer_metadata_info);

    OFF(kvrt_xfer_request, size, 0);
    OFF(kvrt_xfer_request, direction, 8);
    OFF(kvrt_xfer_request, method, 12);
    OFF(kvrt_xfer_request, num_blocks, 16);
    OFF(kvrt_xfer_request, local_ids, 24);
    OFF(kvrt_xfer_request, remote_ids, 32);
    OFF(kvrt_xfer_request, layer_start, 40);
    OFF(kvrt_xfer_request, num_layers, 48);
    OFF(kvrt_xfer_request, local_head_start, 56);
    OFF(kvrt_xfer_request, remote_head_start, 64);
    OFF(kvrt_xfer_request, num_heads, 72);
    OFF(kvrt_xfer_request, notification, 80);
    OFF(kvrt_xfer_request, notification_len, 88);
    /* 1.2 */
    OFF(kvrt_xfer_request, token_start, 96);
    OFF(kvrt_xfer_request, num_tokens, 104);
    OFF(kvrt_xfer_request, remote_num_blocks, 112);
    OFF(kvrt_xfer_request, reserved, 120);
    SIZE(kvrt_xfer_request, 160);
    LAST(kvrt_xfer_request);

    OFF(kvrt_xfer_plan, size, 0);
    OFF(kvrt_xfer_plan, method, 8);
    OFF(kvrt_xfer_plan, regions, 16);
    OFF(kvrt_xfer_plan, messages, 24);
    OFF(kvrt_xfer_plan, bytes, 32);
    OFF(kvrt_xfer_plan, wire_bytes, 40);
    OFF(kvrt_xfer_plan, chunks, 48);
    OFF(kvrt_xfer_plan, chunk_blocks, 56);
    OFF(kvrt_xfer_plan, seconds, 64);
    OFF(kvrt_xfer_plan, why, 72);
    OFF(kvrt_xfer_plan, reserved, 232);
    SIZE(kvrt_xfer_plan, 264);
    LAST(kvrt_xfer_plan);

#ifdef KVRT_ABI_XFER_LINKED
    /* The defaults fill what the checks want: size set, reserved zero. */
    struct kvrt_xfer_agent_options o;
    memset(&o, 0xff, sizeof(o));
    kvrt_xfer_agent_options_default(&o);
    bool zero = true;
    for (size_t i = 0; i < sizeof(o.reserved); i++)
        zero = zero && o.reserved[i] == 0;
    tap_ok(o.size == sizeof(o) && zero && o.reserved32 == 0 && !o.key_file && !o.allow && !o.flags && !o.log,
           "kvrt_xfer_agent_options_default: size set, no key, no allow list, no flags, reserved bytes zero");
    struct kvrt_xfer_request r;
    memset(&r, 0xff, sizeof(r));
    kvrt_xfer_request_default(&r);
    zero = true;
    for (size_t i = 0; i < sizeof(r.reserved); i++)
        zero = zero && r.reserved[i] == 0;
    tap_ok(r.size == sizeof(r) && zero && r.direction == KVRT_XFER_PUSH && r.method == KVRT_XFER_AUTO,
           "kvrt_xfer_request_default: size set, push, auto, reserved bytes zero");
#else
    tap_skip("built without libkvrt-xfer (UCX): the defaults are not checked");
#endif
    return tap_done();
}
