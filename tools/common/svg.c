/* The SVG writer (svg.h).  Numbers are written with two decimals at most so
 * pictures stay small and diff well. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "svg.h"

static void escape(FILE *f, const char *text)
{
    for (const char *p = text; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*p, f);
        }
    }
}

bool svg_open(struct svg *s, const char *path, double width, double height, const char *title)
{
    s->path = path;
    s->failed = false;
    s->f = fopen(path, "w");
    if (!s->f) {
        cli_error(CLI_EXIT_USAGE, "cannot write \"%s\": %s", path, strerror(errno));
        return false;
    }
    fprintf(s->f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Verdana, sans-serif\">\n<title>",
            width, height, width, height);
    escape(s->f, title);
    fputs("</title>\n", s->f);
    fprintf(s->f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", width, height);
    return true;
}

bool svg_close(struct svg *s)
{
    fputs("</svg>\n", s->f);
    bool ok = !ferror(s->f) && !s->failed;
    if (fclose(s->f) != 0)
        ok = false;
    s->f = NULL;
    if (!ok)
        cli_error(CLI_EXIT_INTERNAL, "could not write all of \"%s\"", s->path);
    return ok;
}

void svg_hsl(double h, double s, double l, char out[8])
{
    /* CSS's hsl() to RGB, so every renderer sees the same colour. */
    double c = (1 - fabs(2 * l - 1)) * s, hp = fmod(h, 360) / 60, x = c * (1 - fabs(fmod(hp, 2) - 1));
    double r = 0, g = 0, b = 0;
    if (hp < 1)
        r = c, g = x;
    else if (hp < 2)
        r = x, g = c;
    else if (hp < 3)
        g = c, b = x;
    else if (hp < 4)
        g = x, b = c;
    else if (hp < 5)
        r = x, b = c;
    else
        r = c, b = x;
    double m = l - c / 2;
    snprintf(out, 8, "#%02x%02x%02x", (unsigned)lround((r + m) * 255), (unsigned)lround((g + m) * 255),
             (unsigned)lround((b + m) * 255));
}

static void extra_attrs(FILE *f, const char *fmt, va_list ap)
{
    if (!fmt || !*fmt)
        return;
    fputc(' ', f);
    vfprintf(f, fmt, ap);
}

void svg_rect(struct svg *s, double x, double y, double w, double h, const char *fill, const char *extra, ...)
{
    fprintf(s->f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"", x, y, w, h, fill);
    va_list ap;
    va_start(ap, extra);
    extra_attrs(s->f, extra, ap);
    va_end(ap);
    fputs("/>\n", s->f);
}

void svg_line(struct svg *s, double x1, double y1, double x2, double y2, const char *stroke, double width,
              const char *extra)
{
    fprintf(s->f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" stroke-width=\"%.2f\"%s%s/>\n",
            x1, y1, x2, y2, stroke, width, extra ? " " : "", extra ? extra : "");
}

void svg_text(struct svg *s, double x, double y, double size, const char *anchor, const char *fill, const char *fmt,
              ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(s->f, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\" text-anchor=\"%s\" fill=\"%s\">", x, y, size, anchor,
            fill);
    escape(s->f, buf);
    fputs("</text>\n", s->f);
}

void svg_group_begin(struct svg *s, const char *extra, ...)
{
    fputs("<g", s->f);
    va_list ap;
    va_start(ap, extra);
    extra_attrs(s->f, extra, ap);
    va_end(ap);
    fputs(">\n", s->f);
}

void svg_group_end(struct svg *s)
{
    fputs("</g>\n", s->f);
}

void svg_raw(struct svg *s, const char *markup)
{
    fputs(markup, s->f);
}
