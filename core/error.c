#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/version.h>

#include "error.h"

/* One message per thread: the same contract as dlerror(), so callers on
 * different threads never see each other's failures. */
static _Thread_local char error_text[2048];

const char *kvrt_error_message(void)
{
    return error_text;
}

void kvrt_clear_error(void)
{
    error_text[0] = '\0';
}

void kvrt_error_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_text, sizeof(error_text), fmt, ap);
    va_end(ap);
}

void kvrt_error_prefix(const char *fmt, ...)
{
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    /* Shift the old message right and put "<prefix>: " in front, keeping
     * as much of the old text as fits. */
    size_t pl = strlen(prefix) + 2;
    size_t old = strlen(error_text);
    if (pl + old >= sizeof(error_text))
        old = sizeof(error_text) - 1 - pl;
    memmove(error_text + pl, error_text, old);
    error_text[pl + old] = '\0';
    memcpy(error_text, prefix, pl - 2);
    memcpy(error_text + pl - 2, ": ", 2);
}

int kvrt_error_report(int status, const char *fmt, ...)
{
    if (!fmt) {
        error_text[0] = '\0';
        return status;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_text, sizeof(error_text), fmt, ap);
    va_end(ap);
    return status;
}

const char *kvrt_status_name(int status)
{
    switch (status) {
    case KVRT_OK: return "KVRT_OK";
    case KVRT_ERR_INVALID: return "KVRT_ERR_INVALID";
    case KVRT_ERR_OVERFLOW: return "KVRT_ERR_OVERFLOW";
    case KVRT_ERR_NOMEM: return "KVRT_ERR_NOMEM";
    case KVRT_ERR_REFUSED: return "KVRT_ERR_REFUSED";
    case KVRT_ERR_NODEV: return "KVRT_ERR_NODEV";
    case KVRT_ERR_STATE: return "KVRT_ERR_STATE";
    case KVRT_ERR_DEVICE: return "KVRT_ERR_DEVICE";
    case KVRT_ERR_UNSUPPORTED: return "KVRT_ERR_UNSUPPORTED";
    case KVRT_ERR_PLUGIN: return "KVRT_ERR_PLUGIN";
    case KVRT_ERR_INTERNAL: return "KVRT_ERR_INTERNAL";
    default: return "KVRT_ERR_UNKNOWN";
    }
}

void kvrt_free(void *ptr)
{
    free(ptr);
}

const char *kvrt_version(void)
{
    return KVRT_VERSION_STRING;
}
