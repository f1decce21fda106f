/*
 * Binding with no backend named, as the OpenCL ICD and Vulkan loaders treat
 * a failing driver: a backend whose bind fails ("failbind", a third-party
 * plugin and so ranked above cpu) is passed over with its reason, in the
 * trace and as a warning in the log, and the next one is bound; only when
 * every candidate fails is it an error listing each one's reason.  A
 * backend named explicitly still fails hard.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <kvrt/kvrt.h>

#include "fixtures.h"
#include "tap.h"

static char marker[1100];
static const char *dir, *cpu_path;

/* Warnings the runtime logged (what KVRT_DEBUG=1 prints without a callback). */
static char warnings[4096];

static void log_cb(void *user, enum kvrt_log_level level, const char *message)
{
    (void)user;
    if (level <= KVRT_LOG_WARNING && strlen(warnings) + strlen(message) + 2 < sizeof(warnings)) {
        strcat(warnings, message);
        strcat(warnings, "\n");
    }
}

static kvrt_runtime *open_with(const char *first, const char *second)
{
    char path[4096];
    if (second)
        snprintf(path, sizeof(path), "%s:%s", first, second);
    else
        snprintf(path, sizeof(path), "%s", first);
    warnings[0] = '\0';
    return fixture_runtime(path, log_cb);
}

static const char *plugin(const char *name)
{
    static char paths[4][1100];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof(paths[0]), "%s/kvrt-%s.so", dir, name);
    return p;
}

/* How many lines of the marker file start with "<plugin> bind". */
static int binds_noted(const char *name)
{
    FILE *f = fopen(marker, "r");
    if (!f)
        return 0;
    char line[256], want[64];
    snprintf(want, sizeof(want), "%s bind ", name);
    int n = 0;
    while (fgets(line, sizeof(line), f))
        n += strncmp(line, want, strlen(want)) == 0;
    fclose(f);
    return n;
}

static size_t count_steps(const kvrt_runtime *rt, enum kvrt_trace_kind kind, const char *backend)
{
    size_t n = 0;
    for (size_t i = 0; i < kvrt_runtime_num_trace_steps(rt); i++) {
        struct kvrt_trace_step st;
        if (kvrt_runtime_trace_step(rt, i, &st) == KVRT_OK && st.kind == kind && st.backend &&
            strcmp(st.backend, backend) == 0)
            n++;
    }
    return n;
}

static const char *step_text(const kvrt_runtime *rt, enum kvrt_trace_kind kind, const char *backend, int32_t *layout)
{
    for (size_t i = 0; i < kvrt_runtime_num_trace_steps(rt); i++) {
        struct kvrt_trace_step st;
        if (kvrt_runtime_trace_step(rt, i, &st) == KVRT_OK && st.kind == kind && st.backend &&
            strcmp(st.backend, backend) == 0) {
            if (layout)
                *layout = st.layout;
            return st.text;
        }
    }
    return NULL;
}

/* failbind ranks above cpu: the default is cpu, failbind passed over. */
static void test_default_over_cpu(void)
{
    kvrt_runtime *rt = open_with(plugin("failbind"), cpu_path);
    const char *name = NULL;
    int rc = rt ? kvrt_runtime_default_backend(rt, &name) : KVRT_ERR_INTERNAL;
    tap_ok(rc == KVRT_OK && name && strcmp(name, "cpu") == 0,
           "failbind ranks above cpu and fails to bind: the default backend is cpu (%s)",
           name ? name : kvrt_error_message());
    int32_t layout = -1;
    const char *why = rt ? step_text(rt, KVRT_TRACE_PASSED_OVER, "failbind", &layout) : NULL;
    tap_ok(why && strstr(why, "failed to bind layout LBHNC") && strstr(why, "TEST_BIND_FAILED") &&
               layout == KVRT_LAYOUT_LBHNC,
           "a passed-over step names failbind, the layout it was tried at (its first, LBHNC) and its reason");
    tap_ok(strstr(warnings, "passed over backend \"failbind\"") && strstr(warnings, "TEST_BIND_FAILED"),
           "the log has it as a warning (what KVRT_DEBUG=1 shows)");
    tap_diag("%s", rt ? kvrt_runtime_trace(rt) : "");

    kvrt_backend *b = NULL;
    rc = rt ? kvrt_runtime_bind(rt, NULL, "LBHNC", &b) : KVRT_ERR_INTERNAL;
    tap_ok(rc == KVRT_OK && strcmp(kvrt_backend_name(b), "cpu") == 0,
           "binding LBHNC (declared by both) with no name binds cpu");
    tap_ok(rt && count_steps(rt, KVRT_TRACE_PASSED_OVER, "failbind") == 1,
           "failbind is passed over once in the trace, not again for the bind");

    /* The library resolves for the default it chose. */
    enum kvrt_layout got;
    tap_ok(rt && kvrt_runtime_resolve(rt, NULL, 0, false, NULL, &got) == KVRT_OK && got == KVRT_LAYOUT_BLHNC,
           "resolution with no backend named resolves for cpu (BLHNC, cpu's first choice)");
    kvrt_runtime_close(rt);
}

/* The binding made to learn that a backend binds is the one handed out. */
static void test_spare_binding(void)
{
    unlink(marker);
    kvrt_runtime *rt = open_with(plugin("failbind"), plugin("subset"));
    const char *name = NULL;
    tap_ok(rt && kvrt_runtime_default_backend(rt, &name) == KVRT_OK && strcmp(name, "subset") == 0,
           "failbind then subset: the default is subset");
    tap_ok(binds_noted("failbind") == 1 && binds_noted("subset") == 1,
           "finding it bound each candidate once: failbind (failed), subset at LBHNC");
    kvrt_runtime_default_backend(rt, &name);
    tap_ok(binds_noted("failbind") == 1 && binds_noted("subset") == 1,
           "asking again binds nothing: the results are kept");
    kvrt_backend *b = NULL, *c = NULL;
    tap_ok(kvrt_runtime_bind(rt, NULL, "LBHNC", &b) == KVRT_OK && strcmp(kvrt_backend_name(b), "subset") == 0 &&
               binds_noted("subset") == 1 && binds_noted("failbind") == 1,
           "binding subset at LBHNC hands out that binding: no bind runs, failbind is not asked again");
    tap_ok(kvrt_runtime_bind(rt, NULL, "LBHNC", &c) == KVRT_OK && c != b && binds_noted("subset") == 2,
           "a second binding at LBHNC is a new one");
    kvrt_runtime_close(rt);

    unlink(marker);
    rt = open_with(plugin("failbind"), plugin("subset"));
    tap_ok(rt && kvrt_runtime_default_backend(rt, &name) == KVRT_OK &&
               kvrt_runtime_bind(rt, NULL, "LBNHC", &b) == KVRT_OK && kvrt_backend_layout(b) == KVRT_LAYOUT_LBNHC &&
               binds_noted("subset") == 2,
           "binding another layout than the trial's binds afresh (the trial binding is let go)");
    kvrt_runtime_close(rt);
}

static void test_named_fails_hard(void)
{
    kvrt_runtime *rt = open_with(plugin("failbind"), cpu_path);
    kvrt_backend *b = NULL;
    int rc = rt ? kvrt_runtime_bind(rt, "failbind", "LBHNC", &b) : KVRT_ERR_INTERNAL;
    tap_ok(rc == KVRT_ERR_DEVICE && strstr(kvrt_error_message(), "backend \"failbind\" failed to bind layout LBHNC") &&
               strstr(kvrt_error_message(), "TEST_BIND_FAILED"),
           "named, a failing backend is a hard error with its reason (%s)", kvrt_status_name(rc));
    setenv(KVRT_BACKEND_ENV, "failbind", 1);
    const char *name = NULL;
    tap_ok(kvrt_runtime_default_backend(rt, &name) == KVRT_OK && strcmp(name, "failbind") == 0,
           "KVRT_BACKEND=failbind: the default is the backend named");
    rc = kvrt_runtime_bind(rt, NULL, "LBHNC", &b);
    tap_ok(rc == KVRT_ERR_DEVICE && strstr(kvrt_error_message(), "TEST_BIND_FAILED"),
           "KVRT_BACKEND=failbind and no name: a hard error too, no fallback to cpu");
    unsetenv(KVRT_BACKEND_ENV);
    tap_ok(kvrt_runtime_bind(rt, NULL, "LBHNC", &b) == KVRT_OK && strcmp(kvrt_backend_name(b), "cpu") == 0,
           "unnamed again, a backend that failed named is passed over for cpu");
    kvrt_runtime_close(rt);
}

static void test_all_fail(void)
{
    kvrt_runtime *rt = open_with(plugin("failbind"), plugin("nodev"));
    const char *name = NULL;
    int rc = rt ? kvrt_runtime_default_backend(rt, &name) : KVRT_ERR_INTERNAL;
    const char *m = kvrt_error_message();
    tap_ok(rc == KVRT_ERR_NODEV && strstr(m, "\"failbind\": failed to bind layout LBHNC: TEST_BIND_FAILED") &&
               strstr(m, "\"nodev\": no device: TEST_NO_DEVICE"),
           "no candidate works: KVRT_ERR_NODEV listing each backend's reason");
    tap_diag("%s", m);
    kvrt_backend *b = NULL;
    rc = rt ? kvrt_runtime_bind(rt, NULL, "LBHNC", &b) : KVRT_ERR_INTERNAL;
    m = kvrt_error_message();
    tap_ok(rc == KVRT_ERR_NODEV && b == NULL && strstr(m, "\"failbind\": failed to bind") &&
               strstr(m, "\"nodev\": no device"),
           "binding with no name: the same, for the layout asked");
    enum kvrt_layout got;
    tap_ok(kvrt_runtime_resolve(rt, NULL, 0, false, NULL, &got) == KVRT_ERR_NODEV,
           "resolving with no backend named has no backend to resolve for");
    kvrt_runtime_close(rt);
}

/* kvrt_runtime_choose_backend says where the name came from, and
 * kvrt_runtime_bind_layout binds a parsed layout as kvrt_runtime_bind
 * binds its name. */
static void test_choice_and_enum_bind(void)
{
    kvrt_runtime *rt = open_with(plugin("failbind"), plugin("subset"));
    const char *name = NULL;
    enum kvrt_setting_source source = KVRT_SOURCE_ENVIRONMENT;
    tap_ok(rt && kvrt_runtime_choose_backend(rt, NULL, &name, &source) == KVRT_OK && strcmp(name, "subset") == 0 &&
               source == KVRT_SOURCE_DEFAULT,
           "nothing named: the default choice (subset), source default");
    setenv(KVRT_BACKEND_ENV, "failbind", 1);
    tap_ok(kvrt_runtime_choose_backend(rt, NULL, &name, &source) == KVRT_OK && strcmp(name, "failbind") == 0 &&
               source == KVRT_SOURCE_ENVIRONMENT,
           "KVRT_BACKEND=failbind: failbind, source environment");
    tap_ok(kvrt_runtime_choose_backend(rt, "subset", &name, &source) == KVRT_OK && strcmp(name, "subset") == 0 &&
               source == KVRT_SOURCE_ARGUMENT,
           "a name given wins over KVRT_BACKEND, source argument");
    setenv(KVRT_BACKEND_ENV, "nosuch", 1);
    int rc = kvrt_runtime_choose_backend(rt, NULL, &name, &source);
    tap_ok(rc == KVRT_ERR_NODEV && strstr(kvrt_error_message(), "KVRT_BACKEND=nosuch") &&
               strstr(kvrt_error_message(), "subset"),
           "KVRT_BACKEND naming no plugin: KVRT_ERR_NODEV naming the variable and the plugins found");
    setenv(KVRT_BACKEND_ENV, "", 1);
    rc = kvrt_runtime_choose_backend(rt, NULL, &name, &source);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "KVRT_BACKEND is set but empty"),
           "KVRT_BACKEND set but empty: KVRT_ERR_INVALID");
    unsetenv(KVRT_BACKEND_ENV);
    rc = kvrt_runtime_choose_backend(rt, "nosuch", &name, NULL);
    tap_ok(rc == KVRT_ERR_NODEV && strstr(kvrt_error_message(), "\"nosuch\"") &&
               !strstr(kvrt_error_message(), "KVRT_BACKEND="),
           "a name given that no plugin has: KVRT_ERR_NODEV naming it, not the variable");

    kvrt_backend *b = NULL;
    tap_ok(kvrt_runtime_bind_layout(rt, "subset", KVRT_LAYOUT_LBNHC, &b) == KVRT_OK &&
               kvrt_backend_layout(b) == KVRT_LAYOUT_LBNHC && strcmp(kvrt_backend_name(b), "subset") == 0,
           "bind_layout binds the value");
    rc = kvrt_runtime_bind_layout(rt, "subset", KVRT_LAYOUT_BLHNC, &b);
    tap_ok(rc == KVRT_ERR_REFUSED && b == NULL && strstr(kvrt_error_message(), "layout \"BLHNC\" is not supported") &&
               strstr(kvrt_error_message(), "LBHNC, LBNHC"),
           "an undeclared layout: refused by its canonical name, listing the declaration");
    rc = kvrt_runtime_bind_layout(rt, "subset", (enum kvrt_layout)9, &b);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "layout value 9") &&
               strstr(kvrt_error_message(), "0 (LBHNC)"),
           "a value outside the enum: KVRT_ERR_INVALID naming it and the valid values");
    kvrt_runtime_close(rt);
}

int main(void)
{
    fixture_test_plugins(&dir, &cpu_path);
    snprintf(marker, sizeof(marker), "%s/fallback-marker-%ld", dir, (long)getpid());
    setenv("KVRT_TEST_MARKER", marker, 1);
    unsetenv(KVRT_BACKEND_ENV);
    unsetenv(KVRT_LAYOUT_ENV);
    tap_plan_dynamic();
    test_default_over_cpu();
    test_spare_binding();
    test_named_fails_hard();
    test_all_fail();
    test_choice_and_enum_bind();
    unlink(marker);
    return tap_done();
}
