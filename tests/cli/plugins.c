/*
 * `kvrt plugins`: the cpu backend is listed available and selectable; an
 * invalid VLLM_KV_CACHE_LAYOUT still lists everything, as not selectable and
 * saying why; a plugin that does not declare the env's layout, one without a
 * device, and a file that is not a plugin each get their reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_env.h"

static const json_t *find_plugin(const json_t *root, const char *name)
{
    const json_t *list = json_object_get(root, "plugins");
    for (size_t i = 0; i < json_array_size(list); i++)
        if (strcmp(js(json_array_get(list, i), "name") ? js(json_array_get(list, i), "name") : "", name) == 0)
            return json_array_get(list, i);
    return NULL;
}

static void check_schema(const json_t *root)
{
    const json_t *list = json_object_get(root, "plugins");
    bool ok = json_is_array(list) && json_is_array(json_object_get(root, "skipped"));
    for (size_t i = 0; ok && i < json_array_size(list); i++) {
        const json_t *p = json_array_get(list, i);
        const json_t *layouts = json_object_get(p, "layouts");
        ok = js(p, "name") && js(p, "path") && js(p, "abi") && js(p, "reason") &&
             (json_is_array(layouts) || (json_is_string(layouts) && strcmp(json_string_value(layouts), "any") == 0)) &&
             json_is_array(json_object_get(p, "dtypes")) && json_is_boolean(json_object_get(p, "available")) &&
             json_is_boolean(json_object_get(p, "selectable"));
    }
    tap_ok(ok, "plugins --json: every plugin has name, path, abi, layouts, dtypes, available, selectable, reason");
}

/* Every field `plugins --json` prints is named in `plugins --help` (and so
 * in kvrt(1), which is made from the help). */
static void check_help_lists(const json_t *root)
{
    struct spawn_result help = cli_run(ARGS("plugins", "--help"), NULL);
    const json_t *objects[] = {root, json_array_get(json_object_get(root, "plugins"), 0),
                               json_array_get(json_object_get(root, "skipped"), 0), json_object_get(root, "env")};
    char missing[512] = "";
    bool ok = help.status == 0 && help.out && objects[1] && objects[2] && objects[3];
    for (size_t o = 0; ok && o < sizeof(objects) / sizeof(objects[0]); o++) {
        const char *key;
        json_t *value;
        json_object_foreach((json_t *)objects[o], key, value)
        {
            (void)value;
            if (!strstr(help.out, key)) {
                size_t n = strlen(missing);
                snprintf(missing + n, sizeof(missing) - n, " %s", key);
            }
        }
    }
    tap_ok(ok && !missing[0], "plugins --help names every field of plugins --json%s%s", missing[0] ? "; missing:" : "",
           missing);
    spawn_result_free(&help);
}

static void check_default(void)
{
    json_t *root = cli_json(ARGS("plugins", "--json"), NULL);
    check_schema(root);
    const json_t *cpu = find_plugin(root, "cpu");
    tap_ok(cpu && json_is_true(json_object_get(cpu, "available")) && json_is_true(json_object_get(cpu, "selectable")) &&
               strcmp(js(cpu, "reason"), "") == 0,
           "plugins --json: cpu is available and selectable, with no reason");
    const json_t *layouts = json_object_get(cpu, "layouts");
    tap_ok(json_array_size(layouts) == 6, "plugins --json: cpu declares the six layouts");
    tap_ok(json_is_null(json_object_get(json_object_get(root, "env"), "value")),
           "plugins --json: VLLM_KV_CACHE_LAYOUT reported as unset");
    json_decref(root);
    cli_ok_case(ARGS("plugins"), NULL, MENTIONS("cpu", "selectable yes", "layouts"));
}

static void check_bad_env(void)
{
    /* Listing must still work when the environment is wrong. */
    json_t *root = cli_json(ARGS("plugins", "--json"), ENV("VLLM_KV_CACHE_LAYOUT=bogus"));
    const json_t *cpu = find_plugin(root, "cpu");
    tap_ok(cpu && json_is_true(json_object_get(cpu, "available")) &&
               json_is_false(json_object_get(cpu, "selectable")) && strstr(js(cpu, "reason"), "\"bogus\""),
           "plugins --json with VLLM_KV_CACHE_LAYOUT=bogus: cpu available but not selectable, the reason quotes it");
    const json_t *env = json_object_get(root, "env");
    tap_ok(json_is_false(json_object_get(env, "valid")) && strcmp(js(env, "value"), "bogus") == 0,
           "plugins --json: env reported as spelled and invalid");
    json_decref(root);
    cli_ok_case(ARGS("plugins"), ENV("VLLM_KV_CACHE_LAYOUT=bogus"), MENTIONS("selectable no", "bogus", "note:"));
}

static void check_declaration_and_device(void)
{
    json_t *root = cli_json(ARGS("plugins", "--json"), ENV(cli_env.subset_path_env, "VLLM_KV_CACHE_LAYOUT=BLHNC"));
    const json_t *subset = find_plugin(root, "subset"), *cpu = find_plugin(root, "cpu");
    tap_ok(subset && json_is_true(json_object_get(subset, "available")) &&
               json_is_false(json_object_get(subset, "selectable")) && strstr(js(subset, "reason"), "BLHNC") &&
               strstr(js(subset, "reason"), "LBHNC, LBNHC"),
           "plugins --json: subset under VLLM_KV_CACHE_LAYOUT=BLHNC is not selectable, naming what it declares");
    tap_ok(cpu && json_is_true(json_object_get(cpu, "selectable")), "plugins --json: cpu is selectable under BLHNC");
    json_decref(root);

    root = cli_json(ARGS("plugins", "--json"), ENV(cli_env.nodev_path_env));
    const json_t *nodev = find_plugin(root, "nodev");
    tap_ok(nodev && json_is_false(json_object_get(nodev, "available")) &&
               json_is_false(json_object_get(nodev, "selectable")) && strstr(js(nodev, "reason"), "TEST_NO_DEVICE"),
           "plugins --json: a plugin without a device is not available, with the probe's reason");
    json_decref(root);
}

static void check_skipped(void)
{
    char dir[] = "/tmp/kvrt-cli-plugins-XXXXXX", file[128], env[256];
    if (!mkdtemp(dir)) {
        tap_skip("cannot make a temporary folder");
        return;
    }
    snprintf(file, sizeof(file), "%s/kvrt-broken.so", dir);
    FILE *f = fopen(file, "w");
    if (f) {
        fputs("this is not a shared object\n", f);
        fclose(f);
    }
    char helper[128];
    snprintf(helper, sizeof(helper), "%s/libhelper.so", dir);
    f = fopen(helper, "w");
    if (f) {
        fputs("a library beside the plugins\n", f);
        fclose(f);
    }
    snprintf(env, sizeof(env), "KVRT_PLUGIN_PATH=%s", dir);
    json_t *root = cli_json(ARGS("plugins", "--json"), ENV(env));
    const json_t *skipped = json_object_get(root, "skipped");
    bool found = false, misnamed = false;
    for (size_t i = 0; i < json_array_size(skipped); i++) {
        const json_t *s = json_array_get(skipped, i);
        found |= js(s, "path") && strstr(js(s, "path"), "kvrt-broken.so") && js(s, "reason") && *js(s, "reason");
        misnamed |= js(s, "path") && strstr(js(s, "path"), "libhelper.so") && js(s, "reason") &&
                    strstr(js(s, "reason"), "kvrt-<name>.so");
    }
    tap_ok(found, "plugins --json: a file that is not a plugin is listed under skipped with a reason");
    tap_ok(misnamed, "plugins --json: a shared object not named kvrt-<name>.so is listed under skipped, saying so");
    check_help_lists(root);
    json_decref(root);
    /* Asked for by name, a passed-over plugin says it was passed over. */
    cli_error_case(ARGS("run", "--backend", "broken", "--kv-heads", "2", "--head-size", "64"), ENV(env), 4,
                   MENTIONS("backend \"broken\" was passed over", "kvrt-broken.so"));
    unlink(helper);
    unlink(file);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    cli_env_init(argc, argv);
    check_default();
    check_bad_env();
    check_declaration_and_device();
    check_skipped();
    cli_error_case(ARGS("plugins", "--frob"), NULL, 2, MENTIONS("--frob"));
    return tap_done();
}
