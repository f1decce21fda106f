#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "svg_scan.h"

static char *copy(const char *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

/* Attributes up to "/>" or ">"; false when the syntax is not key="value". */
static bool parse_attrs(const char **pp, struct svg_elem *e)
{
    const char *p = *pp;
    for (;;) {
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '/' || *p == '>' || *p == '\0')
            break;
        const char *k = p;
        while (*p && *p != '=' && !isspace((unsigned char)*p))
            p++;
        if (*p != '=' || p[1] != '"' || e->num_attrs == SVG_SCAN_MAX_ATTRS)
            return false;
        size_t klen = (size_t)(p - k);
        p += 2;
        const char *v = p;
        while (*p && *p != '"')
            p++;
        if (*p != '"')
            return false;
        e->keys[e->num_attrs] = copy(k, klen);
        e->values[e->num_attrs++] = copy(v, (size_t)(p - v));
        p++;
    }
    *pp = p;
    return *p != '\0';
}

size_t svg_scan(const char *text, const char *element, struct svg_elem **out)
{
    size_t n = 0, cap = 0, len = strlen(element);
    struct svg_elem *list = NULL;
    for (const char *p = text; (p = strchr(p, '<')) != NULL; p++) {
        if (strncmp(p + 1, element, len) != 0 || !isspace((unsigned char)p[1 + len]))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            struct svg_elem *grown = realloc(list, cap * sizeof(*list));
            if (!grown) {
                svg_scan_free(list, n);
                *out = NULL;
                return (size_t)-1;
            }
            list = grown;
        }
        memset(&list[n], 0, sizeof(list[n]));
        const char *q = p + 1 + len;
        if (!parse_attrs(&q, &list[n])) {
            svg_scan_free(list, n + 1);
            *out = NULL;
            return (size_t)-1;
        }
        n++;
    }
    *out = list;
    return n;
}

void svg_scan_free(struct svg_elem *e, size_t n)
{
    for (size_t i = 0; e && i < n; i++)
        for (size_t k = 0; k < e[i].num_attrs; k++) {
            free(e[i].keys[k]);
            free(e[i].values[k]);
        }
    free(e);
}

const char *svg_attr(const struct svg_elem *e, const char *key)
{
    for (size_t k = 0; k < e->num_attrs; k++)
        if (strcmp(e->keys[k], key) == 0)
            return e->values[k];
    return NULL;
}

bool png_size(const char *path, unsigned *width, unsigned *height, long *bytes)
{
    static const unsigned char magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char h[24];
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    bool ok = fread(h, 1, sizeof(h), f) == sizeof(h) && memcmp(h, magic, 8) == 0 && memcmp(h + 12, "IHDR", 4) == 0;
    fseek(f, 0, SEEK_END);
    *bytes = ftell(f);
    fclose(f);
    if (ok) {
        *width = (unsigned)h[16] << 24 | (unsigned)h[17] << 16 | (unsigned)h[18] << 8 | h[19];
        *height = (unsigned)h[20] << 24 | (unsigned)h[21] << 16 | (unsigned)h[22] << 8 | h[23];
    }
    return ok;
}
