/*
 * A small TAP producer: one plan per test binary, diagnostics on "# " lines.
 *
 *   tap_plan(n)            "1..n"; or tap_plan_dynamic() + tap_done()
 *   tap_ok(cond, fmt...)   one test point
 *   tap_skip(fmt...)       "ok N # SKIP reason"
 *   tap_skip_all(fmt...)   "1..0 # SKIP reason" and exit 0
 *   tap_diag(fmt...)       "# ..." (never breaks the stream)
 *   tap_exit()             exit status 0; failures are reported as "not ok"
 *
 * Meson treats a non-zero exit under TAP as an ERROR, so the exit code only
 * signals failure when the plan itself went wrong.
 */
#ifndef KVRT_TESTS_TAP_H
#define KVRT_TESTS_TAP_H

#include <stdbool.h>

#if defined(__GNUC__)
#define TAP_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TAP_PRINTF(a, b)
#endif

void tap_plan(int n);
void tap_plan_dynamic(void);
bool tap_ok(bool cond, const char *fmt, ...) TAP_PRINTF(2, 3);
#ifdef __clang_analyzer__
/* For clang-tidy's analyser, which does not look into tap.c: the value of
 * tap_ok(cond, ...) is cond, so the code after
 * `if (!tap_ok(p != NULL, ...)) return ...;` runs only with p set.  (Only
 * there: compilers would warn about the unused value of a bare tap_ok.) */
#define tap_ok(cond, ...) ((cond) ? ((tap_ok)(true, __VA_ARGS__), true) : ((tap_ok)(false, __VA_ARGS__), false))
#endif
void tap_skip(const char *fmt, ...) TAP_PRINTF(1, 2);
void tap_skip_all(const char *fmt, ...) TAP_PRINTF(1, 2);
void tap_diag(const char *fmt, ...) TAP_PRINTF(1, 2);
int tap_failures(void);
int tap_count(void);
/* Print the trailing plan for tap_plan_dynamic(); return the exit status. */
int tap_done(void);

/* Convenience: compare integers with a diagnostic on mismatch. */
#define TAP_EQ_U64(got, want, ...)                                                                                     \
    (tap_ok((unsigned long long)(got) == (unsigned long long)(want), __VA_ARGS__)                                      \
         ? true                                                                                                        \
         : (tap_diag("  got %llu, want %llu", (unsigned long long)(got), (unsigned long long)(want)), false))

#endif
