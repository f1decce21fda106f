/* Test helper: read back the SVG kvrt wrote (elements and their attributes)
 * and the size of a PNG. */
#ifndef KVRT_TESTS_SVG_SCAN_H
#define KVRT_TESTS_SVG_SCAN_H

#include <stdbool.h>
#include <stddef.h>

#define SVG_SCAN_MAX_ATTRS 32

struct svg_elem {
    size_t num_attrs;
    char *keys[SVG_SCAN_MAX_ATTRS];
    char *values[SVG_SCAN_MAX_ATTRS];
};

/* Every <element ...> of `text`, in document order.  Returns the count, or
 * (size_t)-1 when an element is malformed. */
size_t svg_scan(const char *text, const char *element, struct svg_elem **out);
void svg_scan_free(struct svg_elem *e, size_t n);
/* The value of attribute `key`, or NULL. */
const char *svg_attr(const struct svg_elem *e, const char *key);

/* Width and height from a PNG's header; false when the file is no PNG. */
bool png_size(const char *path, unsigned *width, unsigned *height, long *bytes);

#endif
