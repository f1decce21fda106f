/* kvrt draw: a picture of where every page of the first few blocks lives,
 * as SVG and for the terminal. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/placement.h>

#include "commands.h"
#include "cli_model.h"
#include "draw.h"

#define DRAW_TEXT(n) DRAW_TEXT_(n)
#define DRAW_TEXT_(n) #n
#define DRAW_DEFAULT_BLOCKS 3
#define DRAW_MAX_BLOCKS 64
/* More rows than this make a picture nobody can read. */
#define DRAW_MAX_ROWS 6000
/* Cells (head x state of a page) the map may hold: each can become a piece
 * and a span, so this bounds the memory and time of building the map. */
#define DRAW_MAX_CELLS (1u << 21)

enum draw_opt { OPT_LAYOUT, OPT_SVG, OPT_ASCII };

/* --blocks is the model option, described here as draw uses it. */
static const struct cli_option draw_options[] = {
    {"--layout", "NAME", OPT_LAYOUT, false,
     "layout or alias (default: $" KVRT_LAYOUT_ENV " if set,\nelse kvrt's default, below)"},
    {"--blocks", "B", CLI_OPT_BLOCKS, false,
     "blocks in the drawn cache (default " DRAW_TEXT(DRAW_DEFAULT_BLOCKS) ", at most " DRAW_TEXT(DRAW_MAX_BLOCKS) ")"},
    {"--svg", "FILE", OPT_SVG, false, "write the picture as SVG"},
    {"--ascii", NULL, OPT_ASCII, false, "print the map on stdout (64 cells per row)"},
    CLI_HELP_ROW,
    CLI_OPTIONS_END,
};

static const struct cli_option *const draw_tables[] = {draw_options, cli_model_options, NULL};

static void draw_help(FILE *out)
{
    fprintf(out,
            "Usage: kvrt draw [--layout NAME] (--model FILE | model flags) [--blocks B]\n"
            "                 (--svg FILE | --ascii | both)\n"
            "\n"
            "Draw the memory map of a small cache of B blocks (default %d) under one\n"
            "layout: memory runs left to right and wraps every page, so a row is one\n"
            "page where pages are contiguous.  Each page is coloured by layer (hue) and\n"
            "block (shade), its head slots are striped, state pages hatched; a black\n"
            "bar marks where a new block starts and a red underline the contiguous\n"
            "byte runs that move block 0 (kvrt_transfer_regions: one run per block for\n"
            "BLHNC/BLNHC, one per layer for LBHNC/LBNHC, one per layer and head for\n"
            "LHBNC).  Groups of a hybrid model overlay the same bytes and are drawn as\n"
            "separate panels.  The layout repeats for more blocks, so a few show it all.\n"
            "\n"
            "In the SVG every page piece is a <rect class=\"page\"> with data-group,\n"
            "data-layer (placement order), data-name, data-block, data-head (when the\n"
            "piece holds one head), data-offset and data-length (bytes), so the picture\n"
            "can be checked against 'kvrt plan --json'.\n"
            "\n"
            "Options:\n",
            DRAW_DEFAULT_BLOCKS);
    cli_print_options(out, draw_options, 18);
    cli_model_print_options(out);
    fprintf(out,
            "(--memory does not apply here.)\n"
            "\n"
            "Environment:\n"
            "  %s  the layout when --layout is not given (unset: %s,\n"
            "      kvrt's default)\n"
            "\n"
            "Examples:\n"
            "  kvrt draw --layout BLHNC --model examples/models/llama-3.1-8b.json --svg blhnc.svg\n"
            "  kvrt draw --layout LBNHC --layers 2 --kv-heads 2 --head-size 8 --block-size 4 --ascii\n",
            KVRT_LAYOUT_ENV, kvrt_layout_name(kvrt_layout_default()));
}

/* The limits checked from the shape alone, before the map is built: every
 * page lies below the end of the last group, so the pages' bytes give a
 * lower bound of the rows, and the cells bound what the map would hold. */
static int check_size(const kvrt_placement *p)
{
    uint64_t row = 0, page_bytes = 0, cells = 0;
    bool over = false;
    for (size_t s = 0; s < kvrt_placement_num_sets(p); s++) {
        struct kvrt_placement_set set;
        if (kvrt_placement_get_set(p, s, &set) != KVRT_OK)
            return cli_fail_status(KVRT_ERR_INTERNAL);
        const struct kvrt_spec_info *in = &set.geometry.info;
        uint64_t pages, bytes, n;
        row = in->page_size > row ? in->page_size : row;
        over = over || __builtin_mul_overflow(set.num_layers, kvrt_placement_num_blocks(p), &pages) ||
               __builtin_mul_overflow(pages, in->page_size, &bytes) ||
               __builtin_add_overflow(page_bytes, bytes, &page_bytes) ||
               __builtin_mul_overflow(pages, in->head_slots, &n) ||
               __builtin_mul_overflow(n, in->states_per_block, &n) || __builtin_add_overflow(cells, n, &cells);
    }
    uint64_t rows = row ? page_bytes / row : 0;
    if (over || rows > DRAW_MAX_ROWS)
        return cli_error(CLI_EXIT_USAGE,
                         "draw: the map would have %s%" PRIu64 " rows, more than %d can show; "
                         "draw fewer --blocks or layers",
                         over ? "more than " : "", over ? UINT64_MAX : rows, DRAW_MAX_ROWS);
    if (cells > DRAW_MAX_CELLS)
        return cli_error(CLI_EXIT_USAGE,
                         "draw: the map would hold %" PRIu64 " cells (head x state of every "
                         "page), more than %u can be drawn; draw fewer --blocks, layers, heads or tokens per "
                         "block",
                         cells, DRAW_MAX_CELLS);
    return CLI_EXIT_OK;
}

struct draw_request {
    struct cli_model_flags flags;
    const char *svg;
    const char *layout_given_as; /* the option that gave the layout */
    bool ascii;
    enum kvrt_layout layout;
};

static int apply(void *request, const struct cli_option *opt, const char *v)
{
    struct draw_request *d = request;
    bool ok = true;
    if (cli_model_flags_apply(&d->flags, opt, v, &ok))
        return ok ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (opt->id == OPT_LAYOUT) {
        if (kvrt_layout_parse(v, &d->layout) != KVRT_OK)
            return cli_error(CLI_EXIT_USAGE, "%s: %s", opt->name, kvrt_error_message());
        d->layout_given_as = opt->name;
    } else if (opt->id == OPT_SVG) {
        d->svg = v;
    } else {
        d->ascii = true;
    }
    return CLI_EXIT_OK;
}

static int draw_run(int argc, char **argv)
{
    struct draw_request d = {.layout = KVRT_LAYOUT_LBNHC};
    bool help;
    cli_model_flags_init(&d.flags, "draw");
    int parsed = cli_parse_options("draw", argc, argv, draw_tables, apply, &d, &help);
    if (parsed != CLI_EXIT_OK || help) {
        if (help)
            draw_help(stdout);
        return parsed;
    }
    const char *source;
    enum kvrt_layout layout = d.layout;
    if (!d.svg && !d.ascii)
        return cli_error(CLI_EXIT_USAGE, "draw: give %s FILE, %s, or both (see 'kvrt draw --help')",
                         cli_option_name(draw_tables, OPT_SVG), cli_option_name(draw_tables, OPT_ASCII));
    if (cli_model_flag_given(&d.flags, CLI_OPT_MEMORY))
        return cli_error(CLI_EXIT_USAGE, "draw: %s does not apply; the picture shows %s blocks (default %d)",
                         cli_option_name(draw_tables, CLI_OPT_MEMORY), cli_option_name(draw_tables, CLI_OPT_BLOCKS),
                         DRAW_DEFAULT_BLOCKS);
    if (cli_model_flag_given(&d.flags, CLI_OPT_BLOCKS) && d.flags.blocks > DRAW_MAX_BLOCKS)
        return cli_error(CLI_EXIT_USAGE,
                         "%s \"%" PRIu64 "\" is too many to draw: give 1 to %d (the "
                         "layout repeats, a few blocks show it)",
                         cli_option_name(draw_tables, CLI_OPT_BLOCKS), d.flags.blocks, DRAW_MAX_BLOCKS);
    const struct kvrt_model_info *m = NULL;
    int code = cli_model_build(&d.flags, true, &m);
    if (code == CLI_EXIT_OK)
        code = cli_layout_or_env(d.layout_given_as, layout, &layout, &source);
    uint64_t blocks = cli_model_flag_given(&d.flags, CLI_OPT_BLOCKS) ? d.flags.blocks : DRAW_DEFAULT_BLOCKS;
    kvrt_placement *p = NULL;
    struct draw_map map;
    memset(&map, 0, sizeof(map));
    if (code == CLI_EXIT_OK) {
        int rc = kvrt_placement_create(layout, m->placement_groups, m->num_groups, blocks, 0, &p);
        if (rc == KVRT_OK && (code = check_size(p)) == CLI_EXIT_OK)
            rc = draw_map_build(p, &map);
        if (rc != KVRT_OK)
            code = cli_fail_status(rc);
    }
    uint64_t rows = 0;
    for (size_t g = 0; code == CLI_EXIT_OK && g < map.num_groups; g++)
        rows += draw_map_rows(&map, g);
    if (code == CLI_EXIT_OK && rows > DRAW_MAX_ROWS)
        code = cli_error(CLI_EXIT_USAGE,
                         "draw: the map has %" PRIu64 " rows, more than %d can show; draw fewer "
                         "%s or layers",
                         rows, DRAW_MAX_ROWS, cli_option_name(draw_tables, CLI_OPT_BLOCKS));
    if (code == CLI_EXIT_OK && d.svg)
        code = draw_svg(&map, m, d.svg);
    if (code == CLI_EXIT_OK && d.ascii)
        code = draw_ascii(&map, m, stdout);
    else if (code == CLI_EXIT_OK)
        printf("wrote %s: %s, %" PRIu64 " layers x %" PRIu64 " blocks, %zu page pieces in %" PRIu64
               " rows; block 0 moves as %zu contiguous run%s\n",
               d.svg, kvrt_layout_name(layout), map.num_layers, blocks, map.num_pieces, rows, map.num_runs,
               map.num_runs == 1 ? "" : "s");
    draw_map_free(&map);
    kvrt_placement_destroy(p);
    cli_model_flags_free(&d.flags);
    return code;
}

const struct cli_command cli_draw_command = {
    .name = "draw",
    .summary = "draw the memory map of the first blocks as SVG or text",
    .run = draw_run,
    .help = draw_help,
    .options = draw_tables,
};
