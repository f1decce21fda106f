/* kvrt plugins: every backend kvrt found, what it declares, whether it has a
 * device and whether it could be chosen now; and every file passed over. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/plugin.h>
#include <kvrt/runtime.h>

#include "commands.h"
#include "cli.h"

static const struct cli_option plugins_options[] = {
    {"--json", NULL, 0, false,
     "print one JSON object with these fields:\n"
     "plugins: one object per plugin, in search order:\n"
     "  name, path, version, description, abi (\"MAJOR.MINOR\"),\n"
     "  layouts (list, best first, or \"any\"), dtypes (list), ops (list\n"
     "  of write, read, copy_blocks, gather, scatter, decode),\n"
     "  available (a device answered the probe), device_reason (the\n"
     "  probe's words when not), device_name, device_type and\n"
     "  memory (their names below), selectable, reason (why not\n"
     "  selectable, else empty),\n"
     "  default (the one binding picks)\n"
     "skipped: one object per file passed over: path, reason\n"
     "env: the layout variable: name, value (null when unset),\n"
     "  valid, error (empty when valid)\n"
     "default_backend: the backend binding picks, or null"},
    CLI_HELP_ROW,
    CLI_OPTIONS_END,
};

static const struct cli_option *const plugins_tables[] = {plugins_options, NULL};

static void plugins_help(FILE *out)
{
    fprintf(out,
            "Usage: kvrt plugins [--json]\n"
            "\n"
            "List the backend plugins kvrt finds, in search order: name, file, plugin\n"
            "ABI, the layouts it declares (best first, or \"any\"), its element types,\n"
            "whether a device is available (probing runs no kernels and allocates\n"
            "nothing), and whether it is selectable now: available, and declaring the\n"
            "layout %s asks for (when set).  Also lists the files that were\n"
            "passed over, each with its reason (not a plugin, missing entry symbol,\n"
            "incompatible ABI, malformed descriptor, duplicate name).\n"
            "\n"
            "An invalid %s is not an error here: every plugin is then\n"
            "listed as not selectable, with the reason, so this command still helps\n"
            "when the environment is wrong.\n"
            "\n"
            "Options:\n",
            KVRT_LAYOUT_ENV, KVRT_LAYOUT_ENV);
    cli_print_options(out, plugins_options, 11);
    fputs("\nAutomatic selection tries backends in priority order:\n", out);
    cli_print_wrapped(out, 2, 78, kvrt_runtime_backend_priority());
    fputs("A backend whose device is the host CPU (PoCL's OpenCL CPU device) ranks\n"
          "after cpu, which runs the same work natively.\n\n",
          out);
    fputs("Device types:", out);
    for (int t = 0; kvrt_device_type_name((enum kvrt_device_type)t); t++)
        fprintf(out, "%s %s", t ? "," : "", kvrt_device_type_name((enum kvrt_device_type)t));
    fputs("\nMemory kinds:", out);
    for (int m = 0; kvrt_memory_kind_name((enum kvrt_memory_kind)m); m++)
        fprintf(out, "%s %s", m ? "," : "", kvrt_memory_kind_name((enum kvrt_memory_kind)m));
    fprintf(out,
            "\n"
            "\n"
            "Environment:\n"
            "  %s  the layout a plugin must declare to be selectable\n"
            "  %s  the backend binding uses by default (marked \"default\")\n"
            "  %s  plugin folders or files searched first\n"
            "\n"
            "Example:\n"
            "  kvrt plugins --json\n",
            KVRT_LAYOUT_ENV, KVRT_BACKEND_ENV, KVRT_PLUGIN_PATH_ENV);
}

/* VLLM_KV_CACHE_LAYOUT as the selection sees it. */
struct env_layout {
    const char *value; /* as spelled; NULL when unset */
    bool valid;
    enum kvrt_layout layout;
    char error[512];
};

static void read_env(struct env_layout *e)
{
    bool set = false;
    memset(e, 0, sizeof(*e));
    kvrt_setting_get(KVRT_SETTING_LAYOUT, NULL, &e->value, NULL);
    if (kvrt_layout_from_env(&set, &e->layout) == KVRT_OK) {
        e->valid = true;
    } else {
        snprintf(e->error, sizeof(e->error), "%s", kvrt_error_message());
    }
}

static void layouts_text(const struct kvrt_plugin_info *in, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    if (in->any_layout) {
        snprintf(buf, size, "any");
        return;
    }
    for (size_t i = 0; i < in->num_layouts && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", kvrt_layout_name(in->layouts[i]));
}

static void dtypes_text(uint32_t dtypes, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int t = 0; t < KVRT_NUM_DTYPES && used < size; t++)
        if (dtypes & (1u << t))
            used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "",
                                     kvrt_dtype_name((enum kvrt_dtype)t));
}

static const char *const op_names[] = {"write", "read", "copy_blocks", "gather", "scatter", "decode"};

static bool selectable(const kvrt_runtime *rt, size_t i, const struct kvrt_plugin_info *in,
                       const struct env_layout *env, char *reason, size_t size)
{
    reason[0] = '\0';
    if (!in->available) {
        snprintf(reason, size, "no device: %s", in->reason[0] ? in->reason : "the probe found none");
        return false;
    }
    if (!env->value)
        return true;
    if (!env->valid) {
        snprintf(reason, size, "%s", env->error);
        return false;
    }
    if (!kvrt_runtime_plugin_admits(rt, i, env->layout)) {
        char layouts[128];
        layouts_text(in, layouts, sizeof(layouts));
        snprintf(reason, size, "%s=%s is not among the layouts it declares (%s)", KVRT_LAYOUT_ENV, env->value, layouts);
        return false;
    }
    return true;
}

static const char *device_type_name(enum kvrt_device_type t)
{
    const char *name = kvrt_device_type_name(t);
    return name ? name : kvrt_device_type_name(KVRT_DEVICE_TYPE_UNKNOWN);
}

static const char *memory_name(enum kvrt_memory_kind m)
{
    const char *name = kvrt_memory_kind_name(m);
    return name ? name : kvrt_memory_kind_name(KVRT_MEMORY_OPAQUE);
}

/* What the memory kind means for zero-copy export and transfers between
 * engines (Debian's UCX has no GPU transports, so only host memory is
 * registered directly). */
static const char *memory_consequence(enum kvrt_memory_kind m)
{
    switch (m) {
    case KVRT_MEMORY_HOST: return "host memory: zero-copy export, registered directly for transfers";
    case KVRT_MEMORY_CUDA:
    case KVRT_MEMORY_ROCM: return "device pointers: zero-copy export on the device; transfers go through host staging";
    default: return "no address in this process: no zero-copy export; transfers go through host staging";
    }
}

static json_t *plugin_json(const kvrt_runtime *rt, size_t i, const struct env_layout *env, const char *default_name)
{
    struct kvrt_plugin_info in;
    char reason[768], abi[32];
    if (kvrt_runtime_plugin_info(rt, i, &in) != KVRT_OK)
        return NULL;
    json_t *layouts = in.any_layout ? kvrt_json_str("any") : json_array();
    for (size_t k = 0; !in.any_layout && k < in.num_layouts; k++)
        json_array_append_new(layouts, kvrt_json_str(kvrt_layout_name(in.layouts[k])));
    json_t *dtypes = json_array(), *ops = json_array();
    for (int t = 0; t < KVRT_NUM_DTYPES; t++)
        if (in.dtypes & (1u << t))
            json_array_append_new(dtypes, kvrt_json_str(kvrt_dtype_name((enum kvrt_dtype)t)));
    for (size_t k = 0; k < sizeof(op_names) / sizeof(op_names[0]); k++)
        if (in.ops & (1u << k))
            json_array_append_new(ops, kvrt_json_str(op_names[k]));
    bool sel = selectable(rt, i, &in, env, reason, sizeof(reason));
    snprintf(abi, sizeof(abi), "%u.%u", in.abi_major, in.abi_minor);
    json_t *o = json_object();
    bool ok = kvrt_json_put(o, "name", kvrt_json_str(in.name)) && kvrt_json_put(o, "path", kvrt_json_str(in.path)) &&
              kvrt_json_put(o, "version", kvrt_json_str(in.version ? in.version : "")) &&
              kvrt_json_put(o, "description", kvrt_json_str(in.description ? in.description : "")) &&
              kvrt_json_put(o, "abi", kvrt_json_str(abi)) && kvrt_json_put(o, "layouts", layouts) &&
              kvrt_json_put(o, "dtypes", dtypes) && kvrt_json_put(o, "ops", ops) &&
              kvrt_json_put(o, "available", json_boolean(in.available)) &&
              kvrt_json_put(o, "device_reason", kvrt_json_str(in.reason ? in.reason : "")) &&
              kvrt_json_put(o, "device_name", kvrt_json_str(in.device_name ? in.device_name : "")) &&
              kvrt_json_put(o, "device_type", kvrt_json_str(device_type_name(in.device_type))) &&
              kvrt_json_put(o, "memory", kvrt_json_str(memory_name(in.memory))) &&
              kvrt_json_put(o, "selectable", json_boolean(sel)) && kvrt_json_put(o, "reason", kvrt_json_str(reason)) &&
              kvrt_json_put(o, "default", json_boolean(default_name && strcmp(default_name, in.name) == 0));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int print_json(const kvrt_runtime *rt, const struct env_layout *env, const char *default_name)
{
    /* Every part is attached to root as soon as it exists, so one
     * json_decref(root) frees whatever was built when a step fails. */
    json_t *root = json_object(), *plugins = json_array(), *skipped = json_array(), *e = json_object();
    bool ok = root && kvrt_json_put(root, "plugins", plugins) && kvrt_json_put(root, "skipped", skipped) &&
              kvrt_json_put(root, "env", e);
    if (!root) {
        json_decref(plugins);
        json_decref(skipped);
        json_decref(e);
    }
    for (size_t i = 0; ok && i < kvrt_runtime_num_plugins(rt); i++) {
        json_t *p = plugin_json(rt, i, env, default_name);
        ok = p && json_array_append_new(plugins, p) == 0;
    }
    for (size_t i = 0; ok && i < kvrt_runtime_num_skipped(rt); i++) {
        const char *path = "", *reason = "";
        kvrt_runtime_skipped(rt, i, &path, &reason);
        json_t *s = json_object();
        ok = s && json_array_append_new(skipped, s) == 0 && kvrt_json_put(s, "path", kvrt_json_str(path)) &&
             kvrt_json_put(s, "reason", kvrt_json_str(reason));
    }
    ok = ok && kvrt_json_put(e, "name", kvrt_json_str(KVRT_LAYOUT_ENV)) &&
         kvrt_json_put(e, "value", env->value ? kvrt_json_str(env->value) : json_null()) &&
         kvrt_json_put(e, "valid", json_boolean(env->valid)) && kvrt_json_put(e, "error", kvrt_json_str(env->error));
    ok = ok && kvrt_json_put(root, "default_backend", default_name ? kvrt_json_str(default_name) : json_null());
    if (!ok) {
        json_decref(root);
        return cli_error(CLI_EXIT_INTERNAL, "plugins: could not build the JSON output (out of memory)");
    }
    return cli_json_print(root);
}

static void print_human(const kvrt_runtime *rt, const struct env_layout *env, const char *default_name)
{
    size_t n = kvrt_runtime_num_plugins(rt);
    printf("%zu plugin%s found", n, n == 1 ? "" : "s");
    char value[1024];
    if (env->value)
        printf("; %s=%s%s", KVRT_LAYOUT_ENV, cli_printable(env->value, value, sizeof(value)),
               env->valid ? "" : " (invalid)");
    printf("\n");
    for (size_t i = 0; i < n; i++) {
        struct kvrt_plugin_info in;
        char layouts[128], dtypes[128], reason[768];
        if (kvrt_runtime_plugin_info(rt, i, &in) != KVRT_OK)
            continue;
        layouts_text(&in, layouts, sizeof(layouts));
        dtypes_text(in.dtypes, dtypes, sizeof(dtypes));
        bool sel = selectable(rt, i, &in, env, reason, sizeof(reason));
        bool is_default = default_name && strcmp(default_name, in.name) == 0;
        char path[4 * 4096], version[256];
        printf("\n%s%s  %s\n", in.name, is_default ? " (default)" : "", cli_printable(in.path, path, sizeof(path)));
        printf("  version    %s, plugin ABI %u.%u\n", cli_printable(in.version, version, sizeof(version)), in.abi_major,
               in.abi_minor);
        printf("  layouts    %s\n", layouts);
        printf("  dtypes     %s\n", dtypes);
        if (in.available && in.device_name && in.device_name[0])
            printf("  device     available: %s, type %s\n", cli_printable(in.device_name, version, sizeof(version)),
                   device_type_name(in.device_type));
        else
            printf("  device     %s%s%s\n", in.available ? "available" : "not available", in.available ? "" : ": ",
                   in.available ? "" : in.reason);
        if (in.available)
            printf("  memory     %s (%s)\n", memory_name(in.memory), memory_consequence(in.memory));
        if (in.available && in.device_type == KVRT_DEVICE_TYPE_CPU && strcmp(in.name, "cpu") != 0)
            printf("  ranking    after \"cpu\": its device is the host CPU, which \"cpu\" drives natively\n");
        printf("  selectable %s%s%s\n", sel ? "yes" : "no", sel ? "" : ": ", reason);
    }
    size_t s = kvrt_runtime_num_skipped(rt);
    if (s)
        printf("\npassed over:\n");
    for (size_t i = 0; i < s; i++) {
        const char *path = "", *reason = "";
        kvrt_runtime_skipped(rt, i, &path, &reason);
        char shown[4 * 4096];
        printf("  %s: %s\n", cli_printable(path, shown, sizeof(shown)), reason);
    }
    if (env->value && !env->valid)
        printf("\nnote: %s\n", env->error);
}

static int plugins_run(int argc, char **argv)
{
    bool json = false, help;
    int parsed = cli_parse_options("plugins", argc, argv, plugins_tables, cli_apply_switch, &json, &help);
    if (parsed != CLI_EXIT_OK)
        return parsed;
    if (help) {
        plugins_help(stdout);
        return CLI_EXIT_OK;
    }
    struct env_layout env;
    read_env(&env);
    kvrt_runtime *rt = NULL;
    int rc = kvrt_runtime_open(NULL, &rt);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    /* Which backend binding would take: not an error when there is none. */
    const char *default_name = NULL;
    if (kvrt_runtime_default_backend(rt, &default_name) != KVRT_OK)
        default_name = NULL;
    int code = CLI_EXIT_OK;
    if (json)
        code = print_json(rt, &env, default_name);
    else
        print_human(rt, &env, default_name);
    kvrt_runtime_close(rt);
    return code;
}

const struct cli_command cli_plugins_command = {
    .name = "plugins",
    .summary = "list the backend plugins, their declarations and devices, and skipped files",
    .run = plugins_run,
    .help = plugins_help,
    .options = plugins_tables,
};
