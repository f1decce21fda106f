/*
 * A very small SVG writer: rectangles, lines, text and groups, with every
 * text escaped.  Machine-checkable attributes (data-*) go in `extra`, a
 * printf-style attribute string written as is.
 */
#ifndef KVRT_TOOLS_SVG_H
#define KVRT_TOOLS_SVG_H

#include <stdbool.h>
#include <stdio.h>

#include "cli.h"

struct svg {
    FILE *f;
    const char *path;
    bool failed;
};

/* Open `path` and write the header for a width x height picture. */
bool svg_open(struct svg *s, const char *path, double width, double height, const char *title);
/* Finish and close; false (error printed) if anything could not be written. */
bool svg_close(struct svg *s);

/* A colour from hue (degrees), saturation and lightness (0..1), as #rrggbb. */
void svg_hsl(double h, double s, double l, char out[8]);

void svg_rect(struct svg *s, double x, double y, double w, double h, const char *fill, const char *extra, ...)
    KVRT_PRINTF(7, 8);
void svg_line(struct svg *s, double x1, double y1, double x2, double y2, const char *stroke, double width,
              const char *extra);
/* Text at (x, y); anchor "start", "middle" or "end". */
void svg_text(struct svg *s, double x, double y, double size, const char *anchor, const char *fill, const char *fmt,
              ...) KVRT_PRINTF(7, 8);
void svg_group_begin(struct svg *s, const char *extra, ...) KVRT_PRINTF(2, 3);
void svg_group_end(struct svg *s);
/* Raw markup (definitions), written as is. */
void svg_raw(struct svg *s, const char *markup);

#endif
