#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "vectors_json.h"

const char *vectors_dir_arg(int argc, char **argv)
{
    if (argc > 1)
        return argv[1];
    return getenv("KVRT_VECTORS_DIR");
}

json_t *vectors_load(const char *dir, const char *file)
{
    char path[4096];
    json_error_t err;
    if (!dir) {
        printf("Bail out! no vectors directory: pass it as argv[1] or KVRT_VECTORS_DIR\n");
        return NULL;
    }
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    json_t *root = json_load_file(path, 0, &err);
    if (!root)
        printf("Bail out! cannot read %s: %s (line %d)\n", path, err.text, err.line);
    return root;
}

bool vectors_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

char *vectors_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        char *b = realloc(buf, cap * 2);
        if (!b) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = b;
        cap *= 2;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    *len = n;
    return buf;
}
