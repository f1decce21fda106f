/*
 * kvrt — the settings libkvrt takes from the environment.
 *
 * Each environment variable is read in one place, libkvrt, and every
 * answer says where its value came from: the caller's argument, the
 * environment, or libkvrt's default.  Tools and bindings print that answer
 * instead of reading the variable again.
 */
#ifndef KVRT_SETTINGS_H
#define KVRT_SETTINGS_H

#include <kvrt/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The environment variables, by the names the other headers have always
 * given them (kvrt/layout.h, kvrt/runtime.h include this one). */
#define KVRT_LAYOUT_ENV "VLLM_KV_CACHE_LAYOUT"
#define KVRT_BACKEND_ENV "KVRT_BACKEND"
#define KVRT_PLUGIN_PATH_ENV "KVRT_PLUGIN_PATH"
#define KVRT_ALLOW_INSECURE_PLUGINS_ENV "KVRT_ALLOW_INSECURE_PLUGINS"
#define KVRT_DEBUG_ENV "KVRT_DEBUG"
#define KVRT_PP_PARTITION_ENV "VLLM_PP_LAYER_PARTITION"

/* The settings, in the order help texts list them; values are part of the ABI. */
enum kvrt_setting {
    KVRT_SETTING_LAYOUT = 0,                 /* VLLM_KV_CACHE_LAYOUT */
    KVRT_SETTING_BACKEND = 1,                /* KVRT_BACKEND */
    KVRT_SETTING_PLUGIN_PATH = 2,            /* KVRT_PLUGIN_PATH */
    KVRT_SETTING_ALLOW_INSECURE_PLUGINS = 3, /* KVRT_ALLOW_INSECURE_PLUGINS */
    KVRT_SETTING_DEBUG = 4,                  /* KVRT_DEBUG */
    KVRT_SETTING_PP_PARTITION = 5,           /* VLLM_PP_LAYER_PARTITION */
};
#define KVRT_NUM_SETTINGS 6

/* Where a setting's value came from; values are part of the ABI. */
enum kvrt_setting_source {
    KVRT_SOURCE_DEFAULT = 0,     /* neither given nor set: libkvrt's default */
    KVRT_SOURCE_ENVIRONMENT = 1, /* the setting's environment variable */
    KVRT_SOURCE_ARGUMENT = 2,    /* the caller passed it */
};

/** The environment variable of a setting ("VLLM_KV_CACHE_LAYOUT"); NULL
 *  for another value. */
KVRT_API const char *kvrt_setting_variable(enum kvrt_setting setting);

/** What the setting decides, in a few words for help texts ("the hard
 *  layout constraint"); NULL for another value. */
KVRT_API const char *kvrt_setting_summary(enum kvrt_setting setting);

/** "default", "environment" or "argument"; NULL for another value. */
KVRT_API const char *kvrt_setting_source_name(enum kvrt_setting_source source);

/**
 * The value a setting has for one call: `argument` when not NULL (source
 * ARGUMENT), else the environment variable when it is set, the empty
 * string included (ENVIRONMENT), else none (DEFAULT, *value NULL).  The
 * plugin settings (path, insecure plugins, debug) are never read in a
 * setuid or setgid process, as the OpenCL ICD and Vulkan loaders do.  The
 * value is as spelled, unchecked: the call that uses it checks it.  It
 * stays valid until the environment changes (or, as `argument`, while the
 * caller keeps it).  value and source may each be NULL.
 * @return KVRT_OK; KVRT_ERR_INVALID for a value outside enum kvrt_setting.
 */
KVRT_API int kvrt_setting_get(enum kvrt_setting setting, const char *argument, const char **value,
                              enum kvrt_setting_source *source);

/**
 * Where a value came from, as output says it: for ARGUMENT the caller's
 * name of its argument (`argument_name`, such as "--layout"; "argument"
 * when NULL), for ENVIRONMENT the variable, for DEFAULT "default".  The
 * string is argument_name itself or static.  NULL for values outside the
 * enums.
 */
KVRT_API const char *kvrt_setting_origin(enum kvrt_setting setting, enum kvrt_setting_source source,
                                         const char *argument_name);

#ifdef __cplusplus
}
#endif
#endif
