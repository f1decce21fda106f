/* The runtime: its options, opening it with its plugins, their info, and
 * the runtime's JSON.
 *
 * Layer 8 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "json_reports.h"
#include "json_util.h"
#include "reserved.h"
#include "runtime_internal.h"
#include "settings_internal.h"

void kvrt_runtime_options_default(struct kvrt_runtime_options *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof(*options));
    options->search_default_paths = true;
}

int kvrt_runtime_open(const struct kvrt_runtime_options *options, kvrt_runtime **out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_runtime_open: out is NULL");
    *out = NULL;
    if (options) {
        int rc = kvrt_check_reserved(options->reserved, sizeof(options->reserved), "kvrt_runtime_options");
        if (rc != KVRT_OK)
            return rc;
    }
    kvrt_runtime *rt = calloc(1, sizeof(*rt));
    if (!rt)
        return kvrt_fail(KVRT_ERR_NOMEM, "kvrt_runtime_open: out of memory");
    if (options)
        rt->options = *options;
    else
        kvrt_runtime_options_default(&rt->options);
    if (pthread_mutex_init(&rt->lock, NULL) != 0) {
        free(rt);
        return kvrt_fail(KVRT_ERR_INTERNAL, "kvrt_runtime_open: pthread_mutex_init failed");
    }
    rt->log = (struct kvrt_log){rt->options.log, rt->options.log_user};
    int status =
        kvrt_plugins_discover(&rt->plugins, rt->options.plugin_path, rt->options.search_default_paths, &rt->log);
    if (status != KVRT_OK) {
        kvrt_runtime_close(rt);
        return status;
    }
    kvrt_clear_error();
    *out = rt;
    return KVRT_OK;
}

size_t kvrt_runtime_num_plugins(const kvrt_runtime *rt)
{
    return rt ? rt->plugins.num_loaded : 0;
}

int kvrt_runtime_plugin_info(const kvrt_runtime *crt, size_t i, struct kvrt_plugin_info *out)
{
    if (!crt || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_runtime_plugin_info: NULL argument");
    if (i >= crt->plugins.num_loaded)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_runtime_plugin_info: index %zu out of range (%zu plugins)", i,
                         crt->plugins.num_loaded);
    /* Probing is lazy and cached; the runtime stays logically const. */
    kvrt_runtime *rt = (kvrt_runtime *)crt;
    struct kvrt_loaded_plugin *p = &rt->plugins.loaded[i];
    pthread_mutex_lock(&rt->lock);
    kvrt_plugin_probe(p, &rt->log);
    pthread_mutex_unlock(&rt->lock);
    const struct kvrt_plugin_descriptor *d = p->desc;
    memset(out, 0, sizeof(*out));
    out->name = d->name;
    out->path = p->path;
    out->version = d->version;
    out->description = d->description ? d->description : "";
    out->abi_major = d->abi_major;
    out->abi_minor = d->abi_minor;
    out->any_layout = d->flags & KVRT_PLUGIN_ANY_LAYOUT;
    out->num_layouts = d->num_layouts;
    for (uint32_t k = 0; k < d->num_layouts; k++)
        out->layouts[k] = (enum kvrt_layout)d->layouts[k];
    out->dtypes = d->dtypes;
    out->ops = d->ops;
    out->available = p->available;
    out->reason = p->reason ? p->reason : "out of memory";
    out->device_type = (enum kvrt_device_type)p->device.type;
    out->memory = (enum kvrt_memory_kind)p->device.memory;
    out->device_name = p->device.name;
    out->decode_dtypes = (d->ops & KVRT_OP_DECODE) ? kvrt_plugin_decode_dtypes(d) : 0;
    out->import_alignment = kvrt_plugin_imports(d) ? (uint32_t)d->import_alignment : 0;
    return KVRT_OK;
}

static void names_text(const kvrt_runtime *rt, char *out, size_t size)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < rt->plugins.num_loaded && len < size; i++) {
        int n = snprintf(out + len, size - len, "%s%s", i ? ", " : "", rt->plugins.loaded[i].desc->name);
        if (n < 0)
            break;
        len += (size_t)n;
    }
    if (rt->plugins.num_loaded == 0)
        snprintf(out, size, "none found");
}

int kvrt_runtime_find_plugin(const kvrt_runtime *rt, const char *name, size_t *index)
{
    if (!rt || !name)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_runtime_find_plugin: NULL argument");
    for (size_t i = 0; i < rt->plugins.num_loaded; i++) {
        if (strcmp(rt->plugins.loaded[i].desc->name, name) == 0) {
            if (index)
                *index = i;
            return KVRT_OK;
        }
    }
    /* A file kvrt-<name>.so that was passed over explains itself better than
     * the list of the plugins that were not. */
    char file[128];
    snprintf(file, sizeof(file), "kvrt-%s.so", name);
    for (size_t i = 0; i < rt->plugins.num_skipped; i++) {
        const char *path = rt->plugins.skipped[i].path, *slash = strrchr(path, '/');
        if (strcmp(slash ? slash + 1 : path, file) == 0)
            return kvrt_fail(KVRT_ERR_NODEV, "backend \"%s\" was passed over: %s: %s", name, path,
                             rt->plugins.skipped[i].reason);
    }
    char names[512];
    names_text(rt, names, sizeof(names));
    const char *path = kvrt_setting_value(KVRT_SETTING_PLUGIN_PATH, NULL, NULL);
    return kvrt_fail(KVRT_ERR_NODEV, "no backend named \"%s\" (available plugins: %s; search path: %s=%s)", name, names,
                     KVRT_PLUGIN_PATH_ENV, path ? path : "(unset)");
}

bool kvrt_runtime_plugin_admits(const kvrt_runtime *rt, size_t i, enum kvrt_layout layout)
{
    if (!rt || i >= rt->plugins.num_loaded || !kvrt_layout_valid((int)layout))
        return false;
    return kvrt_plugin_declares(rt->plugins.loaded[i].desc, layout);
}

size_t kvrt_runtime_num_skipped(const kvrt_runtime *rt)
{
    return rt ? rt->plugins.num_skipped : 0;
}

int kvrt_runtime_skipped(const kvrt_runtime *rt, size_t i, const char **path, const char **reason)
{
    if (!rt || i >= rt->plugins.num_skipped)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_runtime_skipped: index %zu out of range (%zu skipped)", i,
                         rt ? rt->plugins.num_skipped : 0);
    if (path)
        *path = rt->plugins.skipped[i].path;
    if (reason)
        *reason = rt->plugins.skipped[i].reason;
    return KVRT_OK;
}

const char *kvrt_runtime_trace(const kvrt_runtime *rt)
{
    return rt ? kvrt_trace_text(&rt->trace) : "";
}

size_t kvrt_runtime_num_trace_steps(const kvrt_runtime *crt)
{
    if (!crt)
        return 0;
    /* The lock guards the trace; the runtime stays logically const. */
    kvrt_runtime *rt = (kvrt_runtime *)crt;
    pthread_mutex_lock(&rt->lock);
    size_t n = rt->trace.count;
    pthread_mutex_unlock(&rt->lock);
    return n;
}

int kvrt_runtime_trace_json(const kvrt_runtime *crt, char **out)
{
    if (!crt || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_runtime_trace_json: runtime and out must not be NULL");
    kvrt_runtime *rt = (kvrt_runtime *)crt;
    pthread_mutex_lock(&rt->lock);
    json_t *steps = kvrt_json_trace_steps(&rt->trace);
    pthread_mutex_unlock(&rt->lock);
    return kvrt_json_dump(steps, "the runtime's trace", out);
}

int kvrt_runtime_trace_step(const kvrt_runtime *crt, size_t i, struct kvrt_trace_step *out)
{
    if (!crt || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_runtime_trace_step: runtime and out must not be NULL");
    kvrt_runtime *rt = (kvrt_runtime *)crt;
    pthread_mutex_lock(&rt->lock);
    int status = kvrt_trace_get(&rt->trace, i, out, "kvrt_runtime_trace_step");
    pthread_mutex_unlock(&rt->lock);
    return status;
}
