/*
 * `kvrt plan --model`: every shipped config is sized as vLLM sizes it
 * (groups, pages, block size, vLLM's capacity figures for a budget, with
 * the arithmetic in a comment), the settings say where each value came
 * from, --kv-cache-dtype / --block-size / --attention-backend behave as
 * vLLM's flags, and models kvrt does not size are refused by name.
 * Budgets are 24 GiB = 25769803776 bytes unless said otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_env.h"

#define GIB24 25769803776LL

static char dir[] = "/tmp/kvrt-cli-models-XXXXXX";

static json_t *plan(const char *file, const char *const *extra)
{
    const char *args[32] = {"plan", "--json", "--model", file};
    size_t n = 4;
    for (size_t i = 0; extra && extra[i] && n < 31; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    return cli_json(args, NULL);
}

static json_t *plan_example(const char *file, const char *const *extra)
{
    return plan(cli_model_path(file), extra);
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

/* Bytes a token of one layer of group g: its page over its block size. */
static json_int_t per_token(const json_t *root, size_t g)
{
    json_int_t bs = spec_i(group(root, g), "block_size");
    return bs ? spec_i(group(root, g), "page_bytes") / bs : -1;
}

static const json_t *vllm(const json_t *root)
{
    return json_object_get(root, "vllm");
}

/* The value and the source of a setting ("" when absent). */
static const char *setting(const json_t *root, const char *name, const char *field)
{
    const json_t *a = json_object_get(json_object_get(root, "model"), "settings");
    for (size_t i = 0; i < json_array_size(a); i++)
        if (strcmp(js(json_array_get(a, i), "name"), name) == 0)
            return js(json_array_get(a, i), field);
    return "";
}

static bool has(const char *text, const char *part)
{
    return text && strstr(text, part) != NULL;
}

/* vLLM's figures: blocks, "GPU KV cache size" tokens, blocks per request
 * and the concurrency to two decimals, as vLLM logs it. */
static bool capacity(const json_t *r, json_int_t blocks, json_int_t tokens, json_int_t len, json_int_t per_request,
                     double concurrency)
{
    const json_t *v = vllm(r);
    return v && gi(v, "num_blocks") == blocks && gi(v, "kv_cache_tokens") == tokens && gi(v, "max_model_len") == len &&
           gi(v, "blocks_per_request") == per_request && jnum(v, "max_concurrency") - concurrency < 0.005 &&
           concurrency - jnum(v, "max_concurrency") < 0.005;
}

static bool all_groups(const json_t *r, size_t n, json_int_t layers, json_int_t page, json_int_t block)
{
    bool ok = num_groups(r) == n;
    for (size_t g = 0; ok && g < n; g++)
        ok = gi(group(r, g), "num_layers") == layers && spec_i(group(r, g), "page_bytes") == page &&
             spec_i(group(r, g), "block_size") == block;
    return ok;
}

static void check_llama(void)
{
    /* 8 KV heads x (128 K + 128 V) x 2 bytes = 4096 bytes a token and layer,
     * x 32 layers = 131072 bytes a token.  Page: 16 tokens x 4096 = 65536;
     * a block is 32 pages = 2097152.  24 GiB / 2 MiB = 12288 blocks =
     * 196608 tokens; a request of max_position_embeddings 131072 tokens
     * (rope llama3: not scaled) takes 131072 / 16 = 8192 blocks, so
     * 12288 / 8192 = 1.50x. */
    json_t *r = plan_example("llama-3.1-8b.json", ARGS("--memory", "24GiB"));
    tap_ok(all_groups(r, 1, 32, 65536, 16) && per_token(r, 0) == 4096 &&
               strcmp(spec_s(group(r, 0), "dtype"), "bf16") == 0 && spec_i(group(r, 0), "kv_heads") == 8 &&
               spec_i(group(r, 0), "head_size") == 128 && gi(r, "bytes_per_block") == 2097152 &&
               gi(r, "num_blocks") == 12288 && gi(r, "total_bytes") == GIB24,
           "llama-3.1-8b: one group of 32 layers, pages of 65536 bytes, 12288 blocks in 24 GiB");
    tap_ok(capacity(r, 12288, 196608, 131072, 8192, 1.50) &&
               has(json_string_value(json_array_get(json_object_get(vllm(r), "log"), 0)),
                   "GPU KV cache size: 196,608 tokens") &&
               has(json_string_value(json_array_get(json_object_get(vllm(r), "log"), 1)),
                   "Maximum concurrency for 131,072 tokens per request: 1.50x"),
           "llama-3.1-8b: vLLM's 196,608 tokens and 1.50x for 131,072 tokens");
    tap_ok(strcmp(setting(r, "dtype", "value"), "bfloat16") == 0 &&
               has(setting(r, "dtype", "source"), "config torch_dtype") &&
               has(setting(r, "kv_cache_dtype", "source"), "auto") &&
               has(setting(r, "block_size", "source"), "default") &&
               has(js(json_object_get(r, "model"), "max_model_len_source"), "max_position_embeddings"),
           "llama-3.1-8b: each value says where it came from (config, default)");
    json_decref(r);

    /* --max-model-len 8192: 512 blocks a request, 12288 / 512 = 24.00x. */
    r = plan_example("llama-3.1-8b.json", ARGS("--memory", "24GiB", "--max-model-len", "8192"));
    tap_ok(capacity(r, 12288, 196608, 8192, 512, 24.0) &&
               strcmp(js(vllm(r), "max_model_len_source"), "--max-model-len") == 0,
           "llama-3.1-8b --max-model-len 8192: 24.00x");
    json_decref(r);

    /* fp8 (e4m3): 1 byte an element, 32 tokens: 32 x 8 x 256 = 65536. */
    r = plan_example("llama-3.1-8b.json", ARGS("--blocks", "10", "--kv-cache-dtype", "fp8", "--block-size", "32"));
    tap_ok(strcmp(spec_s(group(r, 0), "dtype"), "fp8_e4m3") == 0 && spec_i(group(r, 0), "block_size") == 32 &&
               spec_i(group(r, 0), "page_bytes") == 65536 && gi(r, "total_bytes") == 10 * 32 * 65536 &&
               has(setting(r, "kv_cache_dtype", "source"), "--kv-cache-dtype fp8") &&
               strcmp(setting(r, "block_size", "source"), "--block-size") == 0,
           "llama-3.1-8b --kv-cache-dtype fp8 --block-size 32: fp8_e4m3 pages of 65536 bytes, from the flags");
    json_decref(r);
    r = plan_example("llama-3.1-8b.json", ARGS("--blocks", "10", "--dtype", "fp8_e5m2"));
    tap_ok(strcmp(spec_s(group(r, 0), "dtype"), "fp8_e5m2") == 0 && spec_i(group(r, 0), "page_bytes") == 32768 &&
               has(setting(r, "kv_cache_dtype", "source"), "--dtype"),
           "llama-3.1-8b --dtype fp8_e5m2 (the older spelling): 16 x 8 x 256 = 32768-byte pages");
    json_decref(r);
    cli_ok_case(ARGS("plan", "--model", cli_model_path("llama-3.1-8b.json"), "--memory", "1.5GiB"), NULL,
                MENTIONS("group 0", "full_attention", "768 blocks fit in --memory 1.50 GiB", "per block",
                         "GPU KV cache size: 12,288 tokens",
                         "Maximum concurrency for 131,072 tokens per request: 0.09x", "vLLM would refuse to start",
                         "from config torch_dtype"));
}

static void check_qwen_and_gemma(void)
{
    /* Qwen2.5-7B: use_sliding_window false, so 28 full layers of 4 KV heads
     * x 256 x 2 = 2048 bytes a token (57344 for the model); pages 16 x 2048
     * = 32768, blocks 28 x 32768 = 917504; 25769803776 / 917504 = 28086
     * blocks = 449376 tokens; 131072 / 16 = 8192 blocks a request, 28086 /
     * 8192 = 3.43x. */
    json_t *r = plan_example("qwen2.5-7b.json", ARGS("--memory", "24GiB"));
    tap_ok(all_groups(r, 1, 28, 32768, 16) && per_token(r, 0) == 2048 &&
               json_is_null(json_object_get(group(r, 0), "window")) && gi(r, "bytes_per_block") == 917504 &&
               capacity(r, 28086, 449376, 131072, 8192, 3.43),
           "qwen2.5-7b: 28 full layers (window off), 28086 blocks, 449376 tokens, 3.43x");
    json_decref(r);

    /* Gemma-2-2B-it: 13 sliding (4096) + 13 full layers alternating, 4 KV
     * heads x 512 x 2 = 4096 bytes a token and layer, pages 65536.  Two
     * groups of 13 share memory: a block is 13 x 65536 = 851968;
     * 25769803776 / 851968 = 30247 blocks; tokens 30247 // 2 groups x 16 =
     * 241968.  A request of 8192 tokens: full 8192 / 16 = 512 blocks,
     * sliding cdiv(min(4095 + 8192, 8192), 16) + 1 = 513, so 1025; 30247 /
     * 1025 = 29.51x. */
    r = plan_example("gemma-2-2b-it.json", ARGS("--memory", "24GiB"));
    tap_ok(all_groups(r, 2, 13, 65536, 16) && per_token(r, 0) == 4096 && per_token(r, 1) == 4096 &&
               gi(group(r, 0), "window") == 4096 && strcmp(js(group(r, 0), "usage"), "sliding_window") == 0 &&
               gi(r, "bytes_per_block") == 851968 && capacity(r, 30247, 241968, 8192, 1025, 29.51),
           "gemma-2-2b-it: 13 sliding + 13 full layers, 30247 blocks, 241968 tokens, 29.51x");
    json_decref(r);
    /* --max-num-batched-tokens 2048: sliding keeps cdiv(4095 + 2048, 16) +
     * 1 = 385 blocks, so 512 + 385 = 897 a request; 30247 / 897 = 33.72x. */
    r = plan_example("gemma-2-2b-it.json", ARGS("--memory", "24GiB", "--max-num-batched-tokens", "2048"));
    tap_ok(capacity(r, 30247, 241968, 8192, 897, 33.72), "gemma-2-2b-it --max-num-batched-tokens 2048: 33.72x");
    json_decref(r);

    /* Mistral-Small-3.1-24B-Instruct-2503 (multimodal): the language model
     * is text_config, 40 full layers of 8 KV heads x (128 K + 128 V) x 2
     * bytes (top-level torch_dtype bfloat16) = 4096 bytes a token and layer,
     * 163840 for the model.  Pages 16 x 4096 = 65536; a block is 40 x 65536
     * = 2621440; 25769803776 / 2621440 = 9830 blocks = 157280 tokens.
     * text_config.max_position_embeddings 131072 / 16 = 8192 blocks a
     * request, 9830 / 8192 = 1.20x. */
    r = plan_example("mistral-small-3.1-24b-instruct-2503.json", ARGS("--memory", "24GiB"));
    tap_ok(all_groups(r, 1, 40, 65536, 16) && per_token(r, 0) == 4096 &&
               strcmp(spec_s(group(r, 0), "dtype"), "bf16") == 0 && spec_i(group(r, 0), "kv_heads") == 8 &&
               spec_i(group(r, 0), "head_size") == 128 && gi(r, "bytes_per_block") == 2621440 &&
               capacity(r, 9830, 157280, 131072, 8192, 1.20) &&
               strcmp(js(json_object_get(r, "model"), "max_model_len_source"),
                      "config text_config.max_position_embeddings") == 0 &&
               has(setting(r, "dtype", "source"), "config torch_dtype"),
           "mistral-small-3.1 (text_config): 40 full layers, pages of 65536, 9830 blocks, 157280 tokens, 1.20x");
    json_decref(r);
}

static void check_deepseek(void)
{
    /* DeepSeek-V3 (MLA): 512 + 64 = 576 elements x 2 bytes = 1152 bytes a
     * token and layer, 70272 for 61 layers.  On Hopper vLLM picks
     * FLASH_ATTN_MLA, whose kernels take multiples of 16, so the default
     * block of 16 stays: pages 16 x 1152 = 18432, blocks 61 x 18432 =
     * 1124352.  Without --blocks or --memory, plan places one block. */
    json_t *r = plan_example("deepseek-v3.json", NULL);
    tap_ok(all_groups(r, 1, 61, 18432, 16) && per_token(r, 0) == 1152 && gi(r, "bytes_per_block") == 1124352 &&
               gi(r, "num_blocks") == 1 && gi(r, "total_bytes") == 1124352 && json_is_null(vllm(r)) &&
               strcmp(spec_s(group(r, 0), "kind"), "mla") == 0 && spec_i(group(r, 0), "head_size") == 576 &&
               spec_i(group(r, 0), "head_size_v") == 0 &&
               strcmp(setting(r, "attention_backend", "value"), "FLASH_ATTN_MLA") == 0 &&
               has(setting(r, "attention_backend", "source"), "Hopper") &&
               has(setting(r, "block_size", "source"), "default"),
           "deepseek-v3: FLASH_ATTN_MLA on Hopper, 16-token pages of 18432 bytes, 1124352 bytes a block");
    json_decref(r);
    /* 25769803776 / 1124352 = 22919 blocks = 366704 tokens.  max_model_len:
     * yarn 4096 x 40 = 163840, 163840 / 16 = 10240 blocks a request;
     * 22919 / 10240 = 2.24x. */
    r = plan_example("deepseek-v3.json", ARGS("--memory", "24GiB"));
    tap_ok(all_groups(r, 1, 61, 18432, 16) && gi(r, "bytes_per_block") == 1124352 &&
               capacity(r, 22919, 366704, 163840, 10240, 2.24),
           "deepseek-v3 --memory 24GiB: 22919 blocks, 366704 tokens, 2.24x");
    json_decref(r);

    /* Each Hopper MLA backend's block: its preferred size for vLLM's 16
     * (get_preferred_block_size), or --block-size when its kernels take it;
     * an fp8 cache is not FLASH_ATTN_MLA's, so vLLM falls to FLASHMLA. */
    static const struct {
        const char *backend, *block, *cache;
        json_int_t expect, page;
        const char *chosen;
    } backends[] = {
        {"TRITON_MLA", NULL, NULL, 16, 16 * 1152, "TRITON_MLA"},
        {"FLASHMLA", NULL, NULL, 64, 64 * 1152, "FLASHMLA"},
        {"FLASHMLA", "128", NULL, 128, 128 * 1152, "FLASHMLA"},
        {"FLASH_ATTN_MLA", "32", NULL, 32, 32 * 1152, "FLASH_ATTN_MLA"},
        {NULL, NULL, "fp8", 64, 64 * 576, "FLASHMLA"},
        {NULL, "48", NULL, 48, 48 * 1152, "FLASH_ATTN_MLA"},
    };
    bool ok = true;
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
        const char *args[8] = {"--blocks", "2"};
        size_t n = 2;
        if (backends[i].backend)
            args[n++] = "--attention-backend", args[n++] = backends[i].backend;
        if (backends[i].block)
            args[n++] = "--block-size", args[n++] = backends[i].block;
        if (backends[i].cache)
            args[n++] = "--kv-cache-dtype", args[n++] = backends[i].cache;
        args[n] = NULL;
        r = plan_example("deepseek-v3.json", args);
        ok = ok && spec_i(group(r, 0), "block_size") == backends[i].expect &&
             spec_i(group(r, 0), "page_bytes") == backends[i].page &&
             strcmp(setting(r, "attention_backend", "value"), backends[i].chosen) == 0;
        json_decref(r);
    }
    tap_ok(ok, "deepseek-v3 block sizes: TRITON_MLA 16, FLASHMLA 64 (128 kept), FLASH_ATTN_MLA keeps 32 and 48, "
               "fp8 falls to FLASHMLA's 64");

    /* DeepSeek-V3.2: every layer keeps its MLA latent (1152 bytes a token)
     * and its indexer's keys (128 fp8 + 1 float32 scale = 132 bytes): 1284
     * bytes a token and layer, 78324 for 61 layers, in one group of 122
     * layers (UniformTypeKVCacheSpecs).  FLASH_ATTN_MLA_SPARSE (vLLM's
     * first sparse backend on Hopper with a bfloat16 cache) and the indexer
     * take only 64-token blocks: 61 x (73728 + 8448) = 5012736 bytes. */
    r = plan_example("deepseek-v3.2-exp.json", NULL);
    const json_t *g = group(r, 0);
    const json_t *layers = json_object_get(g, "layers");
    tap_ok(num_groups(r) == 1 && gi(g, "num_layers") == 122 &&
               strcmp(json_string_value(json_array_get(layers, 1)), "layers.0.indexer") == 0 &&
               gi(r, "bytes_per_block") == 5012736 && gi(r, "bytes_per_block") / 64 == 78324 &&
               spec_i(g, "block_size") == 64 &&
               strcmp(setting(r, "attention_backend", "value"), "FLASH_ATTN_MLA_SPARSE") == 0,
           "deepseek-v3.2-exp: 61 MLA + 61 indexer layers in one group, FLASH_ATTN_MLA_SPARSE, 5012736-byte blocks");
    json_decref(r);
    /* 25769803776 / 5012736 = 5140 blocks = 328960 tokens; 163840 / 64 =
     * 2560 a request, 5140 / 2560 = 2.01x. */
    r = plan_example("deepseek-v3.2-exp.json", ARGS("--memory", "24GiB"));
    tap_ok(gi(r, "bytes_per_block") == 5012736 && capacity(r, 5140, 328960, 163840, 2560, 2.01),
           "deepseek-v3.2-exp --memory 24GiB: 5140 blocks, 328960 tokens, 2.01x");
    json_decref(r);
    /* --kv-cache-dtype fp8 is fp8_ds_mla, which FLASH_ATTN_MLA_SPARSE does
     * not take: FLASHMLA_SPARSE, 64 tokens.  656 + 132 = 788 bytes a token
     * and layer; 61 x 64 x 788 = 3076352 a block; 25769803776 / 3076352 =
     * 8376 blocks = 536064 tokens. */
    r = plan_example("deepseek-v3.2-exp.json", ARGS("--memory", "24GiB", "--kv-cache-dtype", "fp8"));
    tap_ok(gi(r, "bytes_per_block") == 3076352 && gi(r, "bytes_per_block") / 64 == 61 * 788 &&
               gi(vllm(r), "kv_cache_tokens") == 536064 && spec_i(group(r, 0), "page_bytes") == 64 * 656 &&
               strcmp(setting(r, "kv_cache_dtype", "value"), "fp8_ds_mla") == 0 &&
               strcmp(setting(r, "attention_backend", "value"), "FLASHMLA_SPARSE") == 0,
           "deepseek-v3.2-exp --kv-cache-dtype fp8: fp8_ds_mla on FLASHMLA_SPARSE, 3076352-byte blocks, 536064 tokens");
    json_decref(r);
}

static void check_kimi(void)
{
    /* Kimi-Linear-48B-A3B-Instruct: kda_layers is 1-based, 20 KDA and 7
     * MLA layers.  KDA state: conv (4096 + 2 x 4096) x 3 x 2 bytes = 73728
     * + float32 recurrent 32 x 128 x 128 x 4 = 2097152, so 2170880 bytes;
     * MLA 1152 bytes a token.  vLLM aligns the attention block to
     * max(FLASH_ATTN_MLA's smallest kernel block 16, block size 16) = 16:
     * 16 x cdiv(2170880, 16 x 1152) = 16 x 118 = 1888 tokens, pages 1888 x
     * 1152 = 2174976 bytes, the states padded up to them.  Groups of 7:
     * KDA 7/7/6 and MLA 7, a block 7 x 2174976 = 15224832 bytes. */
    json_t *r = plan_example("kimi-linear-48b-a3b-instruct.json", NULL);
    bool ok = num_groups(r) == 4 && gi(r, "bytes_per_block") == 15224832 && gi(r, "num_blocks") == 1;
    static const json_int_t layers[] = {7, 7, 6, 7};
    for (size_t g = 0; ok && g < 4; g++)
        ok = gi(group(r, g), "num_layers") == layers[g] && spec_i(group(r, g), "page_bytes") == 2174976 &&
             spec_i(group(r, g), "block_size") == 1888;
    tap_ok(ok && spec_i(group(r, 0), "content_bytes") == 2170880 && strcmp(spec_s(group(r, 3), "kind"), "mla") == 0 &&
               strcmp(js(group(r, 0), "name"), "kda.0") == 0 &&
               strcmp(setting(r, "attention_backend", "value"), "FLASH_ATTN_MLA") == 0 &&
               has(setting(r, "block_size", "source"), "_align_hybrid_block_size"),
           "kimi-linear-48b: 1888-token blocks, 2174976-byte pages, KDA 7/7/6 + MLA 7, 15224832 bytes a block");
    json_decref(r);
    /* 25769803776 / 15224832 = 1692 blocks; 1692 / 4 groups x 1888 =
     * 798624 tokens.  A request of model_max_length 1048576 tokens:
     * cdiv(1048576, 1888) = 556 MLA pages + 3 state pages = 559 blocks;
     * 1692 / 559 = 3.03x. */
    r = plan_example("kimi-linear-48b-a3b-instruct.json", ARGS("--memory", "24GiB"));
    tap_ok(gi(r, "bytes_per_block") == 15224832 && capacity(r, 1692, 798624, 1048576, 559, 3.03),
           "kimi-linear-48b --memory 24GiB: 1692 blocks, 798624 tokens, 3.03x");
    json_decref(r);
    /* TRITON_MLA (kernels take any size) and --block-size 16 align to 16
     * as well; --block-size 64 and FLASHMLA (64 only) align to 64: 64 x
     * cdiv(2170880, 73728) = 64 x 30 = 1920. */
    static const struct {
        const char *flag, *value;
        json_int_t expect;
    } cases[] = {
        {"--attention-backend", "TRITON_MLA", 1888},
        {"--block-size", "16", 1888},
        {"--block-size", "64", 1920},
        {"--attention-backend", "FLASHMLA", 1920},
    };
    ok = true;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        r = plan_example("kimi-linear-48b-a3b-instruct.json", ARGS("--blocks", "2", cases[i].flag, cases[i].value));
        ok = ok && spec_i(group(r, 3), "block_size") == cases[i].expect &&
             spec_i(group(r, 0), "page_bytes") == cases[i].expect * 1152;
        json_decref(r);
    }
    tap_ok(ok, "kimi-linear-48b: 1888 with TRITON_MLA and --block-size 16, 1920 with --block-size 64 and FLASHMLA");
}

static void check_gpt_oss(void)
{
    /* gpt-oss-20b: no torch_dtype in the published file, so float32, which
     * vLLM serves in bfloat16.  12 sliding (128) + 12 full layers, 8 KV
     * heads x 128 x 2 = 2048 bytes a token and layer, pages 32768; a block
     * is 12 pages = 393216; 25769803776 / 393216 = 65536 blocks; tokens
     * 65536 // 2 x 16 = 524288.  A request of 32 x 4096 = 131072 tokens
     * (yarn): full 8192 blocks, sliding cdiv(127 + 8192, 16) + 1 = 521;
     * 65536 / 8713 = 7.52x. */
    json_t *r = plan_example("gpt-oss-20b.json", ARGS("--memory", "24GiB"));
    tap_ok(all_groups(r, 2, 12, 32768, 16) && per_token(r, 0) == 2048 &&
               strcmp(js(group(r, 0), "name"), "sliding_attention") == 0 && gi(group(r, 0), "window") == 128 &&
               strcmp(spec_s(group(r, 1), "dtype"), "bf16") == 0 && gi(r, "bytes_per_block") == 393216 &&
               capacity(r, 65536, 524288, 131072, 8713, 7.52),
           "gpt-oss-20b: 12 sliding + 12 full layers, bf16, 65536 blocks, 524288 tokens, 7.52x");
    tap_ok(strcmp(setting(r, "dtype", "value"), "bfloat16") == 0 &&
               has(setting(r, "dtype", "source"), "no torch_dtype") &&
               has(setting(r, "dtype", "source"), "served in bfloat16"),
           "gpt-oss-20b: no torch_dtype means float32 served in bfloat16, and the output says so");
    json_decref(r);
}

static void check_hybrids(void)
{
    /* Qwen3-Next: 36 gated-delta-net layers (conv (2 x 16 x 128 + 32 x 128)
     * x 3 + recurrent 32 x 128 x 128, x 2 bytes = 1097728) and 12 full
     * layers (2 KV heads x 512 x 2 = 2048 bytes a token).  Blocks grow to
     * 16 x cdiv(1097728, 16 x 2048) = 544 tokens, pages 544 x 2048 =
     * 1114112; 4 groups of 12; a block is 12 x 1114112 = 13369344;
     * 25769803776 / 13369344 = 1927 blocks; tokens 1927 // 4 x 544 =
     * 261664.  A request of 262144 tokens: cdiv(262144, 544) = 482 blocks
     * + 1 for each of 3 state groups = 485; 1927 / 485 = 3.97x. */
    json_t *r = plan_example("qwen3-next-80b-a3b.json", ARGS("--memory", "24GiB"));
    bool ok = all_groups(r, 4, 12, 1114112, 544);
    for (size_t i = 0; ok && i < 3; i++)
        ok = strcmp(spec_s(group(r, i), "kind"), "state") == 0 && spec_i(group(r, i), "content_bytes") == 1097728;
    tap_ok(ok && strcmp(js(group(r, 3), "name"), "full_attention") == 0 && per_token(r, 3) == 2048 &&
               gi(r, "bytes_per_block") == 13369344 && capacity(r, 1927, 261664, 262144, 485, 3.97) &&
               has(setting(r, "block_size", "source"), "hybrid rule"),
           "qwen3-next: 3 state groups + 1 attention group of 12, 544-token blocks, 1927 blocks, 3.97x");
    json_decref(r);

    /* Jamba: Mamba state (8192 x 3 + 8192 x 16) x 2 = 311296 bytes;
     * attention 8 x 256 x 2 = 4096 bytes a token, blocks 16 x cdiv(311296,
     * 65536) = 80, pages 327680; 4 attention + 28 Mamba layers make 8
     * groups of 4; 4 x 327680 = 1310720 a block; 25769803776 / 1310720 =
     * 19660 blocks; tokens 19660 // 8 x 80 = 196560.  The file gives no
     * length, so --max-model-len 8192: 8192 / 80 = 103 blocks + 7 = 110;
     * 19660 / 110 = 178.73x. */
    r = plan_example("jamba-v0.1.json", ARGS("--memory", "24GiB", "--max-model-len", "8192"));
    tap_ok(all_groups(r, 8, 4, 327680, 80) && per_token(r, 7) == 4096 &&
               spec_i(group(r, 0), "content_bytes") == 311296 && capacity(r, 19660, 196560, 8192, 110, 178.73),
           "jamba-v0.1: 8 groups of 4, 80-token blocks, 19660 blocks, 178.73x for 8192 tokens");
    json_decref(r);
    cli_ok_case(ARGS("plan", "--model", cli_model_path("jamba-v0.1.json"), "--memory", "24GiB"), NULL,
                MENTIONS("GPU KV cache size: 196,560 tokens", "give --max-model-len"));

    r = plan_example("tiny-hybrid.kvrt.json", ARGS("--blocks", "4", "--layout", "BLNHC"));
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

/*
 * Rules with no published config in examples/models (examples/models/
 * SOURCES.md says why): small configs written here, shaped like the
 * families they stand for.
 */
static void check_rules(void)
{
    /* float32 -> bfloat16: the Gemma-2 example with torch_dtype float32
     * sizes exactly as the bfloat16 one (65536-byte pages). */
    char *gemma = cli_read_text(cli_model_path("gemma-2-2b-it.json"));
    char *at = gemma ? strstr(gemma, "\"bfloat16\"") : NULL;
    char fp32[4096] = "";
    if (at) {
        *at = '\0';
        snprintf(fp32, sizeof(fp32), "%s\"float32\"%s", gemma, at + strlen("\"bfloat16\""));
    }
    json_t *r = plan(write_file("gemma2-fp32.json", fp32), ARGS("--blocks", "2"));
    tap_ok(at && spec_i(group(r, 0), "page_bytes") == 65536 && strcmp(spec_s(group(r, 0), "dtype"), "bf16") == 0 &&
               has(setting(r, "dtype", "source"), "float32, served in bfloat16"),
           "torch_dtype float32 is sized as bfloat16 (vLLM's auto rule), not twice as large");
    json_decref(r);
    free(gemma);

    /* text_config (Gemma-3 style): 6 layers, every 6th full, window 1024;
     * 5 sliding groups of 1 + 1 full group; 4 KV heads x 512 x 2 = 4096
     * bytes a token, pages 65536.  Gemma 3's length is not rope-scaled. */
    r = plan(write_file("mm.json",
                        "{\"model_type\": \"gemma3\", \"torch_dtype\": \"bfloat16\", \"text_config\": "
                        "{\"model_type\": \"gemma3_text\", \"num_hidden_layers\": 6, \"num_attention_heads\": 8, "
                        "\"num_key_value_heads\": 4, \"head_dim\": 256, \"sliding_window\": 1024, "
                        "\"sliding_window_pattern\": 6, \"max_position_embeddings\": 131072, "
                        "\"rope_scaling\": {\"factor\": 8.0, \"rope_type\": \"linear\"}}, "
                        "\"vision_config\": {\"model_type\": \"siglip_vision_model\"}}"),
             ARGS("--blocks", "2"));
    tap_ok(all_groups(r, 6, 1, 65536, 16) && strcmp(js(group(r, 5), "name"), "full_attention") == 0 &&
               gi(json_object_get(r, "model"), "max_model_len") == 131072,
           "text_config: the language model is read from it (5 sliding groups + 1 full, 131072 tokens)");
    json_decref(r);

    /* Llama 4 style chunked attention: 8 layers, every 4th without RoPE
     * (full), the rest chunked; vLLM keeps all 8 in one full-attention group. */
    r = plan(write_file("chunked.json",
                        "{\"model_type\": \"llama4\", \"text_config\": {\"model_type\": \"llama4_text\", "
                        "\"torch_dtype\": \"bfloat16\", \"num_hidden_layers\": 8, \"num_attention_heads\": 40, "
                        "\"num_key_value_heads\": 8, \"head_dim\": 128, \"attention_chunk_size\": 8192, "
                        "\"max_position_embeddings\": 262144}}"),
             ARGS("--blocks", "2"));
    tap_ok(all_groups(r, 1, 8, 65536, 16) && strcmp(js(group(r, 0), "usage"), "full") == 0,
           "chunked local attention: one group of 8 full-attention layers, 16-token blocks");
    json_decref(r);

    /* MiniMax-M2 style: attn_type_list all 1 is plain full attention. */
    r = plan(write_file("minimax.json",
                        "{\"model_type\": \"minimax_m2\", \"torch_dtype\": \"bfloat16\", "
                        "\"num_hidden_layers\": 3, \"num_attention_heads\": 48, \"num_key_value_heads\": 8, "
                        "\"head_dim\": 128, \"attn_type_list\": [1, 1, 1]}"),
             ARGS("--blocks", "2"));
    tap_ok(all_groups(r, 1, 3, 65536, 16), "attn_type_list of 1s: three full-attention layers");
    json_decref(r);

    /* Kimi-Linear style: layers 1-3 KDA, 4 MLA.  KDA state: conv 3 x 4 x
     * 128 x 3 x 2 bytes = 9216 + float32 recurrent 4 x 128 x 128 x 4 =
     * 262144, so 271360; MLA 1152 bytes a token, blocks 16 x cdiv(271360,
     * 16 x 1152) = 240 tokens, pages 240 x 1152 = 276480; 4 groups of 1. */
    r = plan(write_file("kimi.json", "{\"model_type\": \"kimi_linear\", \"torch_dtype\": \"bfloat16\", "
                                     "\"num_hidden_layers\": 4, \"num_attention_heads\": 8, \"kv_lora_rank\": 512, "
                                     "\"qk_rope_head_dim\": 64, \"linear_attn_config\": {\"kda_layers\": [1, 2, 3], "
                                     "\"full_attn_layers\": [4], \"num_heads\": 4, \"head_dim\": 128, "
                                     "\"short_conv_kernel_size\": 4}}"),
             ARGS("--blocks", "2"));
    tap_ok(all_groups(r, 4, 1, 276480, 240) && spec_i(group(r, 0), "content_bytes") == 271360 &&
               strcmp(spec_s(group(r, 3), "kind"), "mla") == 0,
           "KDA layers: 271360-byte states (float32 recurrent), MLA blocks of 240 tokens");
    json_decref(r);

    /* mamba_ssm_dtype float32: the GDN recurrent state doubles; conv 8192 x
     * 3 x 2 = 49152 + 32 x 128 x 128 x 4 = 2097152 -> 2146304. */
    char *qn = cli_read_text(cli_model_path("qwen3-next-80b-a3b.json"));
    char *brace = qn ? strchr(qn, '{') : NULL;
    char text[4096];
    snprintf(text, sizeof(text), "{\"mamba_ssm_dtype\": \"float32\",%s", brace ? brace + 1 : "");
    r = plan(write_file("ssm32.json", text), ARGS("--blocks", "2"));
    tap_ok(brace && spec_i(group(r, 0), "content_bytes") == 2146304 &&
               strcmp(setting(r, "mamba_ssm_dtype", "value"), "fp32") == 0,
           "mamba_ssm_dtype float32: gated-delta-net states of 2146304 bytes");
    json_decref(r);
    free(qn);
}

static void check_errors(void)
{
    static const struct {
        const char *name, *text, *mentions;
    } bad[] = {
        {"no-layers.json", "{\"num_attention_heads\": 8, \"hidden_size\": 512, \"torch_dtype\": \"bfloat16\"}",
         "\"num_hidden_layers\""},
        {"bad-type.json",
         "{\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"hidden_size\": 512, "
         "\"torch_dtype\": \"bfloat16\", \"layer_types\": [\"full_attention\", \"teleport\"]}",
         "\"layer_types[1]\""},
        {"short-types.json",
         "{\"num_hidden_layers\": 3, \"num_attention_heads\": 8, \"hidden_size\": 512, "
         "\"torch_dtype\": \"bfloat16\", \"layer_types\": [\"full_attention\"]}",
         "\"layer_types\""},
        {"no-window.json",
         "{\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"hidden_size\": 512, "
         "\"torch_dtype\": \"bfloat16\", \"layer_types\": [\"sliding_attention\", \"full_attention\"]}",
         "\"sliding_window\""},
        {"dtype.json",
         "{\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"hidden_size\": 512, "
         "\"torch_dtype\": \"float64\"}",
         "\"float64\""},
        {"string.json",
         "{\"num_hidden_layers\": \"32\", \"num_attention_heads\": 8, \"hidden_size\": 512, "
         "\"torch_dtype\": \"bfloat16\"}",
         "\"num_hidden_layers\""},
        {"gqa.json",
         "{\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"num_key_value_heads\": 3, "
         "\"hidden_size\": 512, \"torch_dtype\": \"bfloat16\"}",
         "\"num_key_value_heads\""},
        {"nemotron.json",
         "{\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"hidden_size\": 512, "
         "\"torch_dtype\": \"bfloat16\", \"hybrid_override_pattern\": \"M*\"}",
         "\"hybrid_override_pattern\""},
        {"lightning.json",
         "{\"model_type\": \"minimax\", \"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
         "\"hidden_size\": 512, \"attn_type_list\": [0, 1]}",
         "\"attn_type_list[0]\" is 0"},
        {"mla-type.json",
         "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
         "\"hidden_size\": 512, \"kv_lora_rank\": 512, \"qk_rope_head_dim\": 64}",
         "\"kv_lora_rank\" is set but \"model_type\" is \"llama\""},
        {"bad-text.json", "{\"text_config\": 7, \"num_hidden_layers\": 2}", "\"text_config\" is an integer"},
        {"text-nolayers.json", "{\"text_config\": {\"num_attention_heads\": 8}}", "\"text_config.num_hidden_layers\""},
        {"kda-layer.json",
         "{\"model_type\": \"kimi_linear\", \"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
         "\"kv_lora_rank\": 512, \"qk_rope_head_dim\": 64, \"linear_attn_config\": {\"kda_layers\": [3], "
         "\"num_heads\": 4, \"head_dim\": 128}}",
         "\"linear_attn_config.kda_layers[0]\""},
        {"linear.json",
         "{\"num_hidden_layers\": 4, \"num_attention_heads\": 8, \"hidden_size\": 512, "
         "\"torch_dtype\": \"bfloat16\", \"full_attention_interval\": 2}",
         "\"linear_num_key_heads\""},
        {"broken.json", "{\"num_hidden_layers\": 2,", "not valid JSON"},
        {"array.json", "[1, 2]", "JSON object"},
        {"dup.json", "{\"num_hidden_layers\": 2, \"num_hidden_layers\": 3}", "not valid JSON"},
        {"kvrt-key.json",
         "{\"format\": \"kvrt-model\", \"version\": 1, \"dtype\": \"bf16\", \"groups\": [{\"name\": "
         "\"g\", \"layers\": 2, \"spec\": {\"kind\": \"attention\", \"kv_heads\": 2, \"head_size\": 8, "
         "\"heads\": 4}}]}",
         "\"groups[0].spec.heads\""},
        {"kvrt-kind.json",
         "{\"format\": \"kvrt-model\", \"version\": 1, \"groups\": [{\"name\": \"g\", \"layers\": 2, "
         "\"spec\": {\"kind\": \"mamba\", \"state_content_bytes\": 8}}]}",
         "\"mamba\""},
        {"kvrt-version.json", "{\"format\": \"kvrt-model\", \"version\": 2, \"groups\": []}", "\"version\""},
        {"kvrt-dtype.json",
         "{\"format\": \"kvrt-model\", \"version\": 1, \"groups\": [{\"name\": \"g\", \"layers\": 2, "
         "\"spec\": {\"kind\": \"attention\", \"kv_heads\": 2, \"head_size\": 8}}]}",
         "\"groups[0].spec.dtype\""},
        {"kvrt-format.json", "{\"format\": \"gguf\"}", "\"format\""},
        /* The KV head counts' least common multiple is 2^64 + 16711681: it
         * must be refused, not wrapped to 16711681 query heads. */
        {"kvrt-lcm.json",
         "{\"format\": \"kvrt-model\", \"version\": 1, \"dtype\": \"bf16\", \"groups\": ["
         "{\"name\": \"a\", \"layers\": 1, \"spec\": {\"kind\": \"attention\", \"kv_heads\": 16777217, "
         "\"head_size\": 1}}, {\"name\": \"b\", \"layers\": 1, \"spec\": {\"kind\": \"attention\", "
         "\"kv_heads\": 1099511562241, \"head_size\": 1}}]}",
         "no common multiple below 2^40"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *path = write_file(bad[i].name, bad[i].text);
        cli_error_case(ARGS("plan", "--model", path, "--blocks", "2"), NULL, 2, MENTIONS(bad[i].mentions, bad[i].name));
        unlink(path);
    }
    const char *llama = cli_model_path("llama-3.1-8b.json");
    const char *v32 = cli_model_path("deepseek-v3.2-exp.json");
    const char *v3 = cli_model_path("deepseek-v3.json");
    /* MiniMax-M1's published config: 80 layers, attn_type_list 0 (lightning
     * linear attention) on 70 of them and 1 (softmax) on every eighth.
     * kvrt does not size lightning state, so it refuses the first 0 by name
     * and sizes nothing, rather than counting 80 attention layers. */
    cli_error_case(ARGS("plan", "--model", cli_model_path("minimax-m1.json"), "--memory", "24GiB"), NULL, 2,
                   MENTIONS("\"attn_type_list[0]\" is 0", "lightning", "minimax-m1.json"));
    cli_error_case(ARGS("plan", "--model", llama, "--blocks", "2", "--attention-backend", "FLASHMLA"), NULL, 2,
                   MENTIONS("FLASHMLA is an MLA backend", "kv_lora_rank"));
    cli_error_case(ARGS("plan", "--model", cli_model_path("deepseek-v3.json"), "--blocks", "2", "--attention-backend",
                        "FLASH_ATTN"),
                   NULL, 2, MENTIONS("FLASH_ATTN", "MLA"));
    cli_error_case(ARGS("plan", "--model", v32, "--blocks", "2", "--attention-backend", "FLASHMLA"), NULL, 2,
                   MENTIONS("FLASHMLA_SPARSE", "index_topk"));
    /* vLLM keeps a --block-size it was given: one the backend's kernels do
     * not take is refused, not rounded. */
    cli_error_case(ARGS("plan", "--model", v32, "--blocks", "2", "--block-size", "16"), NULL, 2,
                   MENTIONS("blocks of 16 tokens", "FLASH_ATTN_MLA_SPARSE", "multiples of 64"));
    cli_error_case(
        ARGS("plan", "--model", v3, "--blocks", "2", "--attention-backend", "FLASHMLA", "--block-size", "32"), NULL, 2,
        MENTIONS("blocks of 32 tokens", "FLASHMLA", "multiples of 64"));
    cli_error_case(ARGS("plan", "--model", v3, "--blocks", "2", "--block-size", "8"), NULL, 2,
                   MENTIONS("blocks of 8 tokens", "FLASH_ATTN_MLA", "multiples of 16"));
    cli_error_case(ARGS("plan", "--model", cli_model_path("kimi-linear-48b-a3b-instruct.json"), "--blocks", "2",
                        "--block-size", "24"),
                   NULL, 2, MENTIONS("blocks of 1896 tokens", "--block-size 24", "multiples of 16"));
    /* Blackwell-only backends are refused by name: kvrt sizes for Hopper. */
    cli_error_case(ARGS("plan", "--model", v3, "--blocks", "2", "--attention-backend", "CUTLASS_MLA"), NULL, 2,
                   MENTIONS("CUTLASS_MLA", "Blackwell", "Hopper", "FLASH_ATTN_MLA, FLASHMLA, TRITON_MLA"));
    cli_error_case(ARGS("plan", "--model", v3, "--blocks", "2", "--attention-backend", "FLASHINFER_MLA"), NULL, 2,
                   MENTIONS("FLASHINFER_MLA", "Blackwell"));
    /* A cache type no Hopper MLA backend takes, or the named one does not. */
    cli_error_case(ARGS("plan", "--model", v3, "--blocks", "2", "--kv-cache-dtype", "fp8_e5m2"), NULL, 2,
                   MENTIONS("no MLA backend", "fp8_e5m2", "FLASHMLA takes auto, fp8, fp8_e4m3"));
    cli_error_case(
        ARGS("plan", "--model", v3, "--blocks", "2", "--attention-backend", "FLASHMLA", "--kv-cache-dtype", "bf16"),
        NULL, 2, MENTIONS("FLASHMLA does not take kv_cache_dtype bfloat16", "auto, fp8, fp8_e4m3"));
    cli_error_case(ARGS("plan", "--model", v32, "--blocks", "2", "--attention-backend", "FLASH_ATTN_MLA"), NULL, 2,
                   MENTIONS("FLASH_ATTN_MLA", "index_topk", "FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE"));
    cli_error_case(ARGS("plan", "--model", v32, "--blocks", "2", "--kv-cache-dtype", "fp16"), NULL, 2,
                   MENTIONS("fp16", "fp8_ds_mla"));
    cli_error_case(ARGS("plan", "--model", llama, "--blocks", "2", "--kv-cache-dtype", "int4"), NULL, 2,
                   MENTIONS("--kv-cache-dtype", "\"int4\"", "fp8_e5m2"));
    cli_error_case(ARGS("plan", "--model", llama, "--blocks", "2", "--attention-backend", "XFORMERS"), NULL, 2,
                   MENTIONS("--attention-backend", "\"XFORMERS\"", "CUTLASS_MLA"));
    cli_error_case(ARGS("plan", "--model", llama, "--blocks", "2", "--dtype", "bf16", "--kv-cache-dtype", "fp8"), NULL,
                   2, MENTIONS("--dtype", "--kv-cache-dtype"));
    cli_error_case(ARGS("plan", "--model", llama, "--blocks", "2", "--dtype", "int8"), NULL, 2,
                   MENTIONS("--dtype int8", "fp8_e4m3"));
    cli_error_case(ARGS("plan", "--layers", "2", "--block-size", "16", "--kv-heads", "2", "--head-size", "64",
                        "--blocks", "2", "--kv-cache-dtype", "fp8"),
                   NULL, 2, MENTIONS("--kv-cache-dtype", "--model"));
    cli_error_case(ARGS("plan", "--layers", "2", "--block-size", "16", "--kv-heads", "2", "--head-size", "64",
                        "--blocks", "2", "--max-model-len", "8"),
                   NULL, 2, MENTIONS("--max-model-len", "--model"));
    cli_error_case(ARGS("plan", "--model", "/nonexistent/config.json", "--blocks", "2"), NULL, 2,
                   MENTIONS("/nonexistent/config.json"));

    /* No torch_dtype is no longer an error: float32, served in bfloat16. */
    json_t *r = plan(write_file("no-dtype.json", "{\"num_hidden_layers\": 2, \"num_attention_heads\": 8, "
                                                 "\"hidden_size\": 512}"),
                     ARGS("--blocks", "2"));
    tap_ok(r && strcmp(spec_s(group(r, 0), "dtype"), "bf16") == 0 &&
               spec_i(group(r, 0), "page_bytes") == 16 * 8 * 128 * 2,
           "a config without torch_dtype is sized in bfloat16 (8 heads x (64 + 64) x 2 bytes x 16 tokens)");
    json_decref(r);

    /* A folder is read through its config.json. */
    char sub[300];
    snprintf(sub, sizeof(sub), "%s/model", dir);
    mkdir(sub, 0700);
    char cfg[320];
    snprintf(cfg, sizeof(cfg), "%s/config.json", sub);
    FILE *f = fopen(cfg, "w");
    if (f) {
        fputs("{\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"hidden_size\": 256, \"torch_dtype\": "
              "\"float16\"}",
              f);
        fclose(f);
    }
    r = cli_json(ARGS("plan", "--json", "--model", sub, "--blocks", "2"), NULL);
    tap_ok(r && gi(group(r, 0), "num_layers") == 2 && spec_i(group(r, 0), "head_size") == 64,
           "plan --model FOLDER reads FOLDER/config.json (head_dim from hidden_size / heads)");
    json_decref(r);
    unlink(cfg);
    rmdir(sub);

    /* Mixed page sizes in two groups need a block-outermost layout. */
    const char *mixed = write_file(
        "mixed.kvrt.json", "{\"format\": \"kvrt-model\", \"version\": 1, \"dtype\": \"fp16\", \"groups\": ["
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
    cli_error_case(ARGS("plan", "--model", llama, "--memory", "12XB"), NULL, 2,
                   MENTIONS("--memory", "\"12XB\"", "GiB"));
    cli_error_case(ARGS("plan", "--model", llama, "--memory", "1.5"), NULL, 2, MENTIONS("--memory"));
    /* Without --blocks or --memory a model's plan is one block; the flags
     * path, which has no model to size, still asks for a count. */
    json_t *one = cli_json(ARGS("plan", "--json", "--model", llama), NULL);
    tap_ok(one && gi(one, "num_blocks") == 1 && gi(one, "total_bytes") == 2097152 &&
               json_is_null(json_object_get(one, "budget_bytes")),
           "plan --model without --blocks or --memory places one block");
    json_decref(one);
    cli_error_case(ARGS("plan", "--layers", "2", "--block-size", "16", "--kv-heads", "2", "--head-size", "64"), NULL, 2,
                   MENTIONS("--blocks", "--memory"));
    cli_error_case(ARGS("plan", "--model", llama, "--blocks", "2", "--memory", "1GiB"), NULL, 2, MENTIONS("not both"));
    cli_error_case(ARGS("plan", "--model", llama, "--blocks", "2", "--head-size", "8"), NULL, 2,
                   MENTIONS("--head-size", "--model"));
    json_t *r = cli_json(ARGS("plan", "--json", "--model", llama, "--memory", "1.5GiB"), NULL);
    /* 1610612736 / 2097152 = 768 blocks; a 131072-token request needs
     * 32 x 131072 x 4096 bytes = 16 GiB, more than the budget. */
    tap_ok(r && gi(r, "budget_bytes") == 1610612736 && gi(r, "num_blocks") == 768 &&
               json_is_false(json_object_get(vllm(r), "fits_one_request")) &&
               gi(vllm(r), "request_bytes") == 17179869184LL,
           "--memory 1.5GiB is 768 blocks, too few for one 131072-token request (16 GiB)");
    json_decref(r);
    r = cli_json(ARGS("plan", "--json", "--model", llama, "--blocks", "4"), NULL);
    tap_ok(r && json_is_null(json_object_get(r, "vllm")), "--blocks: no budget, so no vLLM figures");
    json_decref(r);
    r = cli_json(ARGS("plan", "--json", "--layers", "2", "--block-size", "16", "--kv-heads", "2", "--head-size", "64",
                      "--memory", "1048576"),
                 NULL);
    tap_ok(r && gi(r, "num_blocks") == 64 && gi(r, "budget_bytes") == 1048576,
           "plan with flags: --memory in plain bytes");
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
    check_qwen_and_gemma();
    check_deepseek();
    check_kimi();
    check_gpt_oss();
    check_hybrids();
    check_rules();
    check_errors();
    check_memory();
    rmdir(dir);
    return tap_done();
}
