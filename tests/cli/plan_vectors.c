/*
 * `kvrt plan --json` reproduces every case of geometry.json, field by field,
 * and refuses every error case with exit 2 or 3 and a message that mentions
 * what the vectors require.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "tap.h"
#include "vectors_json.h"

struct argv_builder {
    const char *args[48];
    char store[24][32];
    size_t n, stored;
};

static void add(struct argv_builder *b, const char *arg)
{
    b->args[b->n++] = arg;
    b->args[b->n] = NULL;
}

/* Add "--option <integer>" when `v` is a JSON integer (null = not set). */
static void add_number(struct argv_builder *b, const char *option, const json_t *v)
{
    if (!json_is_integer(v))
        return;
    snprintf(b->store[b->stored], sizeof(b->store[0]), "%lld", (long long)json_integer_value(v));
    add(b, option);
    add(b, b->store[b->stored++]);
}

static const char *dtype_for_size(json_int_t size)
{
    switch (size) {
    case 4: return "fp32";
    case 2: return "fp16";
    case 1: return "uint8";
    default: return NULL;
    }
}

static void build_args(const json_t *c, struct argv_builder *b)
{
    const json_t *spec = json_object_get(c, "spec");
    const char *kind = json_string_value(json_object_get(spec, "kind"));
    memset(b, 0, sizeof(*b));
    add(b, "plan");
    add(b, "--json");
    add(b, "--layout");
    add(b, json_string_value(json_object_get(c, "layout")));
    add_number(b, "--layers", json_object_get(c, "num_layers"));
    add_number(b, "--blocks", json_object_get(c, "num_blocks"));
    add_number(b, "--kernel-block-size", json_object_get(c, "kernel_block_size"));
    add(b, "--kind");
    add(b, kind);
    add_number(b, "--block-size", json_object_get(spec, "block_size"));
    add_number(b, "--kv-heads", json_object_get(spec, "num_kv_heads"));
    add_number(b, "--head-size", json_object_get(spec, "head_size"));
    add_number(b, "--head-size-v", json_object_get(spec, "head_size_v"));
    add_number(b, "--head-slots", json_object_get(spec, "num_head_slots"));
    add_number(b, "--state-content-bytes", json_object_get(spec, "state_content_bytes"));
    add_number(b, "--page-size-padded", json_object_get(spec, "page_size_padded"));
    const json_t *size = json_object_get(spec, "dtype_size");
    if (json_is_integer(size)) {
        add(b, "--dtype");
        add(b, dtype_for_size(json_integer_value(size)));
    }
    const json_t *tps = json_object_get(spec, "tokens_per_state");
    if (json_is_array(tps)) {
        snprintf(b->store[b->stored], sizeof(b->store[0]), "%lld/%lld",
                 (long long)json_integer_value(json_array_get(tps, 0)),
                 (long long)json_integer_value(json_array_get(tps, 1)));
        add(b, "--tokens-per-state");
        add(b, b->store[b->stored++]);
    }
}

static bool same(const json_t *got, const json_t *want, const char *id, const char *field)
{
    if (json_equal((json_t *)got, (json_t *)want))
        return true;
    char *g = got ? json_dumps(got, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    char *w = json_dumps(want, JSON_COMPACT | JSON_ENCODE_ANY);
    tap_diag("%s %s: got %s, want %s", id, field, g ? g : "(missing)", w ? w : "?");
    free(g);
    free(w);
    return false;
}

static void check_case(const json_t *c, const json_t *layouts)
{
    const char *id = json_string_value(json_object_get(c, "id"));
    const json_t *expect = json_object_get(c, "expect");
    const json_t *spec = json_object_get(c, "spec");
    struct argv_builder b;
    char cmd[1024];
    build_args(c, &b);
    cli_describe(b.args, cmd, sizeof(cmd));

    struct spawn_result res = cli_run(b.args, NULL);
    json_t *got = cli_expect_json(&res, id);
    if (!got) {
        tap_diag("kvrt %s", cmd);
        spawn_result_free(&res);
        return;
    }
    const char *layout = json_string_value(json_object_get(c, "layout"));
    bool ok = same(json_object_get(got, "layout"), json_object_get(c, "layout"), id, "layout");
    for (size_t i = 0; i < json_array_size(layouts); i++) {
        const json_t *l = json_array_get(layouts, i);
        if (strcmp(json_string_value(json_object_get(l, "name")), layout) == 0)
            ok &= same(json_object_get(got, "stride_order"), json_object_get(l, "stride_order"), id, "stride_order");
    }
    ok &= same(json_object_get(got, "page_size_bytes"), json_object_get(expect, "page_size_bytes"), id,
               "page_size_bytes");
    static const char *const fields[] = {"shape_bytes", "strides_bytes", "total_bytes", "layer_stride", "block_stride"};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        ok &= same(json_object_get(got, fields[i]), json_object_get(expect, fields[i]), id, fields[i]);

    const json_t *page = json_object_get(got, "page_size_bytes");
    const json_t *unpadded = json_object_get(got, "unpadded_page_size_bytes");
    if (json_is_null(json_object_get(spec, "page_size_padded")))
        ok &= same(unpadded, page, id, "unpadded_page_size_bytes (no padding)");
    else
        ok &= json_is_integer(unpadded) && json_integer_value(unpadded) <= json_integer_value(page);

    const json_t *want_layers = json_object_get(expect, "layers");
    const json_t *got_layers = json_object_get(got, "layers");
    ok &= json_array_size(got_layers) == json_array_size(want_layers);
    const json_t *size = json_object_get(spec, "dtype_size");
    json_int_t elem = json_is_integer(size) ? json_integer_value(size) : 1;
    for (size_t i = 0; i < json_array_size(want_layers); i++) {
        const json_t *w = json_array_get(want_layers, i), *g = json_array_get(got_layers, i);
        char field[64];
        static const char *const view_fields[] = {"offset_bytes", "shape", "strides"};
        for (size_t f = 0; f < 3; f++) {
            snprintf(field, sizeof(field), "layers[%zu].%s", i, view_fields[f]);
            ok &= same(json_object_get(g, view_fields[f]), json_object_get(w, view_fields[f]), id, field);
        }
        /* Byte strides are the element strides scaled by the element size,
         * except C, which counts bytes in the byte view. */
        const json_t *sb = json_object_get(g, "strides_bytes"), *se = json_object_get(g, "strides");
        for (size_t a = 0; a < 3; a++)
            ok &= json_integer_value(json_array_get(sb, a)) == elem * json_integer_value(json_array_get(se, a));
    }
    if (!tap_ok(ok, "%s: kvrt plan --json reproduces every field (%s)", id, layout))
        tap_diag("kvrt %s", cmd);
    json_decref(got);
    spawn_result_free(&res);

    /* The human table is for people, but it must work for every case too. */
    /* Drop --json (argv[1]) by shifting the rest, NULL included, left by one. */
    memmove(&b.args[1], &b.args[2], (b.n - 1) * sizeof(b.args[0]));
    res = cli_run(b.args, NULL);
    char total[32];
    snprintf(total, sizeof(total), "%lld", (long long)json_integer_value(json_object_get(expect, "total_bytes")));
    tap_ok(res.status == 0 && strstr(res.out, "total") && strstr(res.out, total),
           "%s: the human table shows the total %s bytes", id, total);
    spawn_result_free(&res);
}

static void check_error(const json_t *c)
{
    const char *id = json_string_value(json_object_get(c, "id"));
    const json_t *mentions = json_object_get(c, "expect_error_mentions");
    const char *want[16] = {NULL};
    for (size_t i = 0; i < json_array_size(mentions) && i < 15; i++)
        want[i] = json_string_value(json_array_get(mentions, i));
    struct argv_builder b;
    build_args(c, &b);
    struct spawn_result res = cli_run(b.args, NULL);
    char what[256];
    snprintf(what, sizeof(what), "%s refused (%s)", id, json_string_value(json_object_get(c, "why")));
    /* Which of 2 (invalid) and 3 (refused) is the core's call; either is a
     * refusal with a message, never a plan. */
    cli_expect_error(&res, res.status == 3 ? 3 : 2, want, what);
    spawn_result_free(&res);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        printf("Bail out! usage: %s KVRT_EXE VECTORS_DIR\n", argv[0]);
        return 1;
    }
    cli_set_exe(argv[1]);
    json_t *geometry = vectors_load(argv[2], "geometry.json");
    json_t *layouts = vectors_load(argv[2], "layouts.json");
    if (!geometry || !layouts)
        return 1;
    tap_plan_dynamic();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(geometry, "cases"), i, c) check_case(c, json_object_get(layouts, "layouts"));
    json_array_foreach(json_object_get(geometry, "errors"), i, c) check_error(c);
    json_decref(geometry);
    json_decref(layouts);
    return tap_done();
}
