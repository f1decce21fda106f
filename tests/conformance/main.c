/*
 * kvrt-conformance: the conformance suite every backend must pass.
 *
 *   kvrt-conformance                      every plugin found (KVRT_PLUGIN_PATH, install dir)
 *   kvrt-conformance --backend cpu        one plugin, by name
 *   kvrt-conformance --plugin ./kvrt-x.so a plugin file outside any search path
 *
 * Output is TAP; a plugin without a device reports its points as skipped
 * with the plugin's own reason.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

#define DEFAULT_SEED 0x6b767274u /* "kvrt" */

struct options {
    const char *backend;
    const char *plugin;
    uint64_t seed;
    bool fail_exit;
};

static void usage(FILE *to)
{
    fprintf(to,
            "usage: kvrt-conformance [--backend NAME] [--plugin FILE] [--seed N] [--fail-exit]\n"
            "\n"
            "Runs the kvrt backend conformance suite and prints TAP.\n"
            "  --backend NAME  test only the plugin called NAME\n"
            "  --plugin FILE   load only this plugin file (no other search path)\n"
            "  --seed N        seed of the random data and slot mappings (default %u)\n"
            "  --fail-exit     exit 1 when a point fails (TAP runners such as meson want 0)\n",
            DEFAULT_SEED);
}

static int parse(int argc, char **argv, struct options *o)
{
    memset(o, 0, sizeof(*o));
    o->seed = DEFAULT_SEED;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--fail-exit") == 0) {
            o->fail_exit = true;
        } else if (strcmp(a, "--backend") == 0 && has_value) {
            o->backend = argv[++i];
        } else if (strcmp(a, "--plugin") == 0 && has_value) {
            o->plugin = argv[++i];
        } else if (strcmp(a, "--seed") == 0 && has_value) {
            char *end;
            errno = 0;
            o->seed = strtoull(argv[++i], &end, 0);
            if (errno || *end || !*argv[i]) {
                fprintf(stderr, "kvrt-conformance: --seed \"%s\" is not a number\n", argv[i]);
                return 2;
            }
        } else {
            bool takes_value = strcmp(a, "--backend") == 0 || strcmp(a, "--plugin") == 0 || strcmp(a, "--seed") == 0;
            if (takes_value)
                fprintf(stderr, "kvrt-conformance: %s needs a value\n", a);
            else
                fprintf(stderr, "kvrt-conformance: unknown argument \"%s\"\n", a);
            usage(stderr);
            return 2;
        }
    }
    return 0;
}

static void log_to_tap(void *user, enum kvrt_log_level level, const char *message)
{
    (void)user;
    if (level <= KVRT_LOG_WARNING)
        tap_diag("kvrt %s: %s", level == KVRT_LOG_ERROR ? "error" : "warning", message);
}

static void diag_skipped_files(const kvrt_runtime *rt)
{
    for (size_t i = 0; i < kvrt_runtime_num_skipped(rt); i++) {
        const char *path, *reason;
        if (kvrt_runtime_skipped(rt, i, &path, &reason) == KVRT_OK)
            tap_diag("skipped %s: %s", path, reason);
    }
}

int main(int argc, char **argv)
{
    struct options o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;

    struct kvrt_runtime_options ro;
    kvrt_runtime_options_default(&ro);
    ro.log = log_to_tap;
    if (o.plugin) {
        ro.plugin_path = o.plugin;
        ro.search_default_paths = false;
    }
    kvrt_runtime *rt;
    int status = kvrt_runtime_open(&ro, &rt);
    if (status != KVRT_OK) {
        tap_plan_dynamic();
        tap_ok(false, "kvrt_runtime_open: %s", kvrt_error_message());
        tap_done();
        return o.fail_exit ? 1 : 0;
    }

    /* Which plugins: all, one by name, or the one in --plugin FILE. */
    size_t n = kvrt_runtime_num_plugins(rt), first = 0, count = n;
    if (o.backend) {
        status = kvrt_runtime_find_plugin(rt, o.backend, &first);
        count = status == KVRT_OK ? 1 : 0;
    }
    if (count == 0) {
        tap_plan_dynamic();
        diag_skipped_files(rt);
        if (o.backend)
            tap_ok(false, "backend \"%s\" is loaded: %s", o.backend, kvrt_error_message());
        else
            tap_ok(false, "at least one plugin is loaded from %s", o.plugin ? o.plugin : "the search path");
        kvrt_runtime_close(rt);
        tap_done();
        return o.fail_exit ? 1 : 0;
    }
    if (count == 1) {
        struct kvrt_plugin_info info;
        if (kvrt_runtime_plugin_info(rt, first, &info) == KVRT_OK && !info.available) {
            /* The strings live with the runtime. */
            char why[1024];
            snprintf(why, sizeof(why), "backend \"%s\" has no device: %s", info.name, info.reason);
            kvrt_runtime_close(rt);
            tap_skip_all("%s", why);
        }
    }

    tap_plan_dynamic();
    tap_diag("kvrt %s, seed %llu (replay with --seed %llu)", kvrt_version(), (unsigned long long)o.seed,
             (unsigned long long)o.seed);
    diag_skipped_files(rt);
    for (size_t i = first; i < first + count; i++)
        conf_run_plugin(rt, &ro, i, o.seed);
    kvrt_runtime_close(rt);

    int failed = tap_failures();
    tap_diag("%d points, %d failed", tap_count(), failed);
    rc = tap_done();
    return rc ? rc : (o.fail_exit && failed ? 1 : 0);
}
