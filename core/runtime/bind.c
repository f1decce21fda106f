/* Binding a backend to a runtime: the plugin chosen by name, layout and
 * priority, and the demotions noted on the way.
 *
 * Layer 8 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "layout_internal.h"
#include "priority.h"
#include "runtime_internal.h"
#include "settings_internal.h"

static int bind_plugin(kvrt_runtime *rt, struct kvrt_loaded_plugin *p, enum kvrt_layout layout, kvrt_backend **out);

static bool emulates_cpu(const struct kvrt_loaded_plugin *p)
{
    return strcmp(p->desc->name, "cpu") != 0 && p->available && p->device.type == KVRT_DEVICE_TYPE_CPU;
}

static size_t rank_of(const struct kvrt_loaded_plugin *p)
{
    return kvrt_priority_rank(p->desc->name, emulates_cpu(p));
}

/* Plugin indices in priority order (stable for equal ranks: search order).
 * Ranking needs each device's type, so every plugin is probed; the caller
 * holds rt->lock. */
static size_t *priority_order(kvrt_runtime *rt)
{
    /* Every plugin has a rank below kvrt_priority_num_ranks(), so each entry
     * is written below; zeroed all the same, as an analyser cannot see it. */
    size_t *order = calloc(rt->plugins.num_loaded + 1, sizeof(*order));
    if (!order)
        return NULL;
    for (size_t i = 0; i < rt->plugins.num_loaded; i++)
        kvrt_plugin_probe(&rt->plugins.loaded[i], &rt->log);
    size_t n = 0;
    for (size_t rank = 0; rank < kvrt_priority_num_ranks(); rank++)
        for (size_t i = 0; i < rt->plugins.num_loaded; i++)
            if (rank_of(&rt->plugins.loaded[i]) == rank)
                order[n++] = i;
    return order;
}

/* Why a CPU-device backend was passed over in favour of the native one;
 * recorded so that `kvrt run` and `kvrt explain` can say it. */
static void note_demotions(kvrt_runtime *rt, const struct kvrt_loaded_plugin *chosen)
{
    if (strcmp(chosen->desc->name, "cpu") != 0)
        return;
    for (size_t i = 0; i < rt->plugins.num_loaded; i++) {
        const struct kvrt_loaded_plugin *p = &rt->plugins.loaded[i];
        /* Said once per runtime, however often the choice is made. */
        if (emulates_cpu(p) && !kvrt_trace_has(&rt->trace, KVRT_TRACE_PREFERRED, p->desc->name, NULL))
            kvrt_trace_add(&rt->trace, KVRT_TRACE_PREFERRED, KVRT_TRACE_NO_LAYOUT, p->desc->name,
                           "backend \"cpu\" over \"%s\", whose device (%s) is the host CPU that \"cpu\" drives "
                           "natively; set %s=%s to use it",
                           p->desc->name, p->device.name[0] ? p->device.name : "CPU", KVRT_BACKEND_ENV, p->desc->name);
    }
}

/* The backend `name` or else KVRT_BACKEND names; *out NULL when neither
 * does, which leaves the choice to kvrt.  KVRT_BACKEND set but empty is an
 * error (as for VLLM_KV_CACHE_LAYOUT), never the same as unset. */
static int named_backend(const kvrt_runtime *rt, const char *name, const char **out, enum kvrt_setting_source *source)
{
    const char *v = kvrt_setting_value(KVRT_SETTING_BACKEND, name, source);
    *out = v;
    if (v && !*v && !name) {
        char names[512];
        size_t len = 0;
        names[0] = '\0';
        for (size_t i = 0; i < rt->plugins.num_loaded && len < sizeof(names); i++) {
            int n = snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "", rt->plugins.loaded[i].desc->name);
            if (n < 0)
                break;
            len += (size_t)n;
        }
        return kvrt_fail(KVRT_ERR_INVALID,
                         "%s is set but empty; name a backend (%s) or unset it to use the "
                         "first available one",
                         KVRT_BACKEND_ENV, rt->plugins.num_loaded ? names : "none found");
    }
    return KVRT_OK;
}

/* Layouts a backend is taken at when kvrt tries whether it binds at all:
 * the one resolution would most likely choose for it alone. */
static enum kvrt_layout trial_layout(const struct kvrt_plugin_descriptor *d)
{
    const char *v = kvrt_setting_value(KVRT_SETTING_LAYOUT, NULL, NULL);
    enum kvrt_layout env;
    if (v && kvrt_layout_parse(v, &env) == KVRT_OK && kvrt_plugin_declares(d, env))
        return env;
    if (!(d->flags & KVRT_PLUGIN_ANY_LAYOUT) && d->num_layouts > 0)
        return (enum kvrt_layout)d->layouts[0];
    return kvrt_layout_default();
}

/* Record a backend passed over, in the trace and the log.  A bind failure
 * is worth a warning (the backend has a device and was expected to work);
 * the other reasons are routine.  A step already in the trace with the same
 * text is not repeated: choosing the default and then binding without a
 * name pass over the same failed backend twice. */
static void pass_over(kvrt_runtime *rt, const struct kvrt_loaded_plugin *p, enum kvrt_layout layout, const char *why,
                      enum kvrt_log_level level)
{
    if (kvrt_trace_has(&rt->trace, KVRT_TRACE_PASSED_OVER, p->desc->name, why))
        return;
    char head[128];
    snprintf(head, sizeof(head), "passed over backend \"%s\"", p->desc->name);
    kvrt_trace_add_headed(&rt->trace, KVRT_TRACE_PASSED_OVER, (int32_t)layout, p->desc->name, head, "%s", why);
    kvrt_log(&rt->log, level, "passed over backend \"%s\": %s", p->desc->name, why);
}

/* Whether the plugin binds at all, found out once: a binding that exists
 * proves it; otherwise it is bound at its trial layout and the binding kept
 * (spare) for the next kvrt_runtime_bind to hand out.  Called with
 * rt->lock held; false leaves the reason in p->bind_failure. */
static bool binds(kvrt_runtime *rt, struct kvrt_loaded_plugin *p)
{
    if (p->bind_failure)
        return false;
    for (size_t i = 0; i < rt->num_backends; i++)
        if (rt->backends[i]->plugin == p)
            return true;
    enum kvrt_layout layout = trial_layout(p->desc);
    kvrt_backend *b = NULL;
    if (bind_plugin(rt, p, layout, &b) == KVRT_OK) {
        b->spare = true;
        return true;
    }
    if (!p->bind_failure)
        return false; /* out of memory in the core, not the plugin's fault */
    pass_over(rt, p, layout, p->bind_failure, KVRT_LOG_WARNING);
    return false;
}

/* "\"cuda\": no device: ...; \"x\": failed to bind ...", in priority order. */
static void reasons_text(const kvrt_runtime *rt, const size_t *order, struct kvrt_strbuf *out)
{
    for (size_t k = 0; k < rt->plugins.num_loaded; k++) {
        const struct kvrt_loaded_plugin *p = &rt->plugins.loaded[order[k]];
        if (!p->available)
            kvrt_strbuf_appendf(out, "%s\"%s\": no device: %s", out->len ? "; " : "", p->desc->name,
                                p->reason ? p->reason : "unknown");
        else if (p->bind_failure)
            kvrt_strbuf_appendf(out, "%s\"%s\": %s", out->len ? "; " : "", p->desc->name, p->bind_failure);
    }
}

static int choose_backend(const kvrt_runtime *crt, const char *fn, const char *given, const char **name,
                          enum kvrt_setting_source *source)
{
    if (!crt || !name)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: NULL argument", fn);
    kvrt_runtime *rt = (kvrt_runtime *)crt;
    const char *named = NULL;
    enum kvrt_setting_source from = KVRT_SOURCE_DEFAULT;
    int named_status = named_backend(rt, given, &named, &from);
    if (named_status != KVRT_OK)
        return named_status;
    if (source)
        *source = from;
    if (named) {
        size_t i;
        int status = kvrt_runtime_find_plugin(rt, named, &i);
        if (status != KVRT_OK)
            return from == KVRT_SOURCE_ENVIRONMENT ? kvrt_fail_context(status, "%s=%s", KVRT_BACKEND_ENV, named)
                                                   : status;
        *name = rt->plugins.loaded[i].desc->name;
        return KVRT_OK;
    }
    pthread_mutex_lock(&rt->lock);
    size_t *order = priority_order(rt);
    if (!order) {
        pthread_mutex_unlock(&rt->lock);
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory");
    }
    /* As the OpenCL ICD and Vulkan loaders treat a failing driver: a
     * backend with a device whose bind fails is passed over, with its
     * reason, and the next one is taken. */
    for (size_t k = 0; k < rt->plugins.num_loaded; k++) {
        struct kvrt_loaded_plugin *p = &rt->plugins.loaded[order[k]];
        if (p->available && binds(rt, p)) {
            note_demotions(rt, p);
            *name = p->desc->name;
            pthread_mutex_unlock(&rt->lock);
            free(order);
            kvrt_clear_error();
            return KVRT_OK;
        }
    }
    struct kvrt_strbuf why = {0};
    reasons_text(rt, order, &why);
    pthread_mutex_unlock(&rt->lock);
    free(order);
    int status =
        kvrt_fail(KVRT_ERR_NODEV, "no backend can be used: %s (%zu plugins found; run `kvrt plugins` to see each one)",
                  rt->plugins.num_loaded ? kvrt_strbuf_str(&why) : "no plugins were found", rt->plugins.num_loaded);
    kvrt_strbuf_free(&why);
    return status;
}

int kvrt_runtime_default_backend(const kvrt_runtime *rt, const char **name)
{
    return choose_backend(rt, "kvrt_runtime_default_backend", NULL, name, NULL);
}

int kvrt_runtime_choose_backend(const kvrt_runtime *rt, const char *name, const char **out,
                                enum kvrt_setting_source *source)
{
    return choose_backend(rt, "kvrt_runtime_choose_backend", name, out, source);
}

/* The layers' shapes: given as groups, else as the mixed-shapes flag. */
struct shapes_given {
    const struct kvrt_group *groups;
    size_t num_groups;
    bool mixed;
};

static int resolve_for(kvrt_runtime *rt, const char *fn, const char *const *backends, size_t num_backends,
                       const struct shapes_given *shapes, const char *preference, enum kvrt_layout *out)
{
    if (!rt || !out || (num_backends && !backends))
        return kvrt_fail(KVRT_ERR_INVALID, "%s: NULL argument", fn);
    const char *fallback[1];
    if (num_backends == 0) {
        int status = kvrt_runtime_default_backend(rt, &fallback[0]);
        if (status != KVRT_OK)
            return status;
        backends = fallback;
        num_backends = 1;
    }
    kvrt_resolver *r;
    int status = kvrt_resolver_create(&r);
    if (status != KVRT_OK)
        return status;
    for (size_t i = 0; i < num_backends && status == KVRT_OK; i++) {
        size_t idx;
        status = kvrt_runtime_find_plugin(rt, backends[i], &idx);
        if (status != KVRT_OK)
            break;
        const struct kvrt_plugin_descriptor *d = rt->plugins.loaded[idx].desc;
        if (d->flags & KVRT_PLUGIN_ANY_LAYOUT) {
            status = kvrt_resolver_declare_any(r, d->name);
        } else {
            enum kvrt_layout list[KVRT_NUM_LAYOUTS];
            for (uint32_t k = 0; k < d->num_layouts; k++)
                list[k] = (enum kvrt_layout)d->layouts[k];
            status = kvrt_resolver_declare(r, d->name, list, d->num_layouts);
        }
    }
    if (status == KVRT_OK)
        status = shapes->groups ? kvrt_resolver_set_groups(r, shapes->groups, shapes->num_groups)
                                : kvrt_resolver_set_mixed_shapes(r, shapes->mixed);
    if (status == KVRT_OK && preference)
        status = kvrt_resolver_set_preference(r, preference, "caller");
    enum kvrt_layout chosen = KVRT_LAYOUT_LBNHC;
    if (status == KVRT_OK)
        status = kvrt_resolver_resolve(r, &chosen);

    pthread_mutex_lock(&rt->lock);
    kvrt_trace_append(&rt->trace, kvrt_resolver_steps(r));
    if (status == KVRT_OK) {
        if (rt->has_record && rt->record != chosen) {
            status = kvrt_fail(KVRT_ERR_STATE,
                               "the KV-cache layout was already resolved to %s for this runtime; "
                               "a later resolution chose %s, and a recorded layout cannot change "
                               "(use one runtime per cache configuration)",
                               kvrt_layout_name(rt->record), kvrt_layout_name(chosen));
            kvrt_trace_add(&rt->trace, KVRT_TRACE_REFUSED, (int32_t)chosen, NULL, "layout already recorded as %s",
                           kvrt_layout_name(rt->record));
        } else if (!rt->has_record) {
            rt->has_record = true;
            rt->record = chosen;
            kvrt_trace_add(&rt->trace, KVRT_TRACE_RECORDED, (int32_t)chosen, NULL, "%s", kvrt_layout_name(chosen));
        }
    }
    pthread_mutex_unlock(&rt->lock);
    kvrt_resolver_destroy(r);
    if (status == KVRT_OK)
        *out = chosen;
    return status;
}

int kvrt_runtime_resolve(kvrt_runtime *rt, const char *const *backends, size_t num_backends, bool mixed_shapes,
                         const char *preference, enum kvrt_layout *out)
{
    const struct shapes_given shapes = {NULL, 0, mixed_shapes};
    return resolve_for(rt, "kvrt_runtime_resolve", backends, num_backends, &shapes, preference, out);
}

int kvrt_runtime_resolve_groups(kvrt_runtime *rt, const char *const *backends, size_t num_backends,
                                const struct kvrt_group *groups, size_t num_groups, const char *preference,
                                enum kvrt_layout *out)
{
    if (!groups)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_runtime_resolve_groups: groups is NULL");
    const struct shapes_given shapes = {groups, num_groups, false};
    return resolve_for(rt, "kvrt_runtime_resolve_groups", backends, num_backends, &shapes, preference, out);
}

static void host_log(void *user, int level, const char *message)
{
    kvrt_backend *b = user;
    if (level < KVRT_LOG_ERROR || level > KVRT_LOG_DEBUG)
        level = KVRT_LOG_DEBUG;
    kvrt_log(b->log, (enum kvrt_log_level)level, "backend \"%s\": %s", b->plugin->desc->name, message ? message : "");
}

/* A spare binding of p (kept when kvrt found out whether p binds): handed
 * out when it has the layout asked for, else unbound, since p has now
 * proved that it binds.  Called with rt->lock held. */
static kvrt_backend *take_spare(kvrt_runtime *rt, const struct kvrt_loaded_plugin *p, enum kvrt_layout layout)
{
    for (size_t i = 0; i < rt->num_backends; i++) {
        kvrt_backend *b = rt->backends[i];
        if (b->plugin != p || !b->spare)
            continue;
        if (b->layout == layout) {
            b->spare = false;
            return b;
        }
        for (size_t k = i + 1; k < rt->num_backends; k++)
            rt->backends[k - 1] = rt->backends[k];
        rt->num_backends--;
        p->desc->unbind(b->dev);
        free(b);
        return NULL;
    }
    return NULL;
}

/* Called with rt->lock held.  A failure of the plugin's bind is kept in
 * p->bind_failure, which passes p over when kvrt chooses a backend. */
static int bind_plugin(kvrt_runtime *rt, struct kvrt_loaded_plugin *p, enum kvrt_layout layout, kvrt_backend **out)
{
    kvrt_backend *spare = take_spare(rt, p, layout);
    if (spare) {
        *out = spare;
        return KVRT_OK;
    }
    /* An array of pointers, so sizeof(*grown) is right; clang-tidy 14 flags
     * every sizeof of a pointer to a struct and has no option to tell. */
    /* NOLINTNEXTLINE(bugprone-sizeof-expression) */
    kvrt_backend **grown = realloc(rt->backends, (rt->num_backends + 1) * sizeof(*grown));
    if (!grown)
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory binding backend \"%s\"", p->desc->name);
    rt->backends = grown;
    kvrt_backend *b = calloc(1, sizeof(*b));
    if (!b)
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory binding backend \"%s\"", p->desc->name);
    b->rt = rt;
    b->lock = &rt->lock;
    b->log = &rt->log;
    b->plugin = p;
    b->layout = layout;
    b->host.size = sizeof(b->host);
    b->host.user = b;
    b->host.log = host_log;
    struct kvrt_plugin_bind_info info = {.size = sizeof(info), .layout = (int32_t)layout, .host = &b->host};
    kvrt_plugin_error err;
    err.message[0] = '\0';
    int status = p->desc->bind(&info, &b->dev, &err);
    err.message[sizeof(err.message) - 1] = '\0';
    if (status != KVRT_OK) {
        free(b);
        if (status > 0 || status < KVRT_ERR_INTERNAL)
            status = KVRT_ERR_PLUGIN;
        char why[sizeof(err.message) * 4];
        kvrt_escape_controls(why, sizeof(why), err.message[0] ? err.message : kvrt_status_name(status));
        char failure[sizeof(why) + 64];
        snprintf(failure, sizeof(failure), "failed to bind layout %s: %s", kvrt_layout_name(layout), why);
        free(p->bind_failure);
        p->bind_failure = strdup(failure);
        return kvrt_fail(status, "backend \"%s\" failed to bind layout %s: %s", p->desc->name, kvrt_layout_name(layout),
                         why);
    }
    free(p->bind_failure);
    p->bind_failure = NULL;
    rt->backends[rt->num_backends++] = b;
    *out = b;
    return KVRT_OK;
}

static int refuse_layout(const struct kvrt_plugin_descriptor *d, const char *spelled, enum kvrt_layout layout)
{
    char layouts[128];
    kvrt_plugin_layouts_text(d, layouts, sizeof(layouts));
    char as[96] = "";
    if (strcmp(spelled, kvrt_layout_name(layout)) != 0)
        snprintf(as, sizeof(as), " (%s)", kvrt_layout_name(layout));
    return kvrt_fail(KVRT_ERR_REFUSED,
                     "layout \"%s\"%s is not supported by backend \"%s\", which declares: %s; "
                     "ask for one of those, or choose another backend",
                     spelled, as, d->name, layouts);
}

/* Bind `layout`, which the user spelled `layout_name` (an alias or the
 * canonical name): messages say it as spelled. */
static int bind_as(kvrt_runtime *rt, const char *backend, enum kvrt_layout layout, const char *layout_name,
                   kvrt_backend **out)
{
    int status;
    if (!backend) {
        status = named_backend(rt, NULL, &backend, NULL);
        if (status != KVRT_OK)
            return status;
    }

    if (backend) {
        size_t i;
        status = kvrt_runtime_find_plugin(rt, backend, &i);
        if (status != KVRT_OK)
            return status;
        struct kvrt_loaded_plugin *p = &rt->plugins.loaded[i];
        /* The refusal happens here, from the declaration alone: no plugin
         * function has run yet. */
        if (!kvrt_plugin_declares(p->desc, layout))
            return refuse_layout(p->desc, layout_name, layout);
        pthread_mutex_lock(&rt->lock);
        kvrt_plugin_probe(p, &rt->log);
        if (!p->available) {
            status = kvrt_fail(KVRT_ERR_NODEV, "backend \"%s\" has no usable device: %s", p->desc->name,
                               p->reason ? p->reason : "unknown reason");
        } else {
            status = bind_plugin(rt, p, layout, out);
            if (status == KVRT_OK)
                kvrt_trace_add(&rt->trace, KVRT_TRACE_BOUND, (int32_t)layout, p->desc->name,
                               "backend \"%s\" (requested) with layout %s", p->desc->name, kvrt_layout_name(layout));
        }
        pthread_mutex_unlock(&rt->lock);
        return status;
    }

    pthread_mutex_lock(&rt->lock);
    size_t *order = priority_order(rt);
    if (!order) {
        pthread_mutex_unlock(&rt->lock);
        return kvrt_fail(KVRT_ERR_NOMEM, "out of memory");
    }
    struct kvrt_strbuf passed = {0};
    status = KVRT_ERR_NODEV;
    for (size_t k = 0; k < rt->plugins.num_loaded && status != KVRT_OK; k++) {
        struct kvrt_loaded_plugin *p = &rt->plugins.loaded[order[k]];
        char why[768];
        enum kvrt_log_level level = KVRT_LOG_INFO;
        if (!kvrt_plugin_declares(p->desc, layout)) {
            char layouts[128];
            kvrt_plugin_layouts_text(p->desc, layouts, sizeof(layouts));
            snprintf(why, sizeof(why), "does not declare %s (declares: %s)", kvrt_layout_name(layout), layouts);
        } else if (!p->available) {
            snprintf(why, sizeof(why), "no device: %s", p->reason ? p->reason : "unknown");
        } else {
            /* A backend whose bind failed once is not asked again when
             * kvrt chooses; naming it calls its bind again. */
            if (!p->bind_failure) {
                status = bind_plugin(rt, p, layout, out);
                if (status == KVRT_OK) {
                    note_demotions(rt, p);
                    kvrt_trace_add(&rt->trace, KVRT_TRACE_BOUND, (int32_t)layout, p->desc->name,
                                   "backend \"%s\" (first available in priority order %s) with layout %s",
                                   p->desc->name, kvrt_runtime_backend_priority(), kvrt_layout_name(layout));
                    break;
                }
                status = KVRT_ERR_NODEV;
            }
            snprintf(why, sizeof(why), "%s", p->bind_failure ? p->bind_failure : kvrt_error_message());
            level = KVRT_LOG_WARNING;
        }
        kvrt_strbuf_appendf(&passed, "%s\"%s\": %s", passed.len ? "; " : "", p->desc->name, why);
        pass_over(rt, p, layout, why, level);
    }
    pthread_mutex_unlock(&rt->lock);
    free(order);
    if (status != KVRT_OK)
        status = kvrt_fail(KVRT_ERR_NODEV, "no backend can take layout \"%s\": %s", layout_name,
                           rt->plugins.num_loaded ? kvrt_strbuf_str(&passed)
                                                  : "no plugins were found (set KVRT_PLUGIN_PATH or install kvrt)");
    kvrt_strbuf_free(&passed);
    return status;
}

int kvrt_runtime_bind(kvrt_runtime *rt, const char *backend, const char *layout_name, kvrt_backend **out)
{
    if (!rt || !layout_name || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_runtime_bind: NULL argument");
    *out = NULL;
    enum kvrt_layout layout;
    int status = kvrt_layout_parse(layout_name, &layout);
    if (status != KVRT_OK)
        return status;
    return bind_as(rt, backend, layout, layout_name, out);
}

int kvrt_runtime_bind_layout(kvrt_runtime *rt, const char *backend, enum kvrt_layout layout, kvrt_backend **out)
{
    if (!rt || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_runtime_bind_layout: NULL argument");
    *out = NULL;
    if (!kvrt_layout_valid((int)layout))
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_runtime_bind_layout: layout value %d is not one of %s", (int)layout,
                         kvrt_layout_values_text());
    return bind_as(rt, backend, layout, kvrt_layout_name(layout), out);
}

const char *kvrt_backend_name(const kvrt_backend *b)
{
    return b ? b->plugin->desc->name : NULL;
}

enum kvrt_layout kvrt_backend_layout(const kvrt_backend *b)
{
    return b ? b->layout : KVRT_LAYOUT_LBNHC;
}

bool kvrt_backend_supports_dtype(const kvrt_backend *b, enum kvrt_dtype dtype)
{
    return b && kvrt_plugin_supports_dtype(b->plugin->desc, dtype);
}

uint32_t kvrt_backend_ops(const kvrt_backend *b)
{
    return b ? b->plugin->desc->ops : 0;
}

int kvrt_backend_copy_bandwidth(kvrt_backend *b, uint64_t bytes, double *bytes_per_second)
{
    if (!b || !bytes_per_second)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_backend_copy_bandwidth: NULL argument");
    *bytes_per_second = 0;
    if (bytes == 0)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_backend_copy_bandwidth: bytes is 0; give the copy size");
    const struct kvrt_plugin_descriptor *d = b->plugin->desc;
    if (!KVRT_PLUGIN_HAS(d, measure_copy) || !d->measure_copy)
        return kvrt_fail(KVRT_ERR_UNSUPPORTED,
                         "kvrt_backend_copy_bandwidth: backend \"%s\" does not measure its copy bandwidth", d->name);
    kvrt_plugin_error err;
    err.message[0] = '\0';
    int status = d->measure_copy(b->dev, bytes, bytes_per_second, &err);
    return kvrt_plugin_status(b->plugin, status, &err, "measure_copy");
}

int kvrt_backend_device_info(const kvrt_backend *b, struct kvrt_device_info *out)
{
    if (!b || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_backend_device_info: NULL argument");
    memset(out, 0, sizeof(*out));
    const struct kvrt_plugin_device_info *d = &b->plugin->device;
    out->type = (enum kvrt_device_type)d->type;
    out->memory = (enum kvrt_memory_kind)d->memory;
    out->device_id = d->device_id;
    memcpy(out->name, d->name, sizeof(out->name));
    out->name[sizeof(out->name) - 1] = '\0';
    return KVRT_OK;
}
