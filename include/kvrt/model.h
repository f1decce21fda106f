/*
 * kvrt — a model's KV cache from its model file, sized as vLLM sizes it.
 *
 * A model is read from a Hugging Face config.json (as published with the
 * model) or a kvrt model file (docs/model-format.md).  Its layers come out
 * in the groups vLLM's hybrid KV-cache allocator makes — one kind of layer
 * per group (full attention, a sliding window of one size, a state), about
 * the same number of layers in each group when kinds are mixed — each layer
 * with its spec, ready for kvrt_placement_create().  Every value the sizing
 * used is listed with where it came from: the config key, a default, an
 * option, or the vLLM rule that set it (docs/models.md cites each rule).
 *
 * Where kvrt does not model a family it refuses the file with one line
 * naming the key and its value (KVRT_ERR_INVALID); it never sizes a model
 * with a rule it knows to be wrong.  Values are named in messages by the
 * vLLM flag that sets them (--kv-cache-dtype, --block-size,
 * --attention-backend).
 */
#ifndef KVRT_MODEL_H
#define KVRT_MODEL_H

#include <kvrt/common.h>
#include <kvrt/dtype.h>
#include <kvrt/layout.h>
#include <kvrt/placement.h>
#include <kvrt/spec.h>

#ifdef __cplusplus
extern "C" {
#endif

/* vLLM's --kv-cache-dtype.  Values are part of the ABI. */
enum kvrt_kv_cache_dtype {
    KVRT_KV_CACHE_AUTO = 0,     /* auto: the model's dtype */
    KVRT_KV_CACHE_BF16 = 1,     /* bfloat16 */
    KVRT_KV_CACHE_FP16 = 2,     /* float16 (vLLM's list has none; sized as two bytes) */
    KVRT_KV_CACHE_FP8 = 3,      /* fp8: fp8_e4m3 on CUDA */
    KVRT_KV_CACHE_FP8_E4M3 = 4, /* fp8_e4m3 */
    KVRT_KV_CACHE_FP8_E5M2 = 5, /* fp8_e5m2 */
};
#define KVRT_NUM_KV_CACHE_DTYPES 6

/* vLLM's --attention-backend.  kvrt models vLLM on a Hopper GPU: the MLA
 * backends decide an MLA model's block size; the others are recorded and
 * change nothing but the hybrid alignment.  Values are part of the ABI. */
enum kvrt_attention_backend {
    KVRT_ATTENTION_DEFAULT = 0, /* vLLM's choice on a Hopper GPU */
    KVRT_ATTENTION_FLASH_ATTN = 1,
    KVRT_ATTENTION_FLASHINFER = 2,
    KVRT_ATTENTION_TRITON_ATTN = 3,
    KVRT_ATTENTION_FLASHMLA = 4,
    KVRT_ATTENTION_FLASHMLA_SPARSE = 5,
    KVRT_ATTENTION_CUTLASS_MLA = 6,    /* Blackwell only: refused */
    KVRT_ATTENTION_FLASHINFER_MLA = 7, /* Blackwell only: refused */
    KVRT_ATTENTION_TRITON_MLA = 8,
    KVRT_ATTENTION_FLASH_ATTN_MLA = 9,
    KVRT_ATTENTION_FLASH_ATTN_MLA_SPARSE = 10,
};
#define KVRT_NUM_ATTENTION_BACKENDS 11

/* How vLLM counts what one request needs of a group's layers
 * (max_memory_usage_bytes of their spec).  Values are part of the ABI. */
enum kvrt_model_usage {
    KVRT_MODEL_USAGE_FULL = 0,    /* every token of the request */
    KVRT_MODEL_USAGE_SLIDING = 1, /* the window plus one batch of new tokens */
    KVRT_MODEL_USAGE_STATE = 2,   /* one block per request */
};

/* The block size vLLM uses unless told otherwise (kvrt/spec.h). */
#define KVRT_MODEL_DEFAULT_BLOCK_SIZE KVRT_DEFAULT_BLOCK_SIZE
/* vLLM's default --max-num-batched-tokens for `vllm serve` on a GPU of
 * 70 GiB or more; it bounds what a sliding-window layer keeps. */
#define KVRT_MODEL_DEFAULT_BATCHED_TOKENS 8192u
/* Bounds that keep a typo (or a hostile file) from asking for absurd tables. */
#define KVRT_MODEL_MAX_LAYERS 65536u
#define KVRT_MODEL_MAX_GROUPS 1024u

struct kvrt_model_options {
    /* vLLM's --kv-cache-dtype (config.json files). */
    enum kvrt_kv_cache_dtype kv_cache_dtype;
    /* vLLM's --attention-backend (config.json files). */
    enum kvrt_attention_backend attention_backend;
    /* Tokens per block (--block-size); 0: the file's, else vLLM's choice.
     * Hybrid attention + state models may raise it (see the settings). */
    uint64_t block_size;
    /* Non-zero: the KV cache's element type is `dtype` instead of
     * kv_cache_dtype (config.json: bf16, fp16, fp8_e4m3 or fp8_e5m2; kvrt
     * model files: the type of every attention and MLA spec). */
    uint32_t dtype_given;
    enum kvrt_dtype dtype;
    /* How messages name the option that gave the cache type; NULL:
     * "--kv-cache-dtype". */
    const char *dtype_option;
    /* Room for fields of later API minors; must be zero, which
     * kvrt_model_options_default() and designated initialisers both give. */
    uint8_t reserved[32];
};

KVRT_API void kvrt_model_options_default(struct kvrt_model_options *opt);

typedef struct kvrt_model kvrt_model;

/**
 * Read a model file: a config.json, a folder holding one, or a kvrt model
 * file.  opt may be NULL (the defaults).
 * @return KVRT_OK and *out (free with kvrt_model_destroy); otherwise a
 *   status, *out NULL, and a one-line message: what is wrong, in which key
 *   of which file, and what is valid.
 */
KVRT_API int kvrt_model_open(const char *path, const struct kvrt_model_options *opt, kvrt_model **out);

/**
 * Read a model from JSON text (`len` bytes, need not be NUL-terminated).
 * `name` names it in messages and as its source (may be NULL: "(model)").
 */
KVRT_API int kvrt_model_parse(const char *json, size_t len, const char *name, const struct kvrt_model_options *opt,
                              kvrt_model **out);

/**
 * A model of one group of `num_layers` layers of one spec, named
 * "<prefix>.0" .. (an engine that knows its layers, or the kvrt tool's
 * flags).  Its format is "spec".
 */
KVRT_API int kvrt_model_from_spec(const struct kvrt_spec *spec, uint64_t num_layers, const char *name,
                                  kvrt_model **out);

KVRT_API void kvrt_model_destroy(kvrt_model *m);

/* One group: its layers share one kind and are placed together. */
struct kvrt_model_group {
    const char *name; /* "full_attention", "sliding_attention", "kda.0", ... */
    const char *what; /* for people: "full attention", "sliding window of 128 tokens", ... */
    uint64_t window;  /* sliding window in tokens; 0 = none */
    enum kvrt_model_usage usage;
    size_t num_layers;
    const struct kvrt_layer_entry *layers;
    uint8_t reserved[32];
};

/* One value the sizing used, and where it came from ("config <key>",
 * "default ...", an option, or the vLLM rule that set it). */
struct kvrt_model_setting {
    const char *name;
    const char *value;
    const char *source;
    uint8_t reserved[16];
};

/* What a model is; every pointer stays valid until kvrt_model_destroy. */
struct kvrt_model_info {
    const char *name;         /* the file name without folders, or the file's "name" */
    const char *source;       /* the file as given */
    const char *format;       /* "hf-config", "kvrt-model" or "spec" */
    const char *architecture; /* model_type of a config.json; "" otherwise */
    uint64_t num_layers;      /* all layers, every group */
    uint64_t num_q_heads;     /* query heads for paged decode; 0 when unknown */
    /* vLLM's derived max_model_len; 0 when the file gives none (source NULL). */
    uint64_t max_model_len;
    const char *max_model_len_source;
    size_t num_groups;
    const struct kvrt_model_group *groups;
    /* The groups as kvrt_placement_create() and
     * kvrt_placement_blocks_for_budget() take them (num_groups entries). */
    const struct kvrt_group *placement_groups;
    size_t num_settings;
    const struct kvrt_model_setting *settings;
    size_t num_notes; /* decisions a reader should know about */
    const char *const *notes;
    uint8_t reserved[64];
};

/** The model's description; NULL for a NULL model. */
KVRT_API const struct kvrt_model_info *kvrt_model_get_info(const kvrt_model *m);

/** 1 when the layers mix head-slot, state or page shapes, 0 otherwise:
 *  kvrt_placement_mixed_shapes of the model's placement groups. */
KVRT_API int kvrt_model_mixed_shapes(const kvrt_model *m);

/* vLLM's capacity figures for a KV-cache budget (_report_kv_cache_config). */
struct kvrt_model_capacity {
    uint64_t num_blocks;      /* budget // bytes of one block of every group */
    uint64_t bytes_per_block; /* a page of every layer of the largest group */
    uint64_t tokens;          /* "GPU KV cache size: N tokens" */
    uint64_t max_model_len;
    uint64_t blocks_per_request; /* a request of max_model_len tokens, all groups */
    double max_concurrency;      /* "Maximum concurrency for T tokens per request" */
    uint64_t request_bytes;      /* check_enough_kv_cache_memory's need */
    uint32_t fits_one_request;   /* 0: vLLM refuses to start */
    uint8_t reserved[36];
};

/**
 * vLLM's figures for `budget` bytes of KV cache, requests of max_model_len
 * tokens and batched_tokens scheduled per step (a sliding window keeps
 * window - 1 + batched_tokens).
 */
KVRT_API int kvrt_model_vllm_capacity(const kvrt_model *m, uint64_t budget, uint64_t max_model_len,
                                      uint64_t batched_tokens, struct kvrt_model_capacity *out);

/** "auto", "bf16", ...: the option's value names; NULL out of range. */
KVRT_API const char *kvrt_kv_cache_dtype_name(enum kvrt_kv_cache_dtype d);
/** Parse a --kv-cache-dtype value (vLLM's names and kvrt's short ones);
 *  KVRT_ERR_INVALID with the valid names otherwise. */
KVRT_API int kvrt_kv_cache_dtype_parse(const char *text, enum kvrt_kv_cache_dtype *out);
/** Every --kv-cache-dtype value in enum order, each with vLLM's spelling
 *  when it has another ("auto, bf16 (bfloat16), ..."), for messages and
 *  help; rendered from the table the parser reads. */
KVRT_API const char *kvrt_kv_cache_dtype_valid_names(void);
/** "FLASH_ATTN", ...; "default" for KVRT_ATTENTION_DEFAULT; NULL out of range. */
KVRT_API const char *kvrt_attention_backend_name(enum kvrt_attention_backend b);
/** Parse an --attention-backend name; KVRT_ERR_INVALID with the valid names
 *  otherwise. */
KVRT_API int kvrt_attention_backend_parse(const char *text, enum kvrt_attention_backend *out);
/**
 * The --attention-backend values as one line of text for help and messages,
 * rendered from the table that sizes them: the backends a Hopper GPU runs
 * for a model without MLA, for MLA and for DeepSeek-V3.2's sparse MLA, in
 * vLLM's order, each MLA backend with the block size vLLM takes for its
 * default of 16 and vLLM's default marked; then those refused (Blackwell
 * only).
 */
KVRT_API const char *kvrt_attention_backend_choices(void);

/* A model's plan (kvrt plan --model --json): where the request comes from. */
struct kvrt_model_plan_request {
    enum kvrt_layout layout;
    const char *layout_source;  /* said in the output ("default", an option, ...); NULL: "default" */
    uint64_t num_blocks;        /* ignored when budget_bytes is not 0 */
    uint64_t kernel_block_size; /* 0: no splitting */
    uint64_t budget_bytes;      /* non-zero: as many blocks as fit, and vLLM's figures */
    uint64_t max_model_len;     /* 0: the model's */
    const char *max_model_len_source;
    uint64_t batched_tokens; /* 0: KVRT_MODEL_DEFAULT_BATCHED_TOKENS */
    const char *batched_tokens_source;
    uint8_t reserved[32];
};

KVRT_API void kvrt_model_plan_request_default(struct kvrt_model_plan_request *req);

/**
 * The plan of a model as one JSON object, the one `kvrt plan --model FILE
 * --json` prints: the model (settings, notes, groups with their specs),
 * the layout, blocks and bytes, each group's bytes, the placement's sets,
 * and with a budget vLLM's figures.  *out is NUL-terminated; free it with
 * kvrt_free().
 */
KVRT_API int kvrt_model_plan_json(const kvrt_model *m, const struct kvrt_model_plan_request *req, char **out);

/** The model alone as JSON (the "model" member of the plan); free *out
 *  with kvrt_free(). */
KVRT_API int kvrt_model_json(const kvrt_model *m, char **out);

#ifdef __cplusplus
}
#endif
#endif
