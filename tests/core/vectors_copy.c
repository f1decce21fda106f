/*
 * tests/vectors/ must be an exact copy of the shared acceptance vectors:
 * every data file (*.json) in either folder must exist in the other, byte
 * for byte.  The README is not data: this tree's own describes the vectors
 * against this tree's docs.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tap.h"
#include "vectors_json.h"

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_data(const char *name)
{
    size_t n = strlen(name);
    return n > 5 && strcmp(name + n - 5, ".json") == 0;
}

/* Sorted names of the data files in dir; NULL on error. */
static char **list_files(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    size_t n = 0, cap = 16;
    char **names = malloc(cap * sizeof(*names));
    if (!names) {
        closedir(d);
        return NULL;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || !is_data(e->d_name) || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            char **more = realloc(names, 2 * cap * sizeof(*names));
            if (!more)
                break;
            names = more;
            cap *= 2;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (names)
        qsort(names, n, sizeof(*names), compare_names);
    *count = n;
    return names;
}

static void compare_file(const char *ours, const char *shared, const char *name)
{
    char a[4096], b[4096];
    size_t la = 0, lb = 0;
    snprintf(a, sizeof(a), "%s/%s", ours, name);
    snprintf(b, sizeof(b), "%s/%s", shared, name);
    char *da = vectors_read_file(a, &la);
    char *db = vectors_read_file(b, &lb);
    if (!da || !db) {
        tap_ok(false, "%s: present in both folders", name);
        tap_diag("missing or unreadable: %s", !da ? a : b);
    } else if (la != lb || memcmp(da, db, la) != 0) {
        size_t at = 0;
        while (at < la && at < lb && da[at] == db[at])
            at++;
        tap_ok(false, "%s: identical to the shared copy", name);
        tap_diag("%s (%zu bytes) and %s (%zu bytes) first differ at byte %zu; copy the shared "
                 "file over tests/vectors/",
                 a, la, b, lb, at);
    } else {
        tap_ok(true, "%s: identical to the shared copy (%zu bytes)", name, la);
    }
    free(da);
    free(db);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        printf("Bail out! usage: %s TESTS_VECTORS_DIR SHARED_VECTORS_DIR\n", argv[0]);
        return 1;
    }
    const char *ours = argv[1], *shared = argv[2];
    struct stat st;
    if (stat(shared, &st) != 0 || !S_ISDIR(st.st_mode)) {
        int why = errno ? errno : ENOTDIR;
        tap_skip_all("no shared vectors folder at %s (%s), so there is nothing to compare "
                     "tests/vectors/ against",
                     shared, strerror(why));
    }

    size_t n_ours = 0, n_shared = 0;
    char **in_ours = list_files(ours, &n_ours);
    char **in_shared = list_files(shared, &n_shared);
    tap_plan_dynamic();
    if (!tap_ok(in_ours && in_shared, "both folders can be listed"))
        return tap_done();
    tap_ok(n_shared > 0, "the shared folder holds %zu files", n_shared);

    for (size_t i = 0; i < n_shared; i++)
        compare_file(ours, shared, in_shared[i]);
    /* Files only we have would be acceptance data nobody else agreed to. */
    for (size_t i = 0; i < n_ours; i++) {
        bool found = n_shared > 0 && bsearch(&in_ours[i], in_shared, n_shared, sizeof(*in_shared), compare_names);
        if (!found) {
            tap_ok(false, "%s: also in the shared folder", in_ours[i]);
            tap_diag("%s/%s exists only in tests/vectors/", ours, in_ours[i]);
        }
    }
    for (size_t i = 0; i < n_ours; i++)
        free(in_ours[i]);
    for (size_t i = 0; i < n_shared; i++)
        free(in_shared[i]);
    free(in_ours);
    free(in_shared);
    return tap_done();
}
