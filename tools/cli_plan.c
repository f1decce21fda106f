/* kvrt plan: the geometry of one set of same-shaped layers under one layout. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/geometry.h>
#include <kvrt/layout.h>
#include <kvrt/spec.h>

#include "cli.h"

/* More layers than any model has; the bound keeps a typo from printing
 * gigabytes of per-layer views. */
#define PLAN_MAX_LAYERS 65536u
/* Sizes stay below KVRT_UNSET and within JSON's signed integers. */
#define PLAN_MAX_SIZE ((uint64_t)INT64_MAX)

static const char axis_letters[KVRT_NUM_AXES] = {'L', 'B', 'H', 'N', 'C'};

static void plan_help(FILE *out)
{
    fprintf(out,
            "Usage: kvrt plan [--json] [--layout NAME] --layers L --blocks B --block-size N\n"
            "                 [--kind attention|mla|state] [--kv-heads H --head-size D]\n"
            "                 [--head-size-v V] [--dtype T] [--tokens-per-state P[/Q]]\n"
            "                 [--kernel-block-size K] [--page-size-padded P]\n"
            "                 [--head-slots S] [--state-content-bytes C]\n"
            "\n"
            "Compute where every byte of a paged KV cache goes: the logical shape\n"
            "[L, B, H, N, C] in bytes, the byte strides, the total size, the layer and\n"
            "block strides, and one [B, H, N, C] view per layer (offset, shape and\n"
            "strides in elements of the cache's type; in bytes for state specs).\n"
            "\n"
            "Options:\n"
            "  --layout NAME            layout or alias (default: $%s if set, else LBNHC)\n"
            "  --layers L               number of same-shaped layers (1..%u, required)\n"
            "  --blocks B               number of blocks (required)\n"
            "  --block-size N           tokens per block (required)\n"
            "  --kind KIND              attention (default), mla or state\n"
            "  --kv-heads H             KV heads (required for attention; default 1 for mla)\n"
            "  --head-size D            elements per head (required for attention and mla)\n"
            "  --head-size-v V          elements of a V vector (default D; mla: 0)\n"
            "  --dtype T                fp32, fp16 (default), bf16, fp8_e4m3, fp8_e5m2, int8,\n"
            "                           uint8 (also float32, float16, bfloat16)\n"
            "  --tokens-per-state P[/Q] tokens stored per state (default 1; 1/2 = two states\n"
            "                           per token)\n"
            "  --kernel-block-size K    split each block into kernel blocks of K tokens\n"
            "  --page-size-padded P     pad each page to P bytes\n"
            "  --head-slots S           head slots if not one per KV head\n"
            "  --state-content-bytes C  bytes per cell (required for --kind state, which takes\n"
            "                           no head options and no dtype)\n"
            "  --json                   print one JSON object instead of tables\n"
            "  --help                   show this help\n"
            "\n"
            "Numbers are plain decimal.  Sizes are bytes unless named elements.\n"
            "\n"
            "Environment:\n"
            "  %s  layout used when --layout is not given; set but\n"
            "      invalid (including empty) is an error\n"
            "\n"
            "Example:\n"
            "  kvrt plan --layout HND --layers 32 --blocks 1024 --block-size 16 \\\n"
            "            --kv-heads 8 --head-size 128 --dtype bf16\n",
            KVRT_LAYOUT_ENV, PLAN_MAX_LAYERS, KVRT_LAYOUT_ENV);
}

enum plan_opt {
    OPT_JSON, OPT_LAYOUT, OPT_LAYERS, OPT_BLOCKS, OPT_BLOCK_SIZE, OPT_KIND, OPT_KV_HEADS,
    OPT_HEAD_SIZE, OPT_HEAD_SIZE_V, OPT_DTYPE, OPT_TOKENS_PER_STATE, OPT_KERNEL_BLOCK_SIZE,
    OPT_PAGE_SIZE_PADDED, OPT_HEAD_SLOTS, OPT_STATE_CONTENT_BYTES, NUM_PLAN_OPTS
};

/* Indexed by enum plan_opt. */
static const struct cli_option plan_options[] = {
    {"--json", false, false, OPT_JSON},
    {"--layout", true, false, OPT_LAYOUT},
    {"--layers", true, false, OPT_LAYERS},
    {"--blocks", true, false, OPT_BLOCKS},
    {"--block-size", true, false, OPT_BLOCK_SIZE},
    {"--kind", true, false, OPT_KIND},
    {"--kv-heads", true, false, OPT_KV_HEADS},
    {"--head-size", true, false, OPT_HEAD_SIZE},
    {"--head-size-v", true, false, OPT_HEAD_SIZE_V},
    {"--dtype", true, false, OPT_DTYPE},
    {"--tokens-per-state", true, false, OPT_TOKENS_PER_STATE},
    {"--kernel-block-size", true, false, OPT_KERNEL_BLOCK_SIZE},
    {"--page-size-padded", true, false, OPT_PAGE_SIZE_PADDED},
    {"--head-slots", true, false, OPT_HEAD_SLOTS},
    {"--state-content-bytes", true, false, OPT_STATE_CONTENT_BYTES},
    {NULL, false, false, 0},
};

struct plan_request {
    bool json;
    bool given[NUM_PLAN_OPTS];
    enum kvrt_layout layout;
    const char *layout_source;
    struct kvrt_geometry_params params;
    struct kvrt_spec spec;
};

static bool parse_kind(const char *text, enum kvrt_spec_kind *out)
{
    for (int k = KVRT_SPEC_ATTENTION; k <= KVRT_SPEC_STATE; k++) {
        if (strcmp(text, kvrt_spec_kind_name((enum kvrt_spec_kind)k)) == 0) {
            *out = (enum kvrt_spec_kind)k;
            return true;
        }
    }
    cli_error(CLI_EXIT_USAGE, "--kind \"%s\" is not a spec kind: valid kinds are attention, mla, state",
              text);
    return false;
}

static bool parse_ratio(const char *text, uint64_t *num, uint64_t *den)
{
    const char *slash = strchr(text, '/');
    if (!slash) {
        *den = 1;
        return cli_parse_u64("--tokens-per-state", text, 1, PLAN_MAX_SIZE, num);
    }
    char head[32];
    size_t n = (size_t)(slash - text);
    if (n >= sizeof(head)) {
        cli_error(CLI_EXIT_USAGE, "--tokens-per-state \"%s\" is not P or P/Q with whole numbers", text);
        return false;
    }
    memcpy(head, text, n);
    head[n] = '\0';
    return cli_parse_u64("--tokens-per-state numerator", head, 1, PLAN_MAX_SIZE, num) &&
           cli_parse_u64("--tokens-per-state denominator", slash + 1, 1, PLAN_MAX_SIZE, den);
}

/* One option's value into the request; false after printing an error. */
static bool apply_option(struct plan_request *req, int id, const char *v)
{
    struct kvrt_spec *s = &req->spec;
    enum kvrt_layout layout;
    switch (id) {
    case OPT_JSON:
        req->json = true;
        return true;
    case OPT_LAYOUT:
        if (kvrt_layout_parse(v, &layout) != KVRT_OK) {
            cli_error(CLI_EXIT_USAGE, "--layout: %s", kvrt_error_message());
            return false;
        }
        req->layout = layout;
        req->layout_source = "--layout";
        return true;
    case OPT_LAYERS:
        return cli_parse_u64("--layers", v, 1, PLAN_MAX_LAYERS, &req->params.num_layers);
    case OPT_BLOCKS:
        return cli_parse_u64("--blocks", v, 1, PLAN_MAX_SIZE, &req->params.num_blocks);
    case OPT_BLOCK_SIZE:
        return cli_parse_u64("--block-size", v, 1, PLAN_MAX_SIZE, &s->block_size);
    case OPT_KIND:
        return parse_kind(v, &s->kind);
    case OPT_KV_HEADS:
        return cli_parse_u64("--kv-heads", v, 1, PLAN_MAX_SIZE, &s->num_kv_heads);
    case OPT_HEAD_SIZE:
        return cli_parse_u64("--head-size", v, 1, PLAN_MAX_SIZE, &s->head_size);
    case OPT_HEAD_SIZE_V:
        return cli_parse_u64("--head-size-v", v, 0, PLAN_MAX_SIZE, &s->head_size_v);
    case OPT_DTYPE:
        if (kvrt_dtype_parse(v, &s->dtype) != KVRT_OK) {
            cli_error(CLI_EXIT_USAGE, "--dtype: %s", kvrt_error_message());
            return false;
        }
        return true;
    case OPT_TOKENS_PER_STATE:
        return parse_ratio(v, &s->tokens_per_state_num, &s->tokens_per_state_den);
    case OPT_KERNEL_BLOCK_SIZE:
        return cli_parse_u64("--kernel-block-size", v, 1, PLAN_MAX_SIZE, &req->params.kernel_block_size);
    case OPT_PAGE_SIZE_PADDED:
        return cli_parse_u64("--page-size-padded", v, 1, PLAN_MAX_SIZE, &s->page_size_padded);
    case OPT_HEAD_SLOTS:
        return cli_parse_u64("--head-slots", v, 1, PLAN_MAX_SIZE, &s->num_head_slots);
    case OPT_STATE_CONTENT_BYTES:
        return cli_parse_u64("--state-content-bytes", v, 1, PLAN_MAX_SIZE, &s->state_content_bytes);
    default:
        cli_error(CLI_EXIT_INTERNAL, "plan: option id %d has no handler", id);
        return false;
    }
}

/* Options that must or must not appear together, checked once all are read
 * so the message can name the kind. */
static bool check_combinations(const struct plan_request *req)
{
    static const int required[] = {OPT_LAYERS, OPT_BLOCKS, OPT_BLOCK_SIZE};
    static const char *const what[] = {"the number of layers", "the number of blocks",
                                       "the tokens per block"};
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++)
        if (!req->given[required[i]]) {
            cli_error(CLI_EXIT_USAGE, "plan: %s is required (%s); see 'kvrt plan --help'",
                      plan_options[required[i]].name, what[i]);
            return false;
        }
    const char *kind = kvrt_spec_kind_name(req->spec.kind);
    if (req->spec.kind == KVRT_SPEC_STATE) {
        static const int head_only[] = {OPT_KV_HEADS, OPT_HEAD_SIZE, OPT_HEAD_SIZE_V, OPT_DTYPE,
                                        OPT_TOKENS_PER_STATE};
        for (size_t i = 0; i < sizeof(head_only) / sizeof(head_only[0]); i++)
            if (req->given[head_only[i]]) {
                cli_error(CLI_EXIT_USAGE, "plan: %s does not apply to --kind state, whose cell is "
                          "--state-content-bytes opaque bytes (one state per block); drop it",
                          plan_options[head_only[i]].name);
                return false;
            }
        if (!req->given[OPT_STATE_CONTENT_BYTES]) {
            cli_error(CLI_EXIT_USAGE, "plan: --kind state needs --state-content-bytes (the bytes "
                      "of the layer's state tensors per block)");
            return false;
        }
        return true;
    }
    if (!req->given[OPT_HEAD_SIZE]) {
        cli_error(CLI_EXIT_USAGE, "plan: --kind %s needs --head-size (elements per head)", kind);
        return false;
    }
    if (req->spec.kind == KVRT_SPEC_ATTENTION && !req->given[OPT_KV_HEADS]) {
        cli_error(CLI_EXIT_USAGE, "plan: --kind attention needs --kv-heads (the number of KV heads)");
        return false;
    }
    return true;
}

static int parse_request(int argc, char **argv, struct plan_request *req, bool *help)
{
    struct cli_args args;
    const struct cli_option *opt;
    const char *value;

    memset(req, 0, sizeof(*req));
    kvrt_geometry_params_default(&req->params);
    kvrt_spec_default(&req->spec);
    cli_args_init(&args, "plan", argc, argv);
    for (;;) {
        switch (cli_args_next(&args, plan_options, &opt, &value)) {
        case CLI_NEXT_END:
            goto parsed;
        case CLI_NEXT_HELP:
            *help = true;
            return CLI_EXIT_OK;
        case CLI_NEXT_ERROR:
            return CLI_EXIT_USAGE;
        case CLI_NEXT_OPTION:
            if (!apply_option(req, opt->id, value))
                return CLI_EXIT_USAGE;
            req->given[opt->id] = true;
            break;
        }
    }
parsed:
    if (!check_combinations(req))
        return CLI_EXIT_USAGE;
    if (req->spec.kind == KVRT_SPEC_MLA && !req->given[OPT_KV_HEADS])
        req->spec.num_kv_heads = 1;
    if (!req->given[OPT_LAYOUT]) {
        bool set = false;
        int rc = kvrt_layout_from_env(&set, &req->layout);
        if (rc != KVRT_OK)
            return cli_fail_status(rc);
        req->layout = set ? req->layout : KVRT_LAYOUT_LBNHC;
        req->layout_source = set ? KVRT_LAYOUT_ENV : "default";
    }
    req->params.layout = req->layout;
    req->params.spec = &req->spec;
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

static void describe_spec(const struct plan_request *req, const struct kvrt_geometry *g,
                          char *buf, size_t size)
{
    const struct kvrt_spec *s = &req->spec;
    const struct kvrt_spec_info *in = &g->info;
    if (s->kind == KVRT_SPEC_STATE) {
        snprintf(buf, size, "state, %" PRIu64 " content bytes per block, block size %" PRIu64,
                 in->content_bytes, s->block_size);
        return;
    }
    size_t used = (size_t)snprintf(buf, size, "%s, %s, %" PRIu64 " KV head%s, head size %" PRIu64,
                                   kvrt_spec_kind_name(s->kind), kvrt_dtype_name(s->dtype),
                                   s->num_kv_heads, s->num_kv_heads == 1 ? "" : "s", in->head_size);
    if (s->kind == KVRT_SPEC_ATTENTION && used < size)
        used += (size_t)snprintf(buf + used, size - used, " (V %" PRIu64 ")", in->head_size_v);
    if (used < size)
        used += (size_t)snprintf(buf + used, size - used, ", block size %" PRIu64, s->block_size);
    if ((s->tokens_per_state_num != 1 || s->tokens_per_state_den != 1) && used < size)
        snprintf(buf + used, size - used, ", %" PRIu64 "/%" PRIu64 " tokens per state",
                 s->tokens_per_state_num, s->tokens_per_state_den);
}

static int print_table(const struct plan_request *req, const struct kvrt_geometry *g)
{
    const struct kvrt_spec_info *in = &g->info;
    int o[KVRT_NUM_AXES];
    char buf[512];
    kvrt_layout_stride_order(g->layout, o);

    printf("layout        %s (physical order %c %c %c %c %c; from %s)\n", kvrt_layout_name(g->layout),
           axis_letters[o[0]], axis_letters[o[1]], axis_letters[o[2]], axis_letters[o[3]],
           axis_letters[o[4]], req->layout_source);
    describe_spec(req, g, buf, sizeof(buf));
    printf("spec          %s\n", buf);
    printf("page          %" PRIu64 " bytes = H %" PRIu64 " x N %" PRIu64 " x C %" PRIu64, in->page_size,
           in->head_slots, in->states_per_block, in->content_bytes);
    if (in->page_size != in->unpadded_page_size)
        printf(" (padded from %" PRIu64 ")", in->unpadded_page_size);
    printf("\n");
    if (in->kernel_blocks_per_block > 1)
        printf("kernel blocks %" PRIu64 " per block, %" PRIu64 " tokens each\n",
               in->kernel_blocks_per_block, in->kernel_block_size);
    printf("total         %" PRIu64 " bytes for %" PRIu64 " layer%s x %" PRIu64 " block%s\n",
           g->total_bytes, g->num_layers, g->num_layers == 1 ? "" : "s", g->num_blocks,
           g->num_blocks == 1 ? "" : "s");
    printf("layer stride  %" PRIu64 " bytes\n", g->layer_stride);
    printf("block stride  %" PRIu64 " bytes\n", g->block_stride);

    printf("\naxis  extent          stride_bytes\n");
    for (int a = 0; a < KVRT_NUM_AXES; a++)
        printf("%-5c %-15" PRIu64 " %" PRIu64 "\n", axis_letters[a], g->shape_bytes[a],
               g->strides_bytes[a]);

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

/* json_object_set_new that reports whether `value` could be built. */
static bool put(json_t *obj, const char *key, json_t *value)
{
    return value && json_object_set_new(obj, key, value) == 0;
}

static json_t *layer_json(const struct kvrt_geometry *g, uint64_t layer)
{
    struct kvrt_view v;
    int rc = kvrt_geometry_layer_view(g, 0, layer, &v);
    if (rc != KVRT_OK) {
        cli_fail_status(rc);
        return NULL;
    }
    json_t *o = json_object();
    bool ok = o && put(o, "layer", cli_json_u64(layer, "layer")) &&
              put(o, "offset_bytes", cli_json_u64(v.offset_bytes, "offset_bytes")) &&
              put(o, "shape", cli_json_u64_array(v.shape, 4, "shape")) &&
              put(o, "strides", cli_json_u64_array(v.strides, 4, "strides")) &&
              put(o, "shape_bytes", cli_json_u64_array(v.shape_bytes, 4, "shape_bytes")) &&
              put(o, "strides_bytes", cli_json_u64_array(v.strides_bytes, 4, "strides_bytes"));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int print_json(const struct plan_request *req, const struct kvrt_geometry *g)
{
    const struct kvrt_spec_info *in = &g->info;
    int o[KVRT_NUM_AXES];
    char physical[KVRT_NUM_AXES + 1] = {0};
    kvrt_layout_stride_order(g->layout, o);
    for (int p = 0; p < KVRT_NUM_AXES; p++)
        physical[p] = axis_letters[o[p]];

    json_t *root = json_object(), *layers = json_array();
    bool ok = root && layers &&
              put(root, "layout", json_string(kvrt_layout_name(g->layout))) &&
              put(root, "layout_source", json_string(req->layout_source)) &&
              put(root, "stride_order", cli_json_int_array(o, KVRT_NUM_AXES)) &&
              put(root, "physical_order", json_string(physical)) &&
              put(root, "kind", json_string(kvrt_spec_kind_name(req->spec.kind))) &&
              put(root, "dtype", req->spec.kind == KVRT_SPEC_STATE
                                     ? json_null()
                                     : json_string(kvrt_dtype_name(req->spec.dtype))) &&
              put(root, "elem_size", cli_json_u64(in->elem_size, "elem_size")) &&
              put(root, "num_layers", cli_json_u64(g->num_layers, "num_layers")) &&
              put(root, "num_blocks", cli_json_u64(g->num_blocks, "num_blocks")) &&
              put(root, "kernel_block_size", cli_json_u64(in->kernel_block_size, "kernel_block_size")) &&
              put(root, "kernel_blocks_per_block",
                  cli_json_u64(in->kernel_blocks_per_block, "kernel_blocks_per_block")) &&
              put(root, "page_size_bytes", cli_json_u64(in->page_size, "page_size_bytes")) &&
              put(root, "unpadded_page_size_bytes",
                  cli_json_u64(in->unpadded_page_size, "unpadded_page_size_bytes")) &&
              put(root, "shape_bytes", cli_json_u64_array(g->shape_bytes, KVRT_NUM_AXES, "shape_bytes")) &&
              put(root, "strides_bytes",
                  cli_json_u64_array(g->strides_bytes, KVRT_NUM_AXES, "strides_bytes")) &&
              put(root, "total_bytes", cli_json_u64(g->total_bytes, "total_bytes")) &&
              put(root, "layer_stride", cli_json_u64(g->layer_stride, "layer_stride")) &&
              put(root, "block_stride", cli_json_u64(g->block_stride, "block_stride"));
    for (uint64_t l = 0; ok && l < g->num_layers; l++) {
        json_t *e = layer_json(g, l);
        ok = e && json_array_append_new(layers, e) == 0;
    }
    if (!ok) {
        json_decref(root);
        json_decref(layers);
        /* The failing step has printed its error, except on allocation failure. */
        return CLI_EXIT_USAGE;
    }
    json_object_set_new(root, "layers", layers);
    return cli_json_print(root);
}

static int plan_run(int argc, char **argv)
{
    struct plan_request req;
    struct kvrt_geometry g;
    bool help = false;
    int code = parse_request(argc, argv, &req, &help);
    if (help) {
        plan_help(stdout);
        return CLI_EXIT_OK;
    }
    if (code != CLI_EXIT_OK)
        return code;
    int rc = kvrt_geometry_compute(&req.params, &g);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    return req.json ? print_json(&req, &g) : print_table(&req, &g);
}

const struct cli_command cli_plan_command = {
    .name = "plan",
    .summary = "compute the shape, strides, size and per-layer views of a cache",
    .run = plan_run,
    .help = plan_help,
};
