/*
 * The model options shared by plan, run, draw and explain: a model file
 * (--model) or one group of same-shaped layers from flags, and the number
 * of blocks (--blocks, or --memory through the placement's budget search).
 */
#ifndef KVRT_TOOLS_CLI_MODEL_H
#define KVRT_TOOLS_CLI_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <kvrt/layout.h>
#include <kvrt/spec.h>

#include <kvrt/model.h>

#include "cli.h"

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

/* Their table, for a command's list of tables (after its own, which may
 * describe one of them in its own words: the first row that names an option
 * wins). */
extern const struct cli_option cli_model_options[];

/* The heading and the help lines of cli_model_options. */
void cli_model_print_options(FILE *out);

struct cli_model_flags {
    const char *command;
    bool given[CLI_MODEL_NUM_OPTS];
    const char *file;
    uint64_t layers;
    struct kvrt_spec spec;
    uint64_t blocks;
    uint64_t memory;
    enum kvrt_kv_cache_dtype cache_dtype;
    enum kvrt_attention_backend backend;
    /* The model cli_model_build made (libkvrt's); cli_model_flags_free
     * destroys it. */
    kvrt_model *model;
};

void cli_model_flags_init(struct cli_model_flags *f, const char *command);

/* true when `opt` is a model option (by its id); then *ok says whether its
 * value was valid (an error naming opt->name was printed when not). */
bool cli_model_flags_apply(struct cli_model_flags *f, const struct cli_option *opt, const char *value, bool *ok);

bool cli_model_flag_given(const struct cli_model_flags *f, int id);

/*
 * The model from --model, or from the flags (kept in f->model), and its
 * description.  `defaults`: the flags may leave out --layers (1) and
 * --block-size (16) — run, draw and explain; plan requires them.  Returns a
 * CLI exit status (error printed).
 */
int cli_model_build(struct cli_model_flags *f, bool defaults, const struct kvrt_model_info **out);

/* Destroy the model cli_model_build made. */
void cli_model_flags_free(struct cli_model_flags *f);

/*
 * Blocks of the cache: --memory through kvrt_placement_blocks_for_budget
 * under `layout`, else --blocks, else `fallback` (0: an error naming both
 * options).  Returns a CLI exit status.
 */
int cli_model_num_blocks(const struct cli_model_flags *f, const struct kvrt_model_info *m, enum kvrt_layout layout,
                         uint64_t fallback, uint64_t *blocks);

/* The layout: the option named `given_as` (already parsed; NULL: not given),
 * else VLLM_KV_CACHE_LAYOUT, else kvrt's default, as libkvrt's
 * kvrt_layout_choose answers; *source is its kvrt_setting_origin word (the
 * option, the variable or "default").  Returns a CLI exit status. */
int cli_layout_or_env(const char *given_as, enum kvrt_layout given_layout, enum kvrt_layout *out, const char **source);

/* "attention, bf16, 8 KV heads x 128 (V 128), block 16": one spec for people. */
void cli_describe_spec(const struct kvrt_spec *s, char *buf, size_t size);

/* The model of cli_model_build as libkvrt writes it in JSON (name, source,
 * format, settings with their sources, groups with their specs); NULL with
 * the error printed when it cannot be built. */
json_t *cli_model_json(const struct cli_model_flags *f);

/* "name  value  (source)" lines for the settings, for people. */
void cli_model_print_settings(const struct kvrt_model_info *m);

#endif
