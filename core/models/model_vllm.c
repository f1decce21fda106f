/*
 * vLLM's engine-level choices that size a config.json's cache beyond its
 * layers (docs/models.md cites each rule): the block size (the platform's
 * MLA backend rule and the hybrid attention + state rule), max_model_len,
 * and the capacity figures vLLM logs for a KV-cache budget.
 *
 * Layer 4 of libkvrt (core/models/; CONTRIBUTING.md, "Where things live").
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <kvrt/common.h>
#include <kvrt/spec.h>

#include "error.h"
#include "model_internal.h"

static const char *const cache_names[KVRT_NUM_KV_CACHE_DTYPES] = {
    "auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2",
};

const char *kvrt_kv_cache_dtype_name(enum kvrt_kv_cache_dtype d)
{
    return (unsigned)d < KVRT_NUM_KV_CACHE_DTYPES ? cache_names[d] : NULL;
}

/* vLLM's spellings of kvrt's short names. */
static const struct {
    const char *name;
    enum kvrt_kv_cache_dtype d;
} cache_aliases[] = {{"bfloat16", KVRT_KV_CACHE_BF16}, {"float16", KVRT_KV_CACHE_FP16}, {"half", KVRT_KV_CACHE_FP16}};

/* The lists in messages and help are written once from the tables, so a
 * new type or backend can never be missing from them. */
static char cache_valid[160];
static char backend_choices[768];
static pthread_once_t texts_once = PTHREAD_ONCE_INIT;
static void write_texts(void);

const char *kvrt_kv_cache_dtype_valid_names(void)
{
    pthread_once(&texts_once, write_texts);
    return cache_valid;
}

int kvrt_kv_cache_dtype_parse(const char *text, enum kvrt_kv_cache_dtype *out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_kv_cache_dtype_parse: out is NULL");
    for (int i = 0; text && i < KVRT_NUM_KV_CACHE_DTYPES; i++)
        if (strcmp(text, cache_names[i]) == 0) {
            *out = (enum kvrt_kv_cache_dtype)i;
            return KVRT_OK;
        }
    for (size_t i = 0; text && i < sizeof(cache_aliases) / sizeof(cache_aliases[0]); i++)
        if (strcmp(text, cache_aliases[i].name) == 0) {
            *out = cache_aliases[i].d;
            return KVRT_OK;
        }
    return kvrt_fail(KVRT_ERR_INVALID, "\"%s\" is not a KV-cache type: valid types are %s", text ? text : "(null)",
                     kvrt_kv_cache_dtype_valid_names());
}

/* The KV-cache types a backend lists (supported_kv_cache_dtypes), as vLLM
 * spells them. */
enum {
    CD_AUTO = 1u << 0,
    CD_FLOAT16 = 1u << 1,
    CD_BFLOAT16 = 1u << 2,
    CD_FP8 = 1u << 3,
    CD_FP8_E4M3 = 1u << 4,
    CD_FP8_E5M2 = 1u << 5,
    CD_FP8_DS_MLA = 1u << 6,
    CD_ALL = (1u << 7) - 1,
};
static const char *const cd_names[] = {"auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla"};

/*
 * What vLLM's attention backends declare that sizes a cache (docs/models.md
 * names the file and commit of each): MLA or not, sparse (DeepSeek-V3.2's
 * index_topk) or not, whether a Hopper GPU runs them
 * (supports_compute_capability), the KV-cache types they take and their
 * kernel block sizes (get_supported_kernel_block_sizes: a block must be a
 * multiple of one; 1 is any).  kvrt models vLLM on a Hopper GPU; the
 * backends that are not MLA are shown and change nothing but the hybrid
 * alignment, for which all of them take multiples of 16.
 */
struct attention_backend {
    const char *name;
    bool mla, sparse, hopper;
    uint64_t kernel[2]; /* a 0 ends the list */
    unsigned caches;
};

static const struct attention_backend backends[KVRT_NUM_ATTENTION_BACKENDS] = {
    [KVRT_ATTENTION_DEFAULT] = {"default", false, false, true, {16, 0}, CD_ALL},
    [KVRT_ATTENTION_FLASH_ATTN] = {"FLASH_ATTN", false, false, true, {16, 0}, CD_ALL},
    [KVRT_ATTENTION_FLASHINFER] = {"FLASHINFER", false, false, true, {16, 0}, CD_ALL},
    [KVRT_ATTENTION_TRITON_ATTN] = {"TRITON_ATTN", false, false, true, {16, 0}, CD_ALL},
    [KVRT_ATTENTION_FLASHMLA] = {"FLASHMLA", true, false, true, {64, 0}, CD_AUTO | CD_FP8 | CD_FP8_E4M3},
    [KVRT_ATTENTION_FLASHMLA_SPARSE] =
        {"FLASHMLA_SPARSE", true, true, true, {64, 0}, CD_AUTO | CD_BFLOAT16 | CD_FP8_DS_MLA},
    [KVRT_ATTENTION_CUTLASS_MLA] =
        {"CUTLASS_MLA", true, false, false, {128, 0}, CD_AUTO | CD_FLOAT16 | CD_BFLOAT16 | CD_FP8 | CD_FP8_E4M3},
    [KVRT_ATTENTION_FLASHINFER_MLA] =
        {"FLASHINFER_MLA", true, false, false, {32, 64}, CD_AUTO | CD_FLOAT16 | CD_BFLOAT16 | CD_FP8 | CD_FP8_E4M3},
    [KVRT_ATTENTION_TRITON_MLA] =
        {"TRITON_MLA", true, false, true, {1, 0}, CD_AUTO | CD_BFLOAT16 | CD_FP8 | CD_FP8_E4M3},
    [KVRT_ATTENTION_FLASH_ATTN_MLA] =
        {"FLASH_ATTN_MLA", true, false, true, {16, 0}, CD_AUTO | CD_FLOAT16 | CD_BFLOAT16},
    [KVRT_ATTENTION_FLASH_ATTN_MLA_SPARSE] =
        {"FLASH_ATTN_MLA_SPARSE", true, true, true, {64, 0}, CD_AUTO | CD_FLOAT16 | CD_BFLOAT16},
};

/* vLLM's first backend on a Hopper GPU for a model without MLA
 * (_get_backend_priorities). */
static const enum kvrt_attention_backend dense_default = KVRT_ATTENTION_FLASH_ATTN;

/* _get_backend_priorities (vllm/platforms/cuda.py): the MLA backends in
 * vLLM's order on a GPU that is not a Blackwell. */
static const enum kvrt_attention_backend mla_priority[] = {
    KVRT_ATTENTION_FLASH_ATTN_MLA,        KVRT_ATTENTION_FLASHMLA,
    KVRT_ATTENTION_FLASHINFER_MLA,        KVRT_ATTENTION_TRITON_MLA,
    KVRT_ATTENTION_FLASH_ATTN_MLA_SPARSE, KVRT_ATTENTION_FLASHMLA_SPARSE,
};

static const size_t num_mla = sizeof(mla_priority) / sizeof(mla_priority[0]);

/* The first MLA backend of vLLM's order that a Hopper GPU runs for a
 * (sparse or dense) model and that takes `cache`; num_mla when none does. */
static size_t first_mla(bool sparse, unsigned cache)
{
    size_t i = 0;
    for (; i < num_mla; i++) {
        const struct attention_backend *b = &backends[mla_priority[i]];
        if (b->hopper && b->sparse == sparse && (b->caches & cache))
            break;
    }
    return i;
}

const char *kvrt_attention_backend_name(enum kvrt_attention_backend b)
{
    return (unsigned)b < KVRT_NUM_ATTENTION_BACKENDS ? backends[b].name : NULL;
}

int kvrt_attention_backend_parse(const char *text, enum kvrt_attention_backend *out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_attention_backend_parse: out is NULL");
    char valid[256];
    size_t used = 0;
    valid[0] = '\0';
    for (int i = 1; i < KVRT_NUM_ATTENTION_BACKENDS; i++) {
        if (text && strcmp(text, backends[i].name) == 0) {
            *out = (enum kvrt_attention_backend)i;
            return KVRT_OK;
        }
        if (used < sizeof(valid))
            used += (size_t)snprintf(valid + used, sizeof(valid) - used, "%s%s", i > 1 ? ", " : "", backends[i].name);
    }
    return kvrt_fail(KVRT_ERR_INVALID, "\"%s\" is not a backend kvrt knows: valid backends are %s",
                     text ? text : "(null)", valid);
}

static uint64_t cdiv(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* The cache type a backend is checked against, once DeepSeek-V3.2's rule
 * has run (its bfloat16 is auto, its fp8 is fp8_ds_mla). */
static unsigned cache_bit(const struct hf *h)
{
    if (h->fp8_ds_mla)
        return CD_FP8_DS_MLA;
    switch (h->cache) {
    case KVRT_KV_CACHE_BF16: return h->sparse ? CD_AUTO : CD_BFLOAT16;
    case KVRT_KV_CACHE_FP16: return CD_FLOAT16;
    case KVRT_KV_CACHE_FP8: return CD_FP8;
    case KVRT_KV_CACHE_FP8_E4M3: return CD_FP8_E4M3;
    case KVRT_KV_CACHE_FP8_E5M2: return CD_FP8_E5M2;
    default: return CD_AUTO;
    }
}

static const char *cache_name(unsigned bit)
{
    for (size_t i = 0; i < sizeof(cd_names) / sizeof(cd_names[0]); i++)
        if (bit == 1u << i)
            return cd_names[i];
    return "?";
}

/* "auto, fp8, fp8_e4m3" */
static void list_caches(unsigned caches, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof(cd_names) / sizeof(cd_names[0]) && used < size; i++)
        if (caches & (1u << i))
            used += (size_t)snprintf(out + used, size - used, "%s%s", used ? ", " : "", cd_names[i]);
}

static bool kernel_takes(const struct attention_backend *b, uint64_t block)
{
    for (size_t i = 0; i < 2 && b->kernel[i]; i++)
        if (block % b->kernel[i] == 0)
            return true;
    return false;
}

static uint64_t kernel_min(const struct attention_backend *b)
{
    return b->kernel[1] && b->kernel[1] < b->kernel[0] ? b->kernel[1] : b->kernel[0];
}

/* get_preferred_block_size(16): vLLM's default when the kernels take it,
 * else their smallest block size. */
static uint64_t preferred_block(const struct attention_backend *b)
{
    return kernel_takes(b, KVRT_MODEL_DEFAULT_BLOCK_SIZE) ? KVRT_MODEL_DEFAULT_BLOCK_SIZE : kernel_min(b);
}

/* The backends a Hopper GPU runs for a model with or without MLA (and, for
 * MLA, sparse or dense), in vLLM's order; with `blocks`, each MLA backend
 * with the block size vLLM takes for its default of 16, and the default
 * (for kv_cache_dtype auto) marked. */
static void list_hopper(bool mla, bool sparse, bool blocks, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t k = 0; k < (mla ? num_mla : (size_t)KVRT_NUM_ATTENTION_BACKENDS) && used < size; k++) {
        const enum kvrt_attention_backend id = mla ? mla_priority[k] : (enum kvrt_attention_backend)k;
        const struct attention_backend *b = &backends[id];
        if (id == KVRT_ATTENTION_DEFAULT || !b->hopper || b->mla != mla || (mla && b->sparse != sparse))
            continue;
        const bool is_default = mla ? k == first_mla(sparse, CD_AUTO) : id == dense_default;
        used += (size_t)snprintf(out + used, size - used, "%s%s", used ? ", " : "", b->name);
        if (used < size && blocks && mla)
            used += (size_t)snprintf(out + used, size - used, " (%s%llu)", is_default ? "default, " : "",
                                     (unsigned long long)preferred_block(b));
        else if (used < size && blocks && is_default)
            used += (size_t)snprintf(out + used, size - used, " (default)");
    }
}

static void write_texts(void)
{
    size_t used = 0;
    for (int i = 0; i < KVRT_NUM_KV_CACHE_DTYPES && used < sizeof(cache_valid); i++) {
        used += (size_t)snprintf(cache_valid + used, sizeof(cache_valid) - used, "%s%s", i ? ", " : "", cache_names[i]);
        size_t spellings = 0;
        for (size_t a = 0; a < sizeof(cache_aliases) / sizeof(cache_aliases[0]) && used < sizeof(cache_valid); a++)
            if (cache_aliases[a].d == (enum kvrt_kv_cache_dtype)i)
                used += (size_t)snprintf(cache_valid + used, sizeof(cache_valid) - used, "%s%s",
                                         spellings++ ? ", " : " (", cache_aliases[a].name);
        if (spellings && used < sizeof(cache_valid))
            used += (size_t)snprintf(cache_valid + used, sizeof(cache_valid) - used, ")");
    }
    char dense[128], mla[160], sparse[160], refused[128];
    list_hopper(false, false, true, dense, sizeof(dense));
    list_hopper(true, false, true, mla, sizeof(mla));
    list_hopper(true, true, true, sparse, sizeof(sparse));
    used = 0;
    refused[0] = '\0';
    for (int i = 1; i < KVRT_NUM_ATTENTION_BACKENDS && used < sizeof(refused); i++)
        if (!backends[i].hopper)
            used +=
                (size_t)snprintf(refused + used, sizeof(refused) - used, "%s%s", used ? ", " : "", backends[i].name);
    snprintf(backend_choices, sizeof(backend_choices),
             "%s; for MLA %s; for DeepSeek-V3.2's sparse MLA %s; refused (Blackwell only): %s", dense, mla, sparse,
             refused);
}

const char *kvrt_attention_backend_choices(void)
{
    pthread_once(&texts_once, write_texts);
    return backend_choices;
}

/* The flag that gave the KV-cache type, for messages. */
static const char *cache_flag(const struct hf *h)
{
    return h->opt->dtype_option ? h->opt->dtype_option : "--kv-cache-dtype";
}

/* vLLM's default: the first MLA backend of _get_backend_priorities that
 * validate_configuration accepts on a Hopper GPU (the block size plays no
 * part: the CUDA selector leaves it out). */
static int default_mla_backend(struct hf *h, enum kvrt_attention_backend *out)
{
    const unsigned cache = cache_bit(h);
    const size_t first = first_mla(h->sparse, cache);
    if (first < num_mla) {
        *out = mla_priority[first];
        model_setting(h->m, "attention_backend", backends[*out].name,
                      "default: vLLM's first %sMLA backend on a Hopper GPU (compute capability 9.x) "
                      "that takes kv_cache_dtype %s (_get_backend_priorities)",
                      h->sparse ? "sparse " : "", cache_name(cache));
        return KVRT_OK;
    }
    char why[512];
    size_t used = 0;
    why[0] = '\0';
    for (size_t i = 0; i < num_mla; i++) {
        const struct attention_backend *b = &backends[mla_priority[i]];
        if (b->sparse != h->sparse || !b->hopper)
            continue;
        char takes[96];
        list_caches(b->caches, takes, sizeof(takes));
        if (used < sizeof(why))
            used += (size_t)snprintf(why + used, sizeof(why) - used, "%s%s takes %s", used ? "; " : "", b->name, takes);
    }
    return model_fail(h->c, KVRT_ERR_INVALID,
                      "no %sMLA backend vLLM runs on a Hopper GPU takes kv_cache_dtype %s (%s %s): %s; give "
                      "another %s",
                      h->sparse ? "sparse " : "", cache_name(cache), cache_flag(h), kvrt_kv_cache_dtype_name(h->cache),
                      why, cache_flag(h));
}

/* The backend: the flag's, else what vLLM picks on a Hopper GPU. */
static int choose_backend(struct hf *h, enum kvrt_attention_backend *out)
{
    const enum kvrt_attention_backend given = h->opt->attention_backend;
    char valid[128], dense[128];
    list_hopper(true, h->sparse, false, valid, sizeof(valid));
    list_hopper(false, false, false, dense, sizeof(dense));
    if (given == KVRT_ATTENTION_DEFAULT) {
        if (h->mla)
            return default_mla_backend(h, out);
        *out = dense_default;
        model_setting(h->m, "attention_backend", backends[*out].name,
                      "default: vLLM's first backend on a Hopper GPU (compute capability 9.x; "
                      "_get_backend_priorities)");
        return KVRT_OK;
    }
    const struct attention_backend *b = &backends[given];
    *out = given;
    if (h->mla && !b->mla)
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "--attention-backend %s is not an MLA backend, and this model is MLA "
                          "(\"%skv_lora_rank\"); valid on a Hopper GPU: %s",
                          b->name, h->where, valid);
    if (!h->mla && b->mla)
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "--attention-backend %s is an MLA backend, and this model has no "
                          "\"%skv_lora_rank\"; valid: %s",
                          b->name, h->where, dense);
    if (b->mla && !b->hopper)
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "--attention-backend %s runs only on Blackwell GPUs (compute capability 10.x), "
                          "and kvrt sizes vLLM on a Hopper GPU (9.x); valid there: %s",
                          b->name, valid);
    if (h->sparse && !b->sparse)
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "--attention-backend %s cannot run DeepSeek-V3.2's sparse attention "
                          "(\"%sindex_topk\"); valid: %s",
                          b->name, h->where, valid);
    if (!h->sparse && b->sparse)
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "--attention-backend %s needs a sparse model (\"index_topk\"); valid: %s", b->name, valid);
    const unsigned cache = cache_bit(h);
    if (b->mla && !(b->caches & cache)) {
        char takes[96];
        list_caches(b->caches, takes, sizeof(takes));
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "--attention-backend %s does not take kv_cache_dtype %s (%s %s); it takes %s", b->name,
                          cache_name(cache), cache_flag(h), kvrt_kv_cache_dtype_name(h->cache), takes);
    }
    model_setting(h->m, "attention_backend", b->name, "--attention-backend");
    return KVRT_OK;
}

/*
 * Platform.update_block_size_for_backend (vllm/platforms/interface.py):
 * --block-size, else the backend's preferred block size; then, for a
 * hybrid model, Platform._align_hybrid_block_size.  An MLA backend's
 * kernels must take the result.
 */
int hf_block_size(struct hf *h, uint64_t per_token, uint64_t state_max)
{
    enum kvrt_attention_backend id = KVRT_ATTENTION_DEFAULT;
    int rc = choose_backend(h, &id);
    if (rc != KVRT_OK)
        return rc;
    const struct attention_backend *b = &backends[id];
    const uint64_t user = h->opt->block_size;
    const uint64_t preferred = preferred_block(b);
    uint64_t bs = user ? user : preferred;
    char source[400];
    if (user)
        snprintf(source, sizeof(source), "--block-size");
    else if (preferred == KVRT_MODEL_DEFAULT_BLOCK_SIZE)
        snprintf(source, sizeof(source), "default (CacheConfig.block_size 16)");
    else
        snprintf(source, sizeof(source),
                 "%s's kernels take only multiples of %llu tokens, so vLLM takes %llu for its default of 16 "
                 "(get_preferred_block_size)",
                 b->name, (unsigned long long)kernel_min(b), (unsigned long long)preferred);
    if (state_max && per_token) {
        /* Without prefix caching (vLLM's default for hybrid models): the
         * smallest multiple of the alignment whose attention page holds
         * one state page, the alignment being the larger of the backend's
         * smallest kernel block size and the block size so far. */
        const uint64_t align = kernel_min(b) > bs ? kernel_min(b) : bs;
        uint64_t step, need;
        if (__builtin_mul_overflow(align, per_token, &step) ||
            __builtin_mul_overflow(align, cdiv(state_max, step), &need))
            return model_fail(h->c, KVRT_ERR_OVERFLOW,
                              "--block-size %llu: an attention page of that many tokens (%llu bytes each) "
                              "does not fit in 64 bits; give a smaller block size",
                              (unsigned long long)bs, (unsigned long long)per_token);
        if (bs < need) {
            char was[64];
            snprintf(was, sizeof(was), "%llu%s", (unsigned long long)bs, user ? " (--block-size)" : "");
            bs = need;
            snprintf(source, sizeof(source),
                     "vLLM's hybrid rule: the smallest multiple of %llu tokens (the larger of %s's smallest "
                     "kernel block size %llu and the block size %s) whose attention page (%llu bytes a token) "
                     "holds a state page of %llu bytes (_align_hybrid_block_size)",
                     (unsigned long long)align, b->name, (unsigned long long)kernel_min(b), was,
                     (unsigned long long)per_token, (unsigned long long)state_max);
        }
    }
    if (b->mla && !kernel_takes(b, bs)) {
        char kernels[48];
        if (b->kernel[1])
            snprintf(kernels, sizeof(kernels), "%llu or %llu", (unsigned long long)b->kernel[0],
                     (unsigned long long)b->kernel[1]);
        else
            snprintf(kernels, sizeof(kernels), "%llu", (unsigned long long)b->kernel[0]);
        char from[96];
        if (bs == user)
            snprintf(from, sizeof(from), "--block-size");
        else
            snprintf(from, sizeof(from), "vLLM's hybrid rule from --block-size %llu", (unsigned long long)user);
        return model_fail(h->c, KVRT_ERR_INVALID,
                          "blocks of %llu tokens (%s): %s's kernels take only multiples of %s tokens "
                          "(get_supported_kernel_block_sizes), and vLLM does not round a block size it was given",
                          (unsigned long long)bs, from, b->name, kernels);
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
static int layer_usage(const struct model_group *g, const struct kvrt_spec *s, uint64_t len, uint64_t batched,
                       uint64_t *out)
{
    struct kvrt_spec_info in;
    if (kvrt_spec_derive(s, 0, &in) != KVRT_OK)
        return KVRT_ERR_INVALID;
    uint64_t blocks;
    switch (g->usage) {
    case KVRT_MODEL_USAGE_STATE: blocks = 1; break;
    case KVRT_MODEL_USAGE_SLIDING: {
        const uint64_t keep = g->window - 1 + batched;
        blocks = cdiv(keep < len ? keep : len, s->block_size) + 1;
        break;
    }
    default: blocks = cdiv(len, s->block_size); break;
    }
    return __builtin_mul_overflow(blocks, in.page_size, out) ? KVRT_ERR_OVERFLOW : KVRT_OK;
}

int kvrt_model_vllm_capacity(const kvrt_model *m, uint64_t budget, uint64_t max_model_len, uint64_t batched_tokens,
                             struct kvrt_model_capacity *out)
{
    if (!m || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_model_vllm_capacity: %s is NULL", m ? "out" : "the model");
    struct model_ctx c = {m->name};
    memset(out, 0, sizeof(*out));
    out->max_model_len = max_model_len;
    if (m->num_groups == 0 || max_model_len == 0)
        return model_fail(&c, KVRT_ERR_INVALID, "no groups or no max_model_len to size");
    /* One block: a page of every layer of the largest group (vLLM keeps
     * that many tensors, each shared by one layer of every group). */
    uint64_t per_block = 0, page0 = 0, need = 0, request_need = 0, min_bs = UINT64_MAX;
    size_t largest = 0;
    for (size_t g = 0; g < m->num_groups; g++) {
        const struct model_group *grp = &m->groups[g];
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
    kvrt_clear_error();
    return KVRT_OK;
}
