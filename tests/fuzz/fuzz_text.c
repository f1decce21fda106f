/*
 * fuzz-text: arbitrary bytes through every place that makes text safe to
 * print: the core's message setter (kvrt_escape_controls, kvrt_error_set),
 * the tool's table cells (cli_printable, over the public kvrt_escape_controls) and its JSON strings
 * (kvrt_json_strn).
 *
 * The first byte picks a buffer size.  Escaped text must end inside its
 * buffer, hold no control byte and write nothing past it; the error message
 * must be one line; the JSON string must always be built, equal the input
 * when the input is well-formed UTF-8, and be well-formed UTF-8 itself.
 */
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "error.h"
#include "fuzz.h"

#define CANARY 0x5a

static bool printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return false;
    return true;
}

static void check_escape(const char *text, size_t size, bool core)
{
    char out[1024 + 16];
    memset(out, CANARY, sizeof(out));
    if (core)
        kvrt_escape_controls(out, size, text);
    else
        cli_printable(text, out, size);
    FUZZ_CHECK(memchr(out, '\0', size) != NULL, "%s escape is not terminated inside %zu bytes", core ? "core" : "cli",
               size);
    for (size_t i = size; i < sizeof(out); i++)
        FUZZ_CHECK((unsigned char)out[i] == CANARY, "%s escape wrote byte %zu of %zu", core ? "core" : "cli", i, size);
    FUZZ_CHECK(printable(out), "%s escape left a control byte", core ? "core" : "cli");
    /* Nothing lost when it fits: unescaped text is a prefix of the input. */
    if (strlen(text) * 4 < size && !strchr(text, '\\'))
        for (size_t i = 0, o = 0; text[i]; i++) {
            const unsigned char c = (unsigned char)text[i];
            if (c >= 0x20 && c != 0x7f) {
                FUZZ_CHECK(out[o] == text[i], "escape changed a printable byte at %zu", i);
                o++;
            } else {
                FUZZ_CHECK(out[o] == '\\', "control byte 0x%02x at %zu not escaped", c, i);
                o += (c == '\n' || c == '\t' || c == '\r') ? 2 : 4;
            }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 1000)
        return 0;
    const size_t buf = 1 + data[0] * 4u;
    const char *bytes = (const char *)data + 1;
    const size_t len = size - 1;
    char text[1001];
    memcpy(text, bytes, len);
    text[len] = '\0';

    check_escape(text, buf, true);
    check_escape(text, buf, false);

    kvrt_error_set("prefix %s", text);
    kvrt_error_prefix("context %.40s", text);
    FUZZ_CHECK(printable(kvrt_error_message()), "kvrt_error_message() holds a control byte");

    json_t *s = kvrt_json_strn(bytes, len);
    FUZZ_CHECK(s != NULL, "kvrt_json_strn refused %zu bytes", len);
    json_t *exact = json_stringn(bytes, len);
    if (exact)
        FUZZ_CHECK(json_string_length(s) == len && memcmp(json_string_value(s), bytes, len) == 0,
                   "well-formed UTF-8 was changed");
    else
        FUZZ_CHECK(json_string_length(s) > 0 && json_string_length(s) <= 3 * len, "replacement length %zu for %zu",
                   json_string_length(s), len);
    /* jansson builds strings only from well-formed UTF-8: a round trip
     * proves the result is. */
    json_t *again = json_stringn(json_string_value(s), json_string_length(s));
    FUZZ_CHECK(again != NULL, "kvrt_json_strn produced text that is not UTF-8");
    json_decref(again);
    json_decref(exact);
    json_decref(s);
    return 0;
}
