/* The agent's log lines: control bytes escaped (a peer's words may be in
 * them), one line each.
 *
 * Layer 0 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

void xfer_log(const struct xfer_log *log, enum kvrt_log_level level, const char *fmt, ...)
{
    char raw[1024], line[2048];
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
        fprintf(stderr, "kvrt-xfer: %s: %s\n", level == KVRT_LOG_ERROR ? "error" : "warning", line);
}
