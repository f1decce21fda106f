/*
 * A library's log lines: formatted, control bytes escaped, to the callback
 * or stderr (log.h).
 *
 * Base of libkvrt-xfer and libkvrt-store: below every layer of both.
 */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

void base_log(const struct base_log *log, const char *lib, enum kvrt_log_level level, const char *fmt, ...)
{
    /* an escaped byte takes at most four (\xNN): the line never cuts the
     * message short */
    char raw[1024], line[4 * sizeof(raw)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    kvrt_escape_controls(line, sizeof(line), raw);
    if (log && log->fn) {
        log->fn(log->user, level, line);
        return;
    }
    if (level <= KVRT_LOG_WARNING)
        fprintf(stderr, "%s: %s: %s\n", lib, level == KVRT_LOG_ERROR ? "error" : "warning", line);
}
