/* The runtime's log (plugin layer): one line per report, control bytes
 * escaped, to the caller's callback or, without one, to stderr under
 * KVRT_DEBUG (1: warnings and errors, 2: everything).
 *
 * Layer 6 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "plugin_internal.h"
#include "settings_internal.h"

void kvrt_log(const struct kvrt_log *log, enum kvrt_log_level level, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    kvrt_vformat_line(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (log && log->fn) {
        log->fn(log->user, level, msg);
        return;
    }
    const char *debug = kvrt_setting_value(KVRT_SETTING_DEBUG, NULL, NULL);
    if (debug && *debug && (level <= KVRT_LOG_WARNING || strcmp(debug, "2") == 0))
        fprintf(stderr, "kvrt: %s: %s\n",
                level == KVRT_LOG_ERROR     ? "error"
                : level == KVRT_LOG_WARNING ? "warning"
                : level == KVRT_LOG_INFO    ? "info"
                                            : "debug",
                msg);
}
