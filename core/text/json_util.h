/*
 * Internal: what the library's JSON answers are built with (jansson, which
 * no public header exposes).  Each helper returns NULL when the value
 * cannot be built; a number past JSON's integers also sets the message.
 *
 * Layer 1 of libkvrt (core/text/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_JSON_UTIL_H
#define KVRT_CORE_JSON_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "json_text/json_text.h"

/* Sizes as a JSON array of kvrt_json_u64 (json_text.h); `what` names them
 * in the refusal. */
json_t *kvrt_json_u64_array(const uint64_t *values, size_t n, const char *what);
json_t *kvrt_json_int_array(const int *values, size_t n);

/* Text as a JSON string (names and paths hold any bytes), a size as a JSON
 * integer, kvrt_json_put, kvrt_json_append and kvrt_json_dump: json_text.h. */

#endif
