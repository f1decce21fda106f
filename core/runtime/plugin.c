/*
 * The plugins a runtime found (plugin layer): discovery through the
 * loader, each descriptor validated and the first of a name kept; the lazy
 * probe and description of a plugin's device; a plugin function's failure
 * as a kvrt error.
 *
 * Layer 6 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "loader.h"
#include "plugin_internal.h"

static int add_skipped(void *ctx, const char *path, const char *reason)
{
    struct kvrt_plugins *set = ctx;
    struct kvrt_skipped_plugin *s = realloc(set->skipped, (set->num_skipped + 1) * sizeof(*set->skipped));
    if (!s)
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory recording skipped plugin %s", path);
    set->skipped = s;
    /* Reasons quote plugin text and dlerror(); keep them one line. */
    char line[2048];
    kvrt_escape_controls(line, sizeof(line), reason);
    s[set->num_skipped].path = strdup(path);
    s[set->num_skipped].reason = strdup(line);
    if (!s[set->num_skipped].path || !s[set->num_skipped].reason) {
        free(s[set->num_skipped].path);
        free(s[set->num_skipped].reason);
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory recording skipped plugin %s", path);
    }
    set->num_skipped++;
    kvrt_log(set->log, KVRT_LOG_WARNING, "plugin %s skipped: %s", path, line);
    return KVRT_OK;
}

struct kvrt_loaded_plugin *kvrt_plugins_find(const struct kvrt_plugins *set, const char *name)
{
    for (size_t i = 0; i < set->num_loaded; i++)
        if (strcmp(set->loaded[i].desc->name, name) == 0)
            return &set->loaded[i];
    return NULL;
}

/* A module the loader opened: its descriptor is checked field by field
 * before anything in it is trusted, and the first plugin of a name wins. */
static int admit(void *ctx, const char *path, void *handle, const struct kvrt_plugin_descriptor *d)
{
    struct kvrt_plugins *set = ctx;
    char why[1024];
    if (kvrt_plugin_validate(d, why, sizeof(why)) != KVRT_OK) {
        int status = add_skipped(set, path, why);
        return status == KVRT_OK ? KVRT_ERR_PLUGIN : status;
    }
    const struct kvrt_loaded_plugin *first = kvrt_plugins_find(set, d->name);
    if (first) {
        snprintf(why, sizeof(why),
                 "another plugin named \"%s\" was found first, at %s (the first in search order wins)", d->name,
                 first->path);
        int status = add_skipped(set, path, why);
        return status == KVRT_OK ? KVRT_ERR_PLUGIN : status;
    }
    struct kvrt_loaded_plugin *p = realloc(set->loaded, (set->num_loaded + 1) * sizeof(*set->loaded));
    if (!p)
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory loading plugin %s", path);
    set->loaded = p;
    p = &set->loaded[set->num_loaded];
    memset(p, 0, sizeof(*p));
    p->path = strdup(path);
    if (!p->path)
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory loading plugin %s", path);
    p->handle = handle;
    p->desc = d;
    set->num_loaded++;
    kvrt_log(set->log, KVRT_LOG_DEBUG, "plugin \"%s\" %s loaded from %s", d->name, d->version, path);
    return KVRT_OK;
}

static void note(void *ctx, const char *message)
{
    const struct kvrt_plugins *set = ctx;
    kvrt_log(set->log, KVRT_LOG_DEBUG, "%s", message);
}

int kvrt_plugins_discover(struct kvrt_plugins *set, const char *plugin_path, bool search_default_paths,
                          const struct kvrt_log *log)
{
    memset(set, 0, sizeof(*set));
    set->log = log;
    const struct kvrt_loader_client client = {.ctx = set, .module = admit, .skip = add_skipped, .note = note};
    return kvrt_loader_search(plugin_path, search_default_paths, &client);
}

void kvrt_plugins_release(struct kvrt_plugins *set)
{
    for (size_t i = 0; i < set->num_loaded; i++) {
        free(set->loaded[i].path);
        free(set->loaded[i].reason);
        free(set->loaded[i].bind_failure);
    }
    free(set->loaded);
    for (size_t i = 0; i < set->num_skipped; i++) {
        free(set->skipped[i].path);
        free(set->skipped[i].reason);
    }
    free(set->skipped);
    set->loaded = NULL;
    set->skipped = NULL;
    set->num_loaded = set->num_skipped = 0;
}

/* A description that fails or lies degrades to "unknown": it only informs
 * selection and messages, so a bad one must not cost the user the backend. */
static void describe_device(struct kvrt_loaded_plugin *p, const struct kvrt_log *log)
{
    struct kvrt_plugin_device_info *info = &p->device;
    memset(info, 0, sizeof(*info));
    const struct kvrt_plugin_descriptor *d = p->desc;
    if (!p->available || !KVRT_PLUGIN_HAS(d, describe) || !d->describe)
        return;
    info->size = sizeof(*info);
    kvrt_plugin_error err;
    err.message[0] = '\0';
    int status = d->describe(info, &err);
    err.message[sizeof(err.message) - 1] = '\0';
    info->name[sizeof(info->name) - 1] = '\0';
    bool bad = info->type < KVRT_DEVICE_TYPE_UNKNOWN || info->type > KVRT_DEVICE_TYPE_ACCELERATOR ||
               info->memory < KVRT_MEMORY_OPAQUE || info->memory > KVRT_MEMORY_ROCM;
    if (status != KVRT_OK || bad) {
        kvrt_log(log, KVRT_LOG_WARNING, "backend \"%s\": describe %s; device taken as unknown", d->name,
                 status != KVRT_OK ? (err.message[0] ? err.message : kvrt_status_name(status))
                                   : "returned an out-of-range type or memory kind");
        memset(info, 0, sizeof(*info));
    }
    for (char *c = info->name; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
}

void kvrt_plugin_probe(struct kvrt_loaded_plugin *p, const struct kvrt_log *log)
{
    if (p->probed)
        return;
    kvrt_plugin_error why;
    why.message[0] = '\0';
    int status = p->desc->probe(&why);
    why.message[sizeof(why.message) - 1] = '\0';
    p->available = status == KVRT_OK;
    if (!p->available && !why.message[0])
        snprintf(why.message, sizeof(why.message), "probe failed with %s", kvrt_status_name(status));
    char line[sizeof(why.message) * 4];
    kvrt_escape_controls(line, sizeof(line), p->available ? "" : why.message);
    p->reason = strdup(line);
    p->probed = true;
    describe_device(p, log);
    if (!p->available)
        kvrt_log(log, KVRT_LOG_INFO, "backend \"%s\" has no device: %s", p->desc->name, line);
}

int kvrt_plugin_status(const struct kvrt_loaded_plugin *p, int status, const kvrt_plugin_error *err, const char *op)
{
    if (status == KVRT_OK)
        return KVRT_OK;
    if (status > 0 || status < KVRT_ERR_INTERNAL)
        status = KVRT_ERR_PLUGIN;
    char msg[sizeof(err->message)];
    memcpy(msg, err->message, sizeof(msg));
    msg[sizeof(msg) - 1] = '\0';
    return kvrt_fail(status, "backend \"%s\": %s failed: %s", p->desc->name, op,
                     msg[0] ? msg : kvrt_status_name(status));
}
