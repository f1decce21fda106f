/*
 * The types of a config.json's cache, resolved the way vLLM resolves them
 * (docs/models.md): the model dtype from the config and vLLM's --dtype auto
 * rule, the KV-cache type from --kv-cache-dtype, and the type of the
 * temporal state of Mamba and gated-delta-net layers.
 *
 * Layer 4 of libkvrt (core/models/; CONTRIBUTING.md, "Where things live").
 */
#include <stdio.h>
#include <string.h>

#include <kvrt/common.h>

#include "model_internal.h"

static const struct {
    const char *name;
    enum kvrt_dtype dtype;
} torch_names[] = {
    {"bfloat16", KVRT_DTYPE_BF16}, {"float16", KVRT_DTYPE_FP16}, {"float32", KVRT_DTYPE_FP32},
    {"bf16", KVRT_DTYPE_BF16},     {"fp16", KVRT_DTYPE_FP16},    {"fp32", KVRT_DTYPE_FP32},
    {"half", KVRT_DTYPE_FP16},     {"float", KVRT_DTYPE_FP32},
};

static int torch_dtype(const struct hf *h, const char *where, const char *key, const char *text, enum kvrt_dtype *out)
{
    for (size_t i = 0; i < sizeof(torch_names) / sizeof(torch_names[0]); i++)
        if (strcmp(torch_names[i].name, text) == 0) {
            *out = torch_names[i].dtype;
            return KVRT_OK;
        }
    return model_fail(h->c, KVRT_ERR_INVALID,
                      "\"%s%s\" is \"%s\", which is not a type kvrt knows; "
                      "valid values are bfloat16, float16, float32",
                      where, key, text);
}

/* "torch_dtype", or "dtype" as newer transformers write it, in `obj`. */
static int find_dtype(const struct hf *h, const json_t *obj, const char *where, const char **key, const char **text)
{
    static const char *const keys[] = {"torch_dtype", "dtype"};
    for (size_t i = 0; obj && i < 2; i++) {
        *text = NULL;
        int rc = model_get_string_opt(h->c, obj, where, keys[i], text);
        if (rc != KVRT_OK || *text) {
            *key = keys[i];
            return rc;
        }
    }
    return KVRT_OK;
}

static const char *torch_name(enum kvrt_dtype d)
{
    return d == KVRT_DTYPE_BF16 ? "bfloat16" : d == KVRT_DTYPE_FP16 ? "float16" : "float32";
}

/* Model types vLLM will not run in float16 (_FLOAT16_NOT_SUPPORTED_MODELS). */
static bool no_float16(const struct hf *h)
{
    static const char *const types[] = {"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"};
    const char *top = json_string_value(json_object_get(h->root, "model_type"));
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if ((top && strcmp(top, types[i]) == 0) || strcmp(h->model_type, types[i]) == 0)
            return true;
    return false;
}

/*
 * vLLM's _get_and_verify_dtype with --dtype auto: the config's dtype (the
 * top level, then text_config, then vision_config), else the weights'
 * (which kvrt cannot read), else float32; then _resolve_auto_dtype serves
 * float32 in the first supported type, bfloat16 on Ampere or newer.
 */
static int model_dtype(struct hf *h)
{
    const char *key = NULL, *text = NULL, *where = "";
    int rc = find_dtype(h, h->root, "", &key, &text);
    if (rc == KVRT_OK && !text && h->cfg != h->root) {
        where = h->where;
        rc = find_dtype(h, h->cfg, where, &key, &text);
    }
    const json_t *vision = json_object_get(h->root, "vision_config");
    if (rc == KVRT_OK && !text && json_is_object(vision)) {
        where = "vision_config.";
        rc = find_dtype(h, vision, where, &key, &text);
    }
    if (rc != KVRT_OK)
        return rc;
    enum kvrt_dtype config = KVRT_DTYPE_FP32;
    char source[160];
    if (text) {
        if ((rc = torch_dtype(h, where, key, text, &config)) != KVRT_OK)
            return rc;
        snprintf(source, sizeof(source), "config %s%s", where, key);
    } else {
        snprintf(source, sizeof(source),
                 "default: no torch_dtype in the config, so float32 (vLLM "
                 "would read the weights' dtype first; kvrt cannot)");
    }
    h->model_dtype = config;
    if (config == KVRT_DTYPE_FP32) {
        h->model_dtype = KVRT_DTYPE_BF16;
        model_setting(h->m, "dtype", "bfloat16",
                      "%s float32, served in bfloat16 by vLLM's --dtype "
                      "auto (_resolve_auto_dtype: float32 becomes the first supported type, "
                      "bfloat16 on Ampere or newer)",
                      source);
    } else if (config == KVRT_DTYPE_FP16 && no_float16(h)) {
        h->model_dtype = KVRT_DTYPE_BF16;
        model_setting(h->m, "dtype", "bfloat16",
                      "%s float16, which vLLM does not run for this "
                      "model type (_FLOAT16_NOT_SUPPORTED_MODELS), so bfloat16",
                      source);
    } else {
        model_setting(h->m, "dtype", torch_name(config), "%s", source);
    }
    return KVRT_OK;
}

static int kv_cache_dtype(struct hf *h)
{
    const struct kvrt_model_options *o = h->opt;
    const char *flag = o->dtype_option ? o->dtype_option : "--kv-cache-dtype";
    enum kvrt_kv_cache_dtype choice = o->kv_cache_dtype;
    if (o->dtype_given) {
        switch (o->dtype) {
        case KVRT_DTYPE_BF16: choice = KVRT_KV_CACHE_BF16; break;
        case KVRT_DTYPE_FP16: choice = KVRT_KV_CACHE_FP16; break;
        case KVRT_DTYPE_FP8_E4M3: choice = KVRT_KV_CACHE_FP8_E4M3; break;
        case KVRT_DTYPE_FP8_E5M2: choice = KVRT_KV_CACHE_FP8_E5M2; break;
        default:
            return model_fail(h->c, KVRT_ERR_INVALID,
                              "%s %s is not a KV-cache type vLLM offers for "
                              "a config.json; valid types are %s",
                              flag, kvrt_dtype_name(o->dtype), kvrt_kv_cache_dtype_valid_names());
        }
    }
    const char *name = kvrt_kv_cache_dtype_name(choice);
    h->cache = choice;
    if (h->sparse) {
        /* DeepseekV32ForCausalLM.verify_and_update_config: fp8 means the
         * custom fp8_ds_mla entry; bfloat16 means auto. */
        if (choice == KVRT_KV_CACHE_FP8 || choice == KVRT_KV_CACHE_FP8_E4M3 || choice == KVRT_KV_CACHE_FP8_E5M2) {
            h->fp8_ds_mla = true;
            h->kv_dtype = KVRT_DTYPE_UINT8;
            model_setting(h->m, "kv_cache_dtype", "fp8_ds_mla",
                          "%s %s, which vLLM turns into "
                          "DeepSeek-V3.2's fp8_ds_mla entry (656 bytes per token)",
                          flag, name);
            return KVRT_OK;
        }
        if (choice == KVRT_KV_CACHE_FP16)
            return model_fail(h->c, KVRT_ERR_INVALID,
                              "%s fp16 with DeepSeek-V3.2 (\"index_topk\"): "
                              "its sparse MLA cache is bfloat16 or fp8_ds_mla; give bf16 or fp8",
                              flag);
        if (h->model_dtype != KVRT_DTYPE_BF16)
            return model_fail(h->c, KVRT_ERR_INVALID,
                              "DeepSeek-V3.2 (\"index_topk\") with model dtype "
                              "%s: its sparse MLA cache is bfloat16 or fp8_ds_mla",
                              kvrt_dtype_name(h->model_dtype));
        h->kv_dtype = KVRT_DTYPE_BF16;
        model_setting(h->m, "kv_cache_dtype", "bf16",
                      "%s%s: the model dtype (DeepSeek-V3.2 keeps "
                      "bfloat16 as auto)",
                      choice == KVRT_KV_CACHE_AUTO ? "default " : flag,
                      choice == KVRT_KV_CACHE_AUTO ? "auto" : " bf16");
        return KVRT_OK;
    }
    switch (choice) {
    case KVRT_KV_CACHE_AUTO:
        h->kv_dtype = h->model_dtype;
        model_setting(h->m, "kv_cache_dtype", kvrt_dtype_name(h->kv_dtype),
                      "default auto: the "
                      "model dtype");
        return KVRT_OK;
    case KVRT_KV_CACHE_BF16: h->kv_dtype = KVRT_DTYPE_BF16; break;
    case KVRT_KV_CACHE_FP16: h->kv_dtype = KVRT_DTYPE_FP16; break;
    case KVRT_KV_CACHE_FP8:
        h->kv_dtype = KVRT_DTYPE_FP8_E4M3;
        model_setting(h->m, "kv_cache_dtype", "fp8_e4m3", "%s fp8 (fp8_e4m3 on CUDA)", flag);
        return KVRT_OK;
    case KVRT_KV_CACHE_FP8_E4M3: h->kv_dtype = KVRT_DTYPE_FP8_E4M3; break;
    case KVRT_KV_CACHE_FP8_E5M2: h->kv_dtype = KVRT_DTYPE_FP8_E5M2; break;
    default: return model_fail(h->c, KVRT_ERR_INVALID, "unknown KV-cache type %d", (int)choice);
    }
    model_setting(h->m, "kv_cache_dtype", kvrt_dtype_name(h->kv_dtype), "%s %s", flag, name);
    return KVRT_OK;
}

/* The temporal state's type: the model dtype, or the config's
 * mamba_ssm_dtype (vLLM sets mamba_ssm_cache_dtype from it when the flag is
 * auto).  Recorded as a setting only for models with state layers. */
static int ssm_dtype(struct hf *h)
{
    const char *text = NULL;
    int rc = model_get_string_opt(h->c, h->cfg, h->where, "mamba_ssm_dtype", &text);
    h->ssm_dtype = h->model_dtype;
    if (rc != KVRT_OK || !text)
        return rc;
    return torch_dtype(h, h->where, "mamba_ssm_dtype", text, &h->ssm_dtype);
}

int hf_resolve_dtypes(struct hf *h)
{
    int rc;
    if ((rc = model_dtype(h)) || (rc = kv_cache_dtype(h)) || (rc = ssm_dtype(h)))
        return rc;
    return KVRT_OK;
}
