#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_env.h"
#include "vectors_json.h"

struct cli_env cli_env;

void cli_env_init(int argc, char **argv)
{
    if (argc != 6) {
        printf("Bail out! usage: %s KVRT SUBSET_PLUGIN NODEV_PLUGIN MODELS_DIR RSVG_CONVERT\n", argv[0]);
        exit(1);
    }
    cli_set_exe(argv[1]);
    cli_env.subset = argv[2];
    cli_env.nodev = argv[3];
    cli_env.models = argv[4];
    cli_env.rsvg = argv[5];
    snprintf(cli_env.subset_path_env, sizeof(cli_env.subset_path_env), "KVRT_PLUGIN_PATH=%s", argv[2]);
    snprintf(cli_env.nodev_path_env, sizeof(cli_env.nodev_path_env), "KVRT_PLUGIN_PATH=%s", argv[3]);
    tap_plan_dynamic();
}

const char *cli_model_path(const char *file)
{
    static char ring[8][1024];
    static unsigned next;
    char *p = ring[next++ % 8];
    snprintf(p, sizeof(ring[0]), "%s/%s", cli_env.models, file);
    return p;
}

json_t *cli_json(const char *const *args, const char *const *env)
{
    char what[1024];
    cli_describe(args, what, sizeof(what));
    struct spawn_result res = cli_run(args, env);
    json_t *root = cli_expect_json(&res, what);
    spawn_result_free(&res);
    return root;
}

void cli_error_case(const char *const *args, const char *const *env, int status, const char *const *mentions)
{
    char what[1024];
    cli_describe(args, what, sizeof(what));
    struct spawn_result res = cli_run(args, env);
    cli_expect_error(&res, status, mentions, what);
    spawn_result_free(&res);
}

void cli_ok_case(const char *const *args, const char *const *env, const char *const *mentions)
{
    char what[1024];
    cli_describe(args, what, sizeof(what));
    struct spawn_result res = cli_run(args, env);
    bool mentioned = true;
    for (size_t i = 0; mentions && mentions[i]; i++)
        mentioned &= strstr(res.out, mentions[i]) != NULL;
    if (!tap_ok(res.status == 0 && mentioned, "%s: exit 0, output as expected", what)) {
        tap_diag("exit %d\nstdout:\n%s\nstderr:\n%s", res.status, res.out, res.err);
        for (size_t i = 0; mentions && mentions[i]; i++)
            if (!strstr(res.out, mentions[i]))
                tap_diag("stdout lacks \"%s\"", mentions[i]);
    }
    spawn_result_free(&res);
}

const char *js(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

double jnum(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

char *cli_read_text(const char *path)
{
    size_t len;
    char *raw = vectors_read_file(path, &len);
    char *text = raw ? realloc(raw, len + 1) : NULL;
    if (!text) {
        free(raw);
        return NULL;
    }
    text[len] = '\0';
    return text;
}
