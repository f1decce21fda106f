/*
 * libkvrt-xfer's names for the parallel rank rules (kvrt_xfer_tp_map,
 * kvrt_xfer_pp_layers) give exactly what libkvrt's give, refusals and
 * their messages included: they are the same rules, not copies.  The map
 * takes a request's own direction.
 */
#include <stdlib.h>
#include <string.h>

#include <kvrt/xfer.h>

#include "tap.h"

static bool same_map(uint64_t heads, uint64_t local_tp, uint64_t rank, uint64_t remote_tp, uint64_t spread,
                     enum kvrt_tp_direction dir)
{
    struct kvrt_tp_entry a[32], b[32];
    size_t na = 0, nb = 0;
    memset(a, 0, sizeof(a));
    memset(b, 0, sizeof(b));
    int ra = kvrt_xfer_tp_map(heads, local_tp, rank, remote_tp, spread, (enum kvrt_xfer_direction)dir, a, 32, &na);
    char msg[2048];
    strncpy(msg, kvrt_error_message(), sizeof(msg) - 1);
    msg[sizeof(msg) - 1] = '\0';
    int rb = kvrt_tp_map(heads, local_tp, rank, remote_tp, spread, dir, b, 32, &nb);
    return ra == rb && na == nb && memcmp(a, b, sizeof(a)) == 0 && strcmp(msg, kvrt_error_message()) == 0;
}

int main(void)
{
    tap_plan_dynamic();
    unsetenv(KVRT_PP_PARTITION_ENV);
    size_t cases = 0, bad = 0;
    for (uint64_t heads = 1; heads <= 8; heads++)
        for (uint64_t a = 1; a <= 8; a++)
            for (uint64_t b = 1; b <= 8; b++)
                for (uint64_t r = 0; r < a; r++)
                    for (int dir = KVRT_TP_PUSH; dir <= KVRT_TP_PULL; dir++) {
                        cases++;
                        bad += !same_map(heads, a, r, b, r + 1, (enum kvrt_tp_direction)dir);
                    }
    tap_ok(bad == 0, "kvrt_xfer_tp_map == kvrt_tp_map, refusals included: %zu cases (%zu differ)", cases, bad);

    struct kvrt_tp_entry e[4];
    size_t n = 0;
    tap_ok(kvrt_xfer_tp_map(2, 1, 0, 4, 0, KVRT_XFER_PUSH, e, 4, &n) == KVRT_OK && n == 4 && e[3].remote_rank == 3 &&
               e[3].local_head_start == 1,
           "a request's direction (KVRT_XFER_PUSH) asks for the source view");
    tap_ok(kvrt_xfer_tp_map(8, 3, 0, 8, 0, KVRT_XFER_PULL, e, 4, &n) == KVRT_ERR_INVALID &&
               strstr(kvrt_error_message(), "local tensor-parallel size 3 cannot hold 8 KV heads"),
           "a group that cannot be mapped: libkvrt's refusal");

    uint64_t s = 0, c = 0;
    tap_ok(kvrt_xfer_pp_layers(10, 4, 2, &s, &c) == KVRT_OK && s == 5 && c == 3, "pp: 10 layers, stage 2 of 4: [5, 8)");
    setenv(KVRT_PP_PARTITION_ENV, "4,6", 1);
    tap_ok(kvrt_xfer_pp_layers(10, 2, 1, &s, &c) == KVRT_OK && s == 4 && c == 6, "pp: %s=4,6 is followed",
           KVRT_PP_PARTITION_ENV);
    tap_ok(kvrt_xfer_pp_layers(10, 3, 1, &s, &c) == KVRT_ERR_INVALID &&
               strstr(kvrt_error_message(), KVRT_PP_PARTITION_ENV "=\"4,6\" (from the environment) has 2 entries"),
           "pp: a variable that does not fit is named");
    unsetenv(KVRT_PP_PARTITION_ENV);
    return tap_done();
}
