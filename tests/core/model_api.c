/*
 * kvrt/model.h through the shared library, as an engine calls it: every
 * example model opens and its description agrees with itself (groups, the
 * placement groups, settings); the plan's JSON is an object whose numbers
 * match a placement made from the description; misuse (NULL arguments,
 * reserved bytes, values out of range, bad names) is refused with one line
 * naming the value; a model of one spec; refusals keep their file's name.
 *
 *   test-model-api EXAMPLES_DIR
 */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/kvrt.h>

#include "fixtures.h"
#include "tap.h"

static bool mentions(const char *part)
{
    return strstr(kvrt_error_message(), part) != NULL && strchr(kvrt_error_message(), '\n') == NULL;
}

/* One example: its description holds together and places. */
static void check_example(const char *dir, const char *file)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    kvrt_model *m = NULL;
    int rc = kvrt_model_open(path, NULL, &m);
    if (strcmp(file, "minimax-m1.json") == 0) {
        tap_ok(rc == KVRT_ERR_INVALID && m == NULL && mentions("minimax-m1.json") && mentions("attn_type_list[0]"),
               "%s: refused by name (%s)", file, kvrt_error_message());
        return;
    }
    const struct kvrt_model_info *in = kvrt_model_get_info(m);
    bool ok = rc == KVRT_OK && in && in->num_groups > 0 && strcmp(in->source, path) == 0 &&
              (strcmp(in->name, file) == 0 || strcmp(in->format, "kvrt-model") == 0) && in->settings &&
              in->num_layers > 0;
    uint64_t layers = 0;
    for (size_t g = 0; ok && g < in->num_groups; g++) {
        const struct kvrt_model_group *grp = &in->groups[g];
        ok = grp->name && grp->what && grp->num_layers > 0 && in->placement_groups[g].layers == grp->layers &&
             in->placement_groups[g].num_layers == grp->num_layers;
        layers += grp->num_layers;
    }
    ok = ok && layers == in->num_layers;
    tap_ok(ok, "%s: opens (%s), %zu groups hold its %llu layers", file, rc ? kvrt_error_message() : "ok",
           in ? in->num_groups : 0, in ? (unsigned long long)in->num_layers : 0ULL);
    if (!ok) {
        kvrt_model_destroy(m);
        return;
    }
    /* The plan of 3 blocks under BLHNC against a placement made here. */
    struct kvrt_model_plan_request req;
    kvrt_model_plan_request_default(&req);
    req.layout = KVRT_LAYOUT_BLHNC;
    req.num_blocks = 3;
    char *text = NULL;
    kvrt_placement *p = NULL;
    rc = kvrt_model_plan_json(m, &req, &text);
    int prc = kvrt_placement_create(KVRT_LAYOUT_BLHNC, in->placement_groups, in->num_groups, 3, 0, &p);
    char want[64];
    snprintf(want, sizeof(want), "\"total_bytes\": %llu,",
             prc == KVRT_OK ? (unsigned long long)kvrt_placement_size(p) : 0ULL);
    tap_ok(rc == KVRT_OK && prc == KVRT_OK && text && text[0] == '{' && strstr(text, want) &&
               strstr(text, "\"layout\": \"BLHNC\"") && strstr(text, "\"vllm\": null"),
           "%s: the plan's JSON places 3 blocks as kvrt_placement_create does (%s)", file, want);
    kvrt_free(text);
    kvrt_placement_destroy(p);
    kvrt_model_destroy(m);
}

static void check_misuse(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/llama-3.1-8b.json", dir);
    kvrt_model *m = (kvrt_model *)&m;
    tap_ok(kvrt_model_open(path, NULL, NULL) == KVRT_ERR_INVALID && mentions("kvrt_model_open"),
           "kvrt_model_open: a NULL out is refused by name");
    tap_ok(kvrt_model_open(NULL, NULL, &m) == KVRT_ERR_INVALID && m == NULL && mentions("path is NULL"),
           "kvrt_model_open: a NULL path is refused and *out is NULL");
    tap_ok(kvrt_model_open("/nonexistent/config.json", NULL, &m) == KVRT_ERR_INVALID &&
               mentions("/nonexistent/config.json") && mentions("cannot open"),
           "a missing file is refused naming it");
    struct kvrt_model_options opt;
    kvrt_model_options_default(&opt);
    opt.reserved[3] = 1;
    tap_ok(kvrt_model_open(path, &opt, &m) == KVRT_ERR_INVALID && mentions("kvrt_model_options.reserved[3]"),
           "non-zero reserved bytes are refused (%s)", kvrt_error_message());
    kvrt_model_options_default(&opt);
    opt.attention_backend = (enum kvrt_attention_backend)99;
    tap_ok(kvrt_model_open(path, &opt, &m) == KVRT_ERR_INVALID && mentions("attention_backend is 99"),
           "an attention backend out of range is refused");
    kvrt_model_options_default(&opt);
    opt.kv_cache_dtype = (enum kvrt_kv_cache_dtype) - 1;
    tap_ok(kvrt_model_open(path, &opt, &m) == KVRT_ERR_INVALID && mentions("kv_cache_dtype is -1"),
           "a KV-cache type out of range is refused");
    kvrt_model_options_default(&opt);
    opt.attention_backend = KVRT_ATTENTION_FLASHMLA;
    tap_ok(kvrt_model_open(path, &opt, &m) == KVRT_ERR_INVALID && mentions("llama-3.1-8b.json") &&
               mentions("FLASHMLA is an MLA backend"),
           "an MLA backend for a model without MLA is refused, naming the file");
    const char text[] = "{\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"hidden_size\": 512, "
                        "\"torch_dtype\": \"bfloat16\", \"layer_types\": [\"full_attention\", \"teleport\"]}";
    tap_ok(kvrt_model_parse(text, sizeof(text) - 1, "mine.json", NULL, &m) == KVRT_ERR_INVALID &&
               mentions("mine.json: \"layer_types[1]\" is \"teleport\""),
           "kvrt_model_parse refuses an unknown layer type by name (%s)", kvrt_error_message());
    tap_ok(kvrt_model_parse("{\"num_hidden_layers\": 2", 22, NULL, NULL, &m) == KVRT_ERR_INVALID &&
               mentions("(model): line 1"),
           "text that is not JSON is refused with its line, named (model) without a name");

    enum kvrt_kv_cache_dtype d;
    enum kvrt_attention_backend b;
    tap_ok(kvrt_kv_cache_dtype_parse("bfloat16", &d) == KVRT_OK && d == KVRT_KV_CACHE_BF16 &&
               strcmp(kvrt_kv_cache_dtype_name(d), "bf16") == 0 && kvrt_kv_cache_dtype_parse("int4", &d) != KVRT_OK &&
               mentions("\"int4\"") && mentions("fp8_e5m2") &&
               kvrt_kv_cache_dtype_name((enum kvrt_kv_cache_dtype)6) == NULL,
           "KV-cache type names parse and print; a bad one names the valid ones");
    tap_ok(kvrt_attention_backend_parse("FLASH_ATTN_MLA", &b) == KVRT_OK && b == KVRT_ATTENTION_FLASH_ATTN_MLA &&
               kvrt_attention_backend_parse("XFORMERS", &b) != KVRT_OK && mentions("FLASH_ATTN_MLA_SPARSE") &&
               kvrt_attention_backend_parse("default", &b) != KVRT_OK &&
               strcmp(kvrt_attention_backend_name(KVRT_ATTENTION_DEFAULT), "default") == 0,
           "attention backend names parse and print; \"default\" is not a backend to ask for");
    tap_ok(kvrt_model_get_info(NULL) == NULL && kvrt_model_mixed_shapes(NULL) == 0, "NULL models describe nothing");
    kvrt_model_destroy(NULL);
}

/* Whether `name` stands in `list` as a whole word. */
static bool has_word(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(list, name); p; p = strstr(p + 1, name))
        if ((p == list || (!isalnum((unsigned char)p[-1]) && p[-1] != '_')) && !isalnum((unsigned char)p[n]) &&
            p[n] != '_')
            return true;
    return false;
}

/* The lists help and messages print are rendered from the parsers' tables:
 * every value is in them, and every word of them that names a value parses. */
static void check_rendered_lists(void)
{
    const char *caches = kvrt_kv_cache_dtype_valid_names();
    bool all = true;
    for (int i = 0; i < KVRT_NUM_KV_CACHE_DTYPES; i++)
        all = all && has_word(caches, kvrt_kv_cache_dtype_name((enum kvrt_kv_cache_dtype)i));
    enum kvrt_kv_cache_dtype d;
    tap_ok(all && kvrt_kv_cache_dtype_parse("half", &d) == KVRT_OK && has_word(caches, "half") &&
               kvrt_kv_cache_dtype_parse("int4", &d) == KVRT_ERR_INVALID && strstr(kvrt_error_message(), caches),
           "kvrt_kv_cache_dtype_valid_names lists every type and spelling, and the refusal quotes it (%s)", caches);
    const char *choices = kvrt_attention_backend_choices();
    all = true;
    for (int i = 1; i < KVRT_NUM_ATTENTION_BACKENDS; i++)
        if (!has_word(choices, kvrt_attention_backend_name((enum kvrt_attention_backend)i))) {
            tap_diag("  %s is missing", kvrt_attention_backend_name((enum kvrt_attention_backend)i));
            all = false;
        }
    tap_ok(all && strncmp(choices, "default", 7) != 0 && strstr(choices, "FLASH_ATTN (default)") &&
               strstr(choices, "FLASH_ATTN_MLA (default, 16)") && strstr(choices, "FLASHMLA (64)") &&
               strstr(choices, "refused (Blackwell only): CUTLASS_MLA, FLASHINFER_MLA"),
           "kvrt_attention_backend_choices names every backend, the defaults and MLA block sizes (%s)", choices);
}

static void check_spec_and_capacity(const char *dir)
{
    struct kvrt_spec s = fixture_attention(KVRT_DTYPE_BF16, 16, 8, 128);
    kvrt_model *m = NULL;
    int rc = kvrt_model_from_spec(&s, 32, "mine", &m);
    const struct kvrt_model_info *in = kvrt_model_get_info(m);
    tap_ok(rc == KVRT_OK && in->num_groups == 1 && in->groups[0].num_layers == 32 &&
               strcmp(in->groups[0].layers[31].name, "layer.31") == 0 && strcmp(in->format, "spec") == 0 &&
               strcmp(in->source, "(mine)") == 0 && in->num_q_heads == 8 && !kvrt_model_mixed_shapes(m),
           "kvrt_model_from_spec: one group of 32 layers named layer.N, 8 query heads");
    /* llama-3.1-8b's cache: 131072 bytes a token, 2 MiB a block. */
    struct kvrt_model_capacity cap;
    rc = kvrt_model_vllm_capacity(m, 25769803776ULL, 131072, 8192, &cap);
    tap_ok(rc == KVRT_OK && cap.num_blocks == 12288 && cap.tokens == 196608 && cap.blocks_per_request == 8192 &&
               cap.fits_one_request,
           "capacity of 24 GiB: 12288 blocks, 196608 tokens, 8192 blocks a request");
    kvrt_model_destroy(m);
    tap_ok(kvrt_model_from_spec(&s, 0, NULL, &m) == KVRT_ERR_INVALID && m == NULL && mentions("0 layers"),
           "kvrt_model_from_spec: 0 layers are refused");
    s.head_size = 0;
    tap_ok(kvrt_model_from_spec(&s, 2, NULL, &m) == KVRT_ERR_INVALID && m == NULL,
           "kvrt_model_from_spec: an invalid spec is refused (%s)", kvrt_error_message());

    /* Kimi-Linear mixes state and MLA pages; its JSON has vLLM's figures. */
    char path[1024];
    snprintf(path, sizeof(path), "%s/kimi-linear-48b-a3b-instruct.json", dir);
    rc = kvrt_model_open(path, NULL, &m);
    struct kvrt_model_plan_request req;
    kvrt_model_plan_request_default(&req);
    req.budget_bytes = 25769803776ULL;
    char *text = NULL;
    if (rc == KVRT_OK)
        rc = kvrt_model_plan_json(m, &req, &text);
    tap_ok(rc == KVRT_OK && kvrt_model_mixed_shapes(m) && strstr(text, "\"num_blocks\": 1692") &&
               strstr(text, "GPU KV cache size: 798,624 tokens"),
           "kimi-linear: mixed shapes, 1692 blocks in 24 GiB, vLLM's log line");
    kvrt_free(text);
    req.reserved[0] = 1;
    tap_ok(kvrt_model_plan_json(m, &req, &text) == KVRT_ERR_INVALID && text == NULL &&
               mentions("kvrt_model_plan_request.reserved[0]"),
           "a plan request with reserved bytes set is refused");
    kvrt_model_destroy(m);
}

int main(int argc, char **argv)
{
    tap_plan_dynamic();
    if (argc < 2) {
        tap_diag("usage: test-model-api EXAMPLES_DIR");
        tap_ok(false, "the examples folder is given");
        return tap_done();
    }
    DIR *d = opendir(argv[1]);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n > 5 && strcmp(e->d_name + n - 5, ".json") == 0)
            check_example(argv[1], e->d_name);
    }
    if (d)
        closedir(d);
    check_misuse(argv[1]);
    check_spec_and_capacity(argv[1]);
    check_rendered_lists();
    return tap_done();
}
