/*
 * The pipeline-parallel rule (kvrt_pp_layers, kvrt_pp_layers_partition,
 * kvrt_pp_partition_env): vLLM's even split against its loop written out
 * here, partitions given and from VLLM_PP_LAYER_PARTITION, and every
 * refusal's message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/parallel.h>

#include "tap.h"

static bool has(const char *needle)
{
    return strstr(kvrt_error_message(), needle) != NULL;
}

/* get_pp_indices without a partition, as vLLM writes it: an even share
 * each, then partitions[-i] += 1 for i in 2 .. remaining + 1. */
static void vllm_split(uint64_t layers, uint64_t pp, uint64_t *parts)
{
    for (uint64_t i = 0; i < pp; i++)
        parts[i] = layers / pp;
    for (uint64_t i = 2; i < layers % pp + 2; i++)
        parts[pp - i]++;
}

static bool stages_are(uint64_t layers, const char *partition, const uint64_t *want, uint64_t pp)
{
    uint64_t at = 0;
    for (uint64_t r = 0; r < pp; r++) {
        uint64_t start = 99, count = 99;
        if (kvrt_pp_layers_partition(layers, pp, r, partition, &start, &count) != KVRT_OK) {
            tap_diag("  rank %llu refused: %s", (unsigned long long)r, kvrt_error_message());
            return false;
        }
        if (start != at || count != want[r]) {
            tap_diag("  rank %llu: [%llu, +%llu), want [%llu, +%llu)", (unsigned long long)r, (unsigned long long)start,
                     (unsigned long long)count, (unsigned long long)at, (unsigned long long)want[r]);
            return false;
        }
        at += count;
    }
    return at == layers;
}

#define STAGES_ARE(layers, partition, ...)                                                                             \
    stages_are(layers, partition, (const uint64_t[]){__VA_ARGS__},                                                     \
               sizeof((const uint64_t[]){__VA_ARGS__}) / sizeof(uint64_t))

static void check_even(void)
{
    tap_ok(STAGES_ARE(32, NULL, 8, 8, 8, 8), "32 layers over 4 stages: 8 each");
    tap_ok(STAGES_ARE(10, NULL, 2, 3, 3, 2), "10 over 4: the 2 extra layers go to the two stages before the last");
    tap_ok(STAGES_ARE(7, NULL, 2, 3, 2), "7 over 3: the extra layer goes to the stage before the last");
    tap_ok(STAGES_ARE(7, NULL, 2, 2, 2, 1), "7 over 4: 3 extras, every stage but the last");
    tap_ok(STAGES_ARE(5, NULL, 1, 1, 2, 1), "5 over 4: 1 extra, the stage before the last");
    tap_ok(STAGES_ARE(61, NULL, 15, 15, 16, 15), "61 over 4 (DeepSeek-V3): 15, 15, 16, 15");
    tap_ok(STAGES_ARE(1, NULL, 1), "1 layer, 1 stage");
    size_t cases = 0, bad = 0;
    uint64_t parts[64];
    for (uint64_t layers = 1; layers <= 64; layers++)
        for (uint64_t pp = 1; pp <= layers; pp++) {
            vllm_split(layers, pp, parts);
            cases++;
            if (!stages_are(layers, NULL, parts, pp))
                bad++;
        }
    tap_ok(bad == 0, "%zu (layers, stages) pairs up to 64: the same split as vLLM's loop (%zu differ)", cases, bad);
    uint64_t s = 0, c = 0;
    tap_ok(kvrt_pp_layers_partition(UINT64_MAX, 3, 2, NULL, &s, &c) == KVRT_OK && c == UINT64_MAX / 3 &&
               s == UINT64_MAX - c,
           "2^64-1 layers over 3 stages: no overflow, the last stage ends at the last layer");
}

static void check_partition(void)
{
    tap_ok(STAGES_ARE(16, "4,4,8", 4, 4, 8), "\"4,4,8\": as given");
    tap_ok(STAGES_ARE(8, " 3 , 5\t", 3, 5), "\" 3 , 5\\t\": spaces around entries are allowed, as int() allows");
    tap_ok(STAGES_ARE(5, "5", 5), "\"5\" for one stage");

    unsetenv(KVRT_PP_PARTITION_ENV);
    const char *value = "x", *source = "x";
    tap_ok(kvrt_pp_partition_env(&value, &source) == KVRT_OK && value == NULL && strcmp(source, "default") == 0,
           "unset: no value, source \"default\"");
    uint64_t s = 0, c = 0;
    tap_ok(kvrt_pp_layers(10, 4, 1, &s, &c) == KVRT_OK && s == 2 && c == 3, "unset: kvrt_pp_layers splits evenly");

    setenv(KVRT_PP_PARTITION_ENV, "1,2,3,4", 1);
    tap_ok(kvrt_pp_partition_env(&value, &source) == KVRT_OK && value && strcmp(value, "1,2,3,4") == 0 &&
               strcmp(source, "environment") == 0,
           "set: its text, source \"environment\"");
    tap_ok(kvrt_pp_partition_env(&value, NULL) == KVRT_OK && value, "source may be NULL");
    bool ok = true;
    const uint64_t want_s[] = {0, 1, 3, 6}, want_c[] = {1, 2, 3, 4};
    for (uint64_t r = 0; r < 4; r++)
        ok = ok && kvrt_pp_layers(10, 4, r, &s, &c) == KVRT_OK && s == want_s[r] && c == want_c[r];
    tap_ok(ok, "%s=1,2,3,4: kvrt_pp_layers follows it", KVRT_PP_PARTITION_ENV);
    tap_ok(kvrt_pp_layers_partition(10, 4, 1, NULL, &s, &c) == KVRT_OK && s == 2 && c == 3,
           "kvrt_pp_layers_partition(NULL) does not read the environment");
    tap_ok(kvrt_pp_layers(12, 4, 0, &s, &c) == KVRT_ERR_INVALID && has(KVRT_PP_PARTITION_ENV "=\"1,2,3,4\"") &&
               has("from the environment") && has("adds up to 10") && has("has 12") && has("or unset it") &&
               has("\"3,3,3,3\""),
           "a variable that does not fit is named, with its value, the even split and \"unset it\"");
    tap_diag("%s", kvrt_error_message());
    setenv(KVRT_PP_PARTITION_ENV, "", 1);
    tap_ok(kvrt_pp_layers(10, 4, 0, &s, &c) == KVRT_ERR_INVALID && has("entry 1 is empty"),
           "set but empty: refused, as vLLM refuses it");
    unsetenv(KVRT_PP_PARTITION_ENV);
    tap_ok(kvrt_pp_partition_env(NULL, &source) == KVRT_ERR_INVALID && has("value is NULL"), "value NULL: refused");
}

static void check_refusals(void)
{
    uint64_t s = 0, c = 0;
    struct {
        uint64_t layers, pp, rank;
        const char *partition;
        int rc;
        const char *says[4];
    } cases[] = {
        {8, 3, 0, "4,4", KVRT_ERR_INVALID, {"\"4,4\"", "has 2 entries", "size is 3", "\"3,3,2\""}},
        {8, 2, 0, "4,5", KVRT_ERR_INVALID, {"adds up to 9", "the model has 8", "\"4,4\"", NULL}},
        {8, 2, 0, "4,x", KVRT_ERR_INVALID, {"entry 2 \"x\"", "not a number of layers", "2 comma-separated", "up to 8"}},
        {8, 2, 0, "4,", KVRT_ERR_INVALID, {"entry 2 is empty", NULL}},
        {8, 2, 0, ",8", KVRT_ERR_INVALID, {"entry 1 is empty", NULL}},
        {8, 2, 0, "-1,9", KVRT_ERR_INVALID, {"entry 1 \"-1\"", "not a number", NULL}},
        {8, 2, 0, "4.0,4", KVRT_ERR_INVALID, {"entry 1 \"4.0\"", NULL}},
        {8, 2, 0, "0,8", KVRT_ERR_INVALID, {"entry 1 is 0", "at least one layer", NULL}},
        {8, 2, 0, "99999999999999999999,1", KVRT_ERR_OVERFLOW, {"entry 1 \"99999999999999999999\"", "64 bits", NULL}},
        {8, 2, 0, "18446744073709551615,1", KVRT_ERR_OVERFLOW, {"adds up to more than 64 bits", NULL}},
        {8, 2, 0, "4\n,4", KVRT_ERR_INVALID, {"\\x0a", NULL}},
        {3, 4, 0, NULL, KVRT_ERR_INVALID, {"3 layers", "size 4", "at most 3", NULL}},
        {3, 4, 0, "1,1,1,0", KVRT_ERR_INVALID, {"3 layers", "at most 3", NULL}},
        {0, 1, 0, NULL, KVRT_ERR_INVALID, {"0 layers", NULL}},
        {8, 0, 0, NULL, KVRT_ERR_INVALID, {"pipeline-parallel size 0", "at least 1", NULL}},
        {8, 2, 2, NULL, KVRT_ERR_INVALID, {"rank 2", "size 2", "0 to 1", NULL}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = kvrt_pp_layers_partition(cases[i].layers, cases[i].pp, cases[i].rank, cases[i].partition, &s, &c);
        bool ok = rc == cases[i].rc;
        for (size_t k = 0; k < 4 && cases[i].says[k]; k++)
            ok = ok && has(cases[i].says[k]);
        char label[64];
        snprintf(label, sizeof(label), "%s", cases[i].partition ? cases[i].partition : "(even split)");
        for (char *p = label; *p; p++)
            if (*p == '\n')
                *p = '~';
        if (!tap_ok(ok, "%llu layers, %llu stages, rank %llu, %s: refused (%d) with what is wrong and what is valid",
                    (unsigned long long)cases[i].layers, (unsigned long long)cases[i].pp,
                    (unsigned long long)cases[i].rank, label, cases[i].rc))
            tap_diag("  rc %d: %s", rc, kvrt_error_message());
    }
    tap_ok(kvrt_pp_layers_partition(8, 2, 0, "4,4", NULL, &c) == KVRT_ERR_INVALID &&
               has("kvrt_pp_layers_partition: start and count"),
           "start NULL: refused");
    tap_ok(kvrt_pp_layers(8, 2, 0, &s, NULL) == KVRT_ERR_INVALID && has("kvrt_pp_layers: start and count"),
           "count NULL: refused");
    tap_ok(kvrt_pp_layers_partition(40, 20, 0, "1", &s, &c) == KVRT_ERR_INVALID && !has("even split"),
           "20 stages: no example split in the message");
}

int main(void)
{
    tap_plan_dynamic();
    unsetenv(KVRT_PP_PARTITION_ENV);
    check_even();
    check_partition();
    check_refusals();
    return tap_done();
}
