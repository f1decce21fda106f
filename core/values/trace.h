/* Internal: a trace kept as steps (kvrt/trace.h) and, line by line as they
 * are added, as the text kvrt_*_trace() return.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_TRACE_H
#define KVRT_CORE_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvrt/trace.h>

#include "format.h"
#include "strbuf.h"

struct kvrt_trace_entry {
    enum kvrt_trace_kind kind;
    int32_t layout;
    char *backend; /* NULL when the step is about no one backend */
    char *line;    /* the rendered line, without its newline */
    size_t text;   /* where the step's own text starts in line */
};

struct kvrt_trace {
    struct kvrt_trace_entry *steps;
    size_t count, cap;
    struct kvrt_strbuf text; /* every line so far, each ending in '\n' */
};

/* Add a step whose line is "<kind name>: <text>".  false when it could not
 * be kept (out of memory); the trace is then unchanged. */
bool kvrt_trace_add(struct kvrt_trace *t, enum kvrt_trace_kind kind, int32_t layout, const char *backend,
                    const char *fmt, ...) KVRT_PRINTF(5, 6);
/* The same with the line's head ("resolve #2", "passed over backend \"x\"")
 * given instead of the kind's name. */
bool kvrt_trace_add_headed(struct kvrt_trace *t, enum kvrt_trace_kind kind, int32_t layout, const char *backend,
                           const char *head, const char *fmt, ...) KVRT_PRINTF(6, 7);
/* Append copies of every step of src. */
bool kvrt_trace_append(struct kvrt_trace *t, const struct kvrt_trace *src);
/* true when a step of this kind about this backend is already there, with
 * this text (NULL: any text). */
bool kvrt_trace_has(const struct kvrt_trace *t, enum kvrt_trace_kind kind, const char *backend, const char *text);
/* Step i into *out; fn names the public function in messages. */
int kvrt_trace_get(const struct kvrt_trace *t, size_t i, struct kvrt_trace_step *out, const char *fn);
const char *kvrt_trace_text(const struct kvrt_trace *t);
void kvrt_trace_free(struct kvrt_trace *t);

/* A resolver's steps, for the runtime to keep (resolve.c). */
struct kvrt_resolver;
const struct kvrt_trace *kvrt_resolver_steps(const struct kvrt_resolver *r);

#endif
