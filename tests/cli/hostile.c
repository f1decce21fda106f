/*
 * Hostile input to the tool: output that cannot be written, FIFOs where
 * files belong, shapes too big to draw, values kvrt cannot honour, bytes
 * that are not UTF-8 or not printable.  Each must end in a clear exit
 * status and one error line (or valid JSON), never a hang, a crash or a
 * silent success.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_run.h"
#include "tap.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define MENTIONS(...) ((const char *const[]){__VA_ARGS__, NULL})

static const char *kvrt_exe;
static char tmp[64];

static void expect_error(const char *const *args, const char *const *env, int status, const char *const *mentions)
{
    char what[512];
    cli_describe(args, what, sizeof(what));
    struct spawn_result res = cli_run(args, env);
    cli_expect_error(&res, status, mentions, what);
    spawn_result_free(&res);
}

/* stdout redirected by the shell ("> /dev/full", ">&-"): spawn_run always
 * gives a pipe. */
static void expect_write_error(const char *args, const char *redirect)
{
    char cmd[1024], err_path[128];
    snprintf(err_path, sizeof(err_path), "%s/stderr", tmp);
    snprintf(cmd, sizeof(cmd), "'%s' %s %s 2>'%s'", kvrt_exe, args, redirect, err_path);
    int rc = system(cmd);
    int status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
    char err[2048] = "";
    FILE *f = fopen(err_path, "r");
    if (f) {
        size_t n = fread(err, 1, sizeof(err) - 1, f);
        err[n] = '\0';
        fclose(f);
    }
    if (!tap_ok(status == 1 && strstr(err, "kvrt: error: could not write the output to stdout"),
                "kvrt %s %s: exit 1 with a write error", args, redirect))
        tap_diag("exit %d, stderr: %s", status, err);
}

static void check_write_errors(void)
{
    expect_write_error("layouts", "> /dev/full");
    expect_write_error("layouts", ">&-");
    expect_write_error("plan --layers 2 --blocks 3 --block-size 16 --kv-heads 2 --head-size 64 --json", "> /dev/full");
    expect_write_error("plugins", "> /dev/full");
    expect_write_error("draw --layers 2 --blocks 2 --block-size 4 --kv-heads 2 --head-size 8 --ascii", "> /dev/full");
}

static void check_fifos(const char *models)
{
    char fifo[128], folder[128], config[160];
    snprintf(fifo, sizeof(fifo), "%s/model.fifo", tmp);
    snprintf(folder, sizeof(folder), "%s/model-folder", tmp);
    snprintf(config, sizeof(config), "%s/config.json", folder);
    if (mkfifo(fifo, 0600) != 0 || mkdir(folder, 0700) != 0 || mkfifo(config, 0600) != 0) {
        tap_skip("a FIFO as --model: mkfifo failed");
        tap_skip("a FIFO as config.json: mkfifo failed");
        return;
    }
    expect_error(ARGS("plan", "--model", fifo, "--blocks", "4"), NULL, 2, MENTIONS("model.fifo", "a FIFO"));
    expect_error(ARGS("explain", "--model", fifo), NULL, 2, MENTIONS("model.fifo", "a FIFO"));
    expect_error(ARGS("draw", "--model", fifo, "--ascii"), NULL, 2, MENTIONS("model.fifo", "a FIFO"));
    expect_error(ARGS("plan", "--model", folder, "--blocks", "4"), NULL, 2, MENTIONS("config.json", "a FIFO"));
    expect_error(ARGS("run", "--model", folder), NULL, 2, MENTIONS("config.json", "a FIFO"));
    (void)models;
}

static void check_refused_values(void)
{
    expect_error(ARGS("draw", "--layers", "65536", "--kv-heads", "1024", "--block-size", "1", "--blocks", "64",
                      "--head-size", "8", "--ascii"),
                 NULL, 2, MENTIONS("draw", "rows", "6000"));
    expect_error(ARGS("draw", "--layers", "8", "--kv-heads", "4096", "--block-size", "1024", "--blocks", "1",
                      "--head-size", "1", "--ascii"),
                 NULL, 2, MENTIONS("draw", "cells"));
    expect_error(
        ARGS("run", "--backend", "cpu", "--layers", "2", "--kv-heads", "2", "--q-heads", "3", "--head-size", "8"), NULL,
        2, MENTIONS("3 query heads", "--q-heads", "2 KV heads"));
    expect_error(ARGS("run", "--layers", "2", "--kv-heads", "2", "--head-size", "8"), ENV("KVRT_BACKEND="), 2,
                 MENTIONS("KVRT_BACKEND", "empty"));
    expect_error(ARGS("explain", "--layers", "2", "--kv-heads", "2", "--head-size", "8"), ENV("KVRT_BACKEND="), 2,
                 MENTIONS("KVRT_BACKEND", "empty"));
    static const char *const threads[] = {"KVRT_CPU_THREADS=abc", "KVRT_CPU_THREADS=0",  "KVRT_CPU_THREADS=257",
                                          "KVRT_CPU_THREADS=",    "KVRT_CPU_THREADS= 4", "KVRT_CPU_THREADS=4x"};
    for (size_t i = 0; i < sizeof(threads) / sizeof(threads[0]); i++)
        expect_error(ARGS("run", "--backend", "cpu", "--layers", "2", "--kv-heads", "2", "--head-size", "8"),
                     ENV(threads[i]), 2, MENTIONS("KVRT_CPU_THREADS", "1 to 256"));
}

static bool one_printable_line(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + 1 < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return n > 0 && s[n - 1] == '\n';
}

static void check_control_bytes(void)
{
    struct {
        const char *const *args;
        const char *const *env;
        const char *escaped;
    } cases[] = {
        {ARGS("plan", "--layers", "2", "--blocks", "1\n2\x1b[31m", "--block-size", "16", "--kv-heads", "2",
              "--head-size", "64"),
         NULL, "1\\n2\\x1b[31m"},
        {ARGS("plan", "--layers", "2", "--memory", "1\rGiB", "--block-size", "16", "--kv-heads", "2", "--head-size",
              "64"),
         NULL, "1\\rGiB"},
        {ARGS("run", "--layers", "2", "--kv-heads", "2", "--head-size", "8"), ENV("KVRT_BACKEND=cpu\nx"), "cpu\\nx"},
        {ARGS("plan", "--layers", "2", "--blocks", "3", "--block-size", "16", "--kv-heads", "2", "--head-size", "64"),
         ENV("VLLM_KV_CACHE_LAYOUT=NHD\x07"), "NHD\\x07"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char what[512];
        cli_describe(cases[i].args, what, sizeof(what));
        struct spawn_result res = cli_run(cases[i].args, cases[i].env);
        if (!tap_ok(res.status != 0 && one_printable_line(res.err) && strstr(res.err, cases[i].escaped),
                    "case %zu: control bytes in a value are escaped in the one error line", i))
            tap_diag("exit %d, stderr: %s", res.status, res.err);
        spawn_result_free(&res);
    }
}

/* A kvrt model with a control character in a layer name is refused. */
static void check_model_names(void)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/ctl.kvrt.json", tmp);
    FILE *f = fopen(path, "w");
    if (!f) {
        tap_skip("model with a control character: cannot write %s", path);
        return;
    }
    fputs("{\"format\": \"kvrt-model\", \"version\": 1, \"name\": \"m\", \"dtype\": \"fp16\", \"block_size\": 16,\n"
          " \"groups\": [{\"name\": \"g\", \"layers\": [\"a\\u001b[2Jb\"],\n"
          "  \"spec\": {\"kind\": \"attention\", \"kv_heads\": 2, \"head_size\": 8}}]}\n",
          f);
    fclose(f);
    expect_error(ARGS("plan", "--model", path, "--blocks", "4"), NULL, 2,
                 MENTIONS("layers[0]", "control character 0x1b"));
}

/* Bytes that are not UTF-8 reach --json output as U+FFFD, never a failure. */
static void check_json(const char *models)
{
    struct spawn_result res = cli_run(ARGS("plugins", "--json"), ENV("VLLM_KV_CACHE_LAYOUT=\xff\x01NHD"));
    json_t *root = cli_expect_json(&res, "plugins --json with VLLM_KV_CACHE_LAYOUT=\\xff\\x01NHD");
    const char *v = json_string_value(json_object_get(json_object_get(root, "env"), "value"));
    tap_ok(v && strcmp(v, "\xef\xbf\xbd\x01NHD") == 0, "the value is kept, the bad byte replaced by U+FFFD");
    json_decref(root);
    spawn_result_free(&res);

    char dir[128], src[1024], dst[256], cmd[1600];
    snprintf(dir, sizeof(dir), "%s/bad\xfe\xc3name", tmp);
    snprintf(src, sizeof(src), "%s/tiny-hybrid.kvrt.json", models);
    snprintf(dst, sizeof(dst), "%s/model.kvrt.json", dir);
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", src, dst);
    if (mkdir(dir, 0700) != 0 || system(cmd) != 0) {
        tap_skip("a model path that is not UTF-8: cannot copy the model");
        return;
    }
    res = cli_run(ARGS("plan", "--model", dst, "--blocks", "4", "--json"), NULL);
    root = cli_expect_json(&res, "plan --model <path with bytes 0xfe 0xc3> --json");
    const char *source = json_string_value(json_object_get(json_object_get(root, "model"), "source"));
    if (!source)
        source = json_string_value(json_object_get(root, "source"));
    if (!tap_ok(source && strstr(source, "bad\xef\xbf\xbd\xef\xbf\xbdname"),
                "the path is in the JSON with each bad byte replaced"))
        tap_diag("stdout: %.400s", res.out);
    json_decref(root);
    spawn_result_free(&res);

    /* A plugin folder named with control bytes: escaped in the table. */
    char plugdir[128];
    snprintf(plugdir, sizeof(plugdir), "%s/plug\x1b[31m", tmp);
    if (mkdir(plugdir, 0700) != 0) {
        tap_skip("a plugin folder with control bytes: mkdir failed");
        return;
    }
    char env[256];
    snprintf(env, sizeof(env), "KVRT_PLUGIN_PATH=%s", plugdir);
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s/'", getenv("KVRT_TEST_SUBSET") ? getenv("KVRT_TEST_SUBSET") : "", plugdir);
    if (!getenv("KVRT_TEST_SUBSET") || system(cmd) != 0) {
        tap_skip("a plugin folder with control bytes: no subset plugin to copy");
        return;
    }
    res = cli_run(ARGS("plugins"), ENV(env));
    bool clean = res.status == 0 && !strchr(res.out, '\x1b') && strstr(res.out, "plug\\x1b[31m/kvrt-subset.so");
    if (!tap_ok(clean, "kvrt plugins prints a plugin path with control bytes escaped"))
        tap_diag("exit %d, stdout: %.600s", res.status, res.out);
    spawn_result_free(&res);
    res = cli_run(ARGS("plugins", "--json"), ENV(env));
    root = cli_expect_json(&res, "plugins --json with that folder");
    json_decref(root);
    spawn_result_free(&res);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        printf("Bail out! usage: %s KVRT_EXE SUBSET_PLUGIN NODEV_PLUGIN MODELS_DIR [RSVG]\n", argv[0]);
        return 1;
    }
    kvrt_exe = argv[1];
    cli_set_exe(argv[1]);
    setenv("KVRT_TEST_SUBSET", argv[2], 1);
    snprintf(tmp, sizeof(tmp), "/tmp/kvrt-hostile-XXXXXX");
    if (!mkdtemp(tmp)) {
        printf("Bail out! mkdtemp failed\n");
        return 1;
    }
    tap_plan_dynamic();
    check_write_errors();
    check_fifos(argv[4]);
    check_refused_values();
    check_control_bytes();
    check_model_names();
    check_json(argv[4]);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        tap_diag("could not remove %s", tmp);
    return tap_done();
}
