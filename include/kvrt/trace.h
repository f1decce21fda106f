/*
 * kvrt — the steps of a resolution and selection trace, as data.
 *
 * A resolver (kvrt/resolve.h) and a runtime (kvrt/runtime.h) keep every step
 * that led to a layout or a backend.  Each step has a kind, the layout and
 * the backend it is about (when it is about one), and a sentence for people.
 * kvrt_resolver_trace() and kvrt_runtime_trace() render the same steps as
 * text, one line per step; code that needs to know what happened reads the
 * steps instead of matching words in that text.  docs/resolution.md lists
 * what each kind of step carries.
 */
#ifndef KVRT_TRACE_H
#define KVRT_TRACE_H

#include <stdint.h>
#include <kvrt/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The kinds of step.  The values are part of the ABI (locked by tests):
 * later API minors only add kinds, at the end, so an engine must expect a
 * value it does not know (kvrt_trace_kind_name() returns NULL for it). */
enum kvrt_trace_kind {
    /* Resolution (kvrt_resolver_resolve, kvrt_runtime_resolve). */
    KVRT_TRACE_RESOLVE = 0,         /* a resolve starts */
    KVRT_TRACE_NO_DECLARATIONS = 1, /* no backend has declared anything */
    KVRT_TRACE_DECLARATION = 2,     /* what one backend declares (backend) */
    KVRT_TRACE_DEFAULT = 3,         /* no lists: the default order applies */
    KVRT_TRACE_FAST_PATH = 4,       /* one list, or identical lists, kept as is */
    KVRT_TRACE_INTERSECTION = 5,    /* lists differ: what every backend supports */
    KVRT_TRACE_VOTES = 6,           /* first-choice votes per remaining layout */
    KVRT_TRACE_RANKING = 7,         /* the intersection in rank order */
    KVRT_TRACE_SHAPES = 8,          /* uniform shapes: nothing ruled out */
    KVRT_TRACE_NARROWING = 9,       /* mixed shapes: only block-compact layouts */
    KVRT_TRACE_CANDIDATES = 10,     /* the candidates, best first */
    KVRT_TRACE_ENV = 11,            /* VLLM_KV_CACHE_LAYOUT (layout once parsed) */
    KVRT_TRACE_PREFERENCE = 12,     /* the soft preference (layout when given) */
    KVRT_TRACE_CHOICE = 13,         /* the layout chosen (layout) */
    KVRT_TRACE_RECORDED = 14,       /* the layout recorded or agreed with (layout) */
    KVRT_TRACE_REFUSED = 15,        /* a refusal; layout when one was refused */
    /* Backend selection (kvrt_runtime_bind, kvrt_runtime_default_backend). */
    KVRT_TRACE_PREFERRED = 16,   /* "cpu" ranked above backend (host CPU device) */
    KVRT_TRACE_BOUND = 17,       /* backend bound with layout */
    KVRT_TRACE_PASSED_OVER = 18, /* backend passed over for layout, and why */
};

/* The layout of a step that is not about one layout. */
#define KVRT_TRACE_NO_LAYOUT (-1)

/**
 * One step, filled by kvrt_resolver_trace_step() / kvrt_runtime_trace_step().
 * The strings belong to the resolver or runtime and stay valid until the
 * next call that adds to its trace (a resolve, a bind, a default-backend
 * query), or until it is destroyed.
 */
struct kvrt_trace_step {
    enum kvrt_trace_kind kind;
    int32_t layout;      /* an enum kvrt_layout, or KVRT_TRACE_NO_LAYOUT */
    const char *backend; /* the backend the step is about, or NULL */
    const char *text;    /* the sentence, without the "kind: " the rendering adds */
    /* Room for fields of later API minors; libkvrt writes zeroes. */
    uint8_t reserved[32];
};

/** "declaration", "fast path", "passed over", ...: the word that starts the
 *  step's line in the rendered trace; NULL for a value that is not a kind. */
KVRT_API const char *kvrt_trace_kind_name(enum kvrt_trace_kind kind);

#ifdef __cplusplus
}
#endif
#endif
