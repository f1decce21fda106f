/*
 * `kvrt bench`: the JSON schema on tiny shapes (no speed is asserted), the
 * bar chart as SVG and rendered to PNG, and bad options refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_env.h"
#include "svg_scan.h"

#define TINY                                                                                                           \
    "--tokens", "64", "--layers", "1", "--pairs", "4", "--gather-blocks", "4", "--seqs", "2", "--context", "32",       \
        "--repeat", "2"

static void check_schema(void)
{
    json_t *r = cli_json(ARGS("bench", "--json", "--backend", "cpu", "--op", "write", "--layout", "LBNHC", TINY), NULL);
    const json_t *results = json_object_get(r, "results"), *first = json_array_get(results, 0);
    tap_ok(json_number_value(json_object_get(r, "memcpy_gbps")) > 0, "bench --json: memcpy_gbps is a positive number");
    tap_ok(json_array_size(results) == 1, "bench --json --op write --layout LBNHC: one result");
    tap_ok(first && strcmp(js(first, "backend"), "cpu") == 0 && strcmp(js(first, "op"), "write") == 0 &&
               strcmp(js(first, "layout"), "LBNHC") == 0 && strcmp(js(first, "dtype"), "bf16") == 0 &&
               json_is_number(json_object_get(first, "gbps")) &&
               json_is_number(json_object_get(first, "ratio_to_memcpy")),
           "bench --json: backend, op, layout, dtype, gbps, ratio_to_memcpy");
    /* The cpu plugin measures no device copy: the roofline is memcpy. */
    tap_ok(json_is_string(json_object_get(r, "roofline")) && strcmp(js(r, "roofline"), "memcpy") == 0 &&
               json_number_value(json_object_get(r, "roofline_gbps")) > 0 && first &&
               json_is_null(json_object_get(first, "ratio_to_roofline")),
           "bench --json: without a device roofline, roofline is \"memcpy\" and ratio_to_roofline null");
    tap_ok(json_integer_value(json_object_get(first, "bytes")) == 1 * 64 * 8 * 256 * 2,
           "bench --json: write counts layers x tokens x heads x (D + Dv) x element bytes");
    tap_ok(json_number_value(json_object_get(r, "read_gbps")) > 0 && first &&
               json_number_value(json_object_get(first, "memcpy_gbps")) > 0 &&
               json_number_value(json_object_get(first, "read_gbps")) > 0 &&
               strcmp(js(first, "roofline"), "memcpy") == 0,
           "bench --json: read_gbps, each result's own memcpy_gbps and read_gbps, write rated against memcpy");
    if (first) {
        double g = json_number_value(json_object_get(first, "gbps"));
        double mc = json_number_value(json_object_get(first, "memcpy_gbps"));
        double ratio = json_number_value(json_object_get(first, "ratio"));
        tap_ok(fabs(ratio - g / mc) <= 1e-9 * (g / mc), "bench --json: write's ratio is gbps / its memcpy_gbps (%g)",
               ratio);
    } else {
        tap_ok(false, "bench --json: write's ratio is gbps / its memcpy_gbps");
    }
    json_decref(r);

    r = cli_json(
        ARGS("bench", "--json", "--backend", "cpu", "--op", "decode", "--op", "gather", "--layout", "BLNHC", TINY),
        NULL);
    results = json_object_get(r, "results");
    const json_t *gather = NULL, *decode = NULL;
    for (size_t i = 0; i < json_array_size(results); i++) {
        const json_t *o = json_array_get(results, i);
        if (strcmp(js(o, "op"), "decode") == 0)
            decode = o;
        else if (strcmp(js(o, "op"), "gather") == 0)
            gather = o;
    }
    if (decode && gather) {
        double g = json_number_value(json_object_get(decode, "gbps"));
        double rd = json_number_value(json_object_get(decode, "read_gbps"));
        double ratio = json_number_value(json_object_get(decode, "ratio"));
        tap_ok(strcmp(js(decode, "roofline"), "read") == 0 && rd > 0 && fabs(ratio - g / rd) <= 1e-9 * (g / rd) &&
                   strcmp(js(gather, "roofline"), "memcpy") == 0,
               "bench --json: decode is rated against the read roofline (ratio %g), gather against memcpy", ratio);
    } else {
        tap_ok(false, "bench --json: decode is rated against the read roofline, gather against memcpy");
    }
    json_decref(r);

    r = cli_json(ARGS("bench", "--json", "--backend", "cpu", "--layout", "BLHNC", "--layout", "HND", TINY), NULL);
    results = json_object_get(r, "results");
    bool all = json_array_size(results) == 12;
    for (size_t i = 0; all && i < json_array_size(results); i++)
        all = json_is_number(json_object_get(json_array_get(results, i), "gbps"));
    tap_ok(all, "bench --json: six ops x two layouts, each with a number");
    json_decref(r);

    r = cli_json(
        ARGS("bench", "--json", "--backend", "cpu", "--op", "decode", "--dtype", "int8", "--layout", "LBNHC", TINY),
        NULL);
    first = json_array_get(json_object_get(r, "results"), 0);
    tap_ok(first && json_is_true(json_object_get(first, "skipped")) && json_is_null(json_object_get(first, "gbps")) &&
               strstr(js(first, "reason"), "floating-point"),
           "bench: decode on int8 is skipped with the reason");
    json_decref(r);
}

static void check_plot(void)
{
    char dir[] = "/tmp/kvrt-cli-bench-XXXXXX", svg[128], png[128];
    if (!mkdtemp(dir)) {
        tap_skip("cannot make a temporary folder");
        return;
    }
    snprintf(svg, sizeof(svg), "%s/bench.svg", dir);
    snprintf(png, sizeof(png), "%s/bench.png", dir);
    json_t *r = cli_json(
        ARGS("bench", "--json", "--backend", "cpu", "--op", "copy_blocks", "--op", "gather", "--plot", svg, TINY),
        NULL);
    size_t results = json_array_size(json_object_get(r, "results"));
    json_decref(r);
    char *text = cli_read_text(svg);
    struct svg_elem *rects = NULL, *lines = NULL;
    size_t nr = text ? svg_scan(text, "rect", &rects) : 0, nl = text ? svg_scan(text, "line", &lines) : 0;
    size_t bars = 0, memcpy_lines = 0;
    for (size_t i = 0; i < nr && nr != (size_t)-1; i++)
        bars += svg_attr(&rects[i], "class") && strcmp(svg_attr(&rects[i], "class"), "bar") == 0;
    for (size_t i = 0; i < nl && nl != (size_t)-1; i++)
        memcpy_lines += svg_attr(&lines[i], "class") && strcmp(svg_attr(&lines[i], "class"), "memcpy") == 0;
    tap_ok(text && strncmp(text, "<?xml", 5) == 0 && bars == results && results == 12 && memcpy_lines == 1,
           "bench --plot: one bar per result (%zu) and one memcpy line", bars);
    svg_scan_free(rects, nr == (size_t)-1 ? 0 : nr);
    svg_scan_free(lines, nl == (size_t)-1 ? 0 : nl);
    if (!*cli_env.rsvg) {
        tap_skip("rsvg-convert not found");
    } else {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "'%s' '%s' -o '%s'", cli_env.rsvg, svg, png);
        unsigned w = 0, h = 0;
        long bytes = 0;
        struct svg_elem *root = NULL;
        size_t n = text ? svg_scan(text, "svg", &root) : 0;
        unsigned want_w = n == 1 ? (unsigned)atoi(svg_attr(root, "width")) : 0;
        unsigned want_h = n == 1 ? (unsigned)atoi(svg_attr(root, "height")) : 0;
        tap_ok(system(cmd) == 0 && png_size(png, &w, &h, &bytes) && w == want_w && h == want_h && bytes > 1000,
               "bench --plot renders to a %ux%u PNG (%ld bytes)", w, h, bytes);
        svg_scan_free(root, n == (size_t)-1 ? 0 : n);
    }
    free(text);
    unlink(svg);
    unlink(png);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    cli_env_init(argc, argv);
    check_schema();
    check_plot();
    cli_error_case(ARGS("bench", "--op", "frob"), NULL, 2, MENTIONS("\"frob\"", "write"));
    cli_error_case(ARGS("bench", "--layout", "bogus"), NULL, 2, MENTIONS("\"bogus\""));
    cli_error_case(ARGS("bench", "--backend", "nosuch", "--op", "write"), NULL, 4, MENTIONS("nosuch"));
    cli_error_case(ARGS("bench", "--repeat", "0"), NULL, 2, MENTIONS("--repeat"));
    cli_error_case(ARGS("bench", "--op", "write"), ENV("VLLM_KV_CACHE_LAYOUT=nhd"), 2,
                   MENTIONS("VLLM_KV_CACHE_LAYOUT", "\"nhd\""));
    json_t *r =
        cli_json(ARGS("bench", "--json", "--backend", "cpu", "--op", "read", TINY), ENV("VLLM_KV_CACHE_LAYOUT=HND"));
    const json_t *results = json_object_get(r, "results");
    tap_ok(json_array_size(results) == 1 && strcmp(js(json_array_get(results, 0), "layout"), "LBHNC") == 0,
           "bench without --layout measures only VLLM_KV_CACHE_LAYOUT when set");
    json_decref(r);
    return tap_done();
}
