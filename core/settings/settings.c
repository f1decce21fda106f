/*
 * The settings libkvrt takes from the environment (kvrt/settings.h): the
 * one table of them and the one place each variable is read.
 *
 * Layer 2 of libkvrt (core/settings/; CONTRIBUTING.md, "Where things live").
 */
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include <kvrt/settings.h>

#include "error.h"
#include "settings_internal.h"

static const struct {
    const char *variable;
    /* Settings that choose which shared objects a process loads, or what
     * it tells about them, are not taken from the caller of a setuid or
     * setgid program. */
    bool secure;
    const char *summary;
} settings[KVRT_NUM_SETTINGS] = {
    [KVRT_SETTING_LAYOUT] = {KVRT_LAYOUT_ENV, false,
                             "a hard layout constraint (a layout name or alias); set but empty or misspelled "
                             "is an error"},
    [KVRT_SETTING_BACKEND] = {KVRT_BACKEND_ENV, false,
                              "the backend to bind when none is named; set but empty is an error"},
    [KVRT_SETTING_PLUGIN_PATH] = {KVRT_PLUGIN_PATH_ENV, true,
                                  "colon-separated plugin folders or files searched before the installed plugins "
                                  "(ignored by setuid programs)"},
    [KVRT_SETTING_ALLOW_INSECURE_PLUGINS] = {KVRT_ALLOW_INSECURE_PLUGINS_ENV, true,
                                             "1: load plugins from files or folders that other users can write "
                                             "(ignored by setuid programs)"},
    [KVRT_SETTING_DEBUG] = {KVRT_DEBUG_ENV, true,
                            "1: print warnings (skipped plugins, passed-over backends) on stderr; 2: every log "
                            "message (ignored by setuid programs)"},
    [KVRT_SETTING_PP_PARTITION] = {KVRT_PP_PARTITION_ENV, false,
                                   "pipeline stages' layer counts, comma-separated (kvrt_pp_layers; vLLM's "
                                   "VLLM_PP_LAYER_PARTITION)"},
};

static const char *const source_names[] = {
    [KVRT_SOURCE_DEFAULT] = "default",
    [KVRT_SOURCE_ENVIRONMENT] = "environment",
    [KVRT_SOURCE_ARGUMENT] = "argument",
};

static bool valid_setting(enum kvrt_setting setting)
{
    return (unsigned)setting < KVRT_NUM_SETTINGS;
}

static bool valid_source(enum kvrt_setting_source source)
{
    return (unsigned)source < sizeof(source_names) / sizeof(source_names[0]);
}

const char *kvrt_setting_variable(enum kvrt_setting setting)
{
    return valid_setting(setting) ? settings[setting].variable : NULL;
}

const char *kvrt_setting_summary(enum kvrt_setting setting)
{
    return valid_setting(setting) ? settings[setting].summary : NULL;
}

const char *kvrt_setting_source_name(enum kvrt_setting_source source)
{
    return valid_source(source) ? source_names[source] : NULL;
}

/* Like the OpenCL ICD and Vulkan loaders: a setuid/setgid program must not
 * let its caller pick which shared objects it loads. */
static const char *read_variable(enum kvrt_setting setting)
{
    const char *name = settings[setting].variable;
    if (!settings[setting].secure)
        return getenv(name);
#if defined(__GLIBC__) || defined(_GNU_SOURCE)
    return secure_getenv(name);
#else
    if (getuid() != geteuid() || getgid() != getegid())
        return NULL;
    return getenv(name);
#endif
}

const char *kvrt_setting_value(enum kvrt_setting setting, const char *argument, enum kvrt_setting_source *source)
{
    const char *value = argument;
    enum kvrt_setting_source from = KVRT_SOURCE_ARGUMENT;
    if (!value) {
        value = read_variable(setting);
        from = value ? KVRT_SOURCE_ENVIRONMENT : KVRT_SOURCE_DEFAULT;
    }
    if (source)
        *source = from;
    return value;
}

int kvrt_setting_get(enum kvrt_setting setting, const char *argument, const char **value,
                     enum kvrt_setting_source *source)
{
    if (!valid_setting(setting))
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_setting_get: setting %d is not one of the %d settings (0..%d)",
                         (int)setting, KVRT_NUM_SETTINGS, KVRT_NUM_SETTINGS - 1);
    const char *v = kvrt_setting_value(setting, argument, source);
    if (value)
        *value = v;
    return KVRT_OK;
}

const char *kvrt_setting_origin(enum kvrt_setting setting, enum kvrt_setting_source source, const char *argument_name)
{
    if (!valid_setting(setting) || !valid_source(source))
        return NULL;
    switch (source) {
    case KVRT_SOURCE_ARGUMENT: return argument_name ? argument_name : source_names[source];
    case KVRT_SOURCE_ENVIRONMENT: return settings[setting].variable;
    case KVRT_SOURCE_DEFAULT: break;
    }
    return source_names[KVRT_SOURCE_DEFAULT];
}
