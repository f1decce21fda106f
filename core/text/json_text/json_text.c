/* Any bytes as a JSON string, a size as a JSON integer, and adding values
 * that may have failed to build (json_text.h).
 *
 * Layer 1 of libkvrt (core/text/; CONTRIBUTING.md, "Where things live").
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/common.h>

#include "json_text.h"

json_t *kvrt_json_strn(const char *text, size_t len)
{
    /* Each bad byte becomes U+FFFD: the text stays readable and the rest
     * of the output is kept. */
    size_t need = kvrt_utf8_repair(NULL, 0, text, len);
    if (need == len)
        return json_stringn(text, len);
    char *fixed = malloc(need + 1);
    if (!fixed)
        return NULL;
    kvrt_utf8_repair(fixed, need + 1, text, len);
    json_t *s = json_stringn(fixed, need);
    free(fixed);
    return s;
}

#if JSON_INTEGER_IS_LONG_LONG
#define JSON_INT_MAX LLONG_MAX
#else
#define JSON_INT_MAX LONG_MAX
#endif

json_t *kvrt_json_u64(uint64_t value, const char *what)
{
    /* jansson integers are signed 64-bit; a larger size must not wrap into a
     * negative number that a consumer would trust. */
    if (value > (uint64_t)JSON_INT_MAX) {
        kvrt_error_report(KVRT_ERR_OVERFLOW,
                          "%s %llu exceeds the largest JSON integer %lld; use smaller numbers or the "
                          "human-readable output",
                          what, (unsigned long long)value, (long long)JSON_INT_MAX);
        return NULL;
    }
    return json_integer((json_int_t)value);
}

json_t *kvrt_json_str(const char *text)
{
    return text ? kvrt_json_strn(text, strlen(text)) : json_null();
}

bool kvrt_json_put(json_t *obj, const char *key, json_t *value)
{
    if (!obj || !value) {
        json_decref(value);
        return false;
    }
    return json_object_set_new(obj, key, value) == 0;
}

bool kvrt_json_append(json_t *array, json_t *value)
{
    if (!array || !value) {
        json_decref(value);
        return false;
    }
    return json_array_append_new(array, value) == 0;
}

int kvrt_json_dump(json_t *root, const char *what, char **out)
{
    if (!root) {
        /* Only a number past JSON's integers sets a message; anything else
         * is memory running out. */
        return kvrt_error_message()[0] ? KVRT_ERR_OVERFLOW
                                       : kvrt_error_report(KVRT_ERR_NOMEM, "out of memory building %s", what);
    }
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text)
        return kvrt_error_report(KVRT_ERR_NOMEM, "out of memory writing %s", what);
    kvrt_error_report(KVRT_OK, NULL);
    *out = text;
    return KVRT_OK;
}
