/*
 * kvrt draw: the memory map of a placed cache.
 *
 *   draw_map.c    every page's contiguous pieces and head spans, the row
 *                 width, and block 0's transfer runs (kvrt_transfer_regions)
 *   draw_svg.c    the picture (svg.c)
 *   draw_ascii.c  the same map for a terminal
 *   cli_draw.c    the command
 */
#ifndef KVRT_TOOLS_DRAW_H
#define KVRT_TOOLS_DRAW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <kvrt/model.h>
#include <kvrt/placement.h>
#include <kvrt/transfer.h>

/* A maximal run of bytes of one page (layer, block): the whole page when
 * the layout keeps it contiguous, else one piece per contiguous stretch. */
struct draw_piece {
    uint64_t offset, length;
    size_t group;
    uint32_t layer; /* global index, placement order */
    const char *name;
    uint64_t block;
    int64_t head; /* the piece's only head, or -1 when it holds several */
    bool state;
    size_t first_span, num_spans; /* its head spans in draw_map.spans */
};

/* Consecutive bytes of one head inside a piece. */
struct draw_span {
    uint64_t offset, length, head;
};

struct draw_map {
    enum kvrt_layout layout;
    uint64_t num_blocks, num_layers, row_bytes, heads_max;
    size_t num_groups;
    uint64_t *group_end;       /* bytes spanned by each group's pieces */
    struct draw_piece *pieces; /* by group, then offset */
    size_t num_pieces;
    struct draw_span *spans;
    size_t num_spans;
    struct kvrt_region *runs; /* block 0's transfer runs */
    size_t num_runs;
};

/* Build the map of a placement (the model gives group names).  Returns a
 * kvrt status. */
int draw_map_build(const kvrt_placement *p, struct draw_map *out);
void draw_map_free(struct draw_map *m);

/* Rows of `row_bytes` each that group g spans. */
uint64_t draw_map_rows(const struct draw_map *m, size_t g);

/* The picture.  Returns a CLI exit status. */
int draw_svg(const struct draw_map *m, const struct kvrt_model_info *model, const char *path);
int draw_ascii(const struct draw_map *m, const struct kvrt_model_info *model, FILE *out);

#endif
