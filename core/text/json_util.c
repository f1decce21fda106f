/* The helpers the library's JSON answers are built with (json_util.h).
 *
 * Layer 1 of libkvrt (core/text/; CONTRIBUTING.md, "Where things live").
 */
#include <stdlib.h>
#include <string.h>

#include <kvrt/common.h>

#include "error.h"
#include "json_util.h"

json_t *kvrt_json_u64_array(const uint64_t *values, size_t n, const char *what)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        if (!kvrt_json_append(a, kvrt_json_u64(values[i], what))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *kvrt_json_int_array(const int *values, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        if (!kvrt_json_append(a, json_integer(values[i]))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}
