/*
 * The settings libkvrt reads from the environment (kvrt/settings.h): one
 * table, each variable read through kvrt_setting_get, every answer saying
 * where its value came from; and the layout chosen from them
 * (kvrt_layout_choose), which the tool and the Python package print.
 */
#include <stdlib.h>
#include <string.h>

#include <kvrt/kvrt.h>

#include "tap.h"

static void check_table(void)
{
    static const char *const variables[KVRT_NUM_SETTINGS] = {
        [KVRT_SETTING_LAYOUT] = KVRT_LAYOUT_ENV,
        [KVRT_SETTING_BACKEND] = KVRT_BACKEND_ENV,
        [KVRT_SETTING_PLUGIN_PATH] = KVRT_PLUGIN_PATH_ENV,
        [KVRT_SETTING_ALLOW_INSECURE_PLUGINS] = KVRT_ALLOW_INSECURE_PLUGINS_ENV,
        [KVRT_SETTING_DEBUG] = KVRT_DEBUG_ENV,
        [KVRT_SETTING_PP_PARTITION] = KVRT_PP_PARTITION_ENV,
    };
    bool named = true;
    for (int s = 0; s < KVRT_NUM_SETTINGS; s++) {
        const char *v = kvrt_setting_variable((enum kvrt_setting)s), *sum = kvrt_setting_summary((enum kvrt_setting)s);
        if (!v || strcmp(v, variables[s]) != 0 || !sum || !*sum) {
            tap_diag("  setting %d: variable %s, summary %s", s, v ? v : "(null)", sum ? sum : "(null)");
            named = false;
        }
    }
    tap_ok(named, "every setting has its variable (the header's macro) and a summary");
    tap_ok(!kvrt_setting_variable((enum kvrt_setting)KVRT_NUM_SETTINGS) &&
               !kvrt_setting_summary((enum kvrt_setting) - 1),
           "a value outside the enum has no variable or summary");
    tap_ok(strcmp(kvrt_setting_source_name(KVRT_SOURCE_DEFAULT), "default") == 0 &&
               strcmp(kvrt_setting_source_name(KVRT_SOURCE_ENVIRONMENT), "environment") == 0 &&
               strcmp(kvrt_setting_source_name(KVRT_SOURCE_ARGUMENT), "argument") == 0 &&
               !kvrt_setting_source_name((enum kvrt_setting_source)3),
           "source names: default, environment, argument; none for another value");
}

static void check_get(void)
{
    const char *value = "x";
    enum kvrt_setting_source source = KVRT_SOURCE_ARGUMENT;
    unsetenv(KVRT_BACKEND_ENV);
    tap_ok(kvrt_setting_get(KVRT_SETTING_BACKEND, NULL, &value, &source) == KVRT_OK && !value &&
               source == KVRT_SOURCE_DEFAULT,
           "unset, no argument: no value, source default");
    setenv(KVRT_BACKEND_ENV, "cpu", 1);
    tap_ok(kvrt_setting_get(KVRT_SETTING_BACKEND, NULL, &value, &source) == KVRT_OK && value &&
               strcmp(value, "cpu") == 0 && source == KVRT_SOURCE_ENVIRONMENT,
           "set: the variable's value, source environment");
    tap_ok(kvrt_setting_get(KVRT_SETTING_BACKEND, "opencl", &value, &source) == KVRT_OK && value &&
               strcmp(value, "opencl") == 0 && source == KVRT_SOURCE_ARGUMENT,
           "an argument wins over the environment, source argument");
    setenv(KVRT_BACKEND_ENV, "", 1);
    tap_ok(kvrt_setting_get(KVRT_SETTING_BACKEND, NULL, &value, &source) == KVRT_OK && value && !*value &&
               source == KVRT_SOURCE_ENVIRONMENT,
           "set but empty is set: the empty value, source environment (the user of it refuses it)");
    unsetenv(KVRT_BACKEND_ENV);
    tap_ok(kvrt_setting_get(KVRT_SETTING_DEBUG, NULL, NULL, NULL) == KVRT_OK, "value and source may be NULL");
    int rc = kvrt_setting_get((enum kvrt_setting)7, NULL, &value, &source);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "setting 7") && strstr(kvrt_error_message(), "0..5"),
           "an unknown setting: KVRT_ERR_INVALID naming the value and the valid range (%s)", kvrt_error_message());

    tap_ok(strcmp(kvrt_setting_origin(KVRT_SETTING_LAYOUT, KVRT_SOURCE_ARGUMENT, "--layout"), "--layout") == 0 &&
               strcmp(kvrt_setting_origin(KVRT_SETTING_LAYOUT, KVRT_SOURCE_ARGUMENT, NULL), "argument") == 0 &&
               strcmp(kvrt_setting_origin(KVRT_SETTING_LAYOUT, KVRT_SOURCE_ENVIRONMENT, "--layout"), KVRT_LAYOUT_ENV) ==
                   0 &&
               strcmp(kvrt_setting_origin(KVRT_SETTING_BACKEND, KVRT_SOURCE_DEFAULT, "--backend"), "default") == 0 &&
               !kvrt_setting_origin((enum kvrt_setting)9, KVRT_SOURCE_DEFAULT, NULL) &&
               !kvrt_setting_origin(KVRT_SETTING_DEBUG, (enum kvrt_setting_source)5, NULL),
           "origin words: the argument's name, the variable, or \"default\"");
}

static void check_layout_choice(void)
{
    enum kvrt_layout l = KVRT_LAYOUT_BHLNC;
    enum kvrt_setting_source source = KVRT_SOURCE_ARGUMENT;
    unsetenv(KVRT_LAYOUT_ENV);
    tap_ok(kvrt_layout_choose(NULL, &l, &source) == KVRT_OK && l == kvrt_layout_default() &&
               source == KVRT_SOURCE_DEFAULT,
           "nothing given or set: kvrt_layout_default(), source default");
    setenv(KVRT_LAYOUT_ENV, "HND", 1);
    tap_ok(kvrt_layout_choose(NULL, &l, &source) == KVRT_OK && l == KVRT_LAYOUT_LBHNC &&
               source == KVRT_SOURCE_ENVIRONMENT,
           "%s=HND: LBHNC, source environment", KVRT_LAYOUT_ENV);
    tap_ok(kvrt_layout_choose("BLNHC", &l, &source) == KVRT_OK && l == KVRT_LAYOUT_BLNHC &&
               source == KVRT_SOURCE_ARGUMENT,
           "a name given wins over the environment, source argument");
    tap_ok(kvrt_layout_choose("NHD", &l, NULL) == KVRT_OK && l == KVRT_LAYOUT_LBNHC,
           "aliases parse; source may be NULL");
    int rc = kvrt_layout_choose("nhd", &l, &source);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "\"nhd\"") && strstr(kvrt_error_message(), "LBNHC") &&
               !strstr(kvrt_error_message(), KVRT_LAYOUT_ENV),
           "a bad name given: refused quoting it with the valid names, not blaming the variable");
    setenv(KVRT_LAYOUT_ENV, "HNDX", 1);
    rc = kvrt_layout_choose(NULL, &l, &source);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), KVRT_LAYOUT_ENV) &&
               strstr(kvrt_error_message(), "\"HNDX\"") && strstr(kvrt_error_message(), "LBHNC"),
           "a bad variable: refused naming it, quoting the value, listing the valid names (%s)", kvrt_error_message());
    unsetenv(KVRT_LAYOUT_ENV);
    tap_ok(kvrt_layout_choose(NULL, NULL, &source) == KVRT_ERR_INVALID &&
               strstr(kvrt_error_message(), "kvrt_layout_choose"),
           "NULL out: KVRT_ERR_INVALID naming the function");
}

int main(void)
{
    tap_plan_dynamic();
    check_table();
    check_get();
    check_layout_choice();
    return tap_done();
}
