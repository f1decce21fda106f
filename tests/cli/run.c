/*
 * `kvrt run` on the cpu backend: every layout verifies (write, read back,
 * decode against the double reference), every element type, every shipped
 * model with a small batch (MLA: decode skipped with the reason; state
 * layers: page round trip); refusals exit 3 naming the layout as spelled, a
 * missing backend or device exits 4.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_env.h"

#define SMALL                                                                                                          \
    "--layers", "2", "--kv-heads", "2", "--head-size", "16", "--block-size", "4", "--seqs", "3", "--context", "10"

static const char *const layouts[] = {"LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC"};

static bool verified(const json_t *r, const char *what)
{
    const json_t *err = json_object_get(r, "max_abs_error"), *tol = json_object_get(r, "tolerance");
    bool ok = json_is_true(json_object_get(r, "verified")) &&
              (json_is_null(err) || json_number_value(err) <= json_number_value(tol));
    if (!tap_ok(ok, "%s: verified", what))
        tap_diag("failure: %s", js(r, "failure") ? js(r, "failure") : "(none)");
    return ok;
}

static void check_layouts(void)
{
    for (size_t i = 0; i < 6; i++) {
        char what[64];
        snprintf(what, sizeof(what), "run --backend cpu --layout %s (small)", layouts[i]);
        json_t *r = cli_json(ARGS("run", "--json", "--backend", "cpu", "--layout", layouts[i], SMALL), NULL);
        if (!r) {
            tap_ok(false, "%s: verified", what);
            continue;
        }
        verified(r, what);
        tap_ok(strcmp(js(r, "layout"), layouts[i]) == 0 && strcmp(js(r, "backend"), "cpu") == 0 &&
                   json_integer_value(json_object_get(r, "decode_layers")) == 2 &&
                   json_is_number(json_object_get(r, "max_abs_error")) &&
                   json_is_number(json_object_get(json_object_get(r, "gbps"), "write")) &&
                   json_is_number(json_object_get(json_object_get(r, "timings"), "decode")) &&
                   json_integer_value(json_object_get(json_object_get(r, "bytes"), "write")) == 2 * 3 * 10 * 2 * 32 * 2,
               "%s: layout, backend, decode on both layers, error, GB/s, timings, bytes written", what);
        json_decref(r);
    }
    /* The env decides when --layout is not given, as spelled. */
    json_t *r = cli_json(ARGS("run", "--json", "--backend", "cpu", SMALL), ENV("VLLM_KV_CACHE_LAYOUT=HND"));
    tap_ok(r && strcmp(js(r, "layout"), "LBHNC") == 0 && json_is_true(json_object_get(r, "verified")),
           "run honours VLLM_KV_CACHE_LAYOUT=HND (LBHNC) and verifies");
    json_decref(r);
}

static void check_dtypes(void)
{
    static const char *const dtypes[] = {"fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2"};
    for (size_t i = 0; i < 5; i++) {
        char what[64];
        snprintf(what, sizeof(what), "run --dtype %s", dtypes[i]);
        json_t *r = cli_json(ARGS("run", "--json", "--backend", "cpu", "--dtype", dtypes[i], SMALL), NULL);
        if (r)
            verified(r, what);
        else
            tap_ok(false, "%s: verified", what);
        json_decref(r);
    }
    json_t *r = cli_json(ARGS("run", "--json", "--backend", "cpu", "--dtype", "int8", SMALL), NULL);
    const json_t *skip = json_object_get(r, "decode_skipped");
    tap_ok(r && json_is_true(json_object_get(r, "verified")) &&
               json_integer_value(json_object_get(skip, "layers")) == 2 && strstr(js(skip, "reason"), "floating-point"),
           "run --dtype int8: read back verified, decode skipped with the reason");
    json_decref(r);
}

static void check_models(void)
{
    static const struct {
        const char *file;
        bool decode, state;
    } models[] = {
        {"llama-3.1-8b.json", true, false},      {"qwen2.5-7b.json", true, false},
        {"deepseek-v3.json", false, false},      {"gpt-oss-20b.json", true, false},
        {"qwen3-next-80b-a3b.json", true, true}, {"jamba-v0.1.json", true, true},
        {"tiny-hybrid.kvrt.json", true, true},
    };
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
        char what[128];
        snprintf(what, sizeof(what), "run --model %s", models[i].file);
        json_t *r = cli_json(ARGS("run", "--json", "--backend", "cpu", "--model", cli_model_path(models[i].file),
                                  "--seqs", "1", "--context", "20"),
                             NULL);
        if (!r) {
            tap_ok(false, "%s: verified", what);
            continue;
        }
        verified(r, what);
        const json_t *skip = json_object_get(r, "decode_skipped");
        if (models[i].decode)
            tap_ok(json_integer_value(json_object_get(r, "decode_layers")) > 0, "%s: decode ran", what);
        else
            tap_ok(json_integer_value(json_object_get(r, "decode_layers")) == 0 && strstr(js(skip, "reason"), "MLA") &&
                       json_is_null(json_object_get(r, "max_abs_error")),
                   "%s: decode skipped, saying MLA has no V", what);
        tap_ok((json_integer_value(json_object_get(r, "state_layers")) > 0) == models[i].state, "%s: state pages %s",
               what, models[i].state ? "round-tripped" : "absent");
        json_decref(r);
    }
    cli_ok_case(
        ARGS("run", "--backend", "cpu", "--model", cli_model_path("deepseek-v3.json"), "--seqs", "1", "--context", "8"),
        NULL, MENTIONS("verified  yes", "decode skipped on 61 layers", "MLA"));
    cli_ok_case(ARGS("run", "--backend", "cpu", "--model", cli_model_path("tiny-hybrid.kvrt.json"), "--seqs", "2",
                     "--context", "8"),
                NULL, MENTIONS("verified  yes", "round trip exact", "read back bit-exact"));
}

static void check_refusals(void)
{
    /* Refused before the plugin is bound: exit 3, the layout as spelled. */
    cli_error_case(ARGS("run", "--backend", "subset", "--layout", "BLHNC", SMALL), ENV(cli_env.subset_path_env), 3,
                   MENTIONS("\"BLHNC\"", "subset", "LBHNC, LBNHC"));
    /* The advice names the setting the user used, not the one they did not. */
    struct spawn_result res =
        cli_run(ARGS("run", "--backend", "subset", "--layout", "BLHNC", SMALL), ENV(cli_env.subset_path_env));
    tap_ok(res.status == 3 && strstr(res.err, "--layout BLHNC") && !strstr(res.err, "VLLM_KV_CACHE_LAYOUT"),
           "run --layout refused: the message names --layout, not VLLM_KV_CACHE_LAYOUT");
    if (res.err)
        tap_diag("%s", res.err);
    spawn_result_free(&res);
    cli_error_case(ARGS("run", "--backend", "subset", SMALL),
                   ENV(cli_env.subset_path_env, "VLLM_KV_CACHE_LAYOUT=BHLNC"), 3, MENTIONS("BHLNC", "subset"));
    cli_error_case(ARGS("run", "--json", "--backend", "subset", SMALL),
                   ENV(cli_env.subset_path_env, "KVRT_BACKEND=subset", "VLLM_KV_CACHE_LAYOUT=LHBNC"), 3,
                   MENTIONS("LHBNC"));
    cli_error_case(ARGS("run", "--backend", "nosuch", SMALL), NULL, 4, MENTIONS("\"nosuch\"", "cpu"));
    cli_error_case(ARGS("run", SMALL), ENV("KVRT_BACKEND=nosuch"), 4, MENTIONS("nosuch"));
    cli_error_case(ARGS("run", "--backend", "nodev", SMALL), ENV(cli_env.nodev_path_env), 4,
                   MENTIONS("nodev", "no usable device"));
}

static void check_usage(void)
{
    cli_error_case(ARGS("run", "--backend", "cpu", SMALL, "--blocks", "2"), NULL, 2, MENTIONS("needs", "--blocks"));
    cli_error_case(ARGS("run", "--backend", "cpu", "--layers", "2"), NULL, 2, MENTIONS("--head-size"));
    cli_error_case(ARGS("run", "--backend", "cpu", SMALL, "--layout", "nhd"), NULL, 2, MENTIONS("\"nhd\""));
    cli_error_case(ARGS("run", "--backend", "cpu", SMALL, "--seqs", "0"), NULL, 2, MENTIONS("--seqs"));
    cli_error_case(ARGS("run", "--backend", "cpu", "--model", cli_model_path("llama-3.1-8b.json"), "--kv-heads", "2"),
                   NULL, 2, MENTIONS("--kv-heads", "--model"));
    json_t *r = cli_json(ARGS("run", "--json", "--backend", "cpu", SMALL, "--memory", "64KiB"), NULL);
    tap_ok(r && json_is_true(json_object_get(r, "verified")) &&
               json_integer_value(json_object_get(json_object_get(r, "bytes"), "cache")) <= 65536 &&
               json_integer_value(json_object_get(r, "num_blocks")) >=
                   json_integer_value(json_object_get(r, "blocks_needed")),
           "run --memory 64KiB: the cache fits the budget and holds the batch");
    json_decref(r);
}

/* A backend ranked above cpu whose bind fails is passed over, not fatal,
 * unless it is named; with every candidate failing, exit 4 lists them. */
static void check_fallback(void)
{
    const char *failbind = getenv("KVRT_TEST_FAILBIND_PLUGIN");
    if (!failbind) {
        for (int i = 0; i < 5; i++)
            tap_skip("bind fallback: KVRT_TEST_FAILBIND_PLUGIN not set (run through meson test)");
        return;
    }
    char path_env[1100];
    snprintf(path_env, sizeof(path_env), "KVRT_PLUGIN_PATH=%s", failbind);
    json_t *r = cli_json(ARGS("run", "--json", SMALL), ENV(path_env));
    const char *backend = js(r, "backend");
    if (backend && strcmp(backend, "cpu") != 0) {
        /* A GPU backend outranks failbind: it is never tried. */
        for (int i = 0; i < 4; i++)
            tap_skip("bind fallback: backend \"%s\" ranks above the failing test plugin here", backend);
        json_decref(r);
        return;
    }
    const json_t *passed = json_object_get(r, "passed_over");
    const json_t *first = json_array_get(passed, 0);
    tap_ok(r && json_is_true(json_object_get(r, "verified")) && json_array_size(passed) == 1 &&
               strcmp(js(first, "backend"), "failbind") == 0 && strstr(js(first, "reason"), "TEST_BIND_FAILED"),
           "run: failbind fails to bind and is passed over (passed_over names it with its reason); cpu runs");
    json_decref(r);

    cli_ok_case(ARGS("run", SMALL), ENV(path_env),
                MENTIONS("backend   cpu (default: first available)", "passed over \"failbind\": failed to bind layout",
                         "TEST_BIND_FAILED", "verified  yes"));

    struct spawn_result res = cli_run(ARGS("run", SMALL), ENV(path_env, "KVRT_DEBUG=1"));
    tap_ok(res.status == 0 && strstr(res.err, "kvrt: warning: passed over backend \"failbind\"") &&
               strstr(res.err, "TEST_BIND_FAILED"),
           "run under KVRT_DEBUG=1: the passed-over backend is a warning on stderr");
    spawn_result_free(&res);

    /* Named, it fails hard. */
    cli_error_case(ARGS("run", "--backend", "failbind", SMALL), ENV(path_env), 1,
                   MENTIONS("backend \"failbind\" failed to bind", "TEST_BIND_FAILED"));

    /* Every candidate fails: cpu's bind refuses a bad KVRT_CPU_THREADS, the
     * OpenCL ICD loader finds no platform. */
    cli_error_case(ARGS("run", SMALL), ENV(path_env, "KVRT_CPU_THREADS=x", "OCL_ICD_VENDORS=/nonexistent"), 4,
                   MENTIONS("\"failbind\": failed to bind layout LBHNC: TEST_BIND_FAILED", "\"cpu\": failed to bind",
                            "KVRT_CPU_THREADS"));
}

int main(int argc, char **argv)
{
    cli_env_init(argc, argv);
    check_fallback();
    check_layouts();
    check_dtypes();
    check_models();
    check_refusals();
    check_usage();
    return tap_done();
}
