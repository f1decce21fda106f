/* kvrt plan: where every byte of a cache goes — one set of same-shaped layers
 * from flags (geometry), or a whole model's groups (placement). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/geometry.h>
#include <kvrt/layout.h>
#include <kvrt/placement.h>
#include <kvrt/spec.h>

#include "commands.h"
#include "cli.h"
#include "cli_model.h"
#include "cli_plan.h"

static const char axis_letters[KVRT_NUM_AXES] = {'L', 'B', 'H', 'N', 'C'};

enum plan_opt { OPT_JSON, OPT_LAYOUT, OPT_KERNEL_BLOCK_SIZE, OPT_MAX_MODEL_LEN, OPT_BATCHED_TOKENS };

static const struct cli_option plan_options[] = {
    {"--layout", "NAME", OPT_LAYOUT, false,
     "layout or alias (default: $" KVRT_LAYOUT_ENV " if set,\nelse kvrt's default, below)"},
    {"--kernel-block-size", "K", OPT_KERNEL_BLOCK_SIZE, false, "split each block into kernel blocks of K tokens"},
    {"--max-model-len", "T", OPT_MAX_MODEL_LEN, false,
     "tokens per request for the concurrency figure\n"
     "(default: the config's, as vLLM derives it)"},
    {"--max-num-batched-tokens", "N", OPT_BATCHED_TOKENS, false,
     "tokens scheduled per step; sliding-window layers\n"
     "keep window - 1 + N (default 8192, vllm serve on a\n"
     "GPU of 70 GiB or more)"},
    {"--json", NULL, OPT_JSON, false, "print one JSON object instead of tables"},
    CLI_HELP_ROW,
    CLI_OPTIONS_END,
};

static const struct cli_option *const plan_tables[] = {plan_options, cli_model_options, NULL};

static void plan_help(FILE *out)
{
    fprintf(out, "Usage: kvrt plan [--json] [--layout NAME] --layers L --blocks B --block-size N\n"
                 "                 [--kind KIND] [--kv-heads H --head-size D]\n"
                 "                 [--head-size-v V] [--dtype T] [--tokens-per-state P[/Q]]\n"
                 "                 [--kernel-block-size K] [--page-size-padded P]\n"
                 "                 [--head-slots S] [--state-content-bytes C] [--memory SIZE]\n"
                 "       kvrt plan [--json] [--layout NAME] --model FILE [--blocks B | --memory SIZE]\n"
                 "                 [--kv-cache-dtype T] [--block-size N] [--attention-backend B]\n"
                 "                 [--max-model-len T] [--max-num-batched-tokens N]\n"
                 "\n"
                 "Compute where every byte of a paged KV cache goes.  From flags: the logical\n"
                 "shape [L, B, H, N, C] in bytes, the byte strides, the total size, the layer\n"
                 "and block strides, and one [B, H, N, C] view per layer (offset, shape and\n"
                 "strides in elements of the cache's type; in bytes for state specs).\n"
                 "From a model: its layers grouped the way vLLM groups them (full attention,\n"
                 "sliding window, state), each group's pages, bytes per block and in total,\n"
                 "and the placement of every set of same-shaped layers.  Groups share memory\n"
                 "(group g's layer i overlays every other group's layer i), so the cache is\n"
                 "the size of its largest group.  Every value the sizing used is listed with\n"
                 "where it came from (the config, a default, a flag, a vLLM rule).  With\n"
                 "--memory, also vLLM's own capacity figures for that KV-cache budget: \"GPU KV\n"
                 "cache size: N tokens\" and \"Maximum concurrency for T tokens per request\"\n"
                 "(docs/models.md).\n"
                 "\n"
                 "Options:\n");
    cli_print_options(out, plan_options, 27);
    cli_model_print_options(out);
    fprintf(out,
            "\n"
            "With flags, --layers, --block-size and --blocks (or --memory) are required,\n"
            "--kv-heads and --head-size too for attention, --head-size for mla.  With\n"
            "--model and neither --blocks nor --memory, one block is placed.\n"
            "Numbers are plain decimal.  Sizes are bytes unless named elements.\n"
            "\n"
            "Environment:\n"
            "  %s  layout used when --layout is not given (unset: %s,\n"
            "      kvrt's default); set but invalid (including empty) is an error\n"
            "\n"
            "Examples:\n"
            "  kvrt plan --layout HND --layers 32 --blocks 1024 --block-size 16 \\\n"
            "            --kv-heads 8 --head-size 128 --dtype bf16\n"
            "  kvrt plan --model examples/models/gpt-oss-20b.json --memory 24GiB\n",
            KVRT_LAYOUT_ENV, kvrt_layout_name(kvrt_layout_default()));
}

struct plan_request {
    bool json;
    const char *layout_given_as; /* the option that gave the layout, or NULL */
    enum kvrt_layout layout;
    const char *layout_source;
    uint64_t kernel_block_size;
    struct kvrt_model_plan_request vllm; /* --max-model-len, --max-num-batched-tokens */
    struct cli_model_flags flags;
    const struct kvrt_model_info *model;
    uint64_t num_blocks;
    /* The flags path: one set, as kvrt_geometry_compute takes it. */
    struct kvrt_geometry_params params;
    struct kvrt_spec spec;
};

static int apply(void *request, const struct cli_option *opt, const char *value)
{
    struct plan_request *req = request;
    bool ok = true;
    if (cli_model_flags_apply(&req->flags, opt, value, &ok))
        return ok ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    switch (opt->id) {
    case OPT_JSON: req->json = true; break;
    case OPT_LAYOUT:
        if (kvrt_layout_parse(value, &req->layout) != KVRT_OK)
            return cli_error(CLI_EXIT_USAGE, "%s: %s", opt->name, kvrt_error_message());
        req->layout_given_as = opt->name;
        break;
    case OPT_KERNEL_BLOCK_SIZE:
        if (!cli_parse_u64(opt->name, value, 1, (uint64_t)INT64_MAX, &req->kernel_block_size))
            return CLI_EXIT_USAGE;
        break;
    case OPT_MAX_MODEL_LEN:
        if (!cli_parse_u64(opt->name, value, 1, UINT32_MAX, &req->vllm.max_model_len))
            return CLI_EXIT_USAGE;
        req->vllm.max_model_len_source = opt->name;
        break;
    case OPT_BATCHED_TOKENS:
        if (!cli_parse_u64(opt->name, value, 1, UINT32_MAX, &req->vllm.batched_tokens))
            return CLI_EXIT_USAGE;
        req->vllm.batched_tokens_source = opt->name;
        break;
    }
    return CLI_EXIT_OK;
}

static int parse_request(int argc, char **argv, struct plan_request *req, bool *help)
{
    memset(req, 0, sizeof(*req));
    cli_model_flags_init(&req->flags, "plan");
    kvrt_model_plan_request_default(&req->vllm);
    int code = cli_parse_options("plan", argc, argv, plan_tables, apply, req, help);
    if (code != CLI_EXIT_OK || *help)
        return code;
    if (!req->flags.file && (req->vllm.max_model_len || req->vllm.batched_tokens))
        return cli_error(CLI_EXIT_USAGE, "plan: %s and %s need %s FILE (they size vLLM's requests of a model)",
                         cli_option_name(plan_tables, OPT_MAX_MODEL_LEN),
                         cli_option_name(plan_tables, OPT_BATCHED_TOKENS), cli_option_name(plan_tables, CLI_OPT_MODEL));
    code = cli_model_build(&req->flags, req->flags.file != NULL, &req->model);
    if (code != CLI_EXIT_OK)
        return code;
    code = cli_layout_or_env(req->layout_given_as, req->layout, &req->layout, &req->layout_source);
    if (code != CLI_EXIT_OK)
        return code;
    /* A model's pages and blocks are known without a count: one block. */
    code = cli_model_num_blocks(&req->flags, req->model, req->layout, req->flags.file ? 1 : 0, &req->num_blocks);
    if (code != CLI_EXIT_OK)
        return code;
    kvrt_geometry_params_default(&req->params);
    req->spec = req->model->groups[0].layers[0].spec;
    req->params.layout = req->layout;
    req->params.spec = &req->spec;
    req->params.num_layers = req->model->num_layers;
    req->params.num_blocks = req->num_blocks;
    req->params.kernel_block_size = req->kernel_block_size;
    return CLI_EXIT_OK;
}

/* ---- output ------------------------------------------------------------ */

static void print_u64s(const uint64_t *v, size_t n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%" PRIu64, i ? " " : "", v[i]);
}

static void describe_spec(const struct plan_request *req, const struct kvrt_geometry *g, char *buf, size_t size)
{
    const struct kvrt_spec *s = &req->spec;
    const struct kvrt_spec_info *in = &g->info;
    if (s->kind == KVRT_SPEC_STATE) {
        snprintf(buf, size, "state, %" PRIu64 " content bytes per block, block size %" PRIu64, in->content_bytes,
                 s->block_size);
        return;
    }
    size_t used =
        (size_t)snprintf(buf, size, "%s, %s, %" PRIu64 " KV head%s, head size %" PRIu64, kvrt_spec_kind_name(s->kind),
                         kvrt_dtype_name(s->dtype), s->num_kv_heads, s->num_kv_heads == 1 ? "" : "s", in->head_size);
    if (s->kind == KVRT_SPEC_ATTENTION && used < size)
        used += (size_t)snprintf(buf + used, size - used, " (V %" PRIu64 ")", in->head_size_v);
    if (used < size)
        used += (size_t)snprintf(buf + used, size - used, ", block size %" PRIu64, s->block_size);
    if ((s->tokens_per_state_num != 1 || s->tokens_per_state_den != 1) && used < size)
        snprintf(buf + used, size - used, ", %" PRIu64 "/%" PRIu64 " tokens per state", s->tokens_per_state_num,
                 s->tokens_per_state_den);
}

static int print_table(const struct plan_request *req, const struct kvrt_geometry *g)
{
    const struct kvrt_spec_info *in = &g->info;
    int o[KVRT_NUM_AXES];
    char buf[512];
    kvrt_layout_stride_order(g->layout, o);

    printf("layout        %s (physical order %c %c %c %c %c; from %s)\n", kvrt_layout_name(g->layout),
           axis_letters[o[0]], axis_letters[o[1]], axis_letters[o[2]], axis_letters[o[3]], axis_letters[o[4]],
           req->layout_source);
    describe_spec(req, g, buf, sizeof(buf));
    printf("spec          %s\n", buf);
    printf("page          %" PRIu64 " bytes = H %" PRIu64 " x N %" PRIu64 " x C %" PRIu64, in->page_size,
           in->head_slots, in->states_per_block, in->content_bytes);
    if (in->page_size != in->unpadded_page_size)
        printf(" (padded from %" PRIu64 ")", in->unpadded_page_size);
    printf("\n");
    if (in->kernel_blocks_per_block > 1)
        printf("kernel blocks %" PRIu64 " per block, %" PRIu64 " tokens each\n", in->kernel_blocks_per_block,
               in->kernel_block_size);
    printf("total         %" PRIu64 " bytes for %" PRIu64 " layer%s x %" PRIu64 " block%s\n", g->total_bytes,
           g->num_layers, g->num_layers == 1 ? "" : "s", g->num_blocks, g->num_blocks == 1 ? "" : "s");
    if (cli_model_flag_given(&req->flags, CLI_OPT_MEMORY)) {
        char budget[32], used[32];
        cli_format_bytes(req->flags.memory, budget, sizeof(budget));
        cli_format_bytes(g->total_bytes, used, sizeof(used));
        printf("memory        %" PRIu64 " blocks fit in --memory %s (%s used)\n", g->num_blocks, budget, used);
    }
    printf("layer stride  %" PRIu64 " bytes\n", g->layer_stride);
    printf("block stride  %" PRIu64 " bytes\n", g->block_stride);

    printf("\naxis  extent          stride_bytes\n");
    for (int a = 0; a < KVRT_NUM_AXES; a++)
        printf("%-5c %-15" PRIu64 " %" PRIu64 "\n", axis_letters[a], g->shape_bytes[a], g->strides_bytes[a]);

    printf("\nper-layer views [B, H, N, C]; shape and strides in %s:\n",
           req->spec.kind == KVRT_SPEC_STATE ? "bytes" : "elements");
    printf("%-6s %-15s %-24s %s\n", "layer", "offset_bytes", "shape", "strides");
    for (uint64_t l = 0; l < g->num_layers; l++) {
        struct kvrt_view v;
        int rc = kvrt_geometry_layer_view(g, 0, l, &v);
        if (rc != KVRT_OK)
            return cli_fail_status(rc);
        char shape[128], strides[128];
        print_u64s(v.shape, 4, shape, sizeof(shape));
        print_u64s(v.strides, 4, strides, sizeof(strides));
        printf("%-6" PRIu64 " %-15" PRIu64 " %-24s %s\n", l, v.offset_bytes, shape, strides);
    }
    return CLI_EXIT_OK;
}

/* libkvrt's own answer, which kvrt.plan() returns too. */
static int print_json(const struct plan_request *req)
{
    char *text = NULL;
    uint64_t budget = cli_model_flag_given(&req->flags, CLI_OPT_MEMORY) ? req->flags.memory : 0;
    int rc = kvrt_geometry_json(&req->params, req->layout_source, budget, &text);
    return cli_print_json_text(rc, text);
}

static int plan_run(int argc, char **argv)
{
    struct plan_request req;
    struct kvrt_geometry g;
    bool help = false;
    int code = parse_request(argc, argv, &req, &help);
    if (help) {
        plan_help(stdout);
    } else if (code == CLI_EXIT_OK && req.flags.file) {
        struct kvrt_model_plan_request *pr = &req.vllm;
        pr->layout = req.layout;
        pr->layout_source = req.layout_source;
        pr->num_blocks = req.num_blocks;
        pr->kernel_block_size = req.kernel_block_size;
        pr->budget_bytes = cli_model_flag_given(&req.flags, CLI_OPT_MEMORY) ? req.flags.memory : 0;
        code = plan_model(&req.flags, pr, req.json);
    } else if (code == CLI_EXIT_OK && req.json) {
        code = print_json(&req);
    } else if (code == CLI_EXIT_OK) {
        int rc = kvrt_geometry_compute(&req.params, &g);
        code = rc != KVRT_OK ? cli_fail_status(rc) : print_table(&req, &g);
    }
    cli_model_flags_free(&req.flags);
    return code;
}

const struct cli_command cli_plan_command = {
    .name = "plan",
    .summary = "compute the shape, strides, size and views of a cache or a model's groups",
    .run = plan_run,
    .help = plan_help,
    .options = plan_tables,
};
