/*
 * `kvrt plan --model`: every shipped config is read the way vLLM sizes its
 * cache (groups, specs, pages, block size of hybrids), --memory gives the
 * blocks, --dtype and --block-size override; broken files are refused with
 * the field and the file named.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_env.h"

static char dir[] = "/tmp/kvrt-cli-models-XXXXXX";

static json_t *plan(const char *file, const char *const *extra)
{
    const char *args[32] = {"plan", "--json", "--model", cli_model_path(file)};
    size_t n = 4;
    for (size_t i = 0; extra && extra[i] && n < 31; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    return cli_json(args, NULL);
}

static const json_t *group(const json_t *root, size_t g)
{
    return json_array_get(json_object_get(json_object_get(root, "model"), "groups"), g);
}

static json_int_t gi(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

static json_int_t spec_i(const json_t *g, const char *k)
{
    return json_integer_value(json_object_get(json_object_get(g, "spec"), k));
}

static const char *spec_s(const json_t *g, const char *k)
{
    return json_string_value(json_object_get(json_object_get(g, "spec"), k));
}

static size_t num_groups(const json_t *root)
{
    return json_array_size(json_object_get(json_object_get(root, "model"), "groups"));
}

static void check_llama(void)
{
    json_t *r = plan("llama-3.1-8b.json", ARGS("--memory", "24GiB"));
    const json_t *g = group(r, 0);
    tap_ok(num_groups(r) == 1 && gi(g, "num_layers") == 32 && strcmp(spec_s(g, "kind"), "attention") == 0 &&
               strcmp(spec_s(g, "dtype"), "bf16") == 0 && spec_i(g, "kv_heads") == 8 && spec_i(g, "head_size") == 128 &&
               spec_i(g, "block_size") == 16 && spec_i(g, "page_bytes") == 65536,
           "llama-3.1-8b: one group of 32 layers, bf16, 8 KV heads x 128, pages of 64 KiB");
    tap_ok(gi(r, "bytes_per_block") == 2097152 && gi(r, "num_blocks") == 12288 && gi(r, "total_bytes") == 25769803776LL &&
               gi(r, "budget_bytes") == 25769803776LL,
           "llama-3.1-8b --memory 24GiB: 2 MiB per block, 12288 blocks");
    const json_t *pg = json_array_get(json_object_get(r, "groups"), 0);
    tap_ok(gi(pg, "bytes") == 25769803776LL && gi(pg, "tokens") == 12288 * 16, "llama-3.1-8b: per-group bytes and tokens");
    json_decref(r);
    r = plan("llama-3.1-8b.json", ARGS("--blocks", "10", "--dtype", "fp8_e4m3", "--block-size", "32"));
    g = group(r, 0);
    tap_ok(strcmp(spec_s(g, "dtype"), "fp8_e4m3") == 0 && spec_i(g, "block_size") == 32 && spec_i(g, "page_bytes") == 65536 &&
               gi(r, "total_bytes") == 10 * 32 * 65536,
           "llama-3.1-8b --dtype fp8_e4m3 --block-size 32: both override the file");
    json_decref(r);
    cli_ok_case(ARGS("plan", "--model", cli_model_path("llama-3.1-8b.json"), "--memory", "1.5GiB"), NULL,
                MENTIONS("group 0", "full_attention", "768 blocks fit in --memory 1.50 GiB", "per block"));
}

static void check_others(void)
{
    json_t *r = plan("qwen2.5-7b.json", ARGS("--blocks", "4"));
    const json_t *g = group(r, 0);
    tap_ok(num_groups(r) == 1 && gi(g, "num_layers") == 28 && spec_i(g, "kv_heads") == 4 && spec_i(g, "head_size") == 128 &&
               json_is_null(json_object_get(g, "window")),
           "qwen2.5-7b: 28 full-attention layers (use_sliding_window false), 4 KV heads x 128");
    json_decref(r);

    r = plan("deepseek-v3.json", ARGS("--blocks", "4"));
    g = group(r, 0);
    tap_ok(num_groups(r) == 1 && gi(g, "num_layers") == 61 && strcmp(spec_s(g, "kind"), "mla") == 0 &&
               spec_i(g, "head_slots") == 1 && spec_i(g, "head_size") == 576 && spec_i(g, "head_size_v") == 0 &&
               spec_i(g, "page_bytes") == 16 * 576 * 2,
           "deepseek-v3: 61 MLA layers, one slot of 512 + 64 = 576, no V");
    json_decref(r);

    r = plan("gpt-oss-20b.json", ARGS("--blocks", "4"));
    tap_ok(num_groups(r) == 2 && strcmp(js(group(r, 0), "name"), "sliding_attention") == 0 &&
               gi(group(r, 0), "window") == 128 && gi(group(r, 0), "num_layers") == 12 &&
               strcmp(js(group(r, 1), "name"), "full_attention") == 0 && gi(group(r, 1), "num_layers") == 12 &&
               spec_i(group(r, 1), "head_size") == 64 && gi(r, "bytes_per_block") == 12 * 32768,
           "gpt-oss-20b: 12 sliding-window (128) + 12 full layers in two overlaid groups; a block costs 12 pages");
    json_decref(r);

    r = plan("qwen3-next-80b-a3b.json", ARGS("--blocks", "4"));
    bool ok = num_groups(r) == 4;
    for (size_t i = 0; ok && i < 3; i++)
        ok = strncmp(js(group(r, i), "name"), "linear_attention", 16) == 0 && gi(group(r, i), "num_layers") == 12 &&
             strcmp(spec_s(group(r, i), "kind"), "state") == 0 && spec_i(group(r, i), "content_bytes") == 1097728 &&
             spec_i(group(r, i), "page_bytes") == 1114112;
    g = group(r, 3);
    tap_ok(ok && strcmp(js(g, "name"), "full_attention") == 0 && gi(g, "num_layers") == 12 && spec_i(g, "block_size") == 544 &&
               spec_i(g, "kv_heads") == 2 && spec_i(g, "head_size") == 256 && spec_i(g, "page_bytes") == 1114112,
           "qwen3-next: 36 linear-attention state layers (1097728 B padded to 1114112) in 3 groups + 12 full "
           "attention layers with blocks raised to 544 tokens");
    json_decref(r);

    r = plan("jamba-v0.1.json", ARGS("--blocks", "4"));
    g = group(r, 7);
    tap_ok(num_groups(r) == 8 && strcmp(js(g, "name"), "full_attention") == 0 && gi(g, "num_layers") == 4 &&
               spec_i(g, "block_size") == 80 && spec_i(group(r, 0), "content_bytes") == 311296 &&
               spec_i(group(r, 0), "page_bytes") == 327680,
           "jamba-v0.1: 4 attention layers (blocks of 80) and 28 Mamba layers (311296 B padded to 327680) in 7 groups");
    json_decref(r);

    r = plan("tiny-hybrid.kvrt.json", ARGS("--blocks", "4", "--layout", "BLNHC"));
    tap_ok(num_groups(r) == 3 && gi(group(r, 1), "window") == 256 && strcmp(js(r, "layout"), "BLNHC") == 0 &&
               json_array_size(json_object_get(r, "sets")) == 3,
           "tiny-hybrid.kvrt.json: three explicit groups, placed under BLNHC");
    json_decref(r);
}

/* Write a file into the temporary folder; returns its path (static ring). */
static const char *write_file(const char *name, const char *text)
{
    static char paths[8][256];
    static unsigned next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof(paths[0]), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return p;
}

static void check_errors(void)
{
    static const struct {
        const char *name, *text, *mentions;
    } bad[] = {
        {"no-layers.json", "{\"num_attention_heads\": 8, \"hidden_size\": 512, \"torch_dtype\": \"bfloat16\"}",
         "\"num_hidden_layers\""},
        {"bad-type.json", "{\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"hidden_size\": 512, "
                          "\"torch_dtype\": \"bfloat16\", \"layer_types\": [\"full_attention\", \"teleport\"]}",
         "\"layer_types[1]\""},
        {"short-types.json", "{\"num_hidden_layers\": 3, \"num_attention_heads\": 8, \"hidden_size\": 512, "
                             "\"torch_dtype\": \"bfloat16\", \"layer_types\": [\"full_attention\"]}",
         "\"layer_types\""},
        {"no-window.json", "{\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"hidden_size\": 512, "
                           "\"torch_dtype\": \"bfloat16\", \"layer_types\": [\"sliding_attention\", \"full_attention\"]}",
         "\"sliding_window\""},
        {"dtype.json", "{\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"hidden_size\": 512, "
                       "\"torch_dtype\": \"float64\"}",
         "\"float64\""},
        {"no-dtype.json", "{\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"hidden_size\": 512}", "\"torch_dtype\""},
        {"string.json", "{\"num_hidden_layers\": \"32\", \"num_attention_heads\": 8, \"hidden_size\": 512, "
                        "\"torch_dtype\": \"bfloat16\"}",
         "\"num_hidden_layers\""},
        {"gqa.json", "{\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"num_key_value_heads\": 3, "
                     "\"hidden_size\": 512, \"torch_dtype\": \"bfloat16\"}",
         "\"num_key_value_heads\""},
        {"nemotron.json", "{\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"hidden_size\": 512, "
                          "\"torch_dtype\": \"bfloat16\", \"hybrid_override_pattern\": \"M*\"}",
         "\"hybrid_override_pattern\""},
        {"linear.json", "{\"num_hidden_layers\": 4, \"num_attention_heads\": 8, \"hidden_size\": 512, "
                        "\"torch_dtype\": \"bfloat16\", \"full_attention_interval\": 2}",
         "\"linear_num_key_heads\""},
        {"broken.json", "{\"num_hidden_layers\": 2,", "not valid JSON"},
        {"array.json", "[1, 2]", "JSON object"},
        {"dup.json", "{\"num_hidden_layers\": 2, \"num_hidden_layers\": 3}", "not valid JSON"},
        {"kvrt-key.json", "{\"format\": \"kvrt-model\", \"version\": 1, \"dtype\": \"bf16\", \"groups\": [{\"name\": "
                          "\"g\", \"layers\": 2, \"spec\": {\"kind\": \"attention\", \"kv_heads\": 2, \"head_size\": 8, "
                          "\"heads\": 4}}]}",
         "\"groups[0].spec.heads\""},
        {"kvrt-kind.json", "{\"format\": \"kvrt-model\", \"version\": 1, \"groups\": [{\"name\": \"g\", \"layers\": 2, "
                           "\"spec\": {\"kind\": \"mamba\", \"state_content_bytes\": 8}}]}",
         "\"mamba\""},
        {"kvrt-version.json", "{\"format\": \"kvrt-model\", \"version\": 2, \"groups\": []}", "\"version\""},
        {"kvrt-dtype.json", "{\"format\": \"kvrt-model\", \"version\": 1, \"groups\": [{\"name\": \"g\", \"layers\": 2, "
                            "\"spec\": {\"kind\": \"attention\", \"kv_heads\": 2, \"head_size\": 8}}]}",
         "\"groups[0].spec.dtype\""},
        {"kvrt-format.json", "{\"format\": \"gguf\"}", "\"format\""},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *path = write_file(bad[i].name, bad[i].text);
        cli_error_case(ARGS("plan", "--model", path, "--blocks", "2"), NULL, 2, MENTIONS(bad[i].mentions, bad[i].name));
        unlink(path);
    }
    cli_error_case(ARGS("plan", "--model", "/nonexistent/config.json", "--blocks", "2"), NULL, 2,
                   MENTIONS("/nonexistent/config.json"));
    /* A folder is read through its config.json. */
    char sub[300];
    snprintf(sub, sizeof(sub), "%s/model", dir);
    mkdir(sub, 0700);
    char cfg[320];
    snprintf(cfg, sizeof(cfg), "%s/config.json", sub);
    FILE *f = fopen(cfg, "w");
    if (f) {
        fputs("{\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"hidden_size\": 256, \"torch_dtype\": \"float16\"}", f);
        fclose(f);
    }
    json_t *r = cli_json(ARGS("plan", "--json", "--model", sub, "--blocks", "2"), NULL);
    tap_ok(r && gi(group(r, 0), "num_layers") == 2 && spec_i(group(r, 0), "head_size") == 64,
           "plan --model FOLDER reads FOLDER/config.json (head_dim from hidden_size / heads)");
    json_decref(r);
    unlink(cfg);
    rmdir(sub);

    /* Mixed page sizes in two groups need a block-outermost layout. */
    const char *mixed = write_file("mixed.kvrt.json",
                                   "{\"format\": \"kvrt-model\", \"version\": 1, \"dtype\": \"fp16\", \"groups\": ["
                                   "{\"name\": \"a\", \"layers\": 2, \"spec\": {\"kind\": \"attention\", \"kv_heads\": 2, "
                                   "\"head_size\": 8}}, {\"name\": \"s\", \"layers\": 1, \"spec\": {\"kind\": \"state\", "
                                   "\"state_content_bytes\": 100}}]}");
    cli_error_case(ARGS("plan", "--model", mixed, "--blocks", "2", "--layout", "LBNHC"), NULL, 3,
                   MENTIONS("LBNHC", "BLHNC"));
    r = cli_json(ARGS("plan", "--json", "--model", mixed, "--blocks", "2", "--layout", "BLHNC"), NULL);
    /* Overlaid: the larger group, 2 layers x 2 heads x 16 tokens x (8 + 8) x 2 bytes. */
    tap_ok(r && gi(r, "bytes_per_block") == 2 * 2 * 16 * 16 * 2, "mixed pages place under BLHNC");
    json_decref(r);
    unlink(mixed);
}

static void check_memory(void)
{
    const char *llama = cli_model_path("llama-3.1-8b.json");
    cli_error_case(ARGS("plan", "--model", llama, "--memory", "1KiB"), NULL, 2, MENTIONS("does not hold one block"));
    cli_error_case(ARGS("plan", "--model", llama, "--memory", "12XB"), NULL, 2, MENTIONS("--memory", "\"12XB\"", "GiB"));
    cli_error_case(ARGS("plan", "--model", llama, "--memory", "1.5"), NULL, 2, MENTIONS("--memory"));
    cli_error_case(ARGS("plan", "--model", llama), NULL, 2, MENTIONS("--blocks", "--memory"));
    cli_error_case(ARGS("plan", "--model", llama, "--blocks", "2", "--memory", "1GiB"), NULL, 2, MENTIONS("not both"));
    cli_error_case(ARGS("plan", "--model", llama, "--blocks", "2", "--head-size", "8"), NULL, 2,
                   MENTIONS("--head-size", "--model"));
    json_t *r = cli_json(ARGS("plan", "--json", "--model", llama, "--memory", "1.5GiB"), NULL);
    tap_ok(r && gi(r, "budget_bytes") == 1610612736 && gi(r, "num_blocks") == 768, "--memory 1.5GiB is 1610612736 bytes");
    json_decref(r);
    r = cli_json(ARGS("plan", "--json", "--layers", "2", "--block-size", "16", "--kv-heads", "2", "--head-size", "64",
                      "--memory", "1048576"),
                 NULL);
    tap_ok(r && gi(r, "num_blocks") == 64 && gi(r, "budget_bytes") == 1048576, "plan with flags: --memory in plain bytes");
    json_decref(r);
}

int main(int argc, char **argv)
{
    cli_env_init(argc, argv);
    if (!mkdtemp(dir)) {
        printf("Bail out! cannot make a temporary folder\n");
        return 1;
    }
    check_llama();
    check_others();
    check_errors();
    check_memory();
    rmdir(dir);
    return tap_done();
}
