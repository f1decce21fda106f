/* The model options shared by plan, run, draw and explain (cli_model.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/placement.h>

#include "cli_model.h"

/* Sizes stay below KVRT_UNSET and within JSON's signed integers. */
#define MAX_SIZE ((uint64_t)INT64_MAX)

const struct cli_option cli_model_options[] = {
    {"--model", "FILE", CLI_OPT_MODEL, false,
     "a Hugging Face config.json (or a folder holding one),\n"
     "or a kvrt model file (docs/model-format.md)"},
    {"--layers", "L", CLI_OPT_LAYERS, false, "number of same-shaped layers (L below)"},
    {"--kind", "KIND", CLI_OPT_KIND, false, "the layers' spec kind (KIND below)"},
    {"--kv-heads", "H", CLI_OPT_KV_HEADS, false, "KV heads (attention; default 1 for mla)"},
    {"--head-size", "D", CLI_OPT_HEAD_SIZE, false, "elements per head (attention and mla)"},
    {"--head-size-v", "V", CLI_OPT_HEAD_SIZE_V, false, "elements of a V vector (default D; mla: 0)"},
    {"--dtype", "T", CLI_OPT_DTYPE, false,
     "element type (T below); with --model the KV-cache\n"
     "type, like --kv-cache-dtype"},
    {"--kv-cache-dtype", "T", CLI_OPT_KV_CACHE_DTYPE, false,
     "with --model, as vLLM's flag (T below; default auto:\n"
     "the model dtype)"},
    {"--attention-backend", "B", CLI_OPT_ATTENTION_BACKEND, false,
     "with --model, vLLM's attention backend on a Hopper\n"
     "GPU (B below)"},
    {"--block-size", "N", CLI_OPT_BLOCK_SIZE, false,
     "tokens per block; with --model it replaces vLLM's\n"
     "default of " CLI_TEXT(KVRT_DEFAULT_BLOCK_SIZE) " (backends and hybrid models may raise it)"},
    {"--tokens-per-state", "P[/Q]", CLI_OPT_TOKENS_PER_STATE, false,
     "tokens stored per state (default 1; 1/2 = two states\n"
     "per token)"},
    {"--page-size-padded", "P", CLI_OPT_PAGE_SIZE_PADDED, false, "pad each page to P bytes"},
    {"--head-slots", "S", CLI_OPT_HEAD_SLOTS, false, "head slots if not one per KV head"},
    {"--state-content-bytes", "C", CLI_OPT_STATE_CONTENT_BYTES, false,
     "bytes per cell (--kind state: the bytes of the\n"
     "layer's state tensors; no head options, no dtype)"},
    {"--blocks", "B", CLI_OPT_BLOCKS, false, "blocks in the cache"},
    {"--memory", "SIZE", CLI_OPT_MEMORY, false,
     "as many blocks as fit in SIZE bytes (suffixes KiB,\n"
     "MiB, GiB, TiB; e.g. 24GiB); replaces --blocks"},
    CLI_OPTIONS_END,
};

static const struct cli_option *const model_tables[] = {cli_model_options, NULL};

void cli_model_print_options(FILE *out)
{
    struct kvrt_spec defaults;
    kvrt_spec_default(&defaults);
    fputs("Model (a file, or one group of same-shaped layers from flags):\n", out);
    cli_print_options(out, cli_model_options, 27);
    fprintf(out, "  L is 1 to %u (KVRT_MODEL_MAX_LAYERS)\n", KVRT_MODEL_MAX_LAYERS);
    fprintf(out, "  KIND is one of %s (default %s)\n", kvrt_spec_kind_valid_names(),
            kvrt_spec_kind_name(defaults.kind));
    fprintf(out, "  T (default %s) is one of\n", kvrt_dtype_name(defaults.dtype));
    cli_print_wrapped(out, 4, 78, kvrt_dtype_valid_names());
    fputs("  T of --kv-cache-dtype is one of\n", out);
    cli_print_wrapped(out, 4, 78, kvrt_kv_cache_dtype_valid_names());
    fputs("  B is one of (for MLA with the block size vLLM takes for its 16)\n", out);
    cli_print_wrapped(out, 4, 78, kvrt_attention_backend_choices());
}

static const char *name_of(int id)
{
    return cli_option_name(model_tables, id);
}

void cli_model_flags_init(struct cli_model_flags *f, const char *command)
{
    memset(f, 0, sizeof(*f));
    f->command = command;
    kvrt_spec_default(&f->spec);
}

bool cli_model_flag_given(const struct cli_model_flags *f, int id)
{
    return id >= CLI_MODEL_OPT_FIRST && id < CLI_MODEL_OPT_END && f->given[id - CLI_MODEL_OPT_FIRST];
}

static bool parse_kind(const char *option, const char *text, enum kvrt_spec_kind *out)
{
    if (kvrt_spec_kind_parse(text, out) == KVRT_OK)
        return true;
    cli_error(CLI_EXIT_USAGE, "%s: %s", option, kvrt_error_message());
    return false;
}

static bool parse_ratio(const char *option, const char *text, uint64_t *num, uint64_t *den)
{
    const char *slash = strchr(text, '/');
    if (!slash) {
        *den = 1;
        return cli_parse_u64(option, text, 1, MAX_SIZE, num);
    }
    char head[32], part[64];
    size_t n = (size_t)(slash - text);
    if (n >= sizeof(head)) {
        cli_error(CLI_EXIT_USAGE, "%s \"%s\" is not P or P/Q with whole numbers", option, text);
        return false;
    }
    memcpy(head, text, n);
    head[n] = '\0';
    snprintf(part, sizeof(part), "%s numerator", option);
    if (!cli_parse_u64(part, head, 1, MAX_SIZE, num))
        return false;
    snprintf(part, sizeof(part), "%s denominator", option);
    return cli_parse_u64(part, slash + 1, 1, MAX_SIZE, den);
}

static bool apply(struct cli_model_flags *f, const struct cli_option *opt, const char *v)
{
    struct kvrt_spec *s = &f->spec;
    const char *name = opt->name;
    switch (opt->id) {
    case CLI_OPT_MODEL: f->file = v; return true;
    case CLI_OPT_LAYERS: return cli_parse_u64(name, v, 1, KVRT_MODEL_MAX_LAYERS, &f->layers);
    case CLI_OPT_KIND: return parse_kind(name, v, &s->kind);
    case CLI_OPT_KV_HEADS: return cli_parse_u64(name, v, 1, MAX_SIZE, &s->num_kv_heads);
    case CLI_OPT_HEAD_SIZE: return cli_parse_u64(name, v, 1, MAX_SIZE, &s->head_size);
    case CLI_OPT_HEAD_SIZE_V: return cli_parse_u64(name, v, 0, MAX_SIZE, &s->head_size_v);
    case CLI_OPT_DTYPE:
        if (kvrt_dtype_parse(v, &s->dtype) != KVRT_OK) {
            cli_error(CLI_EXIT_USAGE, "%s: %s", name, kvrt_error_message());
            return false;
        }
        return true;
    case CLI_OPT_BLOCK_SIZE: return cli_parse_u64(name, v, 1, MAX_SIZE, &s->block_size);
    case CLI_OPT_TOKENS_PER_STATE: return parse_ratio(name, v, &s->tokens_per_state_num, &s->tokens_per_state_den);
    case CLI_OPT_PAGE_SIZE_PADDED: return cli_parse_u64(name, v, 1, MAX_SIZE, &s->page_size_padded);
    case CLI_OPT_HEAD_SLOTS: return cli_parse_u64(name, v, 1, MAX_SIZE, &s->num_head_slots);
    case CLI_OPT_STATE_CONTENT_BYTES: return cli_parse_u64(name, v, 1, MAX_SIZE, &s->state_content_bytes);
    case CLI_OPT_BLOCKS: return cli_parse_u64(name, v, 1, MAX_SIZE, &f->blocks);
    case CLI_OPT_MEMORY: return cli_parse_size(name, v, &f->memory);
    case CLI_OPT_KV_CACHE_DTYPE:
    case CLI_OPT_ATTENTION_BACKEND: {
        int rc = opt->id == CLI_OPT_KV_CACHE_DTYPE ? kvrt_kv_cache_dtype_parse(v, &f->cache_dtype)
                                                   : kvrt_attention_backend_parse(v, &f->backend);
        if (rc != KVRT_OK) {
            cli_error(CLI_EXIT_USAGE, "%s %s", name, kvrt_error_message());
            return false;
        }
        return true;
    }
    default: return false;
    }
}

bool cli_model_flags_apply(struct cli_model_flags *f, const struct cli_option *opt, const char *value, bool *ok)
{
    if (opt->id < CLI_MODEL_OPT_FIRST || opt->id >= CLI_MODEL_OPT_END)
        return false;
    *ok = apply(f, opt, value);
    if (*ok)
        f->given[opt->id - CLI_MODEL_OPT_FIRST] = true;
    return true;
}

static bool given(const struct cli_model_flags *f, int id)
{
    return f->given[id - CLI_MODEL_OPT_FIRST];
}

/* Options that must or must not appear together, checked once all are read
 * so the message can name the kind. */
static bool check_flags(const struct cli_model_flags *f, bool defaults)
{
    const char *cmd = f->command;
    if (!defaults) {
        static const int required[] = {CLI_OPT_LAYERS, CLI_OPT_BLOCKS, CLI_OPT_BLOCK_SIZE};
        static const char *const what[] = {"the number of layers", "the number of blocks", "the tokens per block"};
        for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
            if (given(f, required[i]) || (required[i] == CLI_OPT_BLOCKS && given(f, CLI_OPT_MEMORY)))
                continue;
            cli_error(CLI_EXIT_USAGE, "%s: %s is required (%s)%s%s; see 'kvrt %s --help'", cmd, name_of(required[i]),
                      what[i], required[i] == CLI_OPT_BLOCKS ? ", or " : "",
                      required[i] == CLI_OPT_BLOCKS ? name_of(CLI_OPT_MEMORY) : "", cmd);
            return false;
        }
    }
    const char *kind = kvrt_spec_kind_name(f->spec.kind);
    if (f->spec.kind == KVRT_SPEC_STATE) {
        static const int head_only[] = {CLI_OPT_KV_HEADS, CLI_OPT_HEAD_SIZE, CLI_OPT_HEAD_SIZE_V, CLI_OPT_DTYPE,
                                        CLI_OPT_TOKENS_PER_STATE};
        for (size_t i = 0; i < sizeof(head_only) / sizeof(head_only[0]); i++)
            if (given(f, head_only[i])) {
                cli_error(CLI_EXIT_USAGE,
                          "%s: %s does not apply to %s state, whose cell is "
                          "%s opaque bytes (one state per block); drop it",
                          cmd, name_of(head_only[i]), name_of(CLI_OPT_KIND), name_of(CLI_OPT_STATE_CONTENT_BYTES));
                return false;
            }
        if (!given(f, CLI_OPT_STATE_CONTENT_BYTES)) {
            cli_error(CLI_EXIT_USAGE,
                      "%s: %s state needs %s (the bytes "
                      "of the layer's state tensors per block)",
                      cmd, name_of(CLI_OPT_KIND), name_of(CLI_OPT_STATE_CONTENT_BYTES));
            return false;
        }
        return true;
    }
    if (!given(f, CLI_OPT_HEAD_SIZE)) {
        cli_error(CLI_EXIT_USAGE, "%s: %s %s needs %s (elements per head)%s%s%s", cmd, name_of(CLI_OPT_KIND), kind,
                  name_of(CLI_OPT_HEAD_SIZE), defaults ? ", or give " : "", defaults ? name_of(CLI_OPT_MODEL) : "",
                  defaults ? " FILE" : "");
        return false;
    }
    if (f->spec.kind == KVRT_SPEC_ATTENTION && !given(f, CLI_OPT_KV_HEADS)) {
        cli_error(CLI_EXIT_USAGE, "%s: %s attention needs %s (the number of KV heads)", cmd, name_of(CLI_OPT_KIND),
                  name_of(CLI_OPT_KV_HEADS));
        return false;
    }
    return true;
}

static int from_file(struct cli_model_flags *f)
{
    static const int spec_only[] = {CLI_OPT_LAYERS,           CLI_OPT_KIND,        CLI_OPT_KV_HEADS,
                                    CLI_OPT_HEAD_SIZE,        CLI_OPT_HEAD_SIZE_V, CLI_OPT_TOKENS_PER_STATE,
                                    CLI_OPT_PAGE_SIZE_PADDED, CLI_OPT_HEAD_SLOTS,  CLI_OPT_STATE_CONTENT_BYTES};
    for (size_t i = 0; i < sizeof(spec_only) / sizeof(spec_only[0]); i++)
        if (given(f, spec_only[i]))
            return cli_error(CLI_EXIT_USAGE,
                             "%s: %s cannot be combined with %s, which gives the "
                             "layers and their specs (only the cache type, block size and backend "
                             "override it); drop one of them",
                             f->command, name_of(spec_only[i]), name_of(CLI_OPT_MODEL));
    struct kvrt_model_options opt;
    kvrt_model_options_default(&opt);
    if (given(f, CLI_OPT_DTYPE) && given(f, CLI_OPT_KV_CACHE_DTYPE))
        return cli_error(CLI_EXIT_USAGE,
                         "%s: %s and %s both give the KV-cache type; "
                         "drop one of them",
                         f->command, name_of(CLI_OPT_DTYPE), name_of(CLI_OPT_KV_CACHE_DTYPE));
    opt.dtype_given = given(f, CLI_OPT_DTYPE);
    opt.dtype = f->spec.dtype;
    opt.dtype_option = name_of(opt.dtype_given ? CLI_OPT_DTYPE : CLI_OPT_KV_CACHE_DTYPE);
    opt.kv_cache_dtype = f->cache_dtype;
    opt.attention_backend = f->backend;
    opt.block_size = given(f, CLI_OPT_BLOCK_SIZE) ? f->spec.block_size : 0;
    int rc = kvrt_model_open(f->file, &opt, &f->model);
    return rc == KVRT_OK ? CLI_EXIT_OK : cli_fail_status(rc);
}

static int from_flags(struct cli_model_flags *f, bool defaults)
{
    static const int file_only[] = {CLI_OPT_KV_CACHE_DTYPE, CLI_OPT_ATTENTION_BACKEND};
    for (size_t i = 0; i < sizeof(file_only) / sizeof(file_only[0]); i++)
        if (given(f, file_only[i]))
            return cli_error(CLI_EXIT_USAGE,
                             "%s: %s applies to %s FILE (a config.json); with "
                             "flags, give the cache type with %s and the tokens per block with "
                             "%s",
                             f->command, name_of(file_only[i]), name_of(CLI_OPT_MODEL), name_of(CLI_OPT_DTYPE),
                             name_of(CLI_OPT_BLOCK_SIZE));
    if (!check_flags(f, defaults))
        return CLI_EXIT_USAGE;
    struct kvrt_spec *s = &f->spec;
    if (!given(f, CLI_OPT_LAYERS))
        f->layers = 1;
    /* Flags not given are still 0 here: libkvrt fills them. */
    kvrt_spec_apply_defaults(s);
    int rc = kvrt_model_from_spec(s, f->layers, "flags", &f->model);
    return rc == KVRT_OK ? CLI_EXIT_OK : cli_fail_status(rc);
}

int cli_model_build(struct cli_model_flags *f, bool defaults, const struct kvrt_model_info **out)
{
    *out = NULL;
    int code = f->file ? from_file(f) : from_flags(f, defaults);
    if (code == CLI_EXIT_OK)
        *out = kvrt_model_get_info(f->model);
    return code;
}

void cli_model_flags_free(struct cli_model_flags *f)
{
    kvrt_model_destroy(f->model);
    f->model = NULL;
}

int cli_model_num_blocks(const struct cli_model_flags *f, const struct kvrt_model_info *m, enum kvrt_layout layout,
                         uint64_t fallback, uint64_t *blocks)
{
    if (given(f, CLI_OPT_MEMORY) && given(f, CLI_OPT_BLOCKS))
        return cli_error(CLI_EXIT_USAGE, "%s: give %s or %s, not both", f->command, name_of(CLI_OPT_BLOCKS),
                         name_of(CLI_OPT_MEMORY));
    if (given(f, CLI_OPT_MEMORY)) {
        int rc = kvrt_placement_blocks_for_budget(layout, m->placement_groups, m->num_groups, f->memory, blocks);
        return rc == KVRT_OK ? CLI_EXIT_OK : cli_fail_status(rc);
    }
    if (given(f, CLI_OPT_BLOCKS)) {
        *blocks = f->blocks;
        return CLI_EXIT_OK;
    }
    if (fallback) {
        *blocks = fallback;
        return CLI_EXIT_OK;
    }
    return cli_error(CLI_EXIT_USAGE,
                     "%s: give %s (the number of blocks) or %s (a budget "
                     "such as 24GiB); see 'kvrt %s --help'",
                     f->command, name_of(CLI_OPT_BLOCKS), name_of(CLI_OPT_MEMORY), f->command);
}

int cli_layout_or_env(const char *given_as, enum kvrt_layout given_layout, enum kvrt_layout *out, const char **source)
{
    enum kvrt_setting_source from = KVRT_SOURCE_ARGUMENT;
    *out = given_layout;
    if (!given_as) {
        int rc = kvrt_layout_choose(NULL, out, &from);
        if (rc != KVRT_OK)
            return cli_fail_status(rc);
    }
    *source = kvrt_setting_origin(KVRT_SETTING_LAYOUT, from, given_as);
    return CLI_EXIT_OK;
}

void cli_describe_spec(const struct kvrt_spec *s, char *buf, size_t size)
{
    struct kvrt_spec_info in;
    if (kvrt_spec_derive(s, 0, &in) != KVRT_OK) {
        snprintf(buf, size, "%s (invalid)", kvrt_spec_kind_name(s->kind));
        return;
    }
    size_t used;
    if (s->kind == KVRT_SPEC_STATE) {
        used = (size_t)snprintf(buf, size, "state, %" PRIu64 " bytes per block", in.content_bytes);
    } else {
        used = (size_t)snprintf(buf, size, "%s, %s, %" PRIu64 " %s x %" PRIu64, kvrt_spec_kind_name(s->kind),
                                kvrt_dtype_name(s->dtype), in.head_slots,
                                s->kind == KVRT_SPEC_MLA ? (in.head_slots == 1 ? "slot" : "slots")
                                                         : (in.head_slots == 1 ? "KV head" : "KV heads"),
                                in.head_size);
        if (used < size)
            used += (size_t)(in.head_size_v ? snprintf(buf + used, size - used, " (V %" PRIu64 ")", in.head_size_v)
                                            : snprintf(buf + used, size - used, " (no V)"));
        if (used < size)
            used += (size_t)snprintf(buf + used, size - used, ", block %" PRIu64 " tokens", s->block_size);
        if ((s->tokens_per_state_num != 1 || s->tokens_per_state_den != 1) && used < size)
            used += (size_t)snprintf(buf + used, size - used, ", %" PRIu64 "/%" PRIu64 " tokens per state",
                                     s->tokens_per_state_num, s->tokens_per_state_den);
    }
    if (in.page_size != in.unpadded_page_size && used < size)
        snprintf(buf + used, size - used, ", page padded to %" PRIu64 " bytes", in.page_size);
}

void cli_model_print_settings(const struct kvrt_model_info *m)
{
    for (size_t i = 0; i < m->num_settings; i++)
        printf("%-18s %-12s from %s\n", m->settings[i].name, m->settings[i].value, m->settings[i].source);
    if (m->max_model_len)
        printf("%-18s %-12" PRIu64 " from %s\n", "max_model_len", m->max_model_len, m->max_model_len_source);
}

json_t *cli_model_json(const struct cli_model_flags *f)
{
    char *text = NULL;
    int rc = kvrt_model_json(f->model, &text);
    if (rc != KVRT_OK) {
        cli_fail_status(rc);
        return NULL;
    }
    json_t *o = json_loads(text, 0, NULL);
    kvrt_free(text);
    if (!o)
        cli_error(CLI_EXIT_INTERNAL, "%s: could not read back the model's JSON", f->command);
    return o;
}
