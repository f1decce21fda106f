/*
 * The memory map as a picture.  Memory runs left to right and wraps every
 * `row_bytes` (one page of the largest set), so one row is one page where
 * pages are contiguous.  Colour says the layer (hue) and the block (shade),
 * stripes the heads, hatching a state page; a black bar marks where a new
 * block starts, a red bar under the rows the contiguous runs that move
 * block 0.  Every page piece carries data-* attributes with its bytes so
 * tests (and people) can check the picture against the geometry.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "draw.h"
#include "svg.h"

#define LEFT 96.0
#define MAP_W 880.0
#define ROW_H 15.0
#define BAR_H 10.0
#define TOP 92.0
#define PANEL_GAP 34.0
#define LEGEND_W 250.0
/* Past this many head spans per page a stripe would be under a pixel. */
#define MAX_STRIPES_PER_ROW 440

static double layer_hue(uint32_t layer)
{
    return fmod(200.0 + 137.508 * layer, 360.0);
}

static void piece_colour(const struct draw_piece *p, uint64_t head, bool stripe, char out[8])
{
    double light = 0.40 + 0.14 * (double)(p->block % 3);
    if (stripe && head % 2)
        light += 0.07;
    svg_hsl(layer_hue(p->layer), p->state ? 0.30 : 0.62, light, out);
}

struct geom {
    double y0; /* top of the panel's first row */
    uint64_t row_bytes;
};

static double x_of(const struct geom *g, uint64_t offset)
{
    return LEFT + (double)(offset % g->row_bytes) / (double)g->row_bytes * MAP_W;
}

static double y_of(const struct geom *g, uint64_t offset)
{
    const uint64_t row = offset / g->row_bytes; /* whole rows */
    return g->y0 + (double)row * ROW_H;
}

/* Call fn for each row-bounded segment of [offset, offset + length). */
/* seg_off and seg_len name the loop variables it declares, so they cannot
 * be parenthesised there. */
#define FOR_SEGMENTS(g, offset, length, seg_off, seg_len)                                                              \
    for (uint64_t seg_off = (offset), seg_end_ = (offset) + (length),                                                  \
                  seg_len; /* NOLINT(bugprone-macro-parentheses): declares the named variables */                      \
         (seg_off) < seg_end_ && (((seg_len) = (((seg_off) / (g)->row_bytes + 1) * (g)->row_bytes < seg_end_           \
                                                    ? ((seg_off) / (g)->row_bytes + 1) * (g)->row_bytes                \
                                                    : seg_end_) -                                                      \
                                               (seg_off)),                                                             \
                                  1);                                                                                  \
         (seg_off) += (seg_len))

static void draw_piece(struct svg *s, const struct geom *g, const struct draw_map *m, const struct draw_piece *p,
                       bool stripes)
{
    char fill[8];
    /* A single-head piece gets its head's stripe shade, so heads show there too. */
    piece_colour(p, p->head >= 0 ? (uint64_t)p->head : 0, p->head >= 0 && m->heads_max > 1, fill);
    FOR_SEGMENTS(g, p->offset, p->length, off, len)
    {
        const double x = x_of(g, off), w = (double)len / (double)g->row_bytes * MAP_W;
        if (p->head >= 0)
            svg_rect(s, x, y_of(g, off), w, BAR_H, fill,
                     "class=\"page\" data-group=\"%zu\" data-layer=\"%" PRIu32 "\" data-name=\"%s\" "
                     "data-block=\"%" PRIu64 "\" data-head=\"%" PRId64 "\" data-offset=\"%" PRIu64 "\" "
                     "data-length=\"%" PRIu64 "\"%s",
                     p->group, p->layer, p->name, p->block, p->head, off, len, p->state ? " data-state=\"1\"" : "");
        else
            svg_rect(s, x, y_of(g, off), w, BAR_H, fill,
                     "class=\"page\" data-group=\"%zu\" data-layer=\"%" PRIu32 "\" data-name=\"%s\" "
                     "data-block=\"%" PRIu64 "\" data-offset=\"%" PRIu64 "\" data-length=\"%" PRIu64 "\"%s",
                     p->group, p->layer, p->name, p->block, off, len, p->state ? " data-state=\"1\"" : "");
        if (p->state)
            svg_rect(s, x, y_of(g, off), w, BAR_H, "url(#hatch)", NULL);
    }
    if (!stripes || m->heads_max < 2)
        return;
    for (size_t i = 0; i < p->num_spans; i++) {
        const struct draw_span *sp = &m->spans[p->first_span + i];
        if (sp->head % 2 == 0)
            continue; /* the piece's own colour is the even heads' stripe */
        piece_colour(p, sp->head, true, fill);
        FOR_SEGMENTS(g, sp->offset, sp->length, off, len)
        svg_rect(s, x_of(g, off), y_of(g, off), (double)len / (double)g->row_bytes * MAP_W, BAR_H, fill,
                 "class=\"head\" data-head=\"%" PRIu64 "\"", sp->head);
    }
}

static void draw_labels(struct svg *s, const struct geom *g, const struct draw_map *m, size_t group)
{
    uint64_t prev_block = UINT64_MAX;
    for (size_t i = 0; i < m->num_pieces; i++) {
        const struct draw_piece *p = &m->pieces[i];
        if (p->group != group)
            continue;
        const double x = x_of(g, p->offset), y = y_of(g, p->offset);
        const double w = (double)p->length / (double)g->row_bytes * MAP_W;
        if (p->block != prev_block)
            svg_rect(s, x - 1, y - 2, 2.5, BAR_H + 4, "#111111", "class=\"block-start\" data-block=\"%" PRIu64 "\"",
                     p->block);
        prev_block = p->block;
        if (w >= 62) {
            char head[24] = "";
            if (p->head >= 0 && m->heads_max > 1 && !p->state)
                snprintf(head, sizeof(head), " h%" PRId64, p->head);
            svg_text(s, x + 4, y + BAR_H - 2, 8, "start", "#ffffff", "L%" PRIu32 " B%" PRIu64 "%s", p->layer, p->block,
                     head);
        } else if (w >= 22)
            svg_text(s, x + 3, y + BAR_H - 2, 8, "start", "#ffffff", "B%" PRIu64, p->block);
    }
}

static void draw_runs(struct svg *s, const struct geom *g, const struct draw_map *m, uint64_t end, size_t panel)
{
    for (size_t i = 0; i < m->num_runs; i++) {
        if (m->runs[i].offset >= end)
            continue;
        FOR_SEGMENTS(g, m->runs[i].offset, m->runs[i].length, off, len)
        svg_rect(s, x_of(g, off), y_of(g, off) + BAR_H + 1, (double)len / (double)g->row_bytes * MAP_W, 2.5, "#d62728",
                 "class=\"run\" data-panel=\"%zu\" data-run=\"%zu\" data-offset=\"%" PRIu64 "\" "
                 "data-length=\"%" PRIu64 "\"",
                 panel, i, off, len);
    }
}

static void legend(struct svg *s, const struct draw_map *m, const struct kvrt_model_info *model, double x, double y)
{
    svg_text(s, x, y, 12, "start", "#222", "Legend");
    y += 18;
    uint32_t shown = m->num_layers < 12 ? (uint32_t)m->num_layers : 12;
    for (uint32_t l = 0; l < shown; l++) {
        const struct draw_piece *p = NULL;
        for (size_t i = 0; i < m->num_pieces && !p; i++)
            if (m->pieces[i].layer == l)
                p = &m->pieces[i];
        if (!p) /* no piece of this layer in the map: nothing to show */
            continue;
        struct draw_piece tmp = *p;
        char fill[8];
        for (uint64_t b = 0; b < 3 && b < m->num_blocks; b++) {
            tmp.block = b;
            piece_colour(&tmp, 0, false, fill);
            svg_rect(s, x + 10.0 * (double)b, y - 9, 10, 10, fill, NULL);
        }
        svg_text(s, x + 36, y, 10, "start", "#222", "L%" PRIu32 " %s%s", l, p->name, p->state ? " (state)" : "");
        y += 14;
    }
    if (shown < m->num_layers)
        svg_text(s, x, y, 10, "start", "#555", "... %" PRIu64 " layers in all (hue by layer)", m->num_layers), y += 14;
    y += 6;
    static const char *const lines[] = {
        "shade: the block (darker = lower id)",    "stripes: head slots (lighter = odd head)",
        "hatched: a state page (one per block)",   "black bar: a new block starts",
        "red underline: the contiguous byte runs", "   that move block 0 (transfer regions)",
        "grey: padding or bytes of no page",       "one row = one page of the largest set",
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        svg_text(s, x, y, 10, "start", "#333", "%s", lines[i]);
        y += 14;
    }
    (void)model;
}

/* One sentence on what the picture shows, from the layout's properties. */
static const char *layout_story(enum kvrt_layout l)
{
    if (kvrt_layout_block_outermost(l))
        return kvrt_layout_block_compact(l)
                   ? "blocks are outermost: each block is one stretch holding every layer's page"
                   : "blocks are outermost, then heads: each head of a block holds a piece of every layer";
    return kvrt_layout_block_compact(l)
               ? "layers are outermost: each layer has its own region, its blocks one after another"
               : "layers are outermost, then heads: a page is split into one piece per head";
}

int draw_svg(const struct draw_map *m, const struct kvrt_model_info *model, const char *path)
{
    double height = TOP + 40;
    for (size_t g = 0; g < m->num_groups; g++)
        height += PANEL_GAP + (double)draw_map_rows(m, g) * ROW_H;
    height = height < 420 ? 420 : height;
    const double width = LEFT + MAP_W + 30 + LEGEND_W;
    char title[256], order[16];
    int o[KVRT_NUM_AXES];
    static const char letters[] = "LBHNC";
    kvrt_layout_stride_order(m->layout, o);
    snprintf(order, sizeof(order), "%c %c %c %c %c", letters[o[0]], letters[o[1]], letters[o[2]], letters[o[3]],
             letters[o[4]]);
    snprintf(title, sizeof(title), "kvrt draw: %s (physical order %s), %s, %" PRIu64 " blocks",
             kvrt_layout_name(m->layout), order, model->name, m->num_blocks);
    struct svg s;
    if (!svg_open(&s, path, width, height, title))
        return CLI_EXIT_USAGE;
    svg_raw(&s, "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
                "patternTransform=\"rotate(45)\"><rect width=\"2\" height=\"6\" fill=\"#ffffff\" "
                "fill-opacity=\"0.45\"/></pattern></defs>\n");
    svg_text(&s, LEFT, 26, 16, "start", "#111", "%s", title);
    svg_text(&s, LEFT, 46, 11, "start", "#333",
             "%" PRIu64 " layers, %zu group%s; one row = %" PRIu64 " bytes; block 0 moves as %zu contiguous run%s",
             m->num_layers, m->num_groups, m->num_groups == 1 ? "" : "s", m->row_bytes, m->num_runs,
             m->num_runs == 1 ? "" : "s");
    svg_text(&s, LEFT, 62, 11, "start", "#333", "%s", layout_story(m->layout));
    double y = TOP;
    for (size_t g = 0; g < m->num_groups; g++) {
        const uint64_t rows = draw_map_rows(m, g);
        struct geom geo = {y + 20, m->row_bytes};
        svg_text(&s, LEFT, y + 10, 12, "start", "#111", "group %zu: %s%s", g,
                 g < model->num_groups ? model->groups[g].name : "?",
                 m->num_groups > 1 ? " (groups overlay the same bytes)" : "");
        svg_group_begin(&s, "class=\"panel\" data-group=\"%zu\"", g);
        for (uint64_t r = 0; r < rows; r++) {
            svg_rect(&s, LEFT, geo.y0 + (double)r * ROW_H, MAP_W, BAR_H, "#e4e4e4", NULL);
            if (rows <= 400 || r % 10 == 0)
                svg_text(&s, LEFT - 6, geo.y0 + (double)r * ROW_H + 8.5, 8, "end", "#555", "%" PRIu64,
                         r * m->row_bytes);
        }
        const bool stripes = m->heads_max * m->num_blocks <= (uint64_t)MAX_STRIPES_PER_ROW * 8;
        for (size_t i = 0; i < m->num_pieces; i++)
            if (m->pieces[i].group == g)
                draw_piece(&s, &geo, m, &m->pieces[i], stripes);
        draw_labels(&s, &geo, m, g);
        draw_runs(&s, &geo, m, m->group_end[g], g);
        svg_group_end(&s);
        y = geo.y0 + (double)rows * ROW_H + PANEL_GAP - 20;
    }
    legend(&s, m, model, LEFT + MAP_W + 30, TOP + 10);
    return svg_close(&s) ? CLI_EXIT_OK : CLI_EXIT_INTERNAL;
}
