/*
 * The resolver's trace as steps (kvrt/trace.h): for each kind of resolution
 * the exact sequence of kinds, the layout and backend each step is about,
 * and the text rendering built from the same steps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/resolve.h>

#include "tap.h"

#define NONE KVRT_TRACE_NO_LAYOUT

struct want {
    enum kvrt_trace_kind kind;
    int32_t layout;
    const char *backend; /* NULL: none */
    const char *text;    /* a part of the text, or NULL */
};

static kvrt_resolver *make(const char *env)
{
    kvrt_resolver *r = NULL;
    if (kvrt_resolver_create(&r) != KVRT_OK || kvrt_resolver_set_env(r, env) != KVRT_OK)
        tap_diag("resolver: %s", kvrt_error_message());
    return r;
}

static const char *layout_text(int32_t l)
{
    return l == NONE ? "none" : kvrt_layout_name((enum kvrt_layout)l);
}

/* Steps from `first` on are exactly `want`, in order. */
static void expect(const kvrt_resolver *r, size_t first, const struct want *want, size_t n, const char *what)
{
    size_t have = kvrt_resolver_num_trace_steps(r);
    bool ok = have == first + n;
    if (!ok)
        tap_diag("%s: %zu steps, expected %zu", what, have - first, n);
    for (size_t i = 0; ok && i < n; i++) {
        struct kvrt_trace_step st;
        const struct want *w = &want[i];
        if (kvrt_resolver_trace_step(r, first + i, &st) != KVRT_OK) {
            tap_diag("%s: step %zu: %s", what, i, kvrt_error_message());
            ok = false;
            break;
        }
        bool backend_ok = w->backend ? st.backend && strcmp(st.backend, w->backend) == 0 : st.backend == NULL;
        ok = st.kind == w->kind && st.layout == w->layout && backend_ok && st.text &&
             (!w->text || strstr(st.text, w->text));
        if (!ok)
            tap_diag("%s: step %zu is %s (layout %s, backend %s, \"%s\"), expected %s (layout %s, backend %s%s%s)",
                     what, i, kvrt_trace_kind_name(st.kind), layout_text(st.layout), st.backend ? st.backend : "NULL",
                     st.text ? st.text : "(null)", kvrt_trace_kind_name(w->kind), layout_text(w->layout),
                     w->backend ? w->backend : "NULL", w->text ? ", text with " : "", w->text ? w->text : "");
    }
    tap_ok(ok, "%s: the steps' kinds, layouts and backends", what);
}

/* kvrt_resolver_trace() is the steps rendered, line by line. */
static void expect_rendering(const kvrt_resolver *r, const char *what)
{
    const char *t = kvrt_resolver_trace(r);
    size_t n = kvrt_resolver_num_trace_steps(r);
    unsigned resolves = 0;
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        struct kvrt_trace_step st;
        char head[64];
        ok = kvrt_resolver_trace_step(r, i, &st) == KVRT_OK;
        if (!ok)
            break;
        if (st.kind == KVRT_TRACE_RESOLVE)
            snprintf(head, sizeof(head), "resolve #%u: ", ++resolves);
        else
            snprintf(head, sizeof(head), "%s: ", kvrt_trace_kind_name(st.kind));
        size_t hl = strlen(head), tl = strlen(st.text);
        ok = strncmp(t, head, hl) == 0 && strncmp(t + hl, st.text, tl) == 0 && t[hl + tl] == '\n';
        if (!ok)
            tap_diag("%s: line %zu is \"%.*s\", step \"%s%s\"", what, i, (int)strcspn(t, "\n"), t, head, st.text);
        t += hl + tl + 1;
    }
    tap_ok(ok && *t == '\0', "%s: the text trace is the steps rendered, one line each", what);
}

static void check_default(void)
{
    kvrt_resolver *r = make(NULL);
    enum kvrt_layout got;
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_OK && got == KVRT_LAYOUT_LBNHC, "default order: LBNHC");
    const struct want w[] = {
        {KVRT_TRACE_RESOLVE, NONE, NULL, "choosing one layout"},
        {KVRT_TRACE_NO_DECLARATIONS, NONE, NULL, NULL},
        {KVRT_TRACE_DEFAULT, NONE, NULL, "LBNHC, LBHNC, BLNHC, BLHNC, BHLNC, LHBNC"},
        {KVRT_TRACE_SHAPES, NONE, NULL, NULL},
        {KVRT_TRACE_CANDIDATES, NONE, NULL, NULL},
        {KVRT_TRACE_ENV, NONE, NULL, "is not set"},
        {KVRT_TRACE_PREFERENCE, NONE, NULL, NULL},
        {KVRT_TRACE_CHOICE, KVRT_LAYOUT_LBNHC, NULL, "LBNHC, the best-ranked candidate"},
        {KVRT_TRACE_RECORDED, KVRT_LAYOUT_LBNHC, NULL, NULL},
    };
    expect(r, 0, w, sizeof(w) / sizeof(w[0]), "default order");
    expect_rendering(r, "default order");
    kvrt_resolver_destroy(r);
}

static void check_intersection(void)
{
    const enum kvrt_layout a[] = {KVRT_LAYOUT_LBNHC, KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_LHBNC};
    const enum kvrt_layout b[] = {KVRT_LAYOUT_LHBNC, KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_LBNHC};
    kvrt_resolver *r = make("HNC");
    enum kvrt_layout got;
    kvrt_resolver_declare(r, "cuda", a, 3);
    kvrt_resolver_declare(r, "opencl", b, 3);
    kvrt_resolver_declare_any(r, "cpu");
    kvrt_resolver_set_mixed_shapes(r, true);
    kvrt_resolver_set_preference(r, "BLHNC", "nixl connector");
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_OK && got == KVRT_LAYOUT_LBHNC,
           "intersection, votes, mixed shapes, env: LBHNC");
    const struct want w[] = {
        {KVRT_TRACE_RESOLVE, NONE, NULL, NULL},
        {KVRT_TRACE_DECLARATION, NONE, "cuda", "supports LBNHC, LBHNC, LHBNC"},
        {KVRT_TRACE_DECLARATION, NONE, "opencl", NULL},
        {KVRT_TRACE_DECLARATION, NONE, "cpu", "accepts any layout"},
        {KVRT_TRACE_INTERSECTION, NONE, NULL, "LBHNC, LBNHC, LHBNC"},
        {KVRT_TRACE_VOTES, NONE, NULL, "LHBNC 1"},
        {KVRT_TRACE_RANKING, NONE, NULL, NULL},
        {KVRT_TRACE_NARROWING, NONE, NULL, "ruled out: LHBNC"},
        {KVRT_TRACE_CANDIDATES, NONE, NULL, NULL},
        {KVRT_TRACE_ENV, KVRT_LAYOUT_LBHNC, NULL, "is set to"},
        {KVRT_TRACE_ENV, KVRT_LAYOUT_LBHNC, NULL, "hard constraint"},
        {KVRT_TRACE_PREFERENCE, KVRT_LAYOUT_BLHNC, NULL, "not a candidate"},
        {KVRT_TRACE_CHOICE, KVRT_LAYOUT_LBHNC, NULL, NULL},
        {KVRT_TRACE_RECORDED, KVRT_LAYOUT_LBHNC, NULL, NULL},
    };
    expect(r, 0, w, sizeof(w) / sizeof(w[0]), "intersection with votes");
    expect_rendering(r, "intersection with votes");
    kvrt_resolver_destroy(r);
}

static void check_refusals(void)
{
    const enum kvrt_layout lh[] = {KVRT_LAYOUT_LHBNC};
    kvrt_resolver *r = make(NULL);
    enum kvrt_layout got;
    kvrt_resolver_declare(r, "x", lh, 1);
    kvrt_resolver_set_mixed_shapes(r, true);
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_ERR_REFUSED, "mixed shapes, no block-compact layout: refused");
    const struct want mixed[] = {
        {KVRT_TRACE_RESOLVE, NONE, NULL, NULL},
        {KVRT_TRACE_DECLARATION, NONE, "x", NULL},
        {KVRT_TRACE_FAST_PATH, NONE, NULL, "only one backend"},
        {KVRT_TRACE_REFUSED, NONE, NULL, "block-compact"},
    };
    expect(r, 0, mixed, sizeof(mixed) / sizeof(mixed[0]), "mixed shapes refused");
    expect_rendering(r, "mixed shapes refused");
    kvrt_resolver_destroy(r);

    const enum kvrt_layout both[] = {KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_LBNHC};
    r = make("BHLNC");
    kvrt_resolver_declare(r, "cpu", both, 2);
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_ERR_REFUSED, "env BHLNC, not a candidate: refused");
    const struct want env[] = {
        {KVRT_TRACE_RESOLVE, NONE, NULL, NULL},
        {KVRT_TRACE_DECLARATION, NONE, "cpu", NULL},
        {KVRT_TRACE_FAST_PATH, NONE, NULL, NULL},
        {KVRT_TRACE_SHAPES, NONE, NULL, NULL},
        {KVRT_TRACE_CANDIDATES, NONE, NULL, NULL},
        {KVRT_TRACE_ENV, KVRT_LAYOUT_BHLNC, NULL, "given by the caller"},
        {KVRT_TRACE_REFUSED, KVRT_LAYOUT_BHLNC, NULL, "cannot be used"},
    };
    expect(r, 0, env, sizeof(env) / sizeof(env[0]), "env hard constraint refused");
    expect_rendering(r, "env hard constraint refused");
    kvrt_resolver_destroy(r);

    r = make("hnd");
    kvrt_resolver_declare(r, "cpu", both, 2);
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_ERR_INVALID, "env \"hnd\" (malformed): invalid");
    struct kvrt_trace_step st;
    size_t n = kvrt_resolver_num_trace_steps(r);
    bool ok =
        n >= 2 && kvrt_resolver_trace_step(r, n - 2, &st) == KVRT_OK && st.kind == KVRT_TRACE_ENV && st.layout == NONE;
    ok = ok && kvrt_resolver_trace_step(r, n - 1, &st) == KVRT_OK && st.kind == KVRT_TRACE_REFUSED &&
         st.layout == NONE && strstr(st.text, "not a valid layout");
    tap_ok(ok, "a malformed env value: env and refused steps about no layout");
    kvrt_resolver_destroy(r);
}

static void check_preference_overruled(void)
{
    const enum kvrt_layout both[] = {KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_LBNHC};
    kvrt_resolver *r = make("NHD");
    enum kvrt_layout got;
    kvrt_resolver_declare(r, "cpu", both, 2);
    kvrt_resolver_set_preference(r, "LBHNC", "connector");
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_OK && got == KVRT_LAYOUT_LBNHC && !kvrt_resolver_warned(r),
           "env NHD overrules the soft preference LBHNC: LBNHC, no warning");
    const struct want w[] = {
        {KVRT_TRACE_ENV, KVRT_LAYOUT_LBNHC, NULL, "is set to"},
        {KVRT_TRACE_ENV, KVRT_LAYOUT_LBNHC, NULL, "hard constraint"},
        {KVRT_TRACE_PREFERENCE, KVRT_LAYOUT_LBHNC, NULL, "takes precedence"},
        {KVRT_TRACE_CHOICE, KVRT_LAYOUT_LBNHC, NULL, "requires it"},
        {KVRT_TRACE_RECORDED, KVRT_LAYOUT_LBNHC, NULL, NULL},
    };
    expect(r, 5, w, sizeof(w) / sizeof(w[0]), "soft preference overruled");
    kvrt_resolver_destroy(r);

    r = make(NULL);
    kvrt_resolver_declare(r, "cpu", both, 2);
    kvrt_resolver_set_preference(r, "NHD", "connector");
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_OK && got == KVRT_LAYOUT_LBNHC, "a soft preference honoured");
    const struct want honoured[] = {
        {KVRT_TRACE_PREFERENCE, KVRT_LAYOUT_LBNHC, NULL, "it is a candidate"},
        {KVRT_TRACE_CHOICE, KVRT_LAYOUT_LBNHC, NULL, "soft preference of connector"},
        {KVRT_TRACE_RECORDED, KVRT_LAYOUT_LBNHC, NULL, NULL},
    };
    expect(r, 6, honoured, sizeof(honoured) / sizeof(honoured[0]), "soft preference honoured");
    kvrt_resolver_destroy(r);
}

static void check_recorded_conflict(void)
{
    const enum kvrt_layout both[] = {KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_LBNHC};
    kvrt_resolver *r = make(NULL);
    enum kvrt_layout got;
    kvrt_resolver_declare(r, "cpu", both, 2);
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_OK && got == KVRT_LAYOUT_LBHNC, "first resolve: LBHNC");
    size_t first = kvrt_resolver_num_trace_steps(r);
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_OK, "the same result again");
    const struct want again[] = {
        {KVRT_TRACE_RESOLVE, NONE, NULL, NULL},
        {KVRT_TRACE_DECLARATION, NONE, "cpu", NULL},
        {KVRT_TRACE_FAST_PATH, NONE, NULL, NULL},
        {KVRT_TRACE_SHAPES, NONE, NULL, NULL},
        {KVRT_TRACE_CANDIDATES, NONE, NULL, NULL},
        {KVRT_TRACE_ENV, NONE, NULL, NULL},
        {KVRT_TRACE_PREFERENCE, NONE, NULL, NULL},
        {KVRT_TRACE_CHOICE, KVRT_LAYOUT_LBHNC, NULL, NULL},
        {KVRT_TRACE_RECORDED, KVRT_LAYOUT_LBHNC, NULL, "agrees"},
    };
    expect(r, first, again, sizeof(again) / sizeof(again[0]), "second resolve agrees");
    kvrt_resolver_set_preference(r, "LBNHC", "connector");
    first = kvrt_resolver_num_trace_steps(r);
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_ERR_STATE, "a different result: KVRT_ERR_STATE");
    const struct want conflict[] = {
        {KVRT_TRACE_PREFERENCE, KVRT_LAYOUT_LBNHC, NULL, NULL},
        {KVRT_TRACE_CHOICE, KVRT_LAYOUT_LBNHC, NULL, NULL},
        {KVRT_TRACE_REFUSED, KVRT_LAYOUT_LBNHC, NULL, "already recorded as LBHNC"},
    };
    expect(r, first + 6, conflict, sizeof(conflict) / sizeof(conflict[0]), "recorded conflict");
    expect_rendering(r, "three resolves");
    kvrt_resolver_destroy(r);
}

static void check_access(void)
{
    kvrt_resolver *r = make(NULL);
    struct kvrt_trace_step st;
    tap_ok(kvrt_resolver_num_trace_steps(r) == 0 && kvrt_resolver_trace_step(r, 0, &st) == KVRT_ERR_INVALID &&
               strstr(kvrt_error_message(), "out of range"),
           "an empty trace: no steps, step 0 out of range");
    enum kvrt_layout got;
    kvrt_resolver_resolve(r, &got);
    size_t n = kvrt_resolver_num_trace_steps(r);
    tap_ok(kvrt_resolver_trace_step(r, n, &st) == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "9 steps"),
           "step %zu of %zu: KVRT_ERR_INVALID saying how many there are (%s)", n, n, kvrt_error_message());
    memset(&st, 0xff, sizeof(st));
    bool zero = kvrt_resolver_trace_step(r, 0, &st) == KVRT_OK;
    for (size_t i = 0; i < sizeof(st.reserved); i++)
        zero = zero && st.reserved[i] == 0;
    tap_ok(zero, "the reserved bytes of a step are written as zeroes");
    kvrt_resolver_destroy(r);

    bool distinct = true, named = true;
    for (int k = KVRT_TRACE_RESOLVE; k <= KVRT_TRACE_PASSED_OVER; k++) {
        const char *a = kvrt_trace_kind_name((enum kvrt_trace_kind)k);
        named = named && a && *a;
        for (int j = KVRT_TRACE_RESOLVE; a && j < k; j++)
            distinct = distinct && strcmp(a, kvrt_trace_kind_name((enum kvrt_trace_kind)j)) != 0;
    }
    tap_ok(named && distinct, "every kind has its own name");
    tap_ok(kvrt_trace_kind_name((enum kvrt_trace_kind) - 1) == NULL &&
               kvrt_trace_kind_name((enum kvrt_trace_kind)(KVRT_TRACE_PASSED_OVER + 1)) == NULL,
           "a value that is not a kind has no name");
    tap_ok(strcmp(kvrt_trace_kind_name(KVRT_TRACE_FAST_PATH), "fast path") == 0 &&
               strcmp(kvrt_trace_kind_name(KVRT_TRACE_PASSED_OVER), "passed over") == 0,
           "names are the words that start the lines");
}

int main(void)
{
    tap_plan_dynamic();
    unsetenv("VLLM_KV_CACHE_LAYOUT");
    check_default();
    check_intersection();
    check_refusals();
    check_preference_overruled();
    check_recorded_conflict();
    check_access();
    return tap_done();
}
