/*
 * The model options shared by plan, run, draw and explain: a model file
 * (--model) or one group of same-shaped layers from flags, and the number
 * of blocks (--blocks, or --memory through the placement's budget search).
 */
#ifndef KVRT_TOOLS_CLI_MODEL_H
#define KVRT_TOOLS_CLI_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include <kvrt/layout.h>
#include <kvrt/spec.h>

#include "cli.h"
#include "model.h"

/* Option ids; a command's own ids stay below CLI_MODEL_OPT_FIRST. */
enum cli_model_opt {
    CLI_MODEL_OPT_FIRST = 100,
    CLI_OPT_MODEL = CLI_MODEL_OPT_FIRST,
    CLI_OPT_LAYERS,
    CLI_OPT_KIND,
    CLI_OPT_KV_HEADS,
    CLI_OPT_HEAD_SIZE,
    CLI_OPT_HEAD_SIZE_V,
    CLI_OPT_DTYPE,
    CLI_OPT_BLOCK_SIZE,
    CLI_OPT_TOKENS_PER_STATE,
    CLI_OPT_PAGE_SIZE_PADDED,
    CLI_OPT_HEAD_SLOTS,
    CLI_OPT_STATE_CONTENT_BYTES,
    CLI_OPT_BLOCKS,
    CLI_OPT_MEMORY,
    CLI_OPT_KV_CACHE_DTYPE,
    CLI_OPT_ATTENTION_BACKEND,
    CLI_MODEL_OPT_END
};
#define CLI_MODEL_NUM_OPTS (CLI_MODEL_OPT_END - CLI_MODEL_OPT_FIRST)

/* Rows for a command's option table. */
#define CLI_MODEL_OPTION_ROWS                                         \
    {"--model", true, false, CLI_OPT_MODEL},                          \
    {"--layers", true, false, CLI_OPT_LAYERS},                        \
    {"--kind", true, false, CLI_OPT_KIND},                            \
    {"--kv-heads", true, false, CLI_OPT_KV_HEADS},                    \
    {"--head-size", true, false, CLI_OPT_HEAD_SIZE},                  \
    {"--head-size-v", true, false, CLI_OPT_HEAD_SIZE_V},              \
    {"--dtype", true, false, CLI_OPT_DTYPE},                          \
    {"--block-size", true, false, CLI_OPT_BLOCK_SIZE},                \
    {"--tokens-per-state", true, false, CLI_OPT_TOKENS_PER_STATE},    \
    {"--page-size-padded", true, false, CLI_OPT_PAGE_SIZE_PADDED},    \
    {"--head-slots", true, false, CLI_OPT_HEAD_SLOTS},                \
    {"--state-content-bytes", true, false, CLI_OPT_STATE_CONTENT_BYTES}, \
    {"--blocks", true, false, CLI_OPT_BLOCKS},                        \
    {"--memory", true, false, CLI_OPT_MEMORY},                        \
    {"--kv-cache-dtype", true, false, CLI_OPT_KV_CACHE_DTYPE},        \
    {"--attention-backend", true, false, CLI_OPT_ATTENTION_BACKEND}

/* The help lines for those options (one string, for every command). */
extern const char cli_model_options_help[];

struct cli_model_flags {
    const char *command;
    bool given[CLI_MODEL_NUM_OPTS];
    const char *file;
    uint64_t layers;
    struct kvrt_spec spec;
    uint64_t blocks;
    uint64_t memory;
    enum kvrt_model_cache_dtype cache_dtype;
    enum kvrt_model_backend backend;
};

void cli_model_flags_init(struct cli_model_flags *f, const char *command);

/* true when `id` is a model option; then *ok says whether its value was
 * valid (an error was printed when not). */
bool cli_model_flags_apply(struct cli_model_flags *f, int id, const char *value, bool *ok);

bool cli_model_flag_given(const struct cli_model_flags *f, int id);

/*
 * The model from --model, or from the flags.  `defaults`: the flags may
 * leave out --layers (1) and --block-size (16) — run, draw and explain; plan
 * requires them.  Returns a CLI exit status (error printed).
 */
int cli_model_build(struct cli_model_flags *f, bool defaults, struct kvrt_model **out);

/*
 * Blocks of the cache: --memory through kvrt_placement_blocks_for_budget
 * under `layout`, else --blocks, else `fallback` (0: an error naming both
 * options).  Returns a CLI exit status.
 */
int cli_model_num_blocks(const struct cli_model_flags *f, const struct kvrt_model *m,
                         enum kvrt_layout layout, uint64_t fallback, uint64_t *blocks);

/* The layout: --layout (already parsed, `given`), else VLLM_KV_CACHE_LAYOUT,
 * else `fallback`; *source says which.  Returns a CLI exit status. */
int cli_layout_or_env(bool given, enum kvrt_layout given_layout, enum kvrt_layout fallback,
                      enum kvrt_layout *out, const char **source);

/* "attention, bf16, 8 KV heads x 128 (V 128), block 16": one spec for people. */
void cli_describe_spec(const struct kvrt_spec *s, char *buf, size_t size);

/* The model as JSON: name, source, format, settings (value and source of
 * each), groups with their specs. */
json_t *cli_model_json(const struct kvrt_model *m);

/* "name  value  (source)" lines for the settings, for people. */
void cli_model_print_settings(const struct kvrt_model *m);

#endif
