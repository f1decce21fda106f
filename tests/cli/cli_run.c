#include <stdio.h>
#include <string.h>

#include "cli_run.h"
#include "tap.h"

static const char *kvrt_exe;

void cli_set_exe(const char *path)
{
    kvrt_exe = path;
}

struct spawn_result cli_run(const char *const *args, const char *const *env)
{
    const char *argv[64];
    const char *changes[16];
    size_t n = 0, m = 0;
    argv[n++] = kvrt_exe;
    for (size_t i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    bool names_layout = false;
    for (size_t i = 0; env && env[i] && m < 14; i++) {
        changes[m++] = env[i];
        names_layout |= strncmp(env[i], "VLLM_KV_CACHE_LAYOUT", 20) == 0;
    }
    if (!names_layout)
        changes[m++] = "VLLM_KV_CACHE_LAYOUT";
    changes[m] = NULL;
    struct spawn_result res;
    spawn_run(kvrt_exe, (char *const *)argv, changes, &res);
    return res;
}

void cli_describe(const char *const *args, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; args[i] && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? " " : "", args[i][0] ? args[i] : "''");
}

bool cli_expect_error(const struct spawn_result *res, int status, const char *const *mentions, const char *what)
{
    const char *nl = strchr(res->err, '\n');
    bool one_line = nl && nl[1] == '\0';
    bool prefix = strncmp(res->err, "kvrt: error: ", 13) == 0;
    bool mentioned = true;
    for (size_t i = 0; mentions && mentions[i]; i++)
        mentioned &= strstr(res->err, mentions[i]) != NULL;
    bool ok = tap_ok(res->status == status && res->out[0] == '\0' && one_line && prefix && mentioned,
                     "%s: exit %d with one \"kvrt: error:\" line", what, status);
    if (!ok) {
        tap_diag("exit %d, stdout %zu bytes, stderr:\n%s", res->status, strlen(res->out), res->err);
        for (size_t i = 0; mentions && mentions[i]; i++)
            if (!strstr(res->err, mentions[i]))
                tap_diag("stderr lacks \"%s\"", mentions[i]);
    }
    return ok;
}

json_t *cli_expect_json(const struct spawn_result *res, const char *what)
{
    json_error_t err;
    json_t *root = res->status == 0 ? json_loads(res->out, 0, &err) : NULL;
    if (!tap_ok(root && json_is_object(root) && res->err[0] == '\0', "%s: exit 0 with a JSON object", what)) {
        tap_diag("exit %d, stderr: %s", res->status, res->err);
        json_decref(root);
        return NULL;
    }
    return root;
}
