/* The thread's error message, and the one escape rule for control bytes
 * that every message and quoted name goes through.
 *
 * Layer 1 of libkvrt (core/text/; CONTRIBUTING.md, "Where things live").
 */
#include <stdarg.h>
#include <stdbool.h>
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

/* The one escape rule of every message: a byte below 0x20 or 0x7f becomes
 * \n, \t, \r or \xNN; with `quoted`, '"' and '\' are escaped too, so a
 * value between quotes reads back exactly.  An escape that does not fit is
 * left out whole. */
static size_t escape(char *dst, size_t size, const char *src, bool quoted)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    if (!dst || size == 0)
        return 0;
    for (const unsigned char *p = (const unsigned char *)(src ? src : ""); *p; p++) {
        char esc[5];
        size_t len;
        if (quoted && (*p == '"' || *p == '\\')) {
            esc[0] = '\\';
            esc[1] = (char)*p;
            len = 2;
        } else if (*p >= 0x20 && *p != 0x7f) {
            esc[0] = (char)*p;
            len = 1;
        } else if (*p == '\n' || *p == '\t' || *p == '\r') {
            esc[0] = '\\';
            esc[1] = (char)(*p == '\n' ? 'n' : *p == '\t' ? 't' : 'r');
            len = 2;
        } else {
            esc[0] = '\\';
            esc[1] = 'x';
            esc[2] = hex[*p >> 4];
            esc[3] = hex[*p & 0xf];
            len = 4;
        }
        if (n + len >= size)
            break;
        memcpy(dst + n, esc, len);
        n += len;
    }
    dst[n] = '\0';
    return n;
}

size_t kvrt_escape_controls(char *dst, size_t size, const char *src)
{
    /* Messages are one line of text whatever a caller, a file or a plugin
     * put in them. */
    return escape(dst, size, src, false);
}

size_t kvrt_quote(char *dst, size_t size, const char *src)
{
    return escape(dst, size, src, true);
}

/* Every message goes through here: formatted, then escaped, so it is one
 * line whatever the arguments held. */
void kvrt_vformat_line(char *out, size_t size, const char *fmt, va_list ap)
{
    char raw[2048];
    vsnprintf(raw, sizeof(raw), fmt, ap);
    kvrt_escape_controls(out, size, raw);
}

static KVRT_PRINTF(1, 0) void error_vset(const char *fmt, va_list ap)
{
    kvrt_vformat_line(error_text, sizeof(error_text), fmt, ap);
}

void kvrt_error_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(fmt, ap);
    va_end(ap);
}

void kvrt_error_prefix(const char *fmt, ...)
{
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    kvrt_vformat_line(prefix, sizeof(prefix), fmt, ap);
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
    error_vset(fmt, ap);
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
