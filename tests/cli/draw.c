/*
 * `kvrt draw`: for all six layouts the SVG's page rects (data-layer,
 * data-block, data-head, data-offset, data-length) cover exactly the bytes
 * `kvrt plan --json` gives each (layer, block) page, cell by cell; block 0's
 * transfer runs are as many as the layout needs; the SVG renders to a PNG of
 * the size it declares; --ascii prints the map.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_env.h"
#include "svg_scan.h"

static const char *const layouts[] = {"LBHNC", "LBNHC", "LHBNC", "BLHNC", "BLNHC", "BHLNC"};
static char dir[] = "/tmp/kvrt-cli-draw-XXXXXX";

#define SHAPE "--layers", "3", "--kv-heads", "2", "--head-size", "8", "--block-size", "4"
#define BLOCKS 3
#define NONE (-1)

/* Who owns each byte: layer * BLOCKS + block (NONE: nobody), and the head. */
struct owner {
    int page;
    int head;
};

static uint64_t u64(const json_t *a, size_t i)
{
    return (uint64_t)json_integer_value(json_array_get(a, i));
}

/* Expected owners from one set of plan --json: offset, strides over [L, B, H, N, C]. */
static void expect_set(struct owner *own, uint64_t size, uint64_t first_layer, uint64_t layers, uint64_t offset,
                       const json_t *strides, const json_t *shape, bool *ok)
{
    const uint64_t H = u64(shape, 2), N = u64(shape, 3), C = u64(shape, 4);
    for (uint64_t l = 0; l < layers; l++)
        for (uint64_t b = 0; b < BLOCKS; b++)
            for (uint64_t h = 0; h < H; h++)
                for (uint64_t n = 0; n < N; n++) {
                    uint64_t at =
                        offset + l * u64(strides, 0) + b * u64(strides, 1) + h * u64(strides, 2) + n * u64(strides, 3);
                    for (uint64_t c = 0; c < C; c++) {
                        /* own[] is set for every byte below size by the caller's loop,
                         * which the analyser does not follow that far. */
                        /* NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
                        if (at + c >= size || own[at + c].page != NONE) {
                            tap_diag("plan puts two pages on byte %llu (or past the end %llu)",
                                     (unsigned long long)at + c, (unsigned long long)size);
                            *ok = false;
                            return;
                        }
                        own[at + c].page = (int)((first_layer + l) * BLOCKS + b);
                        own[at + c].head = (int)h;
                    }
                }
}

/* Owners from the SVG's page rects of panel `group` (or all when -1). */
static bool svg_owners(const char *text, struct owner *own, uint64_t size, long group, size_t *pieces)
{
    struct svg_elem *rects;
    size_t n = svg_scan(text, "rect", &rects);
    if (n == (size_t)-1)
        return false;
    bool ok = true;
    *pieces = 0;
    for (size_t i = 0; i < n && ok; i++) {
        const char *cls = svg_attr(&rects[i], "class");
        if (!cls || strcmp(cls, "page") != 0)
            continue;
        if (group >= 0 && atol(svg_attr(&rects[i], "data-group")) != group)
            continue;
        const char *off = svg_attr(&rects[i], "data-offset"), *len = svg_attr(&rects[i], "data-length");
        const char *layer = svg_attr(&rects[i], "data-layer"), *block = svg_attr(&rects[i], "data-block");
        const char *head = svg_attr(&rects[i], "data-head");
        if (!off || !len || !layer || !block) {
            ok = false;
            break;
        }
        (*pieces)++;
        uint64_t o = strtoull(off, NULL, 10), l = strtoull(len, NULL, 10);
        int page = atoi(layer) * BLOCKS + atoi(block);
        for (uint64_t k = o; k < o + l && ok; k++) {
            ok = k < size && own[k].page == page && (!head || own[k].head == atoi(head));
            if (ok)
                own[k].page = -2; /* seen */
        }
    }
    svg_scan_free(rects, n);
    for (uint64_t k = 0; k < size && ok; k++)
        ok = own[k].page == NONE || own[k].page == -2;
    return ok;
}

static size_t count_runs(const char *text, long panel)
{
    struct svg_elem *rects;
    size_t n = svg_scan(text, "rect", &rects), distinct = 0;
    long last = -1;
    for (size_t i = 0; i < n && n != (size_t)-1; i++) {
        const char *cls = svg_attr(&rects[i], "class");
        if (!cls || strcmp(cls, "run") != 0 || atol(svg_attr(&rects[i], "data-panel")) != panel)
            continue;
        long run = atol(svg_attr(&rects[i], "data-run"));
        distinct += run != last;
        last = run;
    }
    svg_scan_free(rects, n == (size_t)-1 ? 0 : n);
    return distinct;
}

static void check_png(const char *svg_path, const char *text)
{
    if (!*cli_env.rsvg) {
        tap_skip("rsvg-convert not found");
        return;
    }
    char png[300], cmd[800];
    snprintf(png, sizeof(png), "%s.png", svg_path);
    snprintf(cmd, sizeof(cmd), "'%s' '%s' -o '%s'", cli_env.rsvg, svg_path, png);
    struct svg_elem *root;
    size_t n = svg_scan(text, "svg", &root);
    unsigned w = 0, h = 0;
    long bytes = 0;
    unsigned want_w = n == 1 ? (unsigned)atoi(svg_attr(root, "width")) : 0;
    unsigned want_h = n == 1 ? (unsigned)atoi(svg_attr(root, "height")) : 0;
    tap_ok(system(cmd) == 0 && png_size(png, &w, &h, &bytes) && w == want_w && h == want_h && bytes > 2000,
           "%s renders to a %ux%u PNG of %ld bytes", svg_path, w, h, bytes);
    svg_scan_free(root, n == (size_t)-1 ? 0 : n);
    unlink(png);
}

static void check_flags_layout(const char *layout)
{
    char svg[256];
    snprintf(svg, sizeof(svg), "%s/%s.svg", dir, layout);
    cli_ok_case(ARGS("draw", "--layout", layout, SHAPE, "--blocks", "3", "--svg", svg), NULL, MENTIONS("wrote", svg));
    json_t *plan = cli_json(ARGS("plan", "--json", "--layout", layout, SHAPE, "--blocks", "3"), NULL);
    char *text = cli_read_text(svg);
    const uint64_t size = (uint64_t)json_integer_value(json_object_get(plan, "total_bytes"));
    struct owner *own = malloc((size + 1) * sizeof(*own));
    bool ok = text && plan && own;
    for (uint64_t k = 0; ok && k < size; k++)
        own[k].page = NONE;
    if (ok)
        expect_set(own, size, 0, 3, 0, json_object_get(plan, "strides_bytes"), json_object_get(plan, "shape_bytes"),
                   &ok);
    size_t pieces = 0;
    tap_ok(
        ok && svg_owners(text, own, size, -1, &pieces),
        "draw %s: every page rect lies exactly on its (layer, block, head) bytes from plan, all covered (%zu pieces)",
        layout, pieces);
    /* Block 0 moves as one run per block, per layer, or per layer and head. */
    size_t want = layout[0] == 'B' ? 1 : strcmp(layout, "LHBNC") == 0 ? 6 : 3;
    size_t runs = text ? count_runs(text, 0) : 0;
    if (!tap_ok(runs == want, "draw %s: block 0's transfer runs are marked (%zu)", layout, runs))
        tap_diag("want %zu", want);
    if (text)
        check_png(svg, text);
    free(own);
    free(text);
    json_decref(plan);
    unlink(svg);
}

/* A hybrid model: overlaid groups, each panel checked against plan's sets. */
static void check_model_layout(const char *layout)
{
    char svg[256];
    snprintf(svg, sizeof(svg), "%s/hybrid-%s.svg", dir, layout);
    const char *model = cli_model_path("tiny-hybrid.kvrt.json");
    cli_ok_case(ARGS("draw", "--layout", layout, "--model", model, "--svg", svg), NULL, MENTIONS("wrote"));
    json_t *plan = cli_json(ARGS("plan", "--json", "--layout", layout, "--model", model, "--blocks", "3"), NULL);
    char *text = cli_read_text(svg);
    const uint64_t size = (uint64_t)json_integer_value(json_object_get(plan, "total_bytes"));
    const json_t *sets = json_object_get(plan, "sets");
    bool ok = text && plan;
    uint64_t first_layer = 0;
    size_t pieces_all = 0;
    for (long g = 0; ok && g < 3; g++) {
        struct owner *own = malloc((size + 1) * sizeof(*own));
        ok = own != NULL;
        for (uint64_t k = 0; ok && k < size; k++)
            own[k].page = NONE;
        for (size_t i = 0; ok && i < json_array_size(sets); i++) {
            const json_t *s = json_array_get(sets, i);
            uint64_t layers = json_array_size(json_object_get(s, "layers"));
            if (json_integer_value(json_object_get(s, "group")) == g)
                expect_set(own, size, first_layer, layers, (uint64_t)json_integer_value(json_object_get(s, "offset")),
                           json_object_get(s, "strides_bytes"), json_object_get(s, "shape_bytes"), &ok);
            if (json_integer_value(json_object_get(s, "group")) == g)
                first_layer += layers;
        }
        size_t pieces = 0;
        ok = ok && svg_owners(text, own, size, g, &pieces);
        pieces_all += pieces;
        free(own);
    }
    tap_ok(ok && pieces_all > 0, "draw %s --model tiny-hybrid: each group's panel matches plan's sets (%zu pieces)",
           layout, pieces_all);
    free(text);
    json_decref(plan);
    unlink(svg);
}

static void check_ascii(void)
{
    cli_ok_case(
        ARGS("draw", "--layout", "BLHNC", SHAPE, "--ascii"), NULL,
        MENTIONS("kvrt draw: BLHNC (physical order B L H N C)", "block 0 moves as 1 contiguous run", "|0", "*"));
    cli_ok_case(ARGS("draw", "--layout", "LHBNC", SHAPE, "--ascii"), NULL, MENTIONS("6 contiguous runs"));
    cli_ok_case(ARGS("draw", "--layout", "HND", "--model", cli_model_path("qwen3-next-80b-a3b.json"), "--blocks", "1",
                     "--ascii"),
                NULL, MENTIONS("group 3: full_attention", "state"));
}

static void check_errors(void)
{
    cli_error_case(ARGS("draw", "--layout", "BLHNC", SHAPE), NULL, 2, MENTIONS("--svg", "--ascii"));
    cli_error_case(ARGS("draw", "--layout", "BLHNC", SHAPE, "--ascii", "--blocks", "65"), NULL, 2,
                   MENTIONS("65", "64"));
    cli_error_case(ARGS("draw", "--layout", "bogus", SHAPE, "--ascii"), NULL, 2, MENTIONS("\"bogus\""));
    cli_error_case(ARGS("draw", SHAPE, "--ascii", "--memory", "1GiB"), NULL, 2, MENTIONS("--memory"));
    cli_error_case(ARGS("draw", SHAPE, "--svg", "/nonexistent-dir/x.svg"), NULL, 2, MENTIONS("/nonexistent-dir/x.svg"));
}

int main(int argc, char **argv)
{
    cli_env_init(argc, argv);
    if (!mkdtemp(dir)) {
        printf("Bail out! cannot make a temporary folder\n");
        return 1;
    }
    for (size_t i = 0; i < 6; i++)
        check_flags_layout(layouts[i]);
    static const char *const hybrid[] = {"LBHNC", "LBNHC", "BLHNC", "BLNHC"};
    for (size_t i = 0; i < 4; i++)
        check_model_layout(hybrid[i]);
    check_ascii();
    check_errors();
    rmdir(dir);
    return tap_done();
}
