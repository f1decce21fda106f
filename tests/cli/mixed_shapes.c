/*
 * Mixed shapes through the tool: kvrt model files whose two groups differ
 * only in element type, or only in block size, mix shapes; explain and run
 * resolve them to a layout their placement accepts (block compact and,
 * since the pages differ across groups, block outermost), a backend that
 * declares none refuses at resolution, and plan refuses such a layout when
 * it is given.  Two identical groups do not mix.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_env.h"

static char dir[] = "/tmp/kvrt-cli-mixed-XXXXXX";

/* Two groups of two layers: `a` of the top level's spec, `b` with `extra`. */
static const char *model_file(const char *name, const char *extra)
{
    static char paths[4][256];
    static unsigned next;
    char *p = paths[next++ % 4];
    snprintf(p, sizeof(paths[0]), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fprintf(f,
                "{\"format\": \"kvrt-model\", \"version\": 1, \"dtype\": \"fp16\", \"block_size\": 16, \"groups\": ["
                "{\"name\": \"a\", \"layers\": 2, \"spec\": {\"kind\": \"attention\", \"kv_heads\": 2, "
                "\"head_size\": 8}}, "
                "{\"name\": \"b\", \"layers\": 2, \"spec\": {\"kind\": \"attention\", \"kv_heads\": 2, "
                "\"head_size\": 8%s}}]}",
                extra);
        fclose(f);
    }
    return p;
}

static bool has_step(const json_t *root, const char *kind)
{
    const json_t *steps = json_object_get(root, "steps");
    for (size_t i = 0; i < json_array_size(steps); i++)
        if (js(json_array_get(steps, i), "step") && strcmp(js(json_array_get(steps, i), "step"), kind) == 0)
            return true;
    return false;
}

static bool shapes_allow(const json_t *root, const char *layout)
{
    const json_t *l = json_object_get(root, "layouts");
    for (size_t i = 0; i < json_array_size(l); i++)
        if (strcmp(js(json_array_get(l, i), "name"), layout) == 0)
            return json_is_true(json_object_get(json_array_get(l, i), "shapes"));
    return false;
}

static void check_mixed(const char *what, const char *file, bool one_cache)
{
    char layout[16] = "";
    json_t *r = cli_json(ARGS("explain", "--json", "--backend", "cpu", "--model", file), NULL);
    if (r && js(r, "layout"))
        snprintf(layout, sizeof(layout), "%s", js(r, "layout"));
    tap_ok(r && json_is_true(json_object_get(r, "mixed_shapes")) && has_step(r, "narrowing"),
           "%s: explain says the shapes mix and narrows", what);
    tap_ok((strcmp(layout, "BLHNC") == 0 || strcmp(layout, "BLNHC") == 0) && shapes_allow(r, "BLHNC") &&
               shapes_allow(r, "BLNHC") && !shapes_allow(r, "LBHNC") && !shapes_allow(r, "LBNHC") &&
               !shapes_allow(r, "LHBNC") && !shapes_allow(r, "BHLNC"),
           "%s: only BLHNC and BLNHC fit two groups with different pages; chosen %s", what, layout);
    json_decref(r);

    r = cli_json(ARGS("plan", "--json", "--model", file, "--blocks", "2", "--layout", layout), NULL);
    tap_ok(r != NULL, "%s: plan places the groups in the layout explain chose", what);
    json_decref(r);
    if (one_cache) {
        r = cli_json(ARGS("run", "--json", "--backend", "cpu", "--model", file, "--seqs", "2", "--context", "32"),
                     NULL);
        tap_ok(r && json_is_true(json_object_get(r, "verified")) && js(r, "layout") &&
                   strcmp(js(r, "layout"), layout) == 0,
               "%s: run resolves the same layout, allocates the cache and verifies it", what);
        json_decref(r);
    }

    /* "subset" declares LBHNC and LBNHC only: refused at resolution, by shape. */
    cli_error_case(ARGS("run", "--backend", "subset", "--model", file), ENV(cli_env.subset_path_env), 3,
                   MENTIONS("overlay with different page sizes", "LBHNC, LBNHC", "block-outermost"));
    cli_error_case(ARGS("plan", "--model", file, "--blocks", "2", "--layout", "LBNHC"), NULL, 3,
                   MENTIONS("LBNHC", "different shapes", "BLHNC"));
}

int main(int argc, char **argv)
{
    cli_env_init(argc, argv);
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp failed\n");
        return 1;
    }
    const char *dtype = model_file("dtype.kvrt.json", ", \"dtype\": \"fp32\"");
    const char *block = model_file("block.kvrt.json", ", \"block_size\": 32");
    const char *same = model_file("same.kvrt.json", "");
    check_mixed("groups that differ only in dtype", dtype, true);
    /* A cache counts slots in one block size, so this one is only planned. */
    check_mixed("groups that differ only in block size", block, false);

    json_t *r =
        cli_json(ARGS("explain", "--json", "--backend", "subset", "--model", same), ENV(cli_env.subset_path_env));
    tap_ok(r && json_is_false(json_object_get(r, "mixed_shapes")) && !has_step(r, "narrowing") && js(r, "layout") &&
               strcmp(js(r, "layout"), "LBHNC") == 0,
           "identical groups do not mix: the backend's first choice LBHNC stands");
    json_decref(r);

    unlink(dtype);
    unlink(block);
    unlink(same);
    rmdir(dir);
    return tap_done();
}
