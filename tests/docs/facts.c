/*
 * Facts the docs restate that libkvrt renders: each doc that names the
 * backend priority order gives it as kvrt_runtime_backend_priority() does,
 * a default written as "NAME (value)" has libkvrt's value, and every
 * "libkvrt.so.N" in the docs names the soname of this API major.  Line
 * breaks and Markdown emphasis are ignored.
 *
 *   test-docs-facts SOURCE_ROOT
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/kvrt.h>

#include "tap.h"

/* The file with runs of white space as one space and '*' and '`' dropped. */
static char *read_normalized(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *text = NULL;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)size + 1)) != NULL) {
        size_t n = fread(text, 1, (size_t)size, f), out = 0;
        char prev = ' ';
        for (size_t i = 0; i < n; i++) {
            char c = text[i];
            if (c == '\n' || c == '\t')
                c = ' ';
            if (c == '*' || c == '`' || (c == ' ' && prev == ' '))
                continue;
            text[out++] = c;
            prev = c;
        }
        text[out] = '\0';
    }
    fclose(f);
    return text;
}

/* Every "priority order" in the doc is followed (after ": " or " (") by
 * the rendered order; at least one is. */
static void check_priority(const char *root, const char *doc)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", root, doc);
    char *text = read_normalized(path);
    if (!tap_ok(text != NULL, "%s is readable", doc))
        return;
    const char *want = kvrt_runtime_backend_priority();
    size_t found = 0, right = 0;
    for (const char *p = strstr(text, "priority order"); p; p = strstr(p + 1, "priority order")) {
        const char *after = p + strlen("priority order");
        if (strncmp(after, ": ", 2) == 0 || strncmp(after, " (", 2) == 0)
            after += 2;
        found++;
        if (strncmp(after, want, strlen(want)) == 0)
            right++;
        else
            tap_diag("  %s: \"%.100s\"", doc, p);
    }
    tap_ok(found > 0 && right == found, "%s gives the priority order as libkvrt renders it (%zu of %zu)", doc, right,
           found);
    free(text);
}

/* Every "key (" in the doc goes on with "value)"; at least one does. */
static void check_value(const char *root, const char *doc, const char *key, const char *value)
{
    char path[1024], want[128];
    snprintf(path, sizeof(path), "%s/%s", root, doc);
    snprintf(want, sizeof(want), "%s)", value);
    char *text = read_normalized(path);
    if (!tap_ok(text != NULL, "%s is readable", doc))
        return;
    size_t found = 0, right = 0;
    for (const char *p = strstr(text, key); p; p = strstr(p + 1, key)) {
        const char *after = p + strlen(key);
        if (strncmp(after, " (", 2) != 0)
            continue;
        found++;
        right += strncmp(after + 2, want, strlen(want)) == 0;
    }
    tap_ok(found > 0 && right == found, "%s gives %s as %s (%zu of %zu)", doc, key, value, right, found);
    free(text);
}

/* Count the "libkvrt.so.N" of one file, and those that are `want`. */
static void count_sonames(const char *root, const char *rel, const char *want, size_t *found, size_t *right)
{
    static const char prefix[] = "libkvrt.so.";
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    char *text = read_normalized(path);
    for (const char *p = text ? strstr(text, prefix) : NULL; p; p = strstr(p + 1, prefix)) {
        const char *n = p + strlen(prefix), *end = p + strlen(want);
        if (*n < '0' || *n > '9')
            continue;
        (*found)++;
        if (strncmp(p, want, strlen(want)) == 0 && (*end < '0' || *end > '9'))
            (*right)++;
        else
            tap_diag("  %s: \"%.24s\"", rel, p);
    }
    free(text);
}

/* Every "libkvrt.so.N" of the README and the docs folder has N the API major. */
static void check_soname(const char *root)
{
    char want[32], dir[1024];
    snprintf(want, sizeof(want), "libkvrt.so.%d", KVRT_API_VERSION_MAJOR);
    snprintf(dir, sizeof(dir), "%s/docs", root);
    DIR *d = opendir(dir);
    if (!d) {
        tap_ok(false, "%s is readable", dir);
        return;
    }
    size_t found = 0, right = 0;
    count_sonames(root, "README.md", want, &found, &right);
    for (const struct dirent *e = readdir(d); e; e = readdir(d)) {
        size_t n = strlen(e->d_name);
        char rel[512];
        if (n <= 3 || strcmp(e->d_name + n - 3, ".md") != 0)
            continue;
        snprintf(rel, sizeof(rel), "docs/%s", e->d_name);
        count_sonames(root, rel, want, &found, &right);
    }
    closedir(d);
    tap_ok(found > 0 && right == found, "the docs name the soname as %s (%zu of %zu)", want, right, found);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        printf("Bail out! usage: %s SOURCE_ROOT\n", argv[0]);
        return 1;
    }
    tap_plan_dynamic();
    static const char *const priority_docs[] = {"docs/design.md", "docs/runtime.md", "docs/cli.md"};
    for (size_t i = 0; i < sizeof(priority_docs) / sizeof(priority_docs[0]); i++)
        check_priority(argv[1], priority_docs[i]);
    char block_size[32];
    snprintf(block_size, sizeof(block_size), "%d", KVRT_DEFAULT_BLOCK_SIZE);
    check_value(argv[1], "docs/python.md", "KVRT_DEFAULT_BLOCK_SIZE", block_size);
    check_value(argv[1], "docs/python.md", "kvrt_layout_default()", kvrt_layout_name(kvrt_layout_default()));
    char tp_max[32];
    snprintf(tp_max, sizeof(tp_max), "%u", KVRT_TP_MAX_SIZE);
    check_value(argv[1], "docs/parallel.md", "KVRT_TP_MAX_SIZE", tp_max);
    check_soname(argv[1]);
    return tap_done();
}
