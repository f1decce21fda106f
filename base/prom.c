/*
 * Prometheus' text exposition format into a growing buffer (prom.h).
 *
 * Base of libkvrt-xfer and libkvrt-store: below every layer of both.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fail.h"
#include "prom.h"

void base_prom_put(struct base_prom *p, const char *fmt, ...)
{
    if (p->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(p->buf ? p->buf + p->len : NULL, p->buf ? p->cap - p->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            p->failed = true;
            return;
        }
        if (p->buf && (size_t)n < p->cap - p->len) {
            p->len += (size_t)n;
            return;
        }
        size_t want = p->len + (size_t)n + 1;
        if (want < p->len || want > SIZE_MAX / 2) {
            p->failed = true;
            return;
        }
        size_t cap = p->cap ? p->cap : 4096;
        while (cap < want)
            cap *= 2;
        char *b = realloc(p->buf, cap);
        if (!b) {
            p->failed = true;
            return;
        }
        p->buf = b;
        p->cap = cap;
    }
}

void base_prom_family(struct base_prom *p, const char *name, const char *type, const char *help)
{
    base_prom_put(p, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void base_prom_sample(struct base_prom *p, const char *name, const char *labels, uint64_t v)
{
    if (labels && labels[0])
        base_prom_put(p, "%s{%s} %llu\n", name, labels, ULL(v));
    else
        base_prom_put(p, "%s %llu\n", name, ULL(v));
}

void base_prom_one(struct base_prom *p, const char *name, const char *type, const char *help, uint64_t v)
{
    base_prom_family(p, name, type, help);
    base_prom_sample(p, name, NULL, v);
}

void base_prom_label_value(struct base_prom *p, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '\\')
            base_prom_put(p, "\\\\");
        else if (*s == '"')
            base_prom_put(p, "\\\"");
        else if (*s == '\n')
            base_prom_put(p, "\\n");
        else
            base_prom_put(p, "%c", *s);
    }
}

int base_prom_finish(struct base_prom *p, const char *fn, char *buf, size_t size, size_t *needed)
{
    int rc = KVRT_OK;
    if (p->failed) {
        free(p->buf);
        p->buf = NULL;
        return BASE_FAIL(KVRT_ERR_NOMEM, "%s: out of memory", fn);
    }
    size_t need = p->len + 1;
    if (needed)
        *needed = need;
    if (buf && size >= need)
        memcpy(buf, p->buf ? p->buf : "", need);
    else if (buf) {
        buf[0] = '\0';
        rc = BASE_FAIL(KVRT_ERR_INVALID, "%s: the text needs %zu bytes (with its NUL); buf has %zu", fn, need, size);
    }
    free(p->buf);
    p->buf = NULL;
    return rc;
}
