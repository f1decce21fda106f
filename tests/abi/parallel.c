/*
 * Locks the structs and values of <kvrt/parallel.h>: sizes, offsets,
 * reserved bytes last, the direction values (those of enum
 * kvrt_xfer_direction, checked against <kvrt/xfer.h>, which is there with
 * or without UCX) and the limits.  Offsets are for LP64 targets.
 */
#include <stddef.h>

#include <kvrt/parallel.h>
#include <kvrt/xfer.h>

#include "tap.h"

#define OFF(type, field, want)                                                                                         \
    TAP_EQ_U64(offsetof(struct type, field), want, "offsetof(" #type ", " #field ") == " #want)
#define SIZE(type, want) TAP_EQ_U64(sizeof(struct type), want, "sizeof(struct " #type ") == " #want)
#define VAL(name, want)                                                                                                \
    TAP_EQ_U64((unsigned long long)(long long)(name), (unsigned long long)(long long)(want), #name " == " #want)

int main(void)
{
    tap_plan_dynamic();
    if (sizeof(void *) != 8) {
        tap_skip("offsets are locked for LP64 only");
        return tap_done();
    }
    OFF(kvrt_tp_heads, head_start, 0);
    OFF(kvrt_tp_heads, num_heads, 8);
    OFF(kvrt_tp_heads, replicas, 16);
    OFF(kvrt_tp_heads, replica, 24);
    OFF(kvrt_tp_heads, reserved, 32);
    SIZE(kvrt_tp_heads, 64);
    OFF(kvrt_tp_entry, remote_rank, 0);
    OFF(kvrt_tp_entry, local_head_start, 8);
    OFF(kvrt_tp_entry, remote_head_start, 16);
    OFF(kvrt_tp_entry, num_heads, 24);
    OFF(kvrt_tp_entry, reserved, 32);
    SIZE(kvrt_tp_entry, 64);
    VAL(KVRT_TP_PUSH, 0);
    VAL(KVRT_TP_PULL, 1);
    VAL(KVRT_TP_PUSH, KVRT_XFER_PUSH);
    VAL(KVRT_TP_PULL, KVRT_XFER_PULL);
    VAL(KVRT_TP_MAX_SIZE, 65536);
    return tap_done();
}
