/*
 * `kvrt resolve --json` reproduces every case of resolution.json: the layout
 * and warning, or exit 3 with one error line for the refused cases.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "tap.h"
#include "vectors_json.h"

static bool array_has_string(const json_t *a, const char *s)
{
    for (size_t i = 0; i < json_array_size(a); i++)
        if (json_is_string(json_array_get(a, i)) && strcmp(json_string_value(json_array_get(a, i)), s) == 0)
            return true;
    return false;
}

static bool trace_ok(const json_t *trace, const char *layout)
{
    char choice[64];
    snprintf(choice, sizeof(choice), "choice: %s", layout);
    bool found = false;
    for (size_t i = 0; i < json_array_size(trace); i++) {
        const char *line = json_string_value(json_array_get(trace, i));
        if (!line || !line[0] || strchr(line, '\n'))
            return false;
        found |= strncmp(line, choice, strlen(choice)) == 0;
    }
    return found;
}

static void check_case(size_t index, const json_t *c)
{
    const char *args[32] = {"resolve", "--json"};
    char decl[8][128], env[128], id[32];
    size_t n = 2, i;
    json_t *d;
    json_array_foreach(json_object_get(c, "declarations"), i, d)
    {
        size_t used = (size_t)snprintf(decl[i], sizeof(decl[i]), "backend%zu=", i + 1);
        if (json_is_string(d)) {
            snprintf(decl[i] + used, sizeof(decl[i]) - used, "%s", json_string_value(d));
        } else {
            for (size_t j = 0; j < json_array_size(d); j++)
                used += (size_t)snprintf(decl[i] + used, sizeof(decl[i]) - used, "%s%s", j ? "," : "",
                                         json_string_value(json_array_get(d, j)));
        }
        args[n++] = "--declare";
        args[n++] = decl[i];
    }
    const json_t *pref = json_object_get(c, "soft_preference");
    if (json_is_string(pref)) {
        args[n++] = "--prefer";
        args[n++] = json_string_value(pref);
    }
    if (json_is_true(json_object_get(c, "mixed_shapes")))
        args[n++] = "--mixed-shapes";
    args[n] = NULL;
    const json_t *env_v = json_object_get(c, "env");
    const char *changes[2] = {NULL, NULL};
    if (json_is_string(env_v)) {
        snprintf(env, sizeof(env), "VLLM_KV_CACHE_LAYOUT=%s", json_string_value(env_v));
        changes[0] = env;
    }

    char cmd[1024];
    cli_describe(args, cmd, sizeof(cmd));
    snprintf(id, sizeof(id), "case %zu", index);
    struct spawn_result res = cli_run(args, changes);
    const json_t *expect = json_object_get(c, "expect");
    if (json_is_true(json_object_get(expect, "error"))) {
        if (!cli_expect_error(&res, 3, NULL, id))
            tap_diag("%s kvrt %s", changes[0] ? changes[0] : "", cmd);
        spawn_result_free(&res);
        return;
    }
    json_t *got = cli_expect_json(&res, id);
    if (got) {
        const char *want = json_string_value(json_object_get(expect, "layout"));
        const char *layout = json_string_value(json_object_get(got, "layout"));
        bool warning = json_is_true(json_object_get(expect, "warning"));
        bool ok = tap_ok(layout && strcmp(layout, want) == 0, "%s: layout %s", id, want);
        ok &= tap_ok(json_is_boolean(json_object_get(got, "warning")) &&
                         json_is_true(json_object_get(got, "warning")) == warning,
                     "%s: warning %s", id, warning ? "true" : "false");
        ok &= tap_ok(array_has_string(json_object_get(got, "candidates"), want),
                     "%s: the chosen layout is among the candidates", id);
        ok &= tap_ok(trace_ok(json_object_get(got, "trace"), want),
                     "%s: the trace is a list of one-line steps ending in the choice", id);
        if (!ok)
            tap_diag("%s kvrt %s\n%s", changes[0] ? changes[0] : "", cmd, res.out);
        json_decref(got);
    }
    spawn_result_free(&res);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        printf("Bail out! usage: %s KVRT_EXE VECTORS_DIR\n", argv[0]);
        return 1;
    }
    cli_set_exe(argv[1]);
    json_t *root = vectors_load(argv[2], "resolution.json");
    if (!root)
        return 1;
    tap_plan_dynamic();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(root, "cases"), i, c) check_case(i, c);
    json_decref(root);
    return tap_done();
}
