/*
 * Transfer methods: their names, written once (kvrt/xfer.h).
 *
 * Layer 5 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "plan.h"

/* The enum values index this table. */
static const char *const method_names[] = {
    [KVRT_XFER_AUTO] = "auto",
    [KVRT_XFER_REGIONS] = "regions",
    [KVRT_XFER_DIRECT] = "direct",
    [KVRT_XFER_STAGING] = "staging",
};
#define NUM_METHODS (sizeof(method_names) / sizeof(method_names[0]))

static char names_text[64], values_text[96];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void write_names(void)
{
    size_t n = 0, v = 0;
    for (size_t i = 0; i < NUM_METHODS; i++) {
        n += (size_t)snprintf(names_text + n, sizeof(names_text) - n, "%s%s", i ? ", " : "", method_names[i]);
        v +=
            (size_t)snprintf(values_text + v, sizeof(values_text) - v, "%s%zu (%s)", i ? ", " : "", i, method_names[i]);
    }
}

const char *kvrt_xfer_method_name(enum kvrt_xfer_method method)
{
    return (unsigned)method < NUM_METHODS ? method_names[method] : NULL;
}

const char *kvrt_xfer_method_valid_names(void)
{
    pthread_once(&names_once, write_names);
    return names_text;
}

const char *xfer_method_values(void)
{
    pthread_once(&names_once, write_names);
    return values_text;
}

int kvrt_xfer_method_parse(const char *name, enum kvrt_xfer_method *out)
{
    if (!out)
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt_xfer_method_parse: out is NULL");
    for (size_t i = 0; name && i < NUM_METHODS; i++) {
        if (strcmp(name, method_names[i]) == 0) {
            *out = (enum kvrt_xfer_method)i;
            return KVRT_OK;
        }
    }
    char quoted[128] = "NULL";
    if (name)
        kvrt_escape_controls(quoted, sizeof(quoted), name);
    return BASE_FAIL(KVRT_ERR_INVALID, "%s%s%s is not a transfer method; valid methods (exact, case-sensitive) are %s",
                     name ? "\"" : "", quoted, name ? "\"" : "", kvrt_xfer_method_valid_names());
}
