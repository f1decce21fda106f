/* Reading typed fields of a model file, with messages that name the field
 * and the file and say what is valid.
 *
 * Layer 4 of libkvrt (core/models/; CONTRIBUTING.md, "Where things live").
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/common.h>

#include "error.h"
#include "model_internal.h"

int model_fail(const struct model_ctx *c, int status, const char *fmt, ...)
{
    /* The size of the message a model refusal has always had. */
    char msg[1024];
    int n = snprintf(msg, sizeof(msg), "%s: ", c->file);
    if (n >= 0 && (size_t)n < sizeof(msg)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
        va_end(ap);
    }
    /* Messages quote values from the file (field names, strings, jansson's
     * "near" text) and must stay one line: control bytes become spaces
     * here, for every message at once (found by fuzz-model). */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = ' ';
    return kvrt_fail(status, "%s", msg);
}

const char *model_json_type(const json_t *v)
{
    /* Callers describe a value they looked up; an absent key is NULL. */
    if (!v)
        return "missing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a fractional number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown JSON value";
}

static int read_u64(const struct model_ctx *c, const json_t *v, const char *where, const char *key, uint64_t min,
                    uint64_t max, uint64_t *out)
{
    /* Some configs write whole numbers as 4096.0; accept those, nothing else. */
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d >= (double)min && d <= (double)max && d == (double)(uint64_t)d) {
            *out = (uint64_t)d;
            return KVRT_OK;
        }
    } else if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i >= 0 && (uint64_t)i >= min && (uint64_t)i <= max) {
            *out = (uint64_t)i;
            return KVRT_OK;
        }
        return model_fail(c, KVRT_ERR_INVALID,
                          "\"%s%s\" is %lld; valid values are whole numbers from "
                          "%llu to %llu",
                          where, key, (long long)i, (unsigned long long)min, (unsigned long long)max);
    }
    return model_fail(c, KVRT_ERR_INVALID, "\"%s%s\" is %s; it must be a whole number from %llu to %llu", where, key,
                      model_json_type(v), (unsigned long long)min, (unsigned long long)max);
}

int model_get_u64(const struct model_ctx *c, const json_t *obj, const char *where, const char *key, uint64_t min,
                  uint64_t max, uint64_t *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return model_fail(c, KVRT_ERR_INVALID,
                          "the field \"%s%s\" is missing%s; it must be a whole "
                          "number from %llu to %llu",
                          where, key, v ? " (null)" : "", (unsigned long long)min, (unsigned long long)max);
    return read_u64(c, v, where, key, min, max, out);
}

int model_get_u64_opt(const struct model_ctx *c, const json_t *obj, const char *where, const char *key, uint64_t min,
                      uint64_t max, uint64_t *out, bool *found)
{
    const json_t *v = json_object_get(obj, key);
    *found = v && !json_is_null(v);
    return *found ? read_u64(c, v, where, key, min, max, out) : KVRT_OK;
}

int model_get_string_opt(const struct model_ctx *c, const json_t *obj, const char *where, const char *key,
                         const char **out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return KVRT_OK;
    if (!json_is_string(v))
        return model_fail(c, KVRT_ERR_INVALID, "\"%s%s\" is %s; it must be a string", where, key, model_json_type(v));
    return model_check_text(c, json_string_value(v), where, key, out);
}

int model_check_text(const struct model_ctx *c, const char *text, const char *where, const char *key, const char **out)
{
    /* Names and notes from the file are printed in tables and messages,
     * so they must be one line of text. */
    for (size_t i = 0; text[i]; i++)
        if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f)
            return model_fail(c, KVRT_ERR_INVALID,
                              "\"%s%s\" contains control character 0x%02x at "
                              "position %zu; names and notes must be one line of text",
                              where, key, (unsigned)(unsigned char)text[i], i);
    *out = text;
    return KVRT_OK;
}

int model_get_bool_opt(const struct model_ctx *c, const json_t *obj, const char *where, const char *key, bool *out,
                       bool *found)
{
    const json_t *v = json_object_get(obj, key);
    *found = v && !json_is_null(v);
    if (!*found)
        return KVRT_OK;
    if (!json_is_boolean(v))
        return model_fail(c, KVRT_ERR_INVALID, "\"%s%s\" is %s; it must be true or false", where, key,
                          model_json_type(v));
    *out = json_is_true(v);
    return KVRT_OK;
}

char *model_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}
