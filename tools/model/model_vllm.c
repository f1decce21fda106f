/*
 * vLLM's engine-level choices that size a config.json's cache beyond its
 * layers (docs/models.md cites each rule): the block size (the platform's
 * MLA backend rule and the hybrid attention + state rule), max_model_len,
 * and the capacity figures vLLM logs for a KV-cache budget.
 */
#include <stdio.h>
#include <string.h>

#include <kvrt/common.h>
#include <kvrt/spec.h>

#include "model_internal.h"

static const char *const cache_names[KVRT_NUM_CACHE_DTYPES] = {
    "auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2",
};

const char *kvrt_model_cache_dtype_name(enum kvrt_model_cache_dtype d)
{
    return (unsigned)d < KVRT_NUM_CACHE_DTYPES ? cache_names[d] : NULL;
}

bool kvrt_model_cache_dtype_parse(const char *text, enum kvrt_model_cache_dtype *out)
{
    static const struct {
        const char *name;
        enum kvrt_model_cache_dtype d;
    } aliases[] = {{"bfloat16", KVRT_CACHE_BF16}, {"float16", KVRT_CACHE_FP16}, {"half", KVRT_CACHE_FP16}};
    for (int i = 0; i < KVRT_NUM_CACHE_DTYPES; i++)
        if (strcmp(text, cache_names[i]) == 0) {
            *out = (enum kvrt_model_cache_dtype)i;
            return true;
        }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (strcmp(text, aliases[i].name) == 0) {
            *out = aliases[i].d;
            return true;
        }
    return false;
}

static const char *const backend_names[KVRT_NUM_BACKENDS] = {
    "default",         "FLASH_ATTN",  "FLASHINFER",     "TRITON_ATTN", "FLASHMLA",
    "FLASHMLA_SPARSE", "CUTLASS_MLA", "FLASHINFER_MLA", "TRITON_MLA",
};

const char *kvrt_model_backend_name(enum kvrt_model_backend b)
{
    return (unsigned)b < KVRT_NUM_BACKENDS ? backend_names[b] : NULL;
}

bool kvrt_model_backend_parse(const char *text, enum kvrt_model_backend *out)
{
    for (int i = 1; i < KVRT_NUM_BACKENDS; i++)
        if (strcmp(text, backend_names[i]) == 0) {
            *out = (enum kvrt_model_backend)i;
            return true;
        }
    return false;
}

static bool is_mla_backend(enum kvrt_model_backend b)
{
    return b == KVRT_BACKEND_FLASHMLA || b == KVRT_BACKEND_FLASHMLA_SPARSE || b == KVRT_BACKEND_CUTLASS_MLA ||
           b == KVRT_BACKEND_FLASHINFER_MLA || b == KVRT_BACKEND_TRITON_MLA;
}

static uint64_t cdiv(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* The backend: the flag's, else what vLLM picks on a Hopper GPU. */
static int choose_backend(struct hf *h, enum kvrt_model_backend *b)
{
    const enum kvrt_model_backend given = h->opt->backend;
    if (given == KVRT_BACKEND_DEFAULT) {
        *b = h->sparse ? KVRT_BACKEND_FLASHMLA_SPARSE : h->mla ? KVRT_BACKEND_FLASHMLA : KVRT_BACKEND_FLASH_ATTN;
        model_setting(h->m, "attention_backend", kvrt_model_backend_name(*b),
                      "default: vLLM's "
                      "choice on a Hopper GPU (CudaPlatformBase.check_and_update_config)");
        return KVRT_OK;
    }
    *b = given;
    const char *name = kvrt_model_backend_name(given);
    if (h->mla && !is_mla_backend(given))
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "--attention-backend %s is not an MLA backend, and "
                          "this model is MLA (\"%skv_lora_rank\"); valid: FLASHMLA, CUTLASS_MLA, "
                          "FLASHINFER_MLA, TRITON_MLA%s",
                          name, h->where, h->sparse ? ", FLASHMLA_SPARSE" : "");
    if (!h->mla && is_mla_backend(given))
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "--attention-backend %s is an MLA backend, and this "
                          "model has no \"%skv_lora_rank\"; valid: FLASH_ATTN, FLASHINFER, "
                          "TRITON_ATTN",
                          name, h->where);
    if (h->sparse && given != KVRT_BACKEND_FLASHMLA_SPARSE)
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "--attention-backend %s cannot run DeepSeek-V3.2's "
                          "sparse attention (\"%sindex_topk\"); use FLASHMLA_SPARSE",
                          name, h->where);
    if (!h->sparse && given == KVRT_BACKEND_FLASHMLA_SPARSE)
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "--attention-backend FLASHMLA_SPARSE needs a sparse "
                          "model (\"index_topk\"); valid: FLASHMLA, CUTLASS_MLA, FLASHINFER_MLA, "
                          "TRITON_MLA");
    model_setting(h->m, "attention_backend", name, "--attention-backend");
    return KVRT_OK;
}

int hf_block_size(struct hf *h, uint64_t per_token, uint64_t state_max)
{
    enum kvrt_model_backend backend;
    int rc = choose_backend(h, &backend);
    if (rc != KVRT_OK)
        return rc;
    const uint64_t user = h->opt->block_size;
    char source[320];
    uint64_t bs = user;
    snprintf(source, sizeof(source), user ? "--block-size" : "default (CacheConfig.block_size 16)");
    if (state_max && per_token) {
        /* HybridAttentionMambaModelConfig without prefix caching (vLLM's
         * default for hybrid models): the smallest multiple of the backend's
         * alignment whose attention page holds one state page. */
        const uint64_t align = !h->mla ? 16 : backend == KVRT_BACKEND_CUTLASS_MLA ? 128 : 64;
        const uint64_t need = align * cdiv(state_max, align * per_token);
        if (!user || user < need) {
            bs = need;
            snprintf(source, sizeof(source),
                     "%svLLM's hybrid rule: the smallest multiple of %llu "
                     "tokens whose attention page (%llu bytes a token) holds a state page of %llu "
                     "bytes (HybridAttentionMambaModelConfig)",
                     user ? "raised from --block-size by " : "", (unsigned long long)align,
                     (unsigned long long)per_token, (unsigned long long)state_max);
        }
    } else if (!user) {
        bs = KVRT_MODEL_DEFAULT_BLOCK_SIZE;
    }
    if (h->mla) {
        /* CudaPlatformBase.check_and_update_config, in its order. */
        const uint64_t before = bs;
        if (backend == KVRT_BACKEND_FLASHMLA && bs % 64 != 0)
            bs = 64;
        if (backend == KVRT_BACKEND_CUTLASS_MLA && bs % 128 != 0)
            bs = 128;
        if (backend == KVRT_BACKEND_FLASHINFER_MLA && bs != 32 && bs % 64 != 0)
            bs = 64;
        if (h->sparse && bs != 64)
            bs = 64;
        if (bs != before)
            snprintf(source, sizeof(source), "%s forces %llu tokens (was %llu from %s)",
                     kvrt_model_backend_name(backend), (unsigned long long)bs, (unsigned long long)before,
                     user ? "--block-size" : "the default");
    }
    h->block_size = bs;
    char value[32];
    snprintf(value, sizeof(value), "%llu", (unsigned long long)bs);
    model_setting(h->m, "block_size", value, "%s", source);
    return KVRT_OK;
}

/* A JSON number as a double (integers and reals), or -1. */
static double number(const json_t *v)
{
    return json_is_integer(v) ? (double)json_integer_value(v) : json_is_real(v) ? json_real_value(v) : -1;
}

/* One rope entry's type ("rope_type", or "type" in older files). */
static const char *rope_type(const json_t *rp)
{
    const char *t = json_string_value(json_object_get(rp, "rope_type"));
    return t ? t : json_string_value(json_object_get(rp, "type"));
}

/*
 * The rope parameters: "rope_parameters" (transformers v5) or
 * "rope_scaling", either one entry or one per layer type.  Applies vLLM's
 * scaling to *len; *longrope is set when any entry is LongRoPE.
 */
static int scale_by_rope(struct hf *h, uint64_t *len, const char **from, bool *scaled, bool *longrope, char *how,
                         size_t size)
{
    const char *key = "rope_parameters";
    const json_t *rope = json_object_get(h->cfg, key);
    if (!json_is_object(rope)) {
        key = "rope_scaling";
        rope = json_object_get(h->cfg, key);
    }
    *scaled = *longrope = false;
    if (!json_is_object(rope))
        return KVRT_OK;
    const json_t *entries[16];
    size_t n = 0;
    if (rope_type(rope)) {
        entries[n++] = rope;
    } else {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)rope, k, v) if (json_is_object(v) && rope_type(v) && n < 16) entries[n++] = v;
    }
    double factor = 1.0, base = (double)*len;
    bool applies = false;
    for (size_t i = 0; i < n; i++) {
        const char *t = rope_type(entries[i]);
        *longrope = *longrope || strcmp(t, "longrope") == 0;
        if (strcmp(t, "su") == 0 || strcmp(t, "longrope") == 0 || strcmp(t, "llama3") == 0)
            continue;
        applies = true;
        const json_t *fv = json_object_get(entries[i], "factor");
        if (fv)
            factor = number(fv);
        if (strcmp(t, "yarn") == 0) {
            *from = strcmp(key, "rope_scaling") == 0 ? "rope_scaling.original_max_position_embeddings"
                                                     : "rope_parameters.original_max_position_embeddings";
            base = number(json_object_get(entries[i], "original_max_position_embeddings"));
            if (base <= 0)
                return model_fail(h->c, KVRT_ERR_INVALID,
                                  "\"%s%s\" is yarn without a positive "
                                  "\"original_max_position_embeddings\"",
                                  h->where, key);
        }
        snprintf(how, size, " x %s factor %g (%s)", key, factor, t);
    }
    /* Gemma 3's length is already scaled (vLLM skips it). */
    if (!applies || strstr(h->model_type, "gemma3"))
        return KVRT_OK;
    if (!(factor > 0) || base * factor >= 4294967296.0)
        return model_fail(h->c, KVRT_ERR_INVALID, "\"%s%s\" factor %g gives no length below 2^32", h->where, key,
                          factor);
    *len = (uint64_t)(base * factor);
    *scaled = true;
    return KVRT_OK;
}

/*
 * vLLM's _get_and_verify_max_len: the smallest of the length keys the
 * config has (model_max_length wins when set), scaled by the rope
 * parameters' factor unless the rope type already counts it (su, longrope,
 * llama3) or the model is Gemma 3; YaRN scales
 * original_max_position_embeddings instead; LongRoPE models default to
 * original_max_position_embeddings.
 */
int hf_max_model_len(struct hf *h)
{
    static const char *const keys[] = {
        "max_position_embeddings", "n_positions",         "max_seq_len",    "seq_length", "model_max_length",
        "max_target_positions",    "max_sequence_length", "max_seq_length", "seq_len"};
    uint64_t len = 0, v;
    const char *from = NULL;
    bool found;
    int rc;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if ((rc = model_get_u64_opt(h->c, h->cfg, h->where, keys[i], 1, UINT32_MAX, &v, &found)))
            return rc;
        if (found && (!from || v < len)) {
            len = v;
            from = keys[i];
        }
    }
    if ((rc = model_get_u64_opt(h->c, h->cfg, h->where, "model_max_length", 1, UINT32_MAX, &v, &found)))
        return rc;
    if (found)
        len = v, from = "model_max_length"; /* Command-R, Cohere2 */
    if (!from) {
        /* vLLM would take the transformers config class's default, which
         * kvrt does not know: no length rather than a guessed one. */
        model_note(h->m, "the config gives no max_position_embeddings; vLLM would use its "
                         "transformers class default, so give --max-model-len for the concurrency");
        return KVRT_OK;
    }
    char how[160] = "", source[320];
    bool scaled, longrope;
    const char *length_key = from;
    if ((rc = scale_by_rope(h, &len, &from, &scaled, &longrope, how, sizeof(how))) != KVRT_OK)
        return rc;
    snprintf(source, sizeof(source), "config %s%s%s", h->where, scaled ? from : length_key, scaled ? how : "");
    if (longrope &&
        (rc = model_get_u64_opt(h->c, h->cfg, h->where, "original_max_position_embeddings", 1, UINT32_MAX, &v,
                                &found)) == KVRT_OK &&
        found) {
        len = v;
        snprintf(source, sizeof(source), "config %soriginal_max_position_embeddings (LongRoPE)", h->where);
    }
    if (rc != KVRT_OK)
        return rc;
    h->m->max_model_len = len;
    h->m->max_model_len_source = model_strdup(source);
    return h->m->max_model_len_source ? KVRT_OK : model_fail(h->c, KVRT_ERR_NOMEM, "out of memory");
}

/* What one layer of `g` holds for a request of `len` tokens
 * (max_memory_usage_bytes of the layer's spec). */
static int layer_usage(const struct kvrt_model_group *g, const struct kvrt_spec *s, uint64_t len, uint64_t batched,
                       uint64_t *out)
{
    struct kvrt_spec_info in;
    if (kvrt_spec_derive(s, 0, &in) != KVRT_OK)
        return KVRT_ERR_INVALID;
    uint64_t blocks;
    switch (g->usage) {
    case KVRT_USAGE_STATE: blocks = 1; break;
    case KVRT_USAGE_SLIDING: {
        const uint64_t keep = g->window - 1 + batched;
        blocks = cdiv(keep < len ? keep : len, s->block_size) + 1;
        break;
    }
    default: blocks = cdiv(len, s->block_size); break;
    }
    return __builtin_mul_overflow(blocks, in.page_size, out) ? KVRT_ERR_OVERFLOW : KVRT_OK;
}

int kvrt_model_vllm_capacity(const struct kvrt_model *m, uint64_t budget, uint64_t max_model_len,
                             uint64_t batched_tokens, struct kvrt_model_capacity *out, char *err, size_t err_size)
{
    struct model_ctx c = {m->name, err, err_size};
    memset(out, 0, sizeof(*out));
    out->max_model_len = max_model_len;
    if (m->num_groups == 0 || max_model_len == 0)
        return model_fail(&c, KVRT_ERR_INVALID, "no groups or no max_model_len to size");
    /* One block: a page of every layer of the largest group (vLLM keeps
     * that many tensors, each shared by one layer of every group). */
    uint64_t per_block = 0, page0 = 0, need = 0, request_need = 0, min_bs = UINT64_MAX;
    size_t largest = 0;
    for (size_t g = 0; g < m->num_groups; g++) {
        const struct kvrt_model_group *grp = &m->groups[g];
        uint64_t group_bytes = 0, group_need = 0;
        for (size_t i = 0; i < grp->num_layers; i++) {
            struct kvrt_spec_info in;
            uint64_t use;
            if (kvrt_spec_derive(&grp->layers[i].spec, 0, &in) != KVRT_OK ||
                layer_usage(grp, &grp->layers[i].spec, max_model_len, batched_tokens, &use) != KVRT_OK ||
                __builtin_add_overflow(group_bytes, in.page_size, &group_bytes) ||
                __builtin_add_overflow(group_need, use, &group_need) ||
                __builtin_add_overflow(request_need, use, &request_need))
                return model_fail(&c, KVRT_ERR_OVERFLOW,
                                  "group %s: the bytes of a request of %llu "
                                  "tokens do not fit in 64 bits",
                                  grp->name, (unsigned long long)max_model_len);
        }
        if (grp->num_layers > largest)
            largest = grp->num_layers;
        per_block = group_bytes > per_block ? group_bytes : per_block;
        min_bs = grp->layers[0].spec.block_size < min_bs ? grp->layers[0].spec.block_size : min_bs;
        if (m->num_groups == 1) {
            /* One group (uniform spec or uniform type): its spec's page is
             * every layer's page, its need every layer's need. */
            page0 = group_bytes;
            need = group_need;
        } else {
            uint64_t one;
            struct kvrt_spec_info in;
            kvrt_spec_derive(&grp->layers[0].spec, 0, &in);
            if (layer_usage(grp, &grp->layers[0].spec, max_model_len, batched_tokens, &one) != KVRT_OK ||
                __builtin_add_overflow(need, one, &need))
                return model_fail(&c, KVRT_ERR_OVERFLOW, "the bytes of a request do not fit in 64 bits");
            if (g == 0)
                page0 = in.page_size;
        }
    }
    if (m->num_groups > 1 && __builtin_mul_overflow(page0, (uint64_t)largest, &per_block))
        return model_fail(&c, KVRT_ERR_OVERFLOW, "one block does not fit in 64 bits");
    if (per_block == 0 || page0 == 0)
        return model_fail(&c, KVRT_ERR_INVALID, "the model has empty pages");
    out->bytes_per_block = per_block;
    out->num_blocks = budget / per_block;
    out->tokens = out->num_blocks / m->num_groups * min_bs;
    /* get_max_concurrency_for_kv_cache_config: the layers-per-group factor
     * cancels out of cdiv(layers * need, page * layers). */
    out->blocks_per_request = cdiv(need, page0);
    out->max_concurrency = (double)out->num_blocks / (double)out->blocks_per_request;
    out->request_bytes = request_need;
    out->fits_one_request = request_need <= budget;
    return KVRT_OK;
}
