/*
 * Tests of the TAP helper itself (after Wayland's sanity-test): every other
 * test trusts tap_ok to report a failure, so prove that a test that must fail
 * does print "not ok", by running this binary again as a child in a mode that
 * is expected to fail and reading what it printed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "subprocess.h"
#include "tap.h"

static int child(const char *mode)
{
    if (strcmp(mode, "fail") == 0) {
        tap_plan(1);
        tap_ok(false, "this test must fail");
    } else if (strcmp(mode, "pass") == 0) {
        tap_plan(1);
        tap_ok(true, "this test must pass");
    } else if (strcmp(mode, "skip") == 0) {
        tap_plan(1);
        tap_skip("nothing to test here");
    } else if (strcmp(mode, "short-plan") == 0) {
        tap_plan(3);
        tap_ok(true, "only one of three");
    } else if (strcmp(mode, "diag") == 0) {
        tap_plan_dynamic();
        tap_diag("first line\nsecond line");
        tap_ok(true, "a description with a # hash and\na newline");
        tap_ok(1 + 1 == 3, "arithmetic is broken");
        printf("# failures %d of %d\n", tap_failures(), tap_count());
    } else if (strcmp(mode, "eq") == 0) {
        tap_plan(2);
        TAP_EQ_U64(7, 7, "seven is seven");
        TAP_EQ_U64(7, 8, "seven is eight");
    } else if (strcmp(mode, "skip-all") == 0) {
        tap_skip_all("no device");
    } else {
        return 2;
    }
    return tap_done();
}

static struct spawn_result run_child(const char *self, const char *mode)
{
    char *argv[] = {(char *)self, (char *)"--child", (char *)mode, NULL};
    struct spawn_result res;
    spawn_run(self, argv, NULL, &res);
    return res;
}

static void expect(const char *self, const char *mode, int want_status, const char *const *want_lines,
                   const char *const *unwanted)
{
    struct spawn_result res = run_child(self, mode);
    bool ok = tap_ok(res.status == want_status, "child '%s' exits %d", mode, want_status);
    for (const char *const *w = want_lines; *w; w++)
        ok &= tap_ok(strstr(res.out, *w) != NULL, "child '%s' prints \"%s\"", mode, *w);
    for (const char *const *u = unwanted; u && *u; u++)
        ok &= tap_ok(strstr(res.out, *u) == NULL, "child '%s' does not print \"%s\"", mode, *u);
    if (!ok)
        tap_diag("status %d, stdout:\n%s\nstderr:\n%s", res.status, res.out, res.err);
    spawn_result_free(&res);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child(argv[2]);

    tap_plan_dynamic();
    const char *self = argv[0];

    expect(self, "fail", 0, (const char *const[]){"1..1\n", "\nnot ok 1 - this test must fail\n", NULL}, NULL);
    expect(self, "pass", 0, (const char *const[]){"1..1\n", "ok 1 - this test must pass\n", NULL},
           (const char *const[]){"not ok", NULL});
    expect(self, "skip", 0, (const char *const[]){"ok 1 # SKIP nothing to test here\n", NULL},
           (const char *const[]){"not ok", NULL});
    /* A plan that does not match what ran must be visible to meson: a
     * non-zero exit is an ERROR under the TAP protocol. */
    expect(self, "short-plan", 1, (const char *const[]){"# planned 3 tests but ran 1\n", NULL}, NULL);
    /* Every line a diagnostic prints must start with "# ", and a description
     * can neither start a directive nor break the line. */
    expect(self, "diag", 0,
           (const char *const[]){"# first line\n# second line\n", "ok 1 - a description with a _ hash and a newline\n",
                                 "not ok 2 - arithmetic is broken\n", "# failures 1 of 2\n", "1..2\n", NULL},
           NULL);
    expect(self, "eq", 0,
           (const char *const[]){"ok 1 - seven is seven\n", "not ok 2 - seven is eight\n", "#   got 7, want 8\n", NULL},
           NULL);
    expect(self, "skip-all", 0, (const char *const[]){"1..0 # SKIP no device\n", NULL},
           (const char *const[]){"ok 1", NULL});
    return tap_done();
}
