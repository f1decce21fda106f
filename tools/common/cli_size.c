/* Byte sizes on the command line and in human output. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *suffix;
    uint64_t factor;
} units[] = {
    {"B", 1}, {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
};
#define NUM_UNITS (sizeof(units) / sizeof(units[0]))

bool cli_parse_size(const char *option, const char *text, uint64_t *out)
{
    const char *p = text;
    uint64_t whole = 0;
    bool digits = false, overflow = false;
    for (; *p >= '0' && *p <= '9'; p++, digits = true)
        overflow |=
            __builtin_mul_overflow(whole, 10, &whole) || __builtin_add_overflow(whole, (uint64_t)(*p - '0'), &whole);
    /* Fractions only make sense with a unit ("1.5GiB"); keep them exact to
     * the byte by working in millionths. */
    uint64_t frac = 0, scale = 1;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++, digits = true)
            if (scale < 1000000) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                scale *= 10;
            }
    }
    size_t u = 0;
    while (u < NUM_UNITS && strcmp(p, units[u].suffix) != 0)
        u++;
    if (*p == '\0')
        u = 0;
    if (!digits || u == NUM_UNITS || (scale > 1 && u == 0)) {
        cli_error(CLI_EXIT_USAGE,
                  "%s \"%s\" is not a size: give bytes (e.g. 1073741824) or a number "
                  "with KiB, MiB, GiB or TiB (e.g. 24GiB, 1.5GiB)",
                  option, text);
        return false;
    }
    uint64_t bytes;
    overflow |= __builtin_mul_overflow(whole, units[u].factor, &bytes);
    if (!overflow && scale > 1)
        overflow |= __builtin_add_overflow(bytes, (uint64_t)((long double)frac * units[u].factor / scale), &bytes);
    if (overflow || bytes > (uint64_t)INT64_MAX) {
        cli_error(CLI_EXIT_USAGE, "%s \"%s\" is too large: sizes go up to %" PRId64 " bytes", option, text, INT64_MAX);
        return false;
    }
    if (bytes == 0) {
        cli_error(CLI_EXIT_USAGE, "%s \"%s\" is zero: give a positive size", option, text);
        return false;
    }
    *out = bytes;
    return true;
}

void cli_format_bytes(uint64_t bytes, char *buf, size_t size)
{
    size_t u = NUM_UNITS - 1;
    while (u > 0 && bytes < units[u].factor)
        u--;
    if (u == 0)
        snprintf(buf, size, "%" PRIu64 " B", bytes);
    else if (bytes % units[u].factor == 0)
        snprintf(buf, size, "%" PRIu64 " %s", bytes / units[u].factor, units[u].suffix);
    else
        snprintf(buf, size, "%.2f %s", (double)bytes / (double)units[u].factor, units[u].suffix);
}
