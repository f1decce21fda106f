/*
 * Replay driver: feeds every file of the given directories (or the given
 * files) through the fuzz target's LLVMFuzzerTestOneInput, one TAP point
 * per input.  Built with any compiler, so the seed corpus and every crash
 * ever found are re-checked in a plain gcc build too.  A broken invariant
 * aborts the process (meson reports the test as an error, and the last
 * "ok" line names the input before the one that failed).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "tap.h"

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        tap_ok(false, "%s: cannot open: %s", path, strerror(errno));
        return;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap)
            break;
        uint8_t *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    const int read_error = ferror(f);
    fclose(f);
    if (!buf || read_error) {
        free(buf);
        tap_ok(false, "%s: cannot read", path);
        return;
    }
    /* An input of exactly the bytes in the file, as libFuzzer passes it:
     * a copy of that length lets ASan see any read past the end. */
    uint8_t *input = malloc(len ? len : 1);
    if (!input) {
        free(buf);
        tap_ok(false, "%s: out of memory", path);
        return;
    }
    memcpy(input, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(input, len);
    free(input);
    tap_ok(true, "%s (%zu bytes)", path, len);
}

static void replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        /* A target without regressions yet has no folder: nothing to do. */
        tap_diag("%s: %s, skipped", dir, strerror(errno));
        return;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **grown = realloc(names, cap * sizeof(*names));
            if (!grown)
                break;
            names = grown;
        }
        const size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len)))
            break;
        snprintf(names[n], len, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    /* Sorted, so that a failure names the same input on every machine. */
    if (n > 1)
        qsort(names, n, sizeof(*names), cmp_names);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            replay_file(names[i]);
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    tap_plan_dynamic();
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
            replay_dir(argv[i]);
        else if (stat(argv[i], &st) == 0)
            replay_file(argv[i]);
        else
            tap_diag("%s: %s, skipped", argv[i], strerror(errno));
    }
    if (tap_count() == 0)
        tap_ok(false, "no inputs found in the %d paths given", argc - 1);
    return tap_done();
}
