/*
 * kvrt CPU backend — error and log messages.
 */
#include <stdarg.h>
#include <stdio.h>

#include "device.h"

int cpu_fail(kvrt_plugin_error *err, int status, const char *fmt, ...)
{
    if (err) {
        int n = snprintf(err->message, sizeof(err->message), "cpu: ");
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message + n, sizeof(err->message) - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return status;
}

void cpu_log(const kvrt_plugin_device *dev, int level, const char *fmt, ...)
{
    if (!dev || !dev->log)
        return;
    char text[512];
    int n = snprintf(text, sizeof(text), "cpu: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text + n, sizeof(text) - (size_t)n, fmt, ap);
    va_end(ap);
    dev->log(dev->log_user, level, text);
}
