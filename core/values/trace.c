/*
 * Traces as steps.  Each step keeps its rendered line, so the text of
 * kvrt_resolver_trace() / kvrt_runtime_trace() is exactly the lines in order
 * and the structured view can never drift from what people read.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "trace.h"

static const char *const kind_names[] = {
    [KVRT_TRACE_RESOLVE] = "resolve",
    [KVRT_TRACE_NO_DECLARATIONS] = "declarations",
    [KVRT_TRACE_DECLARATION] = "declaration",
    [KVRT_TRACE_DEFAULT] = "default",
    [KVRT_TRACE_FAST_PATH] = "fast path",
    [KVRT_TRACE_INTERSECTION] = "intersection",
    [KVRT_TRACE_VOTES] = "votes",
    [KVRT_TRACE_RANKING] = "ranking",
    [KVRT_TRACE_SHAPES] = "shapes",
    [KVRT_TRACE_NARROWING] = "narrowing",
    [KVRT_TRACE_CANDIDATES] = "candidates",
    [KVRT_TRACE_ENV] = "env",
    [KVRT_TRACE_PREFERENCE] = "preference",
    [KVRT_TRACE_CHOICE] = "choice",
    [KVRT_TRACE_RECORDED] = "recorded",
    [KVRT_TRACE_REFUSED] = "refused",
    [KVRT_TRACE_PREFERRED] = "preferred",
    [KVRT_TRACE_BOUND] = "bound",
    [KVRT_TRACE_PASSED_OVER] = "passed over",
};
#define NUM_KINDS (sizeof(kind_names) / sizeof(kind_names[0]))

const char *kvrt_trace_kind_name(enum kvrt_trace_kind kind)
{
    return (int)kind >= 0 && (size_t)kind < NUM_KINDS ? kind_names[kind] : NULL;
}

/* Takes ownership of line (freed on failure). */
static bool push(struct kvrt_trace *t, enum kvrt_trace_kind kind, int32_t layout, const char *backend, char *line,
                 size_t text)
{
    char *b = NULL;
    if (!line || (backend && !(b = strdup(backend))))
        goto fail;
    if (t->count == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        struct kvrt_trace_entry *grown = realloc(t->steps, cap * sizeof(*grown));
        if (!grown)
            goto fail;
        t->steps = grown;
        t->cap = cap;
    }
    /* The text last: a step is in both views or in neither. */
    if (!kvrt_strbuf_appendf(&t->text, "%s\n", line))
        goto fail;
    t->steps[t->count++] =
        (struct kvrt_trace_entry){.kind = kind, .layout = layout, .backend = b, .line = line, .text = text};
    return true;
fail:
    free(b);
    free(line);
    return false;
}

static char *format_line(const char *head, size_t *text, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    size_t head_len = strlen(head) + 2;
    char *line = n < 0 ? NULL : malloc(head_len + (size_t)n + 1);
    if (line) {
        snprintf(line, head_len + 1, "%s: ", head);
        vsnprintf(line + head_len, (size_t)n + 1, fmt, again);
    }
    va_end(again);
    *text = head_len;
    return line;
}

static bool add_v(struct kvrt_trace *t, enum kvrt_trace_kind kind, int32_t layout, const char *backend,
                  const char *head, const char *fmt, va_list ap)
{
    size_t text;
    char *line = format_line(head, &text, fmt, ap);
    return push(t, kind, layout, backend, line, text);
}

bool kvrt_trace_add_headed(struct kvrt_trace *t, enum kvrt_trace_kind kind, int32_t layout, const char *backend,
                           const char *head, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    bool ok = add_v(t, kind, layout, backend, head, fmt, ap);
    va_end(ap);
    return ok;
}

bool kvrt_trace_add(struct kvrt_trace *t, enum kvrt_trace_kind kind, int32_t layout, const char *backend,
                    const char *fmt, ...)
{
    const char *head = kvrt_trace_kind_name(kind);
    va_list ap;
    va_start(ap, fmt);
    bool ok = add_v(t, kind, layout, backend, head ? head : "step", fmt, ap);
    va_end(ap);
    return ok;
}

bool kvrt_trace_append(struct kvrt_trace *t, const struct kvrt_trace *src)
{
    bool ok = true;
    for (size_t i = 0; i < src->count; i++) {
        const struct kvrt_trace_entry *s = &src->steps[i];
        ok = push(t, s->kind, s->layout, s->backend, strdup(s->line), s->text) && ok;
    }
    return ok;
}

bool kvrt_trace_has(const struct kvrt_trace *t, enum kvrt_trace_kind kind, const char *backend, const char *text)
{
    for (size_t i = 0; i < t->count; i++) {
        const struct kvrt_trace_entry *s = &t->steps[i];
        if (s->kind == kind && (s->backend && backend ? strcmp(s->backend, backend) == 0 : s->backend == backend) &&
            (!text || strcmp(s->line + s->text, text) == 0))
            return true;
    }
    return false;
}

int kvrt_trace_get(const struct kvrt_trace *t, size_t i, struct kvrt_trace_step *out, const char *fn)
{
    if (i >= t->count)
        return kvrt_fail(KVRT_ERR_INVALID, "%s: step %zu is out of range (the trace has %zu step%s)", fn, i, t->count,
                         t->count == 1 ? "" : "s");
    const struct kvrt_trace_entry *s = &t->steps[i];
    memset(out, 0, sizeof(*out));
    out->kind = s->kind;
    out->layout = s->layout;
    out->backend = s->backend;
    out->text = s->line + s->text;
    return KVRT_OK;
}

const char *kvrt_trace_text(const struct kvrt_trace *t)
{
    return kvrt_strbuf_str(&t->text);
}

void kvrt_trace_free(struct kvrt_trace *t)
{
    for (size_t i = 0; i < t->count; i++) {
        free(t->steps[i].backend);
        free(t->steps[i].line);
    }
    free(t->steps);
    kvrt_strbuf_free(&t->text);
    memset(t, 0, sizeof(*t));
}
