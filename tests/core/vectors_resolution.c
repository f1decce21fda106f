/*
 * resolution.json in full (layout, warning, error), plus what the vectors
 * cannot express: the environment value quoted as spelled, the write-once
 * record, the trace a user reads, and the argument checks of the API.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/resolve.h>

#include "tap.h"
#include "vectors_json.h"

/* Backend names used for the vectors' unnamed declarations. */
static void backend_name(size_t i, char *buf, size_t size)
{
    snprintf(buf, size, "backend%zu", i + 1);
}

static int declare_all(kvrt_resolver *r, const json_t *decls)
{
    size_t i;
    json_t *d;
    json_array_foreach(decls, i, d)
    {
        char name[32];
        backend_name(i, name, sizeof(name));
        int rc;
        if (json_is_string(d)) {
            rc = kvrt_resolver_declare_any(r, name);
        } else {
            enum kvrt_layout list[KVRT_NUM_LAYOUTS];
            size_t n = 0, j;
            json_t *l;
            json_array_foreach(d, j, l)
            {
                if (n == KVRT_NUM_LAYOUTS || kvrt_layout_parse(json_string_value(l), &list[n]) != KVRT_OK)
                    return KVRT_ERR_INVALID;
                n++;
            }
            rc = kvrt_resolver_declare(r, name, list, n);
        }
        if (rc != KVRT_OK)
            return rc;
    }
    return KVRT_OK;
}

static const char *nullable(const json_t *v)
{
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* What an error message must contain for the case's kind of refusal. */
static bool error_explains(const json_t *c, const char *msg)
{
    const char *env = nullable(json_object_get(c, "env"));
    if (env)
        return strstr(msg, env) && strstr(msg, "backend1") && strstr(msg, "candidates");
    if (json_is_true(json_object_get(c, "mixed_shapes")))
        return strstr(msg, "block-compact") != NULL;
    /* Empty intersection: every declaration is listed. */
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(c, "declarations"), i, d)
    {
        char name[32];
        backend_name(i, name, sizeof(name));
        if (!strstr(msg, name))
            return false;
    }
    return true;
}

static void check_case(size_t index, const json_t *c)
{
    const json_t *expect = json_object_get(c, "expect");
    kvrt_resolver *r = NULL;
    enum kvrt_layout got = KVRT_LAYOUT_LBHNC;
    char *decls = json_dumps(json_object_get(c, "declarations"), JSON_COMPACT);
    const char *env = nullable(json_object_get(c, "env"));
    const char *pref = nullable(json_object_get(c, "soft_preference"));

    int rc = kvrt_resolver_create(&r);
    if (rc == KVRT_OK)
        rc = kvrt_resolver_set_env(r, env);
    if (rc == KVRT_OK)
        rc = declare_all(r, json_object_get(c, "declarations"));
    if (rc == KVRT_OK)
        rc = kvrt_resolver_set_mixed_shapes(r, json_is_true(json_object_get(c, "mixed_shapes")));
    if (rc == KVRT_OK)
        rc = kvrt_resolver_set_preference(r, pref, "connector");
    if (!tap_ok(rc == KVRT_OK, "case %zu: set-up", index)) {
        tap_diag("%s", kvrt_error_message());
        goto out;
    }

    rc = kvrt_resolver_resolve(r, &got);
    const char *desc_env = env ? env : "unset";
    if (json_is_true(json_object_get(expect, "error"))) {
        const char *msg = kvrt_error_message();
        tap_ok(rc == KVRT_ERR_REFUSED, "case %zu %s env=%s: refused", index, decls, desc_env);
        tap_ok(error_explains(c, msg), "case %zu: the message explains the refusal", index);
        tap_ok(strstr(kvrt_resolver_trace(r), "refused: ") != NULL, "case %zu: the trace records the refusal", index);
        tap_ok(!kvrt_resolver_recorded(r, NULL), "case %zu: nothing is recorded", index);
        tap_diag("message: %s", msg);
    } else {
        const char *want = json_string_value(json_object_get(expect, "layout"));
        bool warn = json_is_true(json_object_get(expect, "warning"));
        enum kvrt_layout rec;
        if (!tap_ok(rc == KVRT_OK && strcmp(kvrt_layout_name(got), want) == 0,
                    "case %zu %s env=%s pref=%s mixed=%d: %s", index, decls, desc_env, pref ? pref : "none",
                    json_is_true(json_object_get(c, "mixed_shapes")), want))
            tap_diag("rc %d, got %s, message: %s\ntrace:\n%s", rc, rc == KVRT_OK ? kvrt_layout_name(got) : "-",
                     kvrt_error_message(), kvrt_resolver_trace(r));
        tap_ok(kvrt_resolver_warned(r) == warn, "case %zu: warning is %s", index, warn ? "true" : "false");
        tap_ok(kvrt_resolver_recorded(r, &rec) && rec == got, "case %zu: %s is recorded", index, want);
        char final[64];
        snprintf(final, sizeof(final), "choice: %s", want);
        tap_ok(strstr(kvrt_resolver_trace(r), final) != NULL, "case %zu: the trace ends in \"%s\"", index, final);
    }
out:
    free(decls);
    kvrt_resolver_destroy(r);
}

static kvrt_resolver *make(const char *env)
{
    kvrt_resolver *r = NULL;
    if (kvrt_resolver_create(&r) != KVRT_OK)
        return NULL;
    kvrt_resolver_set_env(r, env);
    return r;
}

static void check_env_as_spelled(void)
{
    const enum kvrt_layout only_nhc[] = {KVRT_LAYOUT_LBNHC};
    kvrt_resolver *r = make("HND");
    enum kvrt_layout got;
    kvrt_resolver_declare(r, "cuda", only_nhc, 1);
    int rc = kvrt_resolver_resolve(r, &got);
    const char *msg = kvrt_error_message();
    tap_ok(rc == KVRT_ERR_REFUSED, "env HND with a backend declaring only LBNHC: refused");
    tap_ok(strstr(msg, "HND (LBHNC)") != NULL, "the message names the value as spelled: HND (LBHNC)");
    tap_ok(strstr(msg, "\"cuda\"") != NULL, "the message names the backend that does not support it");
    tap_ok(strstr(msg, "candidates are LBNHC") != NULL, "the message lists the valid candidates");
    tap_diag("message: %s", msg);
    kvrt_resolver_destroy(r);

    /* Malformed values are INVALID (a typo), not REFUSED (a conflict). */
    const char *bad[] = {"hnd", "", "LBNHC,HND"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char quoted[64];
        snprintf(quoted, sizeof(quoted), "\"%s\"", bad[i]);
        r = make(bad[i]);
        rc = kvrt_resolver_resolve(r, &got);
        msg = kvrt_error_message();
        tap_ok(rc == KVRT_ERR_INVALID && strstr(msg, quoted) && strstr(msg, KVRT_LAYOUT_ENV) && strstr(msg, "BHLNC"),
               "env %s is malformed: KVRT_ERR_INVALID, quoted, valid names listed", quoted);
        tap_diag("message: %s", msg);
        kvrt_resolver_destroy(r);
    }

    /* kvrt_resolver_create reads the process environment; set_env overrides it. */
    const enum kvrt_layout both[] = {KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_LBNHC};
    setenv(KVRT_LAYOUT_ENV, "NHD", 1);
    r = NULL;
    kvrt_resolver_create(&r);
    kvrt_resolver_declare(r, "cpu", both, 2);
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_OK && got == KVRT_LAYOUT_LBNHC,
           "create() reads VLLM_KV_CACHE_LAYOUT=NHD from the environment: LBNHC");
    tap_ok(strstr(kvrt_resolver_trace(r), "from the environment") != NULL,
           "the trace says where the constraint came from");
    kvrt_resolver_destroy(r);
    r = NULL;
    kvrt_resolver_create(&r);
    kvrt_resolver_set_env(r, NULL);
    kvrt_resolver_declare(r, "cpu", both, 2);
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_OK && got == KVRT_LAYOUT_LBHNC,
           "set_env(NULL) overrides the environment: no constraint, LBHNC");
    kvrt_resolver_destroy(r);
    setenv(KVRT_LAYOUT_ENV, "", 1);
    r = NULL;
    tap_ok(kvrt_resolver_create(&r) == KVRT_OK && kvrt_resolver_resolve(r, &got) == KVRT_ERR_INVALID,
           "an empty VLLM_KV_CACHE_LAYOUT in the environment is refused at resolve time");
    kvrt_resolver_destroy(r);
    unsetenv(KVRT_LAYOUT_ENV);
}

static void check_write_once(void)
{
    const enum kvrt_layout both[] = {KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_LBNHC};
    kvrt_resolver *r = make(NULL);
    enum kvrt_layout got, rec;
    kvrt_resolver_declare(r, "cpu", both, 2);
    tap_ok(!kvrt_resolver_recorded(r, &rec), "nothing recorded before the first resolve");
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_OK && got == KVRT_LAYOUT_LBHNC, "first resolve: LBHNC");
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_OK && got == KVRT_LAYOUT_LBHNC, "the same result again is fine");
    kvrt_resolver_set_preference(r, "NHD", "connector");
    got = KVRT_LAYOUT_BHLNC;
    int rc = kvrt_resolver_resolve(r, &got);
    const char *msg = kvrt_error_message();
    tap_ok(rc == KVRT_ERR_STATE, "a later resolve choosing LBNHC fails with KVRT_ERR_STATE");
    tap_ok(strstr(msg, "LBHNC") && strstr(msg, "LBNHC"), "the message names both layouts");
    tap_diag("message: %s", msg);
    tap_ok(got == KVRT_LAYOUT_BHLNC, "the output is untouched on failure");
    tap_ok(kvrt_resolver_recorded(r, &rec) && rec == KVRT_LAYOUT_LBHNC, "the record is kept");
    kvrt_resolver_set_preference(r, NULL, NULL);
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_OK && got == KVRT_LAYOUT_LBHNC,
           "without the preference it agrees again");
    kvrt_resolver_destroy(r);
}

static bool has_line_starting(const char *trace, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = trace; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, prefix, n) == 0)
            return true;
    return false;
}

static void check_trace(void)
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
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_OK && got == KVRT_LAYOUT_LBHNC, "trace case resolves to LBHNC");
    tap_ok(kvrt_resolver_warned(r), "the preference BLHNC is not a candidate: warning");
    const char *t = kvrt_resolver_trace(r);
    const char *steps[] = {"resolve #1",
                           "declaration: backend \"cuda\" supports LBNHC, LBHNC, LHBNC",
                           "declaration: backend \"cpu\" accepts any layout",
                           "intersection: ",
                           "votes: ",
                           "ranking: ",
                           "narrowing: ",
                           "candidates: ",
                           "env: ",
                           "preference: ",
                           "choice: LBHNC",
                           "recorded: "};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        tap_ok(has_line_starting(t, steps[i]), "the trace has a line starting \"%s\"", steps[i]);
    tap_ok(strstr(t, "HNC (LBHNC)") != NULL, "the trace shows the env value as spelled");
    tap_ok(strstr(t, "nixl connector") != NULL, "the trace names who preferred what");
    tap_ok(strstr(t, "LHBNC 1") && strstr(t, "LBNHC 1") && strstr(t, "LBHNC 0"),
           "the trace shows the first-choice votes");
    tap_ok(t[strlen(t) - 1] == '\n' && !strstr(t, "\n\n"), "one step per line, no empty lines");
    size_t candidates;
    enum kvrt_layout c[KVRT_NUM_LAYOUTS];
    candidates = kvrt_resolver_candidates(r, c);
    tap_ok(candidates == 2 && c[0] == KVRT_LAYOUT_LBNHC && c[1] == KVRT_LAYOUT_LBHNC,
           "candidates after narrowing: LBNHC (1 vote), LBHNC (0 votes)");
    tap_diag("%s", t);
    kvrt_resolver_destroy(r);

    r = make(NULL);
    tap_ok(kvrt_resolver_resolve(r, &got) == KVRT_OK && got == KVRT_LAYOUT_LBNHC,
           "no declaration at all: the default preference, LBNHC");
    tap_ok(has_line_starting(kvrt_resolver_trace(r), "default: "), "the trace says the default applies");
    kvrt_resolver_destroy(r);

    r = make(NULL);
    kvrt_resolver_set_mixed_shapes(r, true);
    candidates = kvrt_resolver_resolve(r, &got) == KVRT_OK ? kvrt_resolver_candidates(r, c) : 0;
    tap_ok(candidates == 4 && c[0] == KVRT_LAYOUT_LBNHC && c[1] == KVRT_LAYOUT_LBHNC && c[2] == KVRT_LAYOUT_BLNHC &&
               c[3] == KVRT_LAYOUT_BLHNC,
           "mixed shapes, no declaration: the block-compact defaults LBNHC, LBHNC, BLNHC, BLHNC");
    kvrt_resolver_destroy(r);

    /* One declaring backend keeps its own order even where votes and table
     * order would rank differently. */
    const enum kvrt_layout own[] = {KVRT_LAYOUT_BHLNC, KVRT_LAYOUT_LHBNC, KVRT_LAYOUT_LBHNC};
    r = make(NULL);
    kvrt_resolver_declare(r, "rocm", own, 3);
    kvrt_resolver_declare_any(r, "cpu");
    candidates = kvrt_resolver_resolve(r, &got) == KVRT_OK ? kvrt_resolver_candidates(r, c) : 0;
    tap_ok(candidates == 3 && c[0] == KVRT_LAYOUT_BHLNC && c[1] == KVRT_LAYOUT_LHBNC && c[2] == KVRT_LAYOUT_LBHNC,
           "a single declared list with an \"any\" keeps its order");
    tap_ok(has_line_starting(kvrt_resolver_trace(r), "fast path: "), "the trace says the fast path was taken");
    kvrt_resolver_destroy(r);
}

static void check_arguments(void)
{
    const enum kvrt_layout dup[] = {KVRT_LAYOUT_LBNHC, KVRT_LAYOUT_LBNHC};
    const enum kvrt_layout bad[] = {(enum kvrt_layout)9};
    const enum kvrt_layout one[] = {KVRT_LAYOUT_LBNHC};
    kvrt_resolver *r = make(NULL);
    tap_ok(kvrt_resolver_declare(r, "x", dup, 2) == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "twice"),
           "a list naming a layout twice is refused");
    tap_ok(kvrt_resolver_declare(r, "x", bad, 1) == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "9"),
           "an invalid layout value is refused, naming it");
    tap_ok(kvrt_resolver_declare(r, "x", one, 0) == KVRT_ERR_INVALID, "an empty list is refused");
    tap_ok(kvrt_resolver_declare(r, "", one, 1) == KVRT_ERR_INVALID, "an empty backend name is refused");
    tap_ok(kvrt_resolver_declare(r, "x", one, 1) == KVRT_OK, "a good declaration is accepted");
    tap_ok(kvrt_resolver_declare_any(r, "x") == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "\"x\""),
           "a backend declared twice is refused, naming it");
    tap_ok(kvrt_resolver_set_preference(r, "lbnhc", "me") == KVRT_ERR_INVALID &&
               strstr(kvrt_error_message(), "\"lbnhc\""),
           "an invalid preference is refused, quoted");
    kvrt_resolver_destroy(r);
    enum kvrt_layout got;
    tap_ok(kvrt_resolver_resolve(NULL, &got) == KVRT_ERR_INVALID, "resolve(NULL) is refused");
    tap_ok(kvrt_resolver_candidates(NULL, NULL) == 0 && !kvrt_resolver_warned(NULL) &&
               !kvrt_resolver_recorded(NULL, NULL) && strcmp(kvrt_resolver_trace(NULL), "") == 0,
           "the getters tolerate NULL");
}

int main(int argc, char **argv)
{
    json_t *root = vectors_load(vectors_dir_arg(argc, argv), "resolution.json");
    if (!root)
        return 1;
    tap_plan_dynamic();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(root, "cases"), i, c) check_case(i, c);
    check_env_as_spelled();
    check_write_once();
    check_trace();
    check_arguments();
    json_decref(root);
    return tap_done();
}
