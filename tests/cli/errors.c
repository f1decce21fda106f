/*
 * The command line's contract: exit 0/1/2/3, one "kvrt: error:" line on
 * stderr per failure, strict numbers and names, help for every command, and
 * VLLM_KV_CACHE_LAYOUT honoured (and refused, quoted, when invalid).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "tap.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define MENTIONS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_ENV NULL

/* A plan that works, to be spoiled one option at a time. */
#define PLAN_OK "plan", "--layers", "2", "--blocks", "3", "--block-size", "16", "--kv-heads", "2", "--head-size", "64"

static void expect_error(const char *const *args, const char *const *env, int status, const char *const *mentions)
{
    char what[512];
    cli_describe(args, what, sizeof(what));
    struct spawn_result res = cli_run(args, env);
    cli_expect_error(&res, status, mentions, what);
    spawn_result_free(&res);
}

static void expect_ok(const char *const *args, const char *const *env, const char *const *mentions)
{
    char what[512];
    cli_describe(args, what, sizeof(what));
    struct spawn_result res = cli_run(args, env);
    bool mentioned = true;
    for (size_t i = 0; mentions && mentions[i]; i++)
        mentioned &= strstr(res.out, mentions[i]) != NULL;
    if (!tap_ok(res.status == 0 && res.err[0] == '\0' && mentioned, "%s: exit 0, output as expected", what))
        tap_diag("exit %d\nstdout:\n%s\nstderr:\n%s", res.status, res.out, res.err);
    spawn_result_free(&res);
}

/* The "layout" of a successful --json run, or NULL. */
static char *json_layout(const char *const *args, const char *const *env)
{
    struct spawn_result res = cli_run(args, env);
    json_t *root = res.status == 0 ? json_loads(res.out, 0, NULL) : NULL;
    const char *l = json_string_value(json_object_get(root, "layout"));
    char *copy = l ? strdup(l) : NULL;
    if (!copy)
        tap_diag("exit %d, stderr: %s", res.status, res.err);
    json_decref(root);
    spawn_result_free(&res);
    return copy;
}

static void check_top_level(void)
{
    expect_error(ARGS("plan", "--layers", "2"), NO_ENV, 2, MENTIONS("--blocks"));
    expect_ok(ARGS("--version"), NO_ENV, MENTIONS("kvrt 0."));
    expect_ok(ARGS("--help"), NO_ENV, MENTIONS("layouts", "plan", "resolve", "Exit status", "VLLM_KV_CACHE_LAYOUT"));
    expect_ok(ARGS("help", "plan"), NO_ENV, MENTIONS("Usage: kvrt plan"));
    static const char *const cmds[] = {"layouts", "plan", "resolve"};
    for (size_t i = 0; i < 3; i++)
        expect_ok(ARGS(cmds[i], "--help"), NO_ENV, MENTIONS("Usage: kvrt ", cmds[i], "Options:", "Example"));
    expect_ok(ARGS("plan", "--help"), NO_ENV, MENTIONS("VLLM_KV_CACHE_LAYOUT", "LBNHC", "--tokens-per-state"));
    expect_ok(ARGS("resolve", "--help"), NO_ENV, MENTIONS("VLLM_KV_CACHE_LAYOUT", "--declare", "any"));

    struct spawn_result res = cli_run((const char *const[]){NULL}, NO_ENV);
    cli_expect_error(&res, 2, MENTIONS("no command", "plan"), "no arguments");
    spawn_result_free(&res);
    expect_error(ARGS("frobnicate"), NO_ENV, 2, MENTIONS("\"frobnicate\"", "layouts, plan, resolve"));
    expect_error(ARGS("help", "frobnicate"), NO_ENV, 2, MENTIONS("\"frobnicate\""));
}

static void check_layouts(void)
{
    expect_ok(ARGS("layouts"), NO_ENV, MENTIONS("LBHNC", "BHLNC", "HND = LBHNC", "NHD = LBNHC"));
    struct spawn_result res = cli_run(ARGS("layouts", "--json"), NO_ENV);
    json_t *root = cli_expect_json(&res, "layouts --json");
    const json_t *layouts = json_object_get(root, "layouts");
    const json_t *first = json_array_get(layouts, 0);
    tap_ok(json_array_size(layouts) == 6 && json_is_true(json_object_get(first, "block_contiguous")) &&
               json_array_size(json_object_get(first, "layer_view_order")) == 4,
           "layouts --json: six layouts with orders and properties");
    const char *hnc = json_string_value(json_object_get(json_object_get(root, "aliases"), "HNC"));
    tap_ok(hnc && strcmp(hnc, "LBHNC") == 0, "layouts --json: aliases map HNC to LBHNC");
    json_decref(root);
    spawn_result_free(&res);
    expect_error(ARGS("layouts", "extra"), NO_ENV, 2, MENTIONS("\"extra\""));
}

static void check_numbers(void)
{
    /* Each of these would slip through a bare strtoull or atoi. */
    static const char *const bad[] = {"abc", "-1", "+2", " 2", "2 ", "2x", "0x10", "", "1e3", "3.0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char quoted[32];
        snprintf(quoted, sizeof(quoted), "\"%s\"", bad[i]);
        expect_error(ARGS(PLAN_OK, "--page-size-padded", bad[i]), NO_ENV, 2, MENTIONS("--page-size-padded", quoted));
    }
    expect_error(ARGS(PLAN_OK, "--blocks=0"), NO_ENV, 2, MENTIONS("--blocks"));
    expect_error(
        ARGS("plan", "--layers", "0", "--blocks", "3", "--block-size", "16", "--kv-heads", "2", "--head-size", "64"),
        NO_ENV, 2, MENTIONS("--layers \"0\"", "1 to"));
    expect_error(ARGS("plan", "--layers", "99999999999999999999999", "--blocks", "3", "--block-size", "16",
                      "--kv-heads", "2", "--head-size", "64"),
                 NO_ENV, 2, MENTIONS("99999999999999999999999"));
    expect_error(ARGS("plan", "--layers", "100000", "--blocks", "3", "--block-size", "16", "--kv-heads", "2",
                      "--head-size", "64"),
                 NO_ENV, 2, MENTIONS("100000", "65536"));
    expect_error(ARGS(PLAN_OK, "--tokens-per-state", "1/0"), NO_ENV, 2, MENTIONS("denominator", "\"0\""));
    expect_error(ARGS(PLAN_OK, "--tokens-per-state", "1/"), NO_ENV, 2, MENTIONS("--tokens-per-state"));
    expect_error(ARGS(PLAN_OK, "--tokens-per-state", "/2"), NO_ENV, 2, MENTIONS("--tokens-per-state"));
    /* Too large for 64 bits in the core's arithmetic: refused, not wrapped. */
    expect_error(ARGS("plan", "--layers", "2", "--blocks", "9223372036854775807", "--block-size", "16", "--kv-heads",
                      "2", "--head-size", "64"),
                 NO_ENV, 2, MENTIONS("64 bits"));
}

static void check_names_and_usage(void)
{
    expect_error(ARGS(PLAN_OK, "--layout", "nhd"), NO_ENV, 2, MENTIONS("\"nhd\"", "LBHNC", "HND"));
    expect_error(ARGS(PLAN_OK, "--layout", ""), NO_ENV, 2, MENTIONS("\"\"", "LBHNC"));
    expect_error(ARGS(PLAN_OK, "--kind", "mamba"), NO_ENV, 2, MENTIONS("\"mamba\"", "attention, mla, state"));
    expect_error(ARGS(PLAN_OK, "--dtype", "fp64"), NO_ENV, 2, MENTIONS("\"fp64\"", "bf16"));
    expect_error(ARGS(PLAN_OK, "--frobnicate", "1"), NO_ENV, 2, MENTIONS("\"--frobnicate\""));
    expect_error(ARGS(PLAN_OK, "extra"), NO_ENV, 2, MENTIONS("\"extra\""));
    expect_error(ARGS(PLAN_OK, "--layers", "4"), NO_ENV, 2, MENTIONS("--layers", "twice"));
    expect_error(ARGS(PLAN_OK, "--json=yes"), NO_ENV, 2, MENTIONS("--json", "no value"));
    expect_error(ARGS(PLAN_OK, "--dtype"), NO_ENV, 2, MENTIONS("--dtype", "needs a value"));
    expect_error(ARGS("plan", "--layers", "2", "--blocks", "3", "--block-size", "16", "--head-size", "64"), NO_ENV, 2,
                 MENTIONS("--kv-heads"));
    expect_error(ARGS("plan", "--layers", "2", "--blocks", "3", "--block-size", "16", "--kind", "state", "--kv-heads",
                      "2", "--state-content-bytes", "48"),
                 NO_ENV, 2, MENTIONS("--kv-heads", "state"));
    expect_error(ARGS("plan", "--layers", "2", "--blocks", "3", "--block-size", "16", "--kind", "state"), NO_ENV, 2,
                 MENTIONS("--state-content-bytes"));
    /* A core refusal keeps its own status: splitting interleaved pages. */
    expect_error(ARGS("plan", "--layout", "BLHNC", "--layers", "2", "--blocks", "4", "--block-size", "4", "--kv-heads",
                      "1", "--head-size", "2", "--kernel-block-size", "2"),
                 NO_ENV, 3, MENTIONS("BLHNC"));

    expect_error(ARGS("resolve", "--declare", "cuda"), NO_ENV, 2, MENTIONS("\"cuda\"", "NAME=LIST"));
    expect_error(ARGS("resolve", "--declare", "=LBNHC"), NO_ENV, 2, MENTIONS("NAME=LIST"));
    expect_error(ARGS("resolve", "--declare", "cuda="), NO_ENV, 2, MENTIONS("NAME=LIST"));
    expect_error(ARGS("resolve", "--declare", "cuda=LBNHC,,HND"), NO_ENV, 2, MENTIONS("empty"));
    expect_error(ARGS("resolve", "--declare", "cuda=lbnhc"), NO_ENV, 2, MENTIONS("\"lbnhc\"", "LBNHC", "any"));
    expect_error(ARGS("resolve", "--declare", "cuda=LBNHC,NHD"), NO_ENV, 2, MENTIONS("LBNHC twice"));
    expect_error(ARGS("resolve", "--declare", "cuda=LBNHC", "--declare", "cuda=any"), NO_ENV, 2,
                 MENTIONS("\"cuda\"", "already"));
    expect_error(ARGS("resolve", "--prefer", "bogus"), NO_ENV, 2, MENTIONS("\"bogus\""));
    expect_error(ARGS("resolve", "--declare", "a=LBNHC", "--declare", "b=HND"), NO_ENV, 3,
                 MENTIONS("\"a\"", "\"b\"", "LBNHC", "LBHNC"));
    expect_ok(ARGS("resolve", "--declare", "cuda=LBNHC,LBHNC", "--declare", "cpu=any", "--prefer", "HND"), NO_ENV,
              MENTIONS("layout:     LBHNC", "candidates: LBNHC, LBHNC", "why:", "  choice: LBHNC"));
    expect_ok(ARGS("resolve", "--declare", "cuda=LBNHC", "--prefer", "HND"), NO_ENV,
              MENTIONS("layout:     LBNHC", "warning:"));
    expect_ok(ARGS("resolve"), NO_ENV, MENTIONS("layout:     LBNHC", "default"));
}

static void check_env(void)
{
    char *l = json_layout(ARGS(PLAN_OK, "--json"), NO_ENV);
    tap_ok(l && strcmp(l, "LBNHC") == 0, "plan without --layout or env: LBNHC");
    free(l);
    l = json_layout(ARGS(PLAN_OK, "--json"), ARGS("VLLM_KV_CACHE_LAYOUT=HND"));
    tap_ok(l && strcmp(l, "LBHNC") == 0, "plan honours VLLM_KV_CACHE_LAYOUT=HND: LBHNC");
    free(l);
    l = json_layout(ARGS(PLAN_OK, "--json", "--layout", "BLNHC"), ARGS("VLLM_KV_CACHE_LAYOUT=HND"));
    tap_ok(l && strcmp(l, "BLNHC") == 0, "plan: an explicit --layout wins over the environment");
    free(l);
    expect_error(ARGS(PLAN_OK), ARGS("VLLM_KV_CACHE_LAYOUT="), 2, MENTIONS("VLLM_KV_CACHE_LAYOUT", "\"\"", "LBHNC"));
    expect_error(ARGS(PLAN_OK), ARGS("VLLM_KV_CACHE_LAYOUT=hnd"), 2, MENTIONS("VLLM_KV_CACHE_LAYOUT", "\"hnd\""));

    l = json_layout(ARGS("resolve", "--json", "--declare", "cuda=LBNHC,LBHNC"), ARGS("VLLM_KV_CACHE_LAYOUT=HNC"));
    tap_ok(l && strcmp(l, "LBHNC") == 0, "resolve honours VLLM_KV_CACHE_LAYOUT=HNC: LBHNC");
    free(l);
    struct spawn_result res = cli_run(ARGS("resolve", "--json"), ARGS("VLLM_KV_CACHE_LAYOUT=HNC"));
    json_t *root = cli_expect_json(&res, "resolve --json with VLLM_KV_CACHE_LAYOUT=HNC");
    const char *env = json_string_value(json_object_get(root, "env"));
    tap_ok(env && strcmp(env, "HNC") == 0, "resolve --json reports the env value as spelled");
    json_decref(root);
    spawn_result_free(&res);
    expect_error(ARGS("resolve", "--declare", "cuda=LBNHC"), ARGS("VLLM_KV_CACHE_LAYOUT=HND"), 3,
                 MENTIONS("HND (LBHNC)", "\"cuda\"", "candidates are LBNHC"));
    expect_error(ARGS("resolve", "--declare", "cuda=LBNHC"), ARGS("VLLM_KV_CACHE_LAYOUT="), 2,
                 MENTIONS("VLLM_KV_CACHE_LAYOUT", "\"\""));
    expect_error(ARGS("resolve"), ARGS("VLLM_KV_CACHE_LAYOUT=Lbnhc"), 2,
                 MENTIONS("VLLM_KV_CACHE_LAYOUT", "\"Lbnhc\"", "LBNHC"));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        printf("Bail out! usage: %s KVRT_EXE\n", argv[0]);
        return 1;
    }
    cli_set_exe(argv[1]);
    tap_plan_dynamic();
    check_top_level();
    check_layouts();
    check_numbers();
    check_names_and_usage();
    check_env();
    return tap_done();
}
