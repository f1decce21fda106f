/* A growing string for messages and reports.
 *
 * Layer 1 of libkvrt (core/text/; CONTRIBUTING.md, "Where things live").
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "strbuf.h"

bool kvrt_strbuf_appendf(struct kvrt_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return false;
    size_t need = sb->len + (size_t)n + 1;
    if (need > sb->cap) {
        size_t cap = sb->cap ? sb->cap : 256;
        while (cap < need)
            cap *= 2;
        char *p = realloc(sb->data, cap);
        if (!p)
            return false;
        sb->data = p;
        sb->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(sb->data + sb->len, sb->cap - sb->len, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
    return true;
}

const char *kvrt_strbuf_str(const struct kvrt_strbuf *sb)
{
    return sb->data ? sb->data : "";
}

void kvrt_strbuf_reset(struct kvrt_strbuf *sb)
{
    sb->len = 0;
    if (sb->data)
        sb->data[0] = '\0';
}

void kvrt_strbuf_free(struct kvrt_strbuf *sb)
{
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
}
