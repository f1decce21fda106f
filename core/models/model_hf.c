/*
 * A Hugging Face config.json as published with a model, read the way vLLM
 * sizes its KV cache (docs/models.md): the language model's config (the top
 * level or "text_config"), attention layers (full, sliding window, chunked),
 * MLA (one latent vector per token) with DeepSeek-V3.2's indexer keys, and
 * the state of linear-attention, KDA and Mamba layers.  Fields that would
 * change the cache but that this reader does not model are refused by name
 * rather than guessed around.
 *
 * Layer 4 of libkvrt (core/models/; CONTRIBUTING.md, "Where things live").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/common.h>
#include <kvrt/spec.h>

#include "model_internal.h"

#define MAX_HEADS (1u << 20)
#define MAX_DIM (1u << 24)
/* DeepSeek-V3.2's fp8_ds_mla entry: 512 fp8 latents, 4 float32 scales and
 * 64 bfloat16 rope values (MLAAttentionSpec.page_size_bytes). */
#define FP8_DS_MLA_BYTES 656u
/* The indexer quantises its keys in blocks of this many values, one
 * float32 scale each (DeepSeek-V3.2's Indexer, quant_block_size). */
#define INDEXER_QUANT_BLOCK 128u

static const char *const kind_type[NUM_LK] = {
    "full_attention", "sliding_attention", "chunked_attention", "linear_attention", "mamba", "kda",
};

/* Config fields that mean a layer pattern or a cache this reader cannot map. */
static const struct {
    const char *key, *what;
} unsupported[] = {
    {"hybrid_override_pattern", "a Nemotron-H style layer pattern"},
    {"layers_block_type", "a Zamba style layer pattern"},
    {"mamba_d_ssm", "parallel attention and Mamba in every layer (Falcon-H1)"},
    {"kv_cache_quant_layers", "per-layer KV-cache quantisation"},
};

/* The model types vLLM runs as MLA when kv_lora_rank is set
 * (ModelArchConfigConvertorBase.is_deepseek_mla). */
static const char *const mla_types[] = {
    "deepseek_v2", "deepseek_v3",   "deepseek_v32",    "deepseek_mtp",        "kimi_k2",
    "kimi_linear", "longcat_flash", "pangu_ultra_moe", "pangu_ultra_moe_mtp", "glm_moe_dsa",
};

/* vLLM's hf_text_config: a multimodal config's "text_config". */
static int find_text_config(struct hf *h)
{
    const json_t *tc = json_object_get(h->root, "text_config");
    h->cfg = h->root;
    h->where = "";
    if (!tc || json_is_null(tc))
        return KVRT_OK;
    if (!json_is_object(tc))
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "\"text_config\" is %s; it must be the language "
                          "model's config, an object",
                          model_json_type(tc));
    h->cfg = tc;
    h->where = "text_config.";
    model_note(h->m, "the language model is read from \"text_config\", as vLLM reads "
                     "hf_text_config; the vision tower keeps no KV cache");
    return KVRT_OK;
}

static int refuse_unsupported(const struct hf *h)
{
    for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++)
        if (json_object_get(h->cfg, unsupported[i].key))
            return model_fail(h->c, KVRT_ERR_INVALID,
                              "the field \"%s%s\" (%s) is not supported: "
                              "kvrt cannot tell each layer's cache from it; describe the model in a "
                              "kvrt model file instead (docs/model-format.md)",
                              h->where, unsupported[i].key, unsupported[i].what);
    return KVRT_OK;
}

/* vLLM's get_total_num_kv_heads and get_head_size, for attention that is
 * not MLA. */
static int parse_heads(struct hf *h)
{
    const struct model_ctx *c = h->c;
    const json_t *r = h->cfg;
    const char *w = h->where;
    bool found = false, mq = false, mq_found, new_arch = false, na_found;
    int rc = model_get_u64(c, r, w, "num_attention_heads", 1, MAX_HEADS, &h->heads);
    if (rc != KVRT_OK || h->mla)
        return rc; /* MLA keeps one latent per token, whatever the heads */
    h->kv_heads = h->heads;
    static const char *const kv_keys[] = {"n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num"};
    const char *kv_key = "num_key_value_heads";
    for (size_t i = 0; i < 4 && !found; i++) {
        if ((rc = model_get_u64_opt(c, r, w, kv_keys[i], 1, MAX_HEADS, &h->kv_heads, &found)))
            return rc;
        kv_key = found ? kv_keys[i] : kv_key;
    }
    if (strcmp(h->model_type, "falcon") == 0 || strcmp(h->model_type, "RefinedWeb") == 0 ||
        strcmp(h->model_type, "RefinedWebModel") == 0) {
        if ((rc = model_get_bool_opt(c, r, w, "multi_query", &mq, &mq_found)) ||
            (rc = model_get_bool_opt(c, r, w, "new_decoder_architecture", &new_arch, &na_found)))
            return rc;
        if (!new_arch && mq)
            h->kv_heads = 1, kv_key = "multi_query";
    }
    if (h->heads % h->kv_heads != 0)
        return model_fail(c, KVRT_ERR_INVALID,
                          "\"%snum_attention_heads\" %llu is not a multiple of "
                          "\"%s%s\" %llu; grouped-query attention needs it to be",
                          w, (unsigned long long)h->heads, w, kv_key, (unsigned long long)h->kv_heads);
    static const char *const dim_keys[] = {"head_dim", "hidden_size_per_head"};
    for (size_t i = 0; i < 2; i++) {
        if ((rc = model_get_u64_opt(c, r, w, dim_keys[i], 1, MAX_DIM, &h->head_dim, &found)))
            return rc;
        if (found)
            return KVRT_OK;
    }
    uint64_t hidden;
    rc = model_get_u64(c, r, w, "hidden_size", 1, (uint64_t)MAX_DIM * MAX_HEADS, &hidden);
    if (rc != KVRT_OK)
        return model_fail(c, KVRT_ERR_INVALID,
                          "neither \"%shead_dim\" nor \"%shidden_size\" gives the "
                          "head size; add \"head_dim\"",
                          w, w);
    if (hidden % h->heads != 0)
        return model_fail(c, KVRT_ERR_INVALID,
                          "\"%shidden_size\" %llu is not a multiple of "
                          "\"%snum_attention_heads\" %llu, so the head size is unclear; add "
                          "\"head_dim\"",
                          w, (unsigned long long)hidden, w, (unsigned long long)h->heads);
    h->head_dim = hidden / h->heads;
    return KVRT_OK;
}

static int parse_mla(struct hf *h)
{
    const struct model_ctx *c = h->c;
    uint64_t rank, rope, index_dim;
    bool found;
    int rc = model_get_u64_opt(c, h->cfg, h->where, "kv_lora_rank", 1, MAX_DIM, &rank, &found);
    if (rc != KVRT_OK || !found)
        return rc;
    size_t i = 0;
    while (i < sizeof(mla_types) / sizeof(mla_types[0]) && strcmp(mla_types[i], h->model_type) != 0)
        i++;
    if (i == sizeof(mla_types) / sizeof(mla_types[0]))
        return model_fail(c, KVRT_ERR_INVALID,
                          "\"%skv_lora_rank\" is set but \"%smodel_type\" is "
                          "\"%s\", which vLLM does not run as MLA (is_deepseek_mla); kvrt does not "
                          "guess its cache",
                          h->where, h->where, h->model_type);
    if ((rc = model_get_u64(c, h->cfg, h->where, "qk_rope_head_dim", 1, MAX_DIM, &rope)) != KVRT_OK)
        return rc;
    h->mla = true;
    h->mla_dim = rank + rope;
    model_note(h->m,
               "MLA: one latent vector of kv_lora_rank %llu + qk_rope_head_dim %llu = %llu "
               "elements per token, in one head slot, with no V",
               (unsigned long long)rank, (unsigned long long)rope, (unsigned long long)h->mla_dim);
    /* DeepSeek-V3.2 (vLLM keys on index_topk): every layer's indexer keeps
     * fp8 keys and one float32 scale per 128 values. */
    if (!json_object_get(h->cfg, "index_topk"))
        return KVRT_OK;
    if ((rc = model_get_u64(c, h->cfg, h->where, "index_head_dim", INDEXER_QUANT_BLOCK, MAX_DIM, &index_dim)) !=
        KVRT_OK)
        return rc;
    if (index_dim % INDEXER_QUANT_BLOCK != 0)
        return model_fail(c, KVRT_ERR_INVALID,
                          "\"%sindex_head_dim\" %llu is not a multiple of %u, "
                          "the indexer's quantisation block",
                          h->where, (unsigned long long)index_dim, INDEXER_QUANT_BLOCK);
    h->sparse = true;
    h->index_head_dim = index_dim + index_dim / INDEXER_QUANT_BLOCK * 4;
    model_note(h->m,
               "DeepSeek-V3.2 indexer: every layer also keeps %llu bytes of keys per token "
               "(index_head_dim %llu fp8 values + a float32 scale per 128: %llu), in the same block",
               (unsigned long long)h->index_head_dim, (unsigned long long)index_dim,
               (unsigned long long)(index_dim / INDEXER_QUANT_BLOCK));
    return KVRT_OK;
}

static int kinds_from_layer_types(struct hf *h, const json_t *types)
{
    if (!json_is_array(types))
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "\"%slayer_types\" is %s; it must be a list of "
                          "strings, one per layer",
                          h->where, model_json_type(types));
    if (json_array_size(types) != h->layers)
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "\"%slayer_types\" has %zu entries but "
                          "\"%snum_hidden_layers\" is %llu; give one per layer",
                          h->where, json_array_size(types), h->where, (unsigned long long)h->layers);
    static const struct {
        const char *name;
        enum layer_kind kind;
    } names[] = {
        {"full_attention", LK_FULL},       {"attention", LK_FULL},          {"sliding_attention", LK_SLIDING},
        {"chunked_attention", LK_CHUNKED}, {"linear_attention", LK_LINEAR}, {"mamba", LK_MAMBA},
    };
    for (size_t i = 0; i < h->layers; i++) {
        const json_t *v = json_array_get(types, i);
        const char *s = json_string_value(v);
        size_t k = 0;
        while (s && k < sizeof(names) / sizeof(names[0]) && strcmp(names[k].name, s) != 0)
            k++;
        if (!s || k == sizeof(names) / sizeof(names[0]))
            return model_fail(h->c, KVRT_ERR_INVALID,
                              "\"%slayer_types[%zu]\" is %s%s%s%s; valid values "
                              "are full_attention, attention, sliding_attention, chunked_attention, "
                              "linear_attention, mamba",
                              h->where, i, s ? "\"" : model_json_type(v), s ? s : "", s ? "\"" : "",
                              s ? ", an unknown layer type" : "");
        h->kind[i] = names[k].kind;
    }
    return KVRT_OK;
}

/* A list of 1-based layer numbers (Kimi-Linear's linear_attn_config). */
static int mark_layers(struct hf *h, const json_t *list, const char *key, enum layer_kind kind)
{
    if (!json_is_array(list))
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "\"%slinear_attn_config.%s\" is %s; it must be a list "
                          "of layer numbers from 1",
                          h->where, key, model_json_type(list));
    for (size_t k = 0; k < json_array_size(list); k++) {
        const json_t *v = json_array_get(list, k);
        json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
        if (n < 1 || (uint64_t)n > h->layers)
            return model_fail(h->c, KVRT_ERR_INVALID,
                              "\"%slinear_attn_config.%s[%zu]\" is not a layer "
                              "number from 1 to %llu",
                              h->where, key, k, (unsigned long long)h->layers);
        h->kind[n - 1] = kind;
    }
    return KVRT_OK;
}

/* Kimi-Linear: layer i + 1 in kda_layers is KDA (KimiLinearConfig.
 * is_kda_layer), the rest full attention (MLA). */
static int kinds_from_kimi(struct hf *h, const json_t *lac)
{
    if (!json_is_object(lac))
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "\"%slinear_attn_config\" is %s; it must be an "
                          "object",
                          h->where, model_json_type(lac));
    for (size_t i = 0; i < h->layers; i++)
        h->kind[i] = LK_FULL;
    return mark_layers(h, json_object_get(lac, "kda_layers"), "kda_layers", LK_KDA);
}

/* MiniMax: attn_type_list has 1 for full attention and 0 for lightning
 * (linear) attention, whose state kvrt does not model. */
static int kinds_from_minimax(struct hf *h, const json_t *list)
{
    if (!json_is_array(list) || json_array_size(list) != h->layers)
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "\"%sattn_type_list\" must be a list of %llu "
                          "numbers, one per layer",
                          h->where, (unsigned long long)h->layers);
    for (size_t i = 0; i < h->layers; i++) {
        const json_t *v = json_array_get(list, i);
        if (json_is_integer(v) && json_integer_value(v) == 1) {
            h->kind[i] = LK_FULL;
            continue;
        }
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "\"%sattn_type_list[%zu]\" is %s%lld: a MiniMax "
                          "lightning (linear) attention layer, whose state kvrt does not size; only "
                          "all-full-attention lists (1) are supported",
                          h->where, i, json_is_integer(v) ? "" : "not 1, e.g. ",
                          json_is_integer(v) ? (long long)json_integer_value(v) : 0LL);
    }
    return KVRT_OK;
}

/* Llama 4 without layer_types: RoPE layers (no_rope_layers[i] != 0, by
 * default all but every fourth) use chunked local attention. */
static int kinds_from_chunks(struct hf *h)
{
    const json_t *nope = json_object_get(h->cfg, "no_rope_layers");
    const bool listed = json_is_array(nope) && json_array_size(nope) > 0;
    if (listed && json_array_size(nope) != h->layers)
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "\"%sno_rope_layers\" has %zu entries but there are "
                          "%llu layers",
                          h->where, json_array_size(nope), (unsigned long long)h->layers);
    for (size_t i = 0; i < h->layers; i++) {
        const bool rope = listed ? json_integer_value(json_array_get(nope, i)) != 0 : (i + 1) % 4 != 0;
        h->kind[i] = rope ? LK_CHUNKED : LK_FULL;
    }
    return KVRT_OK;
}

/* Which layers are attention when the config has no layer_types. */
static int kinds_from_pattern(struct hf *h)
{
    const struct model_ctx *c = h->c;
    const json_t *r = h->cfg;
    const char *w = h->where;
    uint64_t interval, period, offset, p;
    bool found, on = false, on_found;
    int rc;
    for (size_t i = 0; i < h->layers; i++)
        h->kind[i] = LK_FULL;

    /* Qwen3-Next: every interval-th layer is full attention, the rest
     * linear attention (gated delta net). */
    if ((rc = model_get_u64_opt(c, r, w, "full_attention_interval", 1, KVRT_MODEL_MAX_LAYERS, &interval, &found)) !=
        KVRT_OK)
        return rc;
    if (found) {
        for (size_t i = 0; i < h->layers; i++)
            h->kind[i] = (i + 1) % interval == 0 ? LK_FULL : LK_LINEAR;
        return KVRT_OK;
    }
    /* Jamba: attention where i % period == offset, Mamba elsewhere. */
    if ((rc = model_get_u64_opt(c, r, w, "attn_layer_period", 1, KVRT_MODEL_MAX_LAYERS, &period, &found)) != KVRT_OK)
        return rc;
    if (found) {
        if ((rc = model_get_u64(c, r, w, "attn_layer_offset", 0, period - 1, &offset)) != KVRT_OK)
            return rc;
        for (size_t i = 0; i < h->layers; i++)
            h->kind[i] = i % period == offset ? LK_FULL : LK_MAMBA;
        return KVRT_OK;
    }
    /* Bamba and friends: the attention layers by index, Mamba elsewhere. */
    const json_t *idx = json_object_get(r, "attn_layer_indices");
    if (idx && !json_is_null(idx)) {
        if (!json_is_array(idx))
            return model_fail(c, KVRT_ERR_INVALID,
                              "\"%sattn_layer_indices\" is %s; it must be a list "
                              "of layer numbers",
                              w, model_json_type(idx));
        for (size_t i = 0; i < h->layers; i++)
            h->kind[i] = LK_MAMBA;
        for (size_t k = 0; k < json_array_size(idx); k++) {
            const json_t *v = json_array_get(idx, k);
            json_int_t n = json_is_integer(v) ? json_integer_value(v) : -1;
            if (n < 0 || (uint64_t)n >= h->layers)
                return model_fail(c, KVRT_ERR_INVALID,
                                  "\"%sattn_layer_indices[%zu]\" is not a layer "
                                  "number from 0 to %llu",
                                  w, k, (unsigned long long)h->layers - 1);
            h->kind[n] = LK_FULL;
        }
        return KVRT_OK;
    }
    const json_t *chunk = json_object_get(r, "attention_chunk_size");
    if (chunk && !json_is_null(chunk))
        return kinds_from_chunks(h);
    if ((rc = model_get_u64_opt(c, r, w, "sliding_window", 1, UINT32_MAX, &h->window, &found)) != KVRT_OK)
        return rc;
    if (!found)
        return KVRT_OK;
    if ((rc = model_get_bool_opt(c, r, w, "use_sliding_window", &on, &on_found)) != KVRT_OK)
        return rc;
    if (on_found && !on)
        return KVRT_OK; /* Qwen2: the window is declared but switched off */
    if (on_found) {
        /* Qwen2: layers from max_window_layers on use the window. */
        if ((rc = model_get_u64(c, r, w, "max_window_layers", 0, KVRT_MODEL_MAX_LAYERS, &p)) != KVRT_OK)
            return rc;
        for (size_t i = p; i < h->layers; i++)
            h->kind[i] = LK_SLIDING;
        return KVRT_OK;
    }
    if ((rc = model_get_u64_opt(c, r, w, "sliding_window_pattern", 1, KVRT_MODEL_MAX_LAYERS, &p, &found)) != KVRT_OK)
        return rc;
    if (!found && strcmp(h->model_type, "gemma2") == 0)
        p = 2, found = true; /* Gemma 2 alternates, starting with a window */
    for (size_t i = 0; i < h->layers; i++)
        h->kind[i] = found && (i + 1) % p == 0 ? LK_FULL : LK_SLIDING;
    return KVRT_OK;
}

static int find_kinds(struct hf *h)
{
    const json_t *types = json_object_get(h->cfg, "layer_types");
    const json_t *lac = json_object_get(h->cfg, "linear_attn_config");
    const json_t *mm = json_object_get(h->cfg, "attn_type_list");
    if (types && !json_is_null(types))
        return kinds_from_layer_types(h, types);
    if (lac && !json_is_null(lac))
        return kinds_from_kimi(h, lac);
    if (mm && !json_is_null(mm))
        return kinds_from_minimax(h, mm);
    return kinds_from_pattern(h);
}

/* The cache entry of one attention token and its spec. */
static void attention_spec(const struct hf *h, struct kvrt_spec *s)
{
    kvrt_spec_default(s);
    s->dtype = h->kv_dtype;
    s->block_size = h->block_size;
    if (h->mla) {
        s->kind = KVRT_SPEC_MLA;
        s->num_kv_heads = 1;
        s->head_size = h->fp8_ds_mla ? FP8_DS_MLA_BYTES : h->mla_dim;
        s->head_size_v = 0;
    } else {
        s->kind = KVRT_SPEC_ATTENTION;
        s->num_kv_heads = h->kv_heads;
        s->head_size = h->head_dim;
        s->head_size_v = h->head_dim;
    }
}

static uint64_t attention_bytes_per_token(const struct hf *h)
{
    struct kvrt_spec s;
    attention_spec(h, &s);
    return s.num_kv_heads * (s.head_size + s.head_size_v) * kvrt_dtype_size(s.dtype);
}

/*
 * Chunked local attention: vLLM turns the hybrid allocator off for it by
 * default, and unify_hybrid_kv_cache_specs then makes every chunked and
 * sliding layer a full-attention layer of one group.
 */
static int merge_local_attention(struct hf *h, const bool *have)
{
    if (!have[LK_CHUNKED])
        return KVRT_OK;
    if (!have[LK_FULL])
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "every layer is chunked local attention "
                          "(\"%sattention_chunk_size\"); kvrt sizes chunked layers only next to full "
                          "attention ones, as vLLM merges them",
                          h->where);
    if (have[LK_LINEAR] || have[LK_MAMBA] || have[LK_KDA])
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "chunked local attention (\"%sattention_chunk_size\") "
                          "next to state layers: vLLM cannot merge them into one group without the "
                          "hybrid allocator",
                          h->where);
    for (size_t i = 0; i < h->layers; i++)
        if (h->kind[i] == LK_CHUNKED || h->kind[i] == LK_SLIDING)
            h->kind[i] = LK_FULL;
    model_note(h->m,
               "chunked local attention (%llu-token chunks) is kept for every token in one group "
               "with the full-attention layers: vLLM turns the hybrid allocator off for it unless "
               "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 (unify_hybrid_kv_cache_specs)",
               (unsigned long long)h->chunk);
    return KVRT_OK;
}

static int add_layer(struct hf *h, struct model_builder *b, size_t i, const struct kvrt_spec *attn,
                     const uint64_t *state, char (*state_what)[160], uint64_t attn_page, bool any_attention)
{
    const enum layer_kind k = h->kind[i];
    char name[48], what[224];
    struct kvrt_spec s = *attn;
    uint64_t window = 0;
    snprintf(name, sizeof(name), "layers.%zu", i);
    switch (k) {
    case LK_FULL:
        snprintf(what, sizeof(what), "%s",
                 !h->mla         ? "full attention"
                 : h->fp8_ds_mla ? "full attention, MLA latent in fp8_ds_mla (512 fp8 + 4 float32 "
                                   "scales + 64 bf16 rope = 656 bytes)"
                                 : "full attention, MLA latent");
        break;
    case LK_SLIDING:
        window = h->window;
        snprintf(what, sizeof(what), "sliding window of %llu tokens", (unsigned long long)window);
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
    int rc = model_builder_add(h->c, b, name, kind_type[k], what, window, &s);
    if (rc != KVRT_OK || !h->sparse || k != LK_FULL)
        return rc;
    struct kvrt_spec ix = *attn;
    ix.dtype = KVRT_DTYPE_UINT8;
    ix.head_size = h->index_head_dim;
    snprintf(name, sizeof(name), "layers.%zu.indexer", i);
    return model_builder_add(h->c, b, name, kind_type[LK_FULL],
                             "full attention, DeepSeek-V3.2 "
                             "indexer keys (fp8 + float32 scales)",
                             0, &ix);
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
        if ((rc = model_get_u64_opt(h->c, h->cfg, h->where, "sliding_window", 1, UINT32_MAX, &h->window, &found)) !=
            KVRT_OK)
            return rc;
        if (!found)
            return model_fail(h->c, KVRT_ERR_INVALID,
                              "\"%slayer_types\" has sliding_attention layers "
                              "but the field \"%ssliding_window\" is missing; give the window in tokens",
                              h->where, h->where);
    }
    if (have[LK_CHUNKED] &&
        (rc = model_get_u64(h->c, h->cfg, h->where, "attention_chunk_size", 1, UINT32_MAX, &h->chunk)) != KVRT_OK)
        return rc;
    if ((rc = merge_local_attention(h, have)) != KVRT_OK)
        return rc;
    if (have[LK_CHUNKED])
        have[LK_CHUNKED] = have[LK_SLIDING] = false;
    uint64_t state_max = 0;
    for (int k = LK_LINEAR; k < NUM_LK; k++) {
        if (have[k] &&
            (rc = hf_state_bytes(h, (enum layer_kind)k, &state[k], state_what[k], sizeof(state_what[k]))) != KVRT_OK)
            return rc;
        state_max = state[k] > state_max ? state[k] : state_max;
    }
    const bool any_attention = have[LK_FULL] || have[LK_SLIDING];
    if ((rc = hf_block_size(h, any_attention ? attention_bytes_per_token(h) : 0, state_max)) != KVRT_OK)
        return rc;

    struct kvrt_spec attn;
    attention_spec(h, &attn);
    uint64_t attn_page;
    if (__builtin_mul_overflow(h->block_size, attention_bytes_per_token(h), &attn_page))
        return model_fail(h->c, KVRT_ERR_OVERFLOW,
                          "one attention page of %llu tokens does not fit in "
                          "64 bits; use a smaller block size",
                          (unsigned long long)h->block_size);
    for (size_t i = 0; i < h->layers; i++)
        if ((rc = add_layer(h, b, i, &attn, state, state_what, attn_page, any_attention)) != KVRT_OK)
            return rc;
    return KVRT_OK;
}

int model_parse_hf(const struct model_ctx *c, const json_t *root, const struct kvrt_model_options *opt,
                   struct kvrt_model *m)
{
    struct hf h = {.c = c, .root = root, .opt = opt, .m = m, .model_type = ""};
    struct model_builder b = {0};
    const char *top_type = "";
    int rc;
    m->format = model_strdup("hf-config");
    if ((rc = model_get_string_opt(c, root, "", "model_type", &top_type)) != KVRT_OK)
        return rc;
    m->architecture = model_strdup(top_type);
    if ((rc = find_text_config(&h)) || (rc = refuse_unsupported(&h)) ||
        (rc = model_get_string_opt(c, h.cfg, h.where, "model_type", &h.model_type)))
        return rc;
    if ((rc = model_get_u64(c, h.cfg, h.where, "num_hidden_layers", 1, KVRT_MODEL_MAX_LAYERS, &h.layers)) ||
        (rc = parse_mla(&h)) || (rc = parse_heads(&h)) || (rc = hf_resolve_dtypes(&h)) || (rc = hf_max_model_len(&h)))
        return rc;
    m->num_q_heads = h.heads;
    h.kind = calloc(h.layers, sizeof(*h.kind));
    if (!h.kind)
        return model_fail(c, KVRT_ERR_NOMEM, "out of memory reading %llu layers", (unsigned long long)h.layers);
    rc = find_kinds(&h);
    if (rc == KVRT_OK)
        rc = build_layers(&h, &b);
    if (rc == KVRT_OK)
        rc = model_group_like_vllm(c, &b, m);
    model_builder_free(&b);
    free(h.kind);
    return rc;
}
