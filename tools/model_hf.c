/*
 * A Hugging Face config.json as published with a model, read the way vLLM
 * sizes its KV cache: attention layers (full, sliding window, chunked), MLA
 * (one latent vector per token), and the state of linear-attention and
 * Mamba layers.  Fields that would change the cache but that this reader
 * does not understand are refused by name rather than guessed around.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/common.h>
#include <kvrt/spec.h>

#include "model_internal.h"

#define MAX_HEADS (1u << 20)
#define MAX_DIM (1u << 24)
/* State tensor sizes multiply three of these: they stay far below 2^64. */
#define MAX_STATE_DIM (1u << 16)

enum layer_kind { LK_FULL, LK_SLIDING, LK_CHUNKED, LK_LINEAR, LK_MAMBA, NUM_LK };

static const char *const kind_type[NUM_LK] = {
    "full_attention", "sliding_attention", "chunked_attention", "linear_attention", "mamba",
};

/* Config fields that mean a layer pattern or a cache this reader cannot map. */
static const struct {
    const char *key, *what;
} unsupported[] = {
    {"hybrid_override_pattern", "a Nemotron-H style layer pattern"},
    {"layers_block_type", "a Zamba style layer pattern"},
    {"attn_type_list", "MiniMax style per-layer attention types"},
    {"mamba_d_ssm", "parallel attention and Mamba in every layer (Falcon-H1)"},
    {"kv_cache_quant_layers", "per-layer KV-cache quantisation"},
};

struct hf {
    const struct model_ctx *c;
    const json_t *root;
    const struct kvrt_model_options *opt;
    struct kvrt_model *m;
    uint64_t layers, heads, kv_heads, head_dim, block_size;
    enum kvrt_dtype kv_dtype, model_dtype;
    bool mla;
    uint64_t mla_dim;
    uint64_t window, chunk;
    enum layer_kind *kind;
};

static int parse_torch_dtype(struct hf *h)
{
    const char *key = "torch_dtype", *text = NULL;
    int rc = model_get_string_opt(h->c, h->root, "", key, &text);
    if (rc == KVRT_OK && !text) {
        key = "dtype"; /* what newer transformers write instead */
        rc = model_get_string_opt(h->c, h->root, "", key, &text);
    }
    if (rc != KVRT_OK)
        return rc;
    if (!text) {
        if (!h->opt->dtype_given)
            return model_fail(h->c, KVRT_ERR_INVALID, "the field \"torch_dtype\" is missing; add it "
                              "(e.g. \"bfloat16\") or give the cache type with --dtype");
        h->model_dtype = h->kv_dtype = h->opt->dtype;
        return KVRT_OK;
    }
    static const struct {
        const char *name;
        enum kvrt_dtype dtype;
    } names[] = {
        {"bfloat16", KVRT_DTYPE_BF16}, {"float16", KVRT_DTYPE_FP16}, {"float32", KVRT_DTYPE_FP32},
        {"bf16", KVRT_DTYPE_BF16},     {"fp16", KVRT_DTYPE_FP16},    {"fp32", KVRT_DTYPE_FP32},
        {"half", KVRT_DTYPE_FP16},     {"float", KVRT_DTYPE_FP32},
    };
    size_t i = 0;
    while (i < sizeof(names) / sizeof(names[0]) && strcmp(names[i].name, text) != 0)
        i++;
    if (i == sizeof(names) / sizeof(names[0]))
        return model_fail(h->c, KVRT_ERR_INVALID, "\"%s\" is \"%s\", which is not a type kvrt knows; "
                          "valid values are bfloat16, float16, float32 (or give --dtype)", key, text);
    h->model_dtype = names[i].dtype;
    h->kv_dtype = h->opt->dtype_given ? h->opt->dtype : names[i].dtype;
    if (h->opt->dtype_given && h->kv_dtype != h->model_dtype)
        model_note(h->m, "--dtype %s replaces %s %s for the KV cache (state layers keep %s)",
                   kvrt_dtype_name(h->kv_dtype), key, text, kvrt_dtype_name(h->model_dtype));
    return KVRT_OK;
}

static int parse_heads(struct hf *h)
{
    const struct model_ctx *c = h->c;
    bool found;
    int rc = model_get_u64(c, h->root, "", "num_attention_heads", 1, MAX_HEADS, &h->heads);
    if (rc != KVRT_OK)
        return rc;
    h->kv_heads = h->heads;
    rc = model_get_u64_opt(c, h->root, "", "num_key_value_heads", 1, MAX_HEADS, &h->kv_heads, &found);
    if (rc != KVRT_OK)
        return rc;
    if (h->heads % h->kv_heads != 0)
        return model_fail(c, KVRT_ERR_INVALID, "\"num_attention_heads\" %llu is not a multiple of "
                          "\"num_key_value_heads\" %llu; grouped-query attention needs it to be",
                          (unsigned long long)h->heads, (unsigned long long)h->kv_heads);
    rc = model_get_u64_opt(c, h->root, "", "head_dim", 1, MAX_DIM, &h->head_dim, &found);
    if (rc != KVRT_OK || found)
        return rc;
    uint64_t hidden;
    rc = model_get_u64(c, h->root, "", "hidden_size", 1, (uint64_t)MAX_DIM * MAX_HEADS, &hidden);
    if (rc != KVRT_OK)
        return model_fail(c, KVRT_ERR_INVALID, "neither \"head_dim\" nor \"hidden_size\" gives the head "
                          "size; add \"head_dim\"");
    if (hidden % h->heads != 0)
        return model_fail(c, KVRT_ERR_INVALID, "\"hidden_size\" %llu is not a multiple of "
                          "\"num_attention_heads\" %llu, so the head size is unclear; add \"head_dim\"",
                          (unsigned long long)hidden, (unsigned long long)h->heads);
    h->head_dim = hidden / h->heads;
    return KVRT_OK;
}

static int parse_mla(struct hf *h)
{
    uint64_t rank, rope;
    bool found;
    int rc = model_get_u64_opt(h->c, h->root, "", "kv_lora_rank", 1, MAX_DIM, &rank, &found);
    if (rc != KVRT_OK || !found)
        return rc;
    rc = model_get_u64(h->c, h->root, "", "qk_rope_head_dim", 1, MAX_DIM, &rope);
    if (rc != KVRT_OK)
        return rc;
    h->mla = true;
    h->mla_dim = rank + rope;
    model_note(h->m, "MLA: one latent vector of kv_lora_rank %llu + qk_rope_head_dim %llu = %llu "
               "elements per token, in one head slot, with no V",
               (unsigned long long)rank, (unsigned long long)rope, (unsigned long long)h->mla_dim);
    return KVRT_OK;
}

static int kinds_from_layer_types(struct hf *h, const json_t *types)
{
    if (!json_is_array(types))
        return model_fail(h->c, KVRT_ERR_INVALID, "\"layer_types\" is %s; it must be a list of "
                          "strings, one per layer", model_json_type(types));
    if (json_array_size(types) != h->layers)
        return model_fail(h->c, KVRT_ERR_INVALID, "\"layer_types\" has %zu entries but "
                          "\"num_hidden_layers\" is %llu; give one per layer",
                          json_array_size(types), (unsigned long long)h->layers);
    static const struct {
        const char *name;
        enum layer_kind kind;
    } names[] = {
        {"full_attention", LK_FULL},       {"attention", LK_FULL},
        {"sliding_attention", LK_SLIDING}, {"chunked_attention", LK_CHUNKED},
        {"linear_attention", LK_LINEAR},   {"mamba", LK_MAMBA},
    };
    for (size_t i = 0; i < h->layers; i++) {
        const json_t *v = json_array_get(types, i);
        const char *s = json_string_value(v);
        size_t k = 0;
        while (s && k < sizeof(names) / sizeof(names[0]) && strcmp(names[k].name, s) != 0)
            k++;
        if (!s || k == sizeof(names) / sizeof(names[0]))
            return model_fail(h->c, KVRT_ERR_INVALID, "\"layer_types[%zu]\" is %s%s%s%s; valid values "
                              "are full_attention, attention, sliding_attention, chunked_attention, "
                              "linear_attention, mamba", i, s ? "\"" : model_json_type(v), s ? s : "",
                              s ? "\"" : "", s ? ", an unknown layer type" : "");
        h->kind[i] = names[k].kind;
    }
    return KVRT_OK;
}

/* Which layers are attention when the config has no layer_types. */
static int kinds_from_pattern(struct hf *h)
{
    const struct model_ctx *c = h->c;
    uint64_t interval, period, offset, p;
    bool found, on = false, on_found;
    int rc;
    for (size_t i = 0; i < h->layers; i++)
        h->kind[i] = LK_FULL;

    /* Qwen3-Next: every interval-th layer is full attention, the rest
     * linear attention (gated delta net). */
    if ((rc = model_get_u64_opt(c, h->root, "", "full_attention_interval", 1, KVRT_MODEL_MAX_LAYERS,
                                &interval, &found)) != KVRT_OK)
        return rc;
    if (found) {
        for (size_t i = 0; i < h->layers; i++)
            h->kind[i] = (i + 1) % interval == 0 ? LK_FULL : LK_LINEAR;
        return KVRT_OK;
    }
    /* Jamba: attention where i % period == offset, Mamba elsewhere. */
    if ((rc = model_get_u64_opt(c, h->root, "", "attn_layer_period", 1, KVRT_MODEL_MAX_LAYERS, &period,
                                &found)) != KVRT_OK)
        return rc;
    if (found) {
        if ((rc = model_get_u64(c, h->root, "", "attn_layer_offset", 0, period - 1, &offset)) != KVRT_OK)
            return rc;
        for (size_t i = 0; i < h->layers; i++)
            h->kind[i] = i % period == offset ? LK_FULL : LK_MAMBA;
        return KVRT_OK;
    }
    /* Bamba and friends: the attention layers by index, Mamba elsewhere. */
    const json_t *idx = json_object_get(h->root, "attn_layer_indices");
    if (idx && !json_is_null(idx)) {
        if (!json_is_array(idx))
            return model_fail(c, KVRT_ERR_INVALID, "\"attn_layer_indices\" is %s; it must be a list "
                              "of layer numbers", model_json_type(idx));
        for (size_t i = 0; i < h->layers; i++)
            h->kind[i] = LK_MAMBA;
        for (size_t k = 0; k < json_array_size(idx); k++) {
            const json_t *v = json_array_get(idx, k);
            json_int_t n = json_is_integer(v) ? json_integer_value(v) : -1;
            if (n < 0 || (uint64_t)n >= h->layers)
                return model_fail(c, KVRT_ERR_INVALID, "\"attn_layer_indices[%zu]\" is not a layer "
                                  "number from 0 to %llu", k, (unsigned long long)h->layers - 1);
            h->kind[n] = LK_FULL;
        }
        return KVRT_OK;
    }
    if ((rc = model_get_u64_opt(c, h->root, "", "sliding_window", 1, UINT32_MAX, &h->window, &found)) !=
        KVRT_OK)
        return rc;
    if (!found)
        return KVRT_OK;
    if ((rc = model_get_bool_opt(c, h->root, "", "use_sliding_window", &on, &on_found)) != KVRT_OK)
        return rc;
    if (on_found && !on)
        return KVRT_OK; /* Qwen2: the window is declared but switched off */
    if (on_found) {
        /* Qwen2: layers from max_window_layers on use the window. */
        if ((rc = model_get_u64(c, h->root, "", "max_window_layers", 0, KVRT_MODEL_MAX_LAYERS, &p)) !=
            KVRT_OK)
            return rc;
        for (size_t i = p; i < h->layers; i++)
            h->kind[i] = LK_SLIDING;
        return KVRT_OK;
    }
    if ((rc = model_get_u64_opt(c, h->root, "", "sliding_window_pattern", 1, KVRT_MODEL_MAX_LAYERS, &p,
                                &found)) != KVRT_OK)
        return rc;
    const json_t *type = json_object_get(h->root, "model_type");
    if (!found && json_is_string(type) && strcmp(json_string_value(type), "gemma2") == 0)
        p = 2, found = true; /* Gemma 2 alternates, starting with a window */
    for (size_t i = 0; i < h->layers; i++)
        h->kind[i] = found && (i + 1) % p == 0 ? LK_FULL : LK_SLIDING;
    return KVRT_OK;
}

static int state_bytes(struct hf *h, enum layer_kind kind, uint64_t *bytes, char *what, size_t size)
{
    const struct model_ctx *c = h->c;
    const json_t *r = h->root;
    const uint64_t elem = kvrt_dtype_size(h->model_dtype);
    uint64_t conv_dim, kernel, ssm;
    int rc;
    if (kind == LK_LINEAR) {
        /* Gated delta net: a causal-conv state over q, k and v, and one
         * [head_k_dim, head_v_dim] recurrent state per value head. */
        uint64_t nk, nv, dk, dv;
        if ((rc = model_get_u64(c, r, "", "linear_num_key_heads", 1, MAX_HEADS, &nk)) ||
            (rc = model_get_u64(c, r, "", "linear_num_value_heads", 1, MAX_HEADS, &nv)) ||
            (rc = model_get_u64(c, r, "", "linear_key_head_dim", 1, MAX_STATE_DIM, &dk)) ||
            (rc = model_get_u64(c, r, "", "linear_value_head_dim", 1, MAX_STATE_DIM, &dv)) ||
            (rc = model_get_u64(c, r, "", "linear_conv_kernel_dim", 2, 64, &kernel)))
            return rc;
        conv_dim = 2 * nk * dk + nv * dv;
        ssm = nv * dk * dv;
        snprintf(what, size, "linear attention state (conv %llu x %llu + recurrent %llu x %llu x %llu)",
                 (unsigned long long)conv_dim, (unsigned long long)(kernel - 1),
                 (unsigned long long)nv, (unsigned long long)dk, (unsigned long long)dv);
    } else {
        uint64_t hidden, expand, d_state, heads, d_head, groups;
        bool mamba2;
        if ((rc = model_get_u64(c, r, "", "hidden_size", 1, (uint64_t)MAX_STATE_DIM * 16, &hidden)) ||
            (rc = model_get_u64(c, r, "", "mamba_d_state", 1, MAX_STATE_DIM, &d_state)) ||
            (rc = model_get_u64(c, r, "", "mamba_d_conv", 2, 64, &kernel)) ||
            (rc = model_get_u64(c, r, "", "mamba_expand", 1, 64, &expand)) ||
            (rc = model_get_u64_opt(c, r, "", "mamba_n_heads", 1, MAX_HEADS, &heads, &mamba2)))
            return rc;
        const uint64_t d_inner = expand * hidden;
        if (mamba2) {
            /* Mamba-2: conv over x, B and C; one [d_head, d_state] state per head. */
            if ((rc = model_get_u64(c, r, "", "mamba_d_head", 1, MAX_STATE_DIM, &d_head)) ||
                (rc = model_get_u64(c, r, "", "mamba_n_groups", 1, MAX_HEADS, &groups)))
                return rc;
            conv_dim = d_inner + 2 * groups * d_state;
            ssm = heads * d_head * d_state;
        } else {
            conv_dim = d_inner;
            ssm = d_inner * d_state;
        }
        snprintf(what, size, "Mamba%s state (conv %llu x %llu + SSM %llu)", mamba2 ? "-2" : "",
                 (unsigned long long)conv_dim, (unsigned long long)(kernel - 1), (unsigned long long)ssm);
    }
    /* Every factor is bounded above, so these products fit in 64 bits. */
    *bytes = (conv_dim * (kernel - 1) + ssm) * elem;
    return KVRT_OK;
}

static void attention_spec(const struct hf *h, struct kvrt_spec *s)
{
    kvrt_spec_default(s);
    s->dtype = h->kv_dtype;
    s->block_size = h->block_size;
    if (h->mla) {
        s->kind = KVRT_SPEC_MLA;
        s->num_kv_heads = 1;
        s->head_size = h->mla_dim;
        s->head_size_v = 0;
    } else {
        s->kind = KVRT_SPEC_ATTENTION;
        s->num_kv_heads = h->kv_heads;
        s->head_size = h->head_dim;
        s->head_size_v = h->head_dim;
    }
}

/*
 * vLLM makes attention and state pages one size in hybrid models: the
 * attention block grows (in steps of 16 tokens) until its page holds a state,
 * and the state page is padded to the attention page.
 */
static int unify_pages(struct hf *h, uint64_t state_max)
{
    struct kvrt_spec s;
    attention_spec(h, &s);
    const uint64_t per_token = s.num_kv_heads * (s.head_size + s.head_size_v) * kvrt_dtype_size(s.dtype);
    const uint64_t step = 16 * per_token;
    const uint64_t needed = 16 * ((state_max + step - 1) / step);
    if (h->block_size < needed) {
        model_note(h->m, "block size raised from %llu to %llu tokens so that one attention page "
                   "(%llu bytes) holds one state page (%llu bytes), as vLLM does for hybrid models",
                   (unsigned long long)h->block_size, (unsigned long long)needed,
                   (unsigned long long)needed * per_token, (unsigned long long)state_max);
        h->block_size = needed;
    }
    return KVRT_OK;
}

static int build_layers(struct hf *h, struct model_builder *b)
{
    uint64_t state[NUM_LK] = {0};
    char state_what[NUM_LK][160];
    bool have[NUM_LK] = {false};
    int rc;
    for (size_t i = 0; i < h->layers; i++)
        have[h->kind[i]] = true;
    if (have[LK_SLIDING] && h->window == 0) {
        bool found;
        if ((rc = model_get_u64_opt(h->c, h->root, "", "sliding_window", 1, UINT32_MAX, &h->window,
                                    &found)) != KVRT_OK)
            return rc;
        if (!found)
            return model_fail(h->c, KVRT_ERR_INVALID, "\"layer_types\" has sliding_attention layers but "
                              "the field \"sliding_window\" is missing; give the window in tokens");
    }
    if (have[LK_CHUNKED] && (rc = model_get_u64(h->c, h->root, "", "attention_chunk_size", 1, UINT32_MAX,
                                                &h->chunk)) != KVRT_OK)
        return rc;
    uint64_t state_max = 0;
    for (int k = LK_LINEAR; k <= LK_MAMBA; k++) {
        if (have[k] && (rc = state_bytes(h, (enum layer_kind)k, &state[k], state_what[k],
                                         sizeof(state_what[k]))) != KVRT_OK)
            return rc;
        state_max = state[k] > state_max ? state[k] : state_max;
    }
    bool any_attention = have[LK_FULL] || have[LK_SLIDING] || have[LK_CHUNKED];
    if (state_max && any_attention)
        unify_pages(h, state_max);

    struct kvrt_spec attn;
    attention_spec(h, &attn);
    uint64_t attn_page;
    if (__builtin_mul_overflow(h->block_size, attn.num_kv_heads * (attn.head_size + attn.head_size_v) *
                                                  kvrt_dtype_size(attn.dtype), &attn_page))
        return model_fail(h->c, KVRT_ERR_OVERFLOW, "one attention page of %llu tokens does not fit in "
                          "64 bits; use a smaller block size", (unsigned long long)h->block_size);
    for (size_t i = 0; i < h->layers; i++) {
        enum layer_kind k = h->kind[i];
        char name[32], what[192];
        struct kvrt_spec s = attn;
        uint64_t window = 0;
        snprintf(name, sizeof(name), "layers.%zu", i);
        switch (k) {
        case LK_FULL:
            snprintf(what, sizeof(what), "%s", h->mla ? "full attention, MLA latent" : "full attention");
            break;
        case LK_SLIDING:
            window = h->window;
            snprintf(what, sizeof(what), "sliding window of %llu tokens", (unsigned long long)window);
            break;
        case LK_CHUNKED:
            window = h->chunk;
            snprintf(what, sizeof(what), "chunked local attention, %llu-token chunks",
                     (unsigned long long)window);
            break;
        default:
            kvrt_spec_default(&s);
            s.kind = KVRT_SPEC_STATE;
            s.dtype = KVRT_DTYPE_UINT8;
            s.block_size = h->block_size;
            s.num_kv_heads = 1;
            s.state_content_bytes = state[k];
            if (any_attention && attn_page > state[k])
                s.page_size_padded = attn_page;
            snprintf(what, sizeof(what), "%s", state_what[k]);
            break;
        }
        if ((rc = model_builder_add(h->c, b, name, kind_type[k], what, window, &s)) != KVRT_OK)
            return rc;
    }
    return KVRT_OK;
}

int model_parse_hf(const struct model_ctx *c, const json_t *root, const struct kvrt_model_options *opt,
                   struct kvrt_model *m)
{
    struct hf h = {.c = c, .root = root, .opt = opt, .m = m};
    struct model_builder b = {0};
    const char *type = "";
    int rc;
    m->format = model_strdup("hf-config");
    for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
        if (json_object_get(root, unsupported[i].key))
            return model_fail(c, KVRT_ERR_INVALID, "the field \"%s\" (%s) is not supported: kvrt cannot "
                              "tell each layer's cache from it; describe the model in a kvrt model "
                              "file instead (docs/model-format.md)", unsupported[i].key,
                              unsupported[i].what);
    if ((rc = model_get_string_opt(c, root, "", "model_type", &type)) != KVRT_OK)
        return rc;
    m->architecture = model_strdup(type);
    if ((rc = model_get_u64(c, root, "", "num_hidden_layers", 1, KVRT_MODEL_MAX_LAYERS, &h.layers)) ||
        (rc = parse_heads(&h)) || (rc = parse_torch_dtype(&h)) || (rc = parse_mla(&h)))
        return rc;
    h.block_size = opt->block_size ? opt->block_size : KVRT_MODEL_DEFAULT_BLOCK_SIZE;
    m->num_q_heads = h.heads;
    h.kind = malloc(h.layers * sizeof(*h.kind));
    if (!h.kind)
        return model_fail(c, KVRT_ERR_NOMEM, "out of memory reading %llu layers",
                          (unsigned long long)h.layers);
    const json_t *types = json_object_get(root, "layer_types");
    rc = types && !json_is_null(types) ? kinds_from_layer_types(&h, types) : kinds_from_pattern(&h);
    if (rc == KVRT_OK)
        rc = build_layers(&h, &b);
    if (rc == KVRT_OK)
        rc = model_group_like_vllm(c, &b, m);
    model_builder_free(&b);
    free(h.kind);
    return rc;
}
