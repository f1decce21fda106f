/*
 * Names and valid sets written once in libkvrt: every spelling a valid-names
 * list gives parses back (canonical names first, in enum order), nothing
 * else does, and a refusal quotes the value and lists the valid names.
 */
#include <stdio.h>
#include <string.h>

#include <kvrt/kvrt.h>

#include "tap.h"

typedef int (*parse_fn)(const char *name, int *out);
typedef const char *(*name_fn)(int value);

static int kind_parse(const char *name, int *out)
{
    enum kvrt_spec_kind k;
    int rc = kvrt_spec_kind_parse(name, &k);
    *out = (int)k;
    return rc;
}

static const char *kind_name(int v)
{
    return kvrt_spec_kind_name((enum kvrt_spec_kind)v);
}

static int dtype_parse(const char *name, int *out)
{
    enum kvrt_dtype d;
    int rc = kvrt_dtype_parse(name, &d);
    *out = (int)d;
    return rc;
}

static const char *dtype_name(int v)
{
    return kvrt_dtype_name((enum kvrt_dtype)v);
}

/* Each item of `list` parses; the first `count` are name(0..count-1). */
static void check_list(const char *what, const char *list, parse_fn parse, name_fn name)
{
    int count = 0;
    while (name(count))
        count++;
    char copy[256];
    snprintf(copy, sizeof(copy), "%s", list);
    bool ok = count > 0;
    int i = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save), i++) {
        int v = -1;
        if (parse(tok, &v) != KVRT_OK || !name(v) || (i < count && (v != i || strcmp(name(v), tok) != 0))) {
            tap_diag("  \"%s\" (item %d) parses to %d", tok, i, v);
            ok = false;
        }
    }
    tap_ok(ok && i >= count, "%s: the %d names of \"%s\" parse back, canonical first in enum order", what, i, list);
}

static void check_refusal(const char *what, int rc, const char *value, const char *list)
{
    const char *msg = kvrt_error_message();
    if (!tap_ok(rc == KVRT_ERR_INVALID && strstr(msg, value) && strstr(msg, list),
                "%s: refused with the value and the valid names", what))
        tap_diag("  got %s: %s", kvrt_status_name(rc), msg);
}

int main(void)
{
    tap_plan_dynamic();
    int v;
    check_list("spec kinds", kvrt_spec_kind_valid_names(), kind_parse, kind_name);
    check_refusal("spec kind \"Attention\"", kind_parse("Attention", &v), "\"Attention\"",
                  kvrt_spec_kind_valid_names());
    check_refusal("spec kind NULL", kind_parse(NULL, &v), "NULL", kvrt_spec_kind_valid_names());
    struct kvrt_spec s;
    kvrt_spec_default(&s);
    s.kind = (enum kvrt_spec_kind)7;
    struct kvrt_spec_info info;
    check_refusal("spec kind value 7", kvrt_spec_derive(&s, 0, &info), "kind 7", "2 (state)");

    check_list("element types", kvrt_dtype_valid_names(), dtype_parse, dtype_name);
    check_refusal("dtype \"fp64\"", dtype_parse("fp64", &v), "\"fp64\"", kvrt_dtype_valid_names());

    bool distinct = true;
    for (int t = 0; kvrt_device_type_name((enum kvrt_device_type)t); t++)
        for (int u = 0; u < t; u++)
            distinct = distinct && strcmp(kvrt_device_type_name((enum kvrt_device_type)t),
                                          kvrt_device_type_name((enum kvrt_device_type)u)) != 0;
    tap_ok(distinct && strcmp(kvrt_device_type_name(KVRT_DEVICE_TYPE_CPU), "cpu") == 0 &&
               kvrt_device_type_name((enum kvrt_device_type)(KVRT_DEVICE_TYPE_ACCELERATOR + 1)) == NULL,
           "device types: one distinct name per value, NULL past the last");
    distinct = true;
    for (int m = 0; kvrt_memory_kind_name((enum kvrt_memory_kind)m); m++)
        for (int u = 0; u < m; u++)
            distinct = distinct && strcmp(kvrt_memory_kind_name((enum kvrt_memory_kind)m),
                                          kvrt_memory_kind_name((enum kvrt_memory_kind)u)) != 0;
    tap_ok(distinct && strcmp(kvrt_memory_kind_name(KVRT_MEMORY_HOST), "host") == 0 &&
               kvrt_memory_kind_name((enum kvrt_memory_kind)(KVRT_MEMORY_ROCM + 1)) == NULL,
           "memory kinds: one distinct name per value, NULL past the last");
    return tap_done();
}
