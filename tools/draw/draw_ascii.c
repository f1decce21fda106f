/*
 * The memory map for a terminal: one line per row of `row_bytes`, 64 cells
 * each.  A cell shows the head slot of the page covering its first byte
 * (0-9, a-z, cycling), '.' where no page is; '|' is inserted where a new
 * block starts, and '*' marks rows that hold a transfer run of block 0.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "draw.h"

#define CELLS 64

static const char symbols[] = "0123456789abcdefghijklmnopqrstuvwxyz";

/* The piece covering `offset` in group g, by binary search over the sorted pieces. */
static const struct draw_piece *piece_at(const struct draw_map *m, size_t g, uint64_t offset)
{
    size_t lo = 0, hi = m->num_pieces;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct draw_piece *p = &m->pieces[mid];
        if (p->group < g || (p->group == g && p->offset + p->length <= offset))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < m->num_pieces && m->pieces[lo].group == g && m->pieces[lo].offset <= offset)
        return &m->pieces[lo];
    return NULL;
}

static uint64_t head_at(const struct draw_map *m, const struct draw_piece *p, uint64_t offset)
{
    for (size_t i = 0; i < p->num_spans; i++) {
        const struct draw_span *s = &m->spans[p->first_span + i];
        if (offset >= s->offset && offset < s->offset + s->length)
            return s->head;
    }
    return 0;
}

static bool row_has_run(const struct draw_map *m, uint64_t start, uint64_t end)
{
    for (size_t i = 0; i < m->num_runs; i++)
        if (m->runs[i].offset < end && m->runs[i].offset + m->runs[i].length > start)
            return true;
    return false;
}

int draw_ascii(const struct draw_map *m, const struct kvrt_model_info *model, FILE *out)
{
    int o[KVRT_NUM_AXES];
    static const char letters[] = "LBHNC";
    kvrt_layout_stride_order(m->layout, o);
    fprintf(out, "kvrt draw: %s (physical order %c %c %c %c %c), %s, %" PRIu64 " layers, %" PRIu64 " blocks\n",
            kvrt_layout_name(m->layout), letters[o[0]], letters[o[1]], letters[o[2]], letters[o[3]], letters[o[4]],
            model->name, m->num_layers, m->num_blocks);
    fprintf(out,
            "one row = %" PRIu64 " bytes in %d cells; a cell shows the head slot of its page (0-9a-z),\n"
            "'.' no page (padding); '|' a new block starts; '*' the row holds a transfer run of block 0\n"
            "(block 0 moves as %zu contiguous run%s)\n",
            m->row_bytes, CELLS, m->num_runs, m->num_runs == 1 ? "" : "s");
    for (size_t g = 0; g < m->num_groups; g++) {
        fprintf(out, "\ngroup %zu: %s%s\n", g, g < model->num_groups ? model->groups[g].name : "?",
                m->num_groups > 1 ? " (groups overlay the same bytes)" : "");
        fprintf(out, "%12s  %-16s  cells\n", "offset", "first page");
        const uint64_t rows = draw_map_rows(m, g);
        uint64_t prev_block = UINT64_MAX;
        for (uint64_t r = 0; r < rows; r++) {
            const uint64_t start = r * m->row_bytes;
            char line[4 * CELLS + 8], first[32] = "-";
            size_t n = 0;
            for (int c = 0; c < CELLS; c++) {
                const uint64_t at = start + (uint64_t)c * m->row_bytes / CELLS;
                const struct draw_piece *p = piece_at(m, g, at);
                if (!p) {
                    line[n++] = '.';
                    continue;
                }
                if (first[0] == '-')
                    snprintf(first, sizeof(first), "L%" PRIu32 " B%" PRIu64 "%s", p->layer, p->block,
                             p->state ? " state" : "");
                if (p->block != prev_block)
                    line[n++] = '|';
                prev_block = p->block;
                line[n++] = symbols[head_at(m, p, at) % (sizeof(symbols) - 1)];
            }
            line[n] = '\0';
            fprintf(out, "%12" PRIu64 "%c %-16s  %s\n", start, row_has_run(m, start, start + m->row_bytes) ? '*' : ' ',
                    first, line);
        }
    }
    return ferror(out) ? CLI_EXIT_INTERNAL : CLI_EXIT_OK;
}
