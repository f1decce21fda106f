#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static int planned = -1;
static int count;
static int failures;
static bool dynamic;

void tap_plan(int n)
{
    planned = n;
    printf("1..%d\n", n);
    fflush(stdout);
}

void tap_plan_dynamic(void)
{
    dynamic = true;
}

/* Diagnostics may contain newlines; every line must start with "# " or the
 * TAP parser flags it. */
static void emit_comment(const char *prefix, const char *text)
{
    const char *p = text;
    do {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        printf("%s%.*s\n", prefix, len, p);
        p = nl ? nl + 1 : NULL;
    } while (p && *p);
}

static void sanitize_line(char *s)
{
    for (; *s; s++)
        if (*s == '\n' || *s == '#')
            *s = (*s == '#') ? '_' : ' ';
}

bool(tap_ok)(bool cond, const char *fmt, ...)
{
    char desc[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(desc, sizeof(desc), fmt, ap);
    va_end(ap);
    sanitize_line(desc);
    count++;
    if (!cond)
        failures++;
    printf("%s %d - %s\n", cond ? "ok" : "not ok", count, desc);
    fflush(stdout);
    return cond;
}

void tap_skip(const char *fmt, ...)
{
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    sanitize_line(why);
    count++;
    printf("ok %d # SKIP %s\n", count, why);
    fflush(stdout);
}

void tap_skip_all(const char *fmt, ...)
{
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    sanitize_line(why);
    printf("1..0 # SKIP %s\n", why);
    fflush(stdout);
    exit(0);
}

void tap_diag(const char *fmt, ...)
{
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    emit_comment("# ", text);
    fflush(stdout);
}

int tap_failures(void)
{
    return failures;
}

int tap_count(void)
{
    return count;
}

int tap_done(void)
{
    if (dynamic) {
        printf("1..%d\n", count);
    } else if (planned >= 0 && planned != count) {
        printf("# planned %d tests but ran %d\n", planned, count);
        fflush(stdout);
        return 1;
    }
    fflush(stdout);
    return 0;
}
