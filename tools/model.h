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
#define KVRT_MODEL_DEFAULT_BLOCK_SIZE 16u
/* Bounds that keep a typo (or a fuzzer) from asking for absurd tables. */
#define KVRT_MODEL_MAX_LAYERS 65536u
#define KVRT_MODEL_MAX_GROUPS 1024u
#define KVRT_MODEL_MAX_NOTES 8u

struct kvrt_model_group {
    char *name;          /* "full_attention", "sliding_attention", "linear_attention.1", ... */
    char *what;          /* for people: "full attention", "sliding window of 128 tokens", ... */
    uint64_t window;     /* sliding window / chunk in tokens; 0 = none */
    size_t num_layers;
    struct kvrt_layer_entry *layers; /* names owned by the model */
};

struct kvrt_model {
    char *name;          /* file name without directories, or the "name" field */
    char *source;        /* the file as given */
    char *format;        /* "hf-config", "kvrt-model" or "flags" */
    char *architecture;  /* model_type of a config.json; "" otherwise */
    uint64_t num_layers; /* all layers, every group */
    uint64_t num_q_heads; /* query heads for paged decode; 0 when unknown */
    size_t num_groups;
    struct kvrt_model_group *groups;
    size_t num_notes;    /* decisions a reader should know about */
    char *notes[KVRT_MODEL_MAX_NOTES];
};

struct kvrt_model_options {
    /* Replaces the element type of every attention and MLA spec (the KV
     * cache type; state layers keep the model's type, as in vLLM). */
    bool dtype_given;
    enum kvrt_dtype dtype;
    /* Tokens per block; 0 = the file's, else KVRT_MODEL_DEFAULT_BLOCK_SIZE.
     * Hybrid attention + state models may raise it (see the notes). */
    uint64_t block_size;
};

void kvrt_model_options_default(struct kvrt_model_options *opt);

/**
 * Parse a config.json or a kvrt model file held in memory (`len` bytes, need
 * not be NUL-terminated).  `filename` is only used in messages.
 * @return KVRT_OK and *out (free with kvrt_model_free); otherwise a kvrt
 *   status and a one-line message in err: what is wrong, in which field of
 *   which file, and what is valid.
 */
int kvrt_model_parse_buffer(const char *json, size_t len, const char *filename,
                            const struct kvrt_model_options *opt, struct kvrt_model **out,
                            char *err, size_t err_size);

/** Read `path` (a file, or a directory holding config.json) and parse it. */
int kvrt_model_load(const char *path, const struct kvrt_model_options *opt,
                    struct kvrt_model **out, char *err, size_t err_size);

void kvrt_model_free(struct kvrt_model *m);

/** The groups as kvrt_placement_create() takes them (free with free()). */
struct kvrt_group *kvrt_model_placement_groups(const struct kvrt_model *m);

/** true when the specs mix head-slot, state or page shapes (docs/design.md §7, step 3). */
bool kvrt_model_mixed_shapes(const struct kvrt_model *m);

#endif
