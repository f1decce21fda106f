/*
 * A model's KV cache as groups of named layers with their specs, read from a
 * Hugging Face config.json or a kvrt model file (docs/model-format.md).
 *
 * Layers are grouped the way vLLM's hybrid KV-cache allocator groups them:
 * one kind of layer per group (full attention, sliding window of one size,
 * state), and when kinds are mixed every group gets about the same number of
 * layers, because group g's layer i shares its memory with every other
 * group's layer i (kvrt places groups overlaid from offset 0).
 *
 * Nothing here prints or exits: every failure returns a kvrt status code and
 * a one-line message, so a fuzzer can drive kvrt_model_parse_buffer().
 */
#ifndef KVRT_TOOLS_MODEL_H
#define KVRT_TOOLS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <kvrt/dtype.h>
#include <kvrt/placement.h>

/* The block size vLLM uses unless told otherwise. */
#define KVRT_MODEL_DEFAULT_BLOCK_SIZE KVRT_DEFAULT_BLOCK_SIZE
/* vLLM's default --max-num-batched-tokens for `vllm serve` on a GPU of 70 GiB
 * or more; it bounds what a sliding-window layer keeps (docs/models.md). */
#define KVRT_MODEL_DEFAULT_BATCHED_TOKENS 8192u
/* Bounds that keep a typo (or a fuzzer) from asking for absurd tables. */
#define KVRT_MODEL_MAX_LAYERS 65536u
#define KVRT_MODEL_MAX_GROUPS 1024u
#define KVRT_MODEL_MAX_NOTES 8u
#define KVRT_MODEL_MAX_SETTINGS 12u

/* How vLLM's allocator treats a group's layers when it counts what one
 * request needs (max_memory_usage_bytes of its KV-cache spec). */
enum kvrt_model_usage {
    KVRT_USAGE_FULL,    /* every token of the request */
    KVRT_USAGE_SLIDING, /* the window plus one batch of new tokens */
    KVRT_USAGE_STATE,   /* one block per request */
};

/* The attention backends whose choice changes vLLM's block size. */
enum kvrt_model_backend {
    KVRT_BACKEND_DEFAULT = 0, /* vLLM's choice on a Hopper GPU */
    KVRT_BACKEND_FLASH_ATTN,
    KVRT_BACKEND_FLASHINFER,
    KVRT_BACKEND_TRITON_ATTN,
    KVRT_BACKEND_FLASHMLA,
    KVRT_BACKEND_FLASHMLA_SPARSE,
    KVRT_BACKEND_CUTLASS_MLA,
    KVRT_BACKEND_FLASHINFER_MLA,
    KVRT_BACKEND_TRITON_MLA,
    KVRT_NUM_BACKENDS
};

/* The values of --kv-cache-dtype (vLLM's spelling in the comments). */
enum kvrt_model_cache_dtype {
    KVRT_CACHE_AUTO = 0, /* auto: the model's dtype */
    KVRT_CACHE_BF16,     /* bfloat16 */
    KVRT_CACHE_FP16,     /* float16 (kvrt accepts it; vLLM's list has no float16) */
    KVRT_CACHE_FP8,      /* fp8 = fp8_e4m3 on CUDA */
    KVRT_CACHE_FP8_E4M3,
    KVRT_CACHE_FP8_E5M2,
    KVRT_NUM_CACHE_DTYPES
};

/* One value the sizing used, and where it came from: "config <key>",
 * "default ...", "--flag", or the vLLM rule that set it. */
struct kvrt_model_setting {
    char *name;
    char *value;
    char *source;
};

struct kvrt_model_group {
    char *name;      /* "full_attention", "sliding_attention", "linear_attention.1", ... */
    char *what;      /* for people: "full attention", "sliding window of 128 tokens", ... */
    uint64_t window; /* sliding window / chunk in tokens; 0 = none */
    enum kvrt_model_usage usage;
    size_t num_layers;
    struct kvrt_layer_entry *layers; /* names owned by the model */
};

struct kvrt_model {
    char *name;           /* file name without directories, or the "name" field */
    char *source;         /* the file as given */
    char *format;         /* "hf-config", "kvrt-model" or "flags" */
    char *architecture;   /* model_type of a config.json; "" otherwise */
    uint64_t num_layers;  /* all layers, every group */
    uint64_t num_q_heads; /* query heads for paged decode; 0 when unknown */
    size_t num_groups;
    struct kvrt_model_group *groups;
    size_t num_notes; /* decisions a reader should know about */
    char *notes[KVRT_MODEL_MAX_NOTES];
    size_t num_settings;
    struct kvrt_model_setting settings[KVRT_MODEL_MAX_SETTINGS];
    /* vLLM's derived max_model_len (0: the file does not give one). */
    uint64_t max_model_len;
    char *max_model_len_source;
};

struct kvrt_model_options {
    /* Replaces the element type of every attention and MLA spec (the KV
     * cache type; state layers keep the model's type, as in vLLM). */
    bool dtype_given;
    enum kvrt_dtype dtype;
    /* --kv-cache-dtype as vLLM reads it (config.json files; dtype_given
     * takes precedence).  `dtype_flag` names the flag in the output. */
    enum kvrt_model_cache_dtype cache_dtype;
    const char *dtype_flag;
    /* Tokens per block; 0 = the file's, else KVRT_MODEL_DEFAULT_BLOCK_SIZE.
     * Hybrid attention + state models and MLA backends may raise it (see
     * the settings). */
    uint64_t block_size;
    enum kvrt_model_backend backend;
};

/* vLLM's capacity figures for a KV-cache budget (_report_kv_cache_config). */
struct kvrt_model_capacity {
    uint64_t num_blocks; /* available_memory // bytes of one block of every group */
    uint64_t bytes_per_block;
    uint64_t tokens; /* "GPU KV cache size: N tokens" */
    uint64_t max_model_len;
    uint64_t blocks_per_request; /* a request of max_model_len tokens, all groups */
    double max_concurrency;      /* "Maximum concurrency for T tokens per request" */
    uint64_t request_bytes;      /* check_enough_kv_cache_memory's need */
    bool fits_one_request;       /* false: vLLM refuses to start */
};

/**
 * vLLM's figures for `budget` bytes of KV cache, requests of `max_model_len`
 * tokens and `batched_tokens` scheduled per step (sliding windows keep
 * window - 1 + batched_tokens).  Returns a kvrt status and a message.
 */
int kvrt_model_vllm_capacity(const struct kvrt_model *m, uint64_t budget, uint64_t max_model_len,
                             uint64_t batched_tokens, struct kvrt_model_capacity *out, char *err, size_t err_size);

/* "auto", "bf16", ...: the flag's value names; NULL when out of range. */
const char *kvrt_model_cache_dtype_name(enum kvrt_model_cache_dtype d);
/* Parse a --kv-cache-dtype value (vLLM's names and kvrt's short ones). */
bool kvrt_model_cache_dtype_parse(const char *text, enum kvrt_model_cache_dtype *out);
const char *kvrt_model_backend_name(enum kvrt_model_backend b);
bool kvrt_model_backend_parse(const char *text, enum kvrt_model_backend *out);

void kvrt_model_options_default(struct kvrt_model_options *opt);

/**
 * Parse a config.json or a kvrt model file held in memory (`len` bytes, need
 * not be NUL-terminated).  `filename` is only used in messages.
 * @return KVRT_OK and *out (free with kvrt_model_free); otherwise a kvrt
 *   status and a one-line message in err: what is wrong, in which field of
 *   which file, and what is valid.
 */
int kvrt_model_parse_buffer(const char *json, size_t len, const char *filename, const struct kvrt_model_options *opt,
                            struct kvrt_model **out, char *err, size_t err_size);

/** Read `path` (a file, or a directory holding config.json) and parse it. */
int kvrt_model_load(const char *path, const struct kvrt_model_options *opt, struct kvrt_model **out, char *err,
                    size_t err_size);

void kvrt_model_free(struct kvrt_model *m);

/** The groups as kvrt_placement_create() takes them (free with free()). */
struct kvrt_group *kvrt_model_placement_groups(const struct kvrt_model *m);

/** true when the specs mix shapes: libkvrt's kvrt_placement_mixed_shapes on the model's groups. */
bool kvrt_model_mixed_shapes(const struct kvrt_model *m);

#endif
