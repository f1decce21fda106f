/*
 * What libkvrt's JSON answers, the tool's and libkvrt-store's (through
 * base/) are all built with, as its own static archive so all link the one
 * definition (it needs only
 * jansson and the public kvrt_utf8_repair and kvrt_error_report): text as
 * a JSON string, whose invalid UTF-8 bytes become U+FFFD (jansson refuses
 * them, which would lose the whole output), a size as a JSON integer,
 * adding a value that may have failed to build, and the finished text.
 *
 * Layer 1 of libkvrt (core/text/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_JSON_TEXT_H
#define KVRT_CORE_JSON_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* NULL text is JSON's null; NULL only when memory runs out. */
json_t *kvrt_json_str(const char *text);
json_t *kvrt_json_strn(const char *text, size_t len);

/* A size as a JSON integer; jansson's are signed 64-bit, and a larger size
 * must not wrap into a negative number a consumer would trust: NULL then,
 * with the thread's message (kvrt_error_message) naming `what`. */
json_t *kvrt_json_u64(uint64_t value, const char *what);

/* json_object_set_new / json_array_append_new that report whether `value`
 * could be built (and release it when it could not be added). */
bool kvrt_json_put(json_t *obj, const char *key, json_t *value);
bool kvrt_json_append(json_t *array, json_t *value);

/* The text of `root` (released) for the caller to kvrt_free, indented by
 * two and in insertion order, as the tool prints JSON.  A NULL root is the
 * failure of building it: KVRT_ERR_OVERFLOW when a number set the message,
 * else KVRT_ERR_NOMEM naming `what`. */
int kvrt_json_dump(json_t *root, const char *what, char **out);

#endif
