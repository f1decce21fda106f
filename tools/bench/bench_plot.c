/* kvrt bench --plot: GB/s of each layout, grouped by operation, with the
 * machine's memcpy as a dashed line to read every bar against. */
#include <math.h>
#include <string.h>

#include "bench.h"
#include "svg.h"

#define BAR_W 18.0
#define GROUP_GAP 34.0
#define LEFT 70.0
#define TOP 50.0
#define PLOT_H 300.0

/* One hue per layout, in table order, fixed so pictures compare. */
static void layout_colour(enum kvrt_layout l, char out[8])
{
    svg_hsl(210 + 60.0 * (int)l, 0.55, 0.5, out);
}

/* 1, 2 or 5 times a power of ten, so ticks land on round numbers. */
static double tick_step(double top)
{
    double raw = top / 5, p = pow(10, floor(log10(raw)));
    return raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
}

int bench_plot_svg(const char *path, double memcpy_gbps, const struct bench_result *r, size_t n)
{
    /* Groups: consecutive results of one backend and op. */
    size_t groups = 0, most = 1, in_group = 0;
    double top = memcpy_gbps;
    bool present[KVRT_NUM_LAYOUTS] = {false};
    for (size_t i = 0; i < n; i++) {
        bool fresh = i == 0 || r[i].op != r[i - 1].op || strcmp(r[i].backend, r[i - 1].backend) != 0;
        in_group = fresh ? 1 : in_group + 1;
        groups += fresh;
        most = in_group > most ? in_group : most;
        double g = bench_gbps(r[i].bytes, r[i].best_s);
        top = g > top ? g : top;
        present[r[i].layout] = true;
    }
    const double step = tick_step(top > 0 ? top * 1.1 : 1);
    top = ceil((top > 0 ? top * 1.1 : 1) / step) * step;
    const double group_w = (double)most * BAR_W + GROUP_GAP;
    double width = LEFT + (double)groups * group_w + 160;
    width = width < 640 ? 640 : width;
    const double height = TOP + PLOT_H + 90;
    struct svg s;
    if (!svg_open(&s, path, width, height, "kvrt bench: throughput per layout and operation"))
        return CLI_EXIT_USAGE;
    svg_text(&s, LEFT, 24, 15, "start", "#222", "kvrt bench: GB/s per operation and layout (higher is better)");
    /* Axis and grid. */
    for (unsigned t = 0; (double)t * step <= top + step / 2; t++) {
        const double v = (double)t * step;
        double y = TOP + PLOT_H - v / top * PLOT_H;
        svg_line(&s, LEFT, y, width - 150, y, "#dddddd", 1, NULL);
        svg_text(&s, LEFT - 6, y + 4, 11, "end", "#444", "%g", v);
    }
    svg_text(&s, 16, TOP + PLOT_H / 2, 12, "middle", "#444", "GB/s");
    svg_line(&s, LEFT, TOP, LEFT, TOP + PLOT_H, "#444", 1, NULL);
    /* Bars. */
    size_t g = 0, k = 0;
    for (size_t i = 0; i < n; i++) {
        bool fresh = i == 0 || r[i].op != r[i - 1].op || strcmp(r[i].backend, r[i - 1].backend) != 0;
        if (fresh && i > 0)
            g++;
        k = fresh ? 0 : k + 1;
        const double x0 = LEFT + GROUP_GAP / 2 + (double)g * group_w;
        if (fresh)
            svg_text(&s, x0 + (double)most * BAR_W / 2, TOP + PLOT_H + 18, 12, "middle", "#222", "%s%s%s",
                     bench_op_names[r[i].op], n && strcmp(r[0].backend, r[n - 1].backend) != 0 ? " / " : "",
                     n && strcmp(r[0].backend, r[n - 1].backend) != 0 ? r[i].backend : "");
        const double x = x0 + (double)k * BAR_W;
        if (r[i].skipped) {
            svg_text(&s, x + BAR_W / 2, TOP + PLOT_H - 4, 9, "middle", "#888", "n/a");
            continue;
        }
        const double gbps = bench_gbps(r[i].bytes, r[i].best_s), h = gbps / top * PLOT_H;
        char fill[8];
        layout_colour(r[i].layout, fill);
        svg_rect(&s, x + 1, TOP + PLOT_H - h, BAR_W - 2, h, fill,
                 "class=\"bar\" data-backend=\"%s\" data-op=\"%s\" data-layout=\"%s\" data-gbps=\"%.3f\"", r[i].backend,
                 bench_op_names[r[i].op], kvrt_layout_name(r[i].layout), gbps);
    }
    /* The memcpy line over the bars. */
    const double my = TOP + PLOT_H - memcpy_gbps / top * PLOT_H;
    svg_line(&s, LEFT, my, width - 150, my, "#c0392b", 2, "stroke-dasharray=\"6 4\" class=\"memcpy\"");
    svg_text(&s, width - 146, my + 4, 11, "start", "#c0392b", "memcpy %.2f GB/s", memcpy_gbps);
    /* Legend. */
    double ly = TOP + 30;
    for (int l = 0; l < KVRT_NUM_LAYOUTS; l++) {
        if (!present[l])
            continue;
        char fill[8];
        layout_colour((enum kvrt_layout)l, fill);
        svg_rect(&s, width - 146, ly - 10, 12, 12, fill, NULL);
        svg_text(&s, width - 128, ly, 12, "start", "#222", "%s", kvrt_layout_name((enum kvrt_layout)l));
        ly += 18;
    }
    svg_text(&s, LEFT, height - 20, 11, "start", "#555",
             "best of the timed repetitions; bytes counted as in 'kvrt bench --help'");
    return svg_close(&s) ? CLI_EXIT_OK : CLI_EXIT_INTERNAL;
}
