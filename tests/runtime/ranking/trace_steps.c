/*
 * The runtime's trace as steps (kvrt/trace.h): backend selection (passed
 * over, bound, preferred) and the runtime's own record, each naming the
 * backend and layout it is about, rendered line by line as text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/kvrt.h>

#include "fixtures.h"
#include "tap.h"

static const char *dir, *cpu_path;

/* A runtime over "realgpu" (a GPU, declares LBHNC and LBNHC), "emucpu" (a
 * host-CPU device, the same two) and "cpu". */
static kvrt_runtime *open_runtime(void)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/kvrt-realgpu.so:%s/kvrt-emucpu.so:%s", dir, dir, cpu_path);
    return fixture_runtime(path, NULL);
}

/* The index of the first step from `from` of this kind, or SIZE_MAX. */
static size_t find(const kvrt_runtime *rt, size_t from, enum kvrt_trace_kind kind, struct kvrt_trace_step *out)
{
    size_t n = kvrt_runtime_num_trace_steps(rt);
    memset(out, 0, sizeof(*out));
    for (size_t i = from; i < n; i++)
        if (kvrt_runtime_trace_step(rt, i, out) == KVRT_OK && out->kind == kind)
            return i;
    return SIZE_MAX;
}

static bool about(const struct kvrt_trace_step *st, int32_t layout, const char *backend)
{
    bool b = backend ? st->backend && strcmp(st->backend, backend) == 0 : !st->backend;
    if (!b || st->layout != layout)
        tap_diag("step %s: layout %d, backend %s, \"%s\"", kvrt_trace_kind_name(st->kind), (int)st->layout,
                 st->backend ? st->backend : "NULL", st->text);
    return b && st->layout == layout;
}

/* kvrt_runtime_trace() is the steps rendered, line by line. */
static void expect_rendering(const kvrt_runtime *rt)
{
    const char *t = kvrt_runtime_trace(rt);
    size_t n = kvrt_runtime_num_trace_steps(rt);
    bool ok = n > 0;
    for (size_t i = 0; ok && i < n; i++) {
        struct kvrt_trace_step st;
        char head[160];
        ok = kvrt_runtime_trace_step(rt, i, &st) == KVRT_OK;
        if (!ok)
            break;
        if (st.kind == KVRT_TRACE_RESOLVE)
            snprintf(head, sizeof(head), "resolve #1: "); /* one resolver per kvrt_runtime_resolve */
        else if (st.kind == KVRT_TRACE_PASSED_OVER)
            snprintf(head, sizeof(head), "passed over backend \"%s\": ", st.backend);
        else
            snprintf(head, sizeof(head), "%s: ", kvrt_trace_kind_name(st.kind));
        size_t hl = strlen(head), tl = strlen(st.text);
        ok = strncmp(t, head, hl) == 0 && strncmp(t + hl, st.text, tl) == 0 && t[hl + tl] == '\n';
        if (!ok)
            tap_diag("line %zu is \"%.*s\", step \"%s%s\"", i, (int)strcspn(t, "\n"), t, head, st.text);
        t += hl + tl + 1;
    }
    tap_ok(ok && *t == '\0', "the runtime's text trace is its %zu steps rendered, one line each", n);
}

int main(void)
{
    fixture_test_plugins(&dir, &cpu_path);
    unsetenv(KVRT_BACKEND_ENV);
    unsetenv(KVRT_LAYOUT_ENV);
    tap_plan_dynamic();
    kvrt_runtime *rt = open_runtime();
    if (!rt) {
        tap_ok(false, "the runtime opens");
        return tap_done();
    }
    struct kvrt_trace_step st;
    tap_ok(kvrt_runtime_num_trace_steps(rt) == 0 && kvrt_runtime_trace_step(rt, 0, &st) == KVRT_ERR_INVALID,
           "a new runtime has no steps; step 0 is out of range");

    /* realgpu ranks first but does not declare BLHNC: passed over; cpu
     * binds it, and emucpu is said to be ranked below cpu. */
    kvrt_backend *b = NULL;
    tap_ok(kvrt_runtime_bind(rt, NULL, "BLHNC", &b) == KVRT_OK && strcmp(kvrt_backend_name(b), "cpu") == 0,
           "automatic binding for BLHNC takes cpu");
    size_t i = find(rt, 0, KVRT_TRACE_PASSED_OVER, &st);
    tap_ok(i == 0 && about(&st, KVRT_LAYOUT_BLHNC, "realgpu") && strstr(st.text, "does not declare BLHNC"),
           "first step: passed over realgpu for BLHNC, with the reason as text");
    i = find(rt, 0, KVRT_TRACE_PREFERRED, &st);
    tap_ok(i != SIZE_MAX && about(&st, KVRT_TRACE_NO_LAYOUT, "emucpu") && strstr(st.text, "\"cpu\" over \"emucpu\""),
           "a preferred step about emucpu, the backend ranked below cpu");
    size_t bound = find(rt, 0, KVRT_TRACE_BOUND, &st);
    tap_ok(bound != SIZE_MAX && bound > i && about(&st, KVRT_LAYOUT_BLHNC, "cpu") && strstr(st.text, "priority order"),
           "then bound: cpu with BLHNC, chosen by priority");
    size_t before = kvrt_runtime_num_trace_steps(rt);
    kvrt_backend *again = NULL;
    kvrt_runtime_bind(rt, NULL, "BLHNC", &again);
    tap_ok(find(rt, before, KVRT_TRACE_PREFERRED, &st) == SIZE_MAX &&
               find(rt, before, KVRT_TRACE_BOUND, &st) != SIZE_MAX,
           "a second automatic bind says bound again, but preferred only once per runtime");

    tap_ok(kvrt_runtime_bind(rt, "realgpu", "LBNHC", &b) == KVRT_OK, "binding realgpu by name");
    i = find(rt, bound + 1, KVRT_TRACE_BOUND, &st);
    while (i != SIZE_MAX && !(st.backend && strcmp(st.backend, "realgpu") == 0))
        i = find(rt, i + 1, KVRT_TRACE_BOUND, &st);
    tap_ok(i != SIZE_MAX && about(&st, KVRT_LAYOUT_LBNHC, "realgpu") && strstr(st.text, "(requested)"),
           "bound: realgpu (requested) with LBNHC");

    /* Resolution through the runtime: the resolver's steps, then the record. */
    const char *names[] = {"realgpu", "cpu"};
    enum kvrt_layout got;
    before = kvrt_runtime_num_trace_steps(rt);
    tap_ok(kvrt_runtime_resolve(rt, names, 2, false, NULL, &got) == KVRT_OK && got == KVRT_LAYOUT_LBHNC,
           "realgpu and cpu resolve to LBHNC");
    tap_ok(find(rt, before, KVRT_TRACE_RESOLVE, &st) == before, "the resolve's steps follow");
    i = find(rt, before, KVRT_TRACE_DECLARATION, &st);
    tap_ok(i != SIZE_MAX && about(&st, KVRT_TRACE_NO_LAYOUT, "realgpu"), "a declaration step about realgpu");
    i = find(rt, before, KVRT_TRACE_RECORDED, &st);
    size_t n = kvrt_runtime_num_trace_steps(rt);
    struct kvrt_trace_step last;
    tap_ok(i == n - 2 && about(&st, KVRT_LAYOUT_LBHNC, NULL) && kvrt_runtime_trace_step(rt, n - 1, &last) == KVRT_OK &&
               last.kind == KVRT_TRACE_RECORDED && about(&last, KVRT_LAYOUT_LBHNC, NULL) &&
               strcmp(last.text, "LBHNC") == 0,
           "the resolver's recorded step, then the runtime's own record of LBHNC");

    const char *cpu_only[] = {"cpu"};
    tap_ok(kvrt_runtime_resolve(rt, cpu_only, 1, false, NULL, &got) == KVRT_ERR_STATE,
           "cpu alone would choose BLHNC: KVRT_ERR_STATE, the runtime recorded LBHNC");
    n = kvrt_runtime_num_trace_steps(rt);
    tap_ok(kvrt_runtime_trace_step(rt, n - 1, &last) == KVRT_OK && last.kind == KVRT_TRACE_REFUSED &&
               about(&last, KVRT_LAYOUT_BLHNC, NULL) && strstr(last.text, "already recorded as LBHNC"),
           "the last step refuses BLHNC, the layout recorded being LBHNC");
    expect_rendering(rt);
    kvrt_runtime_close(rt);
    return tap_done();
}
