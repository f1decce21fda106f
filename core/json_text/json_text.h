/*
 * Text as a JSON string, for libkvrt's JSON answers and for the tool's:
 * invalid UTF-8 bytes become U+FFFD (jansson refuses them, which would lose
 * the whole output).  Built as its own static archive so both link the one
 * definition; it needs only jansson and the public kvrt_utf8_repair.
 */
#ifndef KVRT_CORE_JSON_TEXT_H
#define KVRT_CORE_JSON_TEXT_H

#include <stddef.h>

#include <jansson.h>

/* NULL text is JSON's null; NULL only when memory runs out. */
json_t *kvrt_json_str(const char *text);
json_t *kvrt_json_strn(const char *text, size_t len);

#endif
