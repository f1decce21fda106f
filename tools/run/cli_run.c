/* kvrt run: resolve, bind, place and allocate a real cache on a backend, push
 * a synthetic batch through it, and verify every byte and every decode. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/placement.h>
#include <kvrt/runtime.h>

#include "commands.h"
#include "cli_model.h"
#include "run.h"

#define RUN_MAX_SEQS_N 4096
#define RUN_MAX_SEQS ((unsigned)RUN_MAX_SEQS_N)
/* seq_lens are int32 in the decode ABI. */
#define RUN_MAX_CONTEXT (1u << 24)

enum run_opt { OPT_JSON, OPT_BACKEND, OPT_LAYOUT, OPT_SEQS, OPT_CONTEXT, OPT_Q_HEADS, OPT_SEED, OPT_NO_DECODE };

/* --blocks and --memory are the model options, described here as run uses them. */
static const struct cli_option run_options[] = {
    {"--backend", "NAME", OPT_BACKEND, false,
     "backend to run on (default: $" KVRT_BACKEND_ENV ", else the first\n"
     "available in priority order, below)"},
    {"--layout", "NAME", OPT_LAYOUT, false,
     "use this layout (a name or alias); refused (exit 3) when\n"
     "the backend does not declare it.  Default: resolved"},
    {"--seqs", "S", OPT_SEQS, false, "sequences in the batch (default 4, at most " CLI_TEXT(RUN_MAX_SEQS_N) ")"},
    {"--context", "T", OPT_CONTEXT, false, "tokens per sequence (default 512)"},
    {"--q-heads", "Q", OPT_Q_HEADS, false,
     "query heads for decode (default: the model's attention\n"
     "heads; with flags 4 x --kv-heads)"},
    {"--blocks", "B", CLI_OPT_BLOCKS, false,
     "blocks in the cache (default: what the batch needs plus\n"
     "a quarter, so blocks are drawn from a larger pool)"},
    {"--memory", "SIZE", CLI_OPT_MEMORY, false, "as many blocks as fit in SIZE"},
    {"--seed", "N", OPT_SEED, false, "seed of the random data and blocks (default 1)"},
    {"--no-decode", NULL, OPT_NO_DECODE, false, "skip paged decode"},
    {"--json", NULL, OPT_JSON, false,
     "print one JSON object: backend, layout, verified,\n"
     "max_abs_error, tolerance, bytes, gbps, timings, ..."},
    CLI_HELP_ROW,
    CLI_OPTIONS_END,
};

static const struct cli_option *const run_tables[] = {run_options, cli_model_options, NULL};

static void run_help(FILE *out)
{
    fprintf(out,
            "Usage: kvrt run [--json] [--backend NAME] [--layout NAME]\n"
            "                (--model FILE | --layers L --kv-heads H --head-size D ...)\n"
            "                [--seqs S] [--context T] [--q-heads Q] [--blocks B | --memory SIZE]\n"
            "                [--seed N] [--no-decode]\n"
            "\n"
            "Run a cache for real on a backend and check it on the host:\n"
            "  1. resolve the layout across the backend (kvrt_runtime_resolve_groups:\n"
            "     its declaration, the model's groups, %s), or take --layout;\n"
            "  2. bind the backend (a layout it does not declare is refused first);\n"
            "  3. place every group of the model in one allocation and create the cache;\n"
            "  4. write random K/V for S sequences x T tokens into random, distinct blocks\n"
            "     of every layer, read them back and compare bit for bit;\n"
            "  5. run paged decode on every attention layer (query heads Q, scale\n"
            "     1/sqrt(D), the first sequence T tokens long, the others between T/2\n"
            "     and T) and compare with a reference computed in double precision from\n"
            "     the stored values;\n"
            "  6. for state layers (Mamba, linear attention) and compressed layers, which\n"
            "     take no token operations: put random pages where the geometry says,\n"
            "     gather them, wipe them, scatter them back and gather again.\n"
            "MLA layers have no V: they are written and read back, and decode is\n"
            "skipped with the reason.  Sliding windows do not change the check (decode\n"
            "attends to every token).\n"
            "\n"
            "Bytes and throughput (GB/s = 10^9 bytes per second, per operation, summed\n"
            "over layers): write and read count the K and V bytes moved, decode the K\n"
            "and V bytes of every token it attends to, gather and scatter the staging\n"
            "bytes.  The decode tolerance is (2u + 1e-5) * max|reference| + 1e-6, u the\n"
            "unit roundoff of the cache type (bf16 2^-8, fp16 2^-11, fp32 2^-24).\n"
            "\n"
            "Options:\n",
            KVRT_LAYOUT_ENV);
    cli_print_options(out, run_options, 20);
    cli_model_print_options(out);
    fputs("\nBackends in priority order:\n", out);
    cli_print_wrapped(out, 2, 78, kvrt_runtime_backend_priority());
    fprintf(out,
            "\n"
            "Environment:\n"
            "  %s  the layout the resolution must honour (without --layout)\n"
            "  %s  the backend when --backend is not given\n"
            "  %s  plugin folders or files searched first\n"
            "\n"
            "Without --backend and %s, a backend whose bind fails is passed over\n"
            "(and shown) for the next one.\n"
            "\n"
            "Exit status: 0 verified; 1 a check failed (or an internal error); 2 bad\n"
            "input; 3 the layout is refused; 4 no such backend, no device, or no\n"
            "backend that binds.\n"
            "A progress line is shown on a terminal (not with --json).\n"
            "\n"
            "Example (a Llama-3-8B-shaped cache on the CPU, in seconds):\n"
            "  kvrt run --backend cpu --model examples/models/llama-3.1-8b.json \\\n"
            "           --seqs 4 --context 512\n",
            KVRT_LAYOUT_ENV, KVRT_BACKEND_ENV, KVRT_PLUGIN_PATH_ENV, KVRT_BACKEND_ENV);
}

struct run_request {
    bool json, decode;
    const char *backend, *layout; /* as spelled */
    enum kvrt_layout layout_value;
    const char *backend_option, *layout_option, *q_heads_option; /* as the table spells them */
    uint64_t seqs, context, q_heads, seed;
    struct cli_model_flags flags;
};

static int apply(void *request, const struct cli_option *opt, const char *v)
{
    struct run_request *r = request;
    bool ok = true;
    if (cli_model_flags_apply(&r->flags, opt, v, &ok))
        return ok ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    switch (opt->id) {
    case OPT_JSON: r->json = true; break;
    case OPT_BACKEND:
        r->backend = v;
        r->backend_option = opt->name;
        break;
    case OPT_LAYOUT:
        /* Parsed here, where the name comes in; the refusal of a layout the
         * backend does not declare quotes the spelling with the option. */
        if (kvrt_layout_parse(v, &r->layout_value) != KVRT_OK)
            return cli_error(CLI_EXIT_USAGE, "%s: %s", opt->name, kvrt_error_message());
        r->layout = v;
        r->layout_option = opt->name;
        break;
    case OPT_NO_DECODE: r->decode = false; break;
    case OPT_SEQS: ok = cli_parse_u64(opt->name, v, 1, RUN_MAX_SEQS, &r->seqs); break;
    case OPT_CONTEXT: ok = cli_parse_u64(opt->name, v, 1, RUN_MAX_CONTEXT, &r->context); break;
    case OPT_Q_HEADS:
        ok = cli_parse_u64(opt->name, v, 1, 1u << 16, &r->q_heads);
        r->q_heads_option = opt->name;
        break;
    case OPT_SEED: ok = cli_parse_u64(opt->name, v, 0, UINT64_MAX, &r->seed); break;
    }
    return ok ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

static int parse(int argc, char **argv, struct run_request *r, bool *help)
{
    memset(r, 0, sizeof(*r));
    r->decode = true;
    r->seqs = 4;
    r->context = 512;
    r->seed = 1;
    cli_model_flags_init(&r->flags, "run");
    return cli_parse_options("run", argc, argv, run_tables, apply, r, help);
}

/* Everything the run holds, released in one place. */
struct run_state {
    kvrt_runtime *rt;
    kvrt_backend *backend;
    kvrt_placement *placement;
    kvrt_cache *cache;
    const struct kvrt_model_info *model;
    uint64_t q_heads; /* --q-heads, else the model's (flags: 4 per KV head) */
    struct cli_model_flags *flags;
    struct run_batch batch;
    const char *backend_name, *backend_source; /* kvrt_setting_origin's word */
    bool backend_default;                      /* chosen by priority, not named */
    enum kvrt_layout layout;
    const char *layout_source;
    char layout_reason[512];
    uint64_t num_blocks, needed;
};

static void state_free(struct run_state *s)
{
    run_batch_free(&s->batch);
    kvrt_placement_destroy(s->placement);
    if (s->flags)
        cli_model_flags_free(s->flags);
    kvrt_runtime_close(s->rt); /* destroys the cache, buffers and backend */
}

/* The reason of the last resolve's choice step, for the report. */
static void choice_from_trace(const kvrt_runtime *rt, char *out, size_t size)
{
    struct kvrt_trace_step choice = {.kind = KVRT_TRACE_RESOLVE, .text = NULL};
    size_t n = kvrt_runtime_num_trace_steps(rt);
    for (size_t i = 0; i < n; i++) {
        struct kvrt_trace_step st;
        if (kvrt_runtime_trace_step(rt, i, &st) == KVRT_OK && st.kind == KVRT_TRACE_CHOICE)
            choice = st;
    }
    out[0] = '\0';
    if (!choice.text)
        return;
    /* "LBHNC, the best-ranked candidate": the name is printed separately. */
    const char *p = choice.text;
    const char *name = kvrt_layout_name((enum kvrt_layout)choice.layout);
    if (name && strncmp(p, name, strlen(name)) == 0 && strncmp(p + strlen(name), ", ", 2) == 0)
        p += strlen(name) + 2;
    snprintf(out, size, "%s", p);
}

static int choose_layout(struct run_request *r, struct run_state *s)
{
    const char *names[1] = {s->backend_name};
    if (r->layout) {
        s->layout = r->layout_value;
        s->layout_source = r->layout_option;
        snprintf(s->layout_reason, sizeof(s->layout_reason), "given with %s %s", r->layout_option, r->layout);
        return CLI_EXIT_OK;
    }
    int rc = kvrt_runtime_resolve_groups(s->rt, names, 1, s->model->placement_groups, s->model->num_groups, NULL,
                                         &s->layout);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    s->layout_source = "resolved";
    choice_from_trace(s->rt, s->layout_reason, sizeof(s->layout_reason));
    return CLI_EXIT_OK;
}

static int check_dtypes(const struct run_state *s)
{
    for (size_t g = 0; g < s->model->num_groups; g++) {
        const struct kvrt_spec *sp = &s->model->groups[g].layers[0].spec;
        if (sp->kind != KVRT_SPEC_STATE && !kvrt_backend_supports_dtype(s->backend, sp->dtype))
            return cli_error(CLI_EXIT_USAGE,
                             "backend \"%s\" does not support %s caches (group %s); "
                             "choose another --dtype or backend (see 'kvrt plugins')",
                             s->backend_name, kvrt_dtype_name(sp->dtype), s->model->groups[g].name);
    }
    return CLI_EXIT_OK;
}

/* Decode shares each KV head among q_heads / kv_heads query heads; a count
 * that does not divide is refused, never replaced by another. */
static int check_q_heads(const struct run_request *r, const struct kvrt_model_info *m, uint64_t q)
{
    for (size_t g = 0; q && g < m->num_groups; g++) {
        const struct kvrt_spec *spec = &m->groups[g].layers[0].spec;
        struct kvrt_spec_info in;
        if (!run_token_layer(spec) || kvrt_spec_derive(spec, 0, &in) != KVRT_OK || in.head_slots == 0 ||
            q % in.head_slots == 0)
            continue;
        return cli_error(CLI_EXIT_USAGE,
                         "run: %" PRIu64 " query heads (%s) is not a multiple of the %" PRIu64
                         " KV heads of group \"%s\"; give --q-heads as a multiple of %" PRIu64,
                         q, r->q_heads ? r->q_heads_option : "the model's", in.head_slots, m->groups[g].name,
                         in.head_slots);
    }
    return CLI_EXIT_OK;
}

static int set_up(struct run_request *r, struct run_state *s)
{
    s->flags = &r->flags;
    int code = cli_model_build(&r->flags, true, &s->model);
    if (code != CLI_EXIT_OK)
        return code;
    s->q_heads = r->q_heads ? r->q_heads : s->model->num_q_heads;
    if (!r->flags.file && !r->q_heads)
        s->q_heads *= 4; /* flags give KV heads; a typical GQA ratio */
    if ((code = check_q_heads(r, s->model, s->q_heads)) != CLI_EXIT_OK)
        return code;
    int rc = kvrt_runtime_open(NULL, &s->rt);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    enum kvrt_setting_source source;
    if ((rc = kvrt_runtime_choose_backend(s->rt, r->backend, &s->backend_name, &source)) != KVRT_OK)
        return cli_fail_status(rc);
    s->backend_source = kvrt_setting_origin(KVRT_SETTING_BACKEND, source, r->backend_option);
    s->backend_default = source == KVRT_SOURCE_DEFAULT;
    if ((code = choose_layout(r, s)) != CLI_EXIT_OK)
        return code;
    /* Unnamed, the library binds: a backend whose bind fails is passed over
     * for the next, as when the default was chosen. */
    rc = kvrt_runtime_bind_layout(s->rt, r->backend, s->layout, &s->backend);
    if (rc == KVRT_ERR_REFUSED && r->layout)
        return cli_error(cli_exit_for_status(rc), "%s %s: %s (see 'kvrt plugins')", r->layout_option, r->layout,
                         kvrt_error_message());
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    s->backend_name = kvrt_backend_name(s->backend);
    if ((code = check_dtypes(s)) != CLI_EXIT_OK)
        return code;

    s->needed = run_blocks_needed(s->model, r->seqs, r->context);
    code = cli_model_num_blocks(&r->flags, s->model, s->layout, s->needed + s->needed / 4 + 1, &s->num_blocks);
    if (code != CLI_EXIT_OK)
        return code;
    if (s->num_blocks < s->needed)
        return cli_error(CLI_EXIT_USAGE,
                         "run: the batch needs %" PRIu64 " blocks (%" PRIu64 " sequences x "
                         "%" PRIu64 " tokens in every group) but the cache has %" PRIu64 "; raise --blocks "
                         "or --memory, or lower --seqs or --context",
                         s->needed, r->seqs, r->context, s->num_blocks);
    if (s->num_blocks > INT32_MAX)
        return cli_error(CLI_EXIT_USAGE,
                         "run: %" PRIu64 " blocks is more than decode's block tables "
                         "address (%d); lower --blocks or --memory",
                         s->num_blocks, INT32_MAX);
    rc = kvrt_placement_create(s->layout, s->model->placement_groups, s->model->num_groups, s->num_blocks, 0,
                               &s->placement);
    if (rc == KVRT_OK)
        rc = kvrt_cache_create(s->backend, s->placement, &s->cache);
    return rc == KVRT_OK ? CLI_EXIT_OK : cli_fail_status(rc);
}

static double gbps(const struct run_op *op)
{
    return op->seconds > 0 ? (double)op->bytes / op->seconds / 1e9 : 0;
}

static json_t *op_json(const struct run_op *op, bool seconds)
{
    if (!op->layers)
        return json_null();
    return seconds ? json_real(op->seconds) : json_real(gbps(op));
}

static int print_json(const struct run_request *r, const struct run_state *s, const struct run_totals *t, bool verified)
{
    const struct run_op *ops[] = {&t->write, &t->read, &t->decode, &t->gather, &t->scatter};
    static const char *const names[] = {"write", "read", "decode", "gather", "scatter"};
    json_t *root = json_object(), *bytes = json_object(), *rates = json_object(), *times = json_object();
    bool ok = kvrt_json_put(bytes, "cache", cli_json_u64(kvrt_placement_size(s->placement), "bytes"));
    for (size_t i = 0; ok && i < 5; i++)
        ok = kvrt_json_put(bytes, names[i], cli_json_u64(ops[i]->bytes, "bytes")) &&
             kvrt_json_put(rates, names[i], op_json(ops[i], false)) &&
             kvrt_json_put(times, names[i], op_json(ops[i], true));
    bool decoded = t->decode.layers > 0;
    json_t *skipped = json_object();
    ok = ok && kvrt_json_put(skipped, "layers", cli_json_u64(t->decode_skipped, "layers")) &&
         kvrt_json_put(skipped, "reason", kvrt_json_str(t->skip_reason));
    /* Backends whose bind failed before this one was bound. */
    json_t *passed = json_array();
    ok = kvrt_json_put(root, "passed_over", passed) && ok;
    for (size_t i = 0, n = kvrt_runtime_num_trace_steps(s->rt); ok && i < n; i++) {
        struct kvrt_trace_step st;
        if (kvrt_runtime_trace_step(s->rt, i, &st) != KVRT_OK || !cli_bind_failure_step(s->rt, &st))
            continue;
        json_t *o = json_object();
        ok = json_array_append_new(passed, o) == 0 && kvrt_json_put(o, "backend", kvrt_json_str(st.backend)) &&
             kvrt_json_put(o, "reason", kvrt_json_str(st.text));
    }
    ok = ok && kvrt_json_put(root, "backend", kvrt_json_str(s->backend_name)) &&
         kvrt_json_put(root, "backend_source", kvrt_json_str(s->backend_source)) &&
         kvrt_json_put(root, "layout", kvrt_json_str(kvrt_layout_name(s->layout))) &&
         kvrt_json_put(root, "layout_source", kvrt_json_str(s->layout_source)) &&
         kvrt_json_put(root, "layout_reason", kvrt_json_str(s->layout_reason)) &&
         kvrt_json_put(root, "verified", json_boolean(verified)) &&
         kvrt_json_put(root, "max_abs_error", decoded ? json_real(t->max_abs_error) : json_null()) &&
         kvrt_json_put(root, "tolerance", decoded ? json_real(t->tolerance) : json_null()) &&
         kvrt_json_put(root, "failure", verified ? json_null() : kvrt_json_str(t->failure)) &&
         kvrt_json_put(root, "decode_layers", cli_json_u64(t->decode.layers, "layers")) &&
         kvrt_json_put(root, "decode_skipped", skipped) &&
         kvrt_json_put(root, "state_layers", cli_json_u64(t->gather.layers, "layers")) &&
         kvrt_json_put(root, "bytes", bytes) && kvrt_json_put(root, "gbps", rates) &&
         kvrt_json_put(root, "timings", times) &&
         kvrt_json_put(root, "num_blocks", cli_json_u64(s->num_blocks, "num_blocks")) &&
         kvrt_json_put(root, "blocks_needed", cli_json_u64(s->needed, "blocks_needed")) &&
         kvrt_json_put(root, "bytes_per_block", cli_json_u64(kvrt_placement_bytes_per_block(s->placement), "b")) &&
         kvrt_json_put(root, "seqs", cli_json_u64(r->seqs, "seqs")) &&
         kvrt_json_put(root, "context", cli_json_u64(r->context, "context")) &&
         kvrt_json_put(root, "q_heads", cli_json_u64(t->q_heads, "q_heads")) &&
         kvrt_json_put(root, "seed", json_integer((json_int_t)r->seed)) &&
         kvrt_json_put(root, "model", cli_model_json(s->flags));
    if (!ok) {
        json_decref(root);
        return cli_error(CLI_EXIT_INTERNAL, "run: could not build the JSON output");
    }
    return cli_json_print(root);
}

static void print_op(const char *name, const struct run_op *op, const char *what, const char *tail)
{
    char b[32];
    if (!op->layers)
        return;
    cli_format_bytes(op->bytes, b, sizeof(b));
    printf("%-9s %" PRIu64 " layer%s, %s%s in %.4f s = %.3g GB/s%s\n", name, op->layers, op->layers == 1 ? "" : "s", b,
           what, op->seconds, gbps(op), tail);
}

static void print_human(const struct run_request *r, const struct run_state *s, const struct run_totals *t,
                        bool verified)
{
    char a[32], b[64], spec[256];
    printf("backend   %s (%s%s)\n", s->backend_name, s->backend_source, s->backend_default ? ": first available" : "");
    cli_print_selection(s->rt, "          ");
    printf("layout    %s (%s)\n", kvrt_layout_name(s->layout), s->layout_reason);
    printf("model     %s: %" PRIu64 " layer%s in %zu group%s\n", s->model->source, s->model->num_layers,
           s->model->num_layers == 1 ? "" : "s", s->model->num_groups, s->model->num_groups == 1 ? "" : "s");
    for (size_t g = 0; g < s->model->num_groups; g++) {
        cli_describe_spec(&s->model->groups[g].layers[0].spec, spec, sizeof(spec));
        printf("  group %zu %s: %zu layer%s, %s\n", g, s->model->groups[g].name, s->model->groups[g].num_layers,
               s->model->groups[g].num_layers == 1 ? "" : "s", spec);
    }
    cli_format_bytes(kvrt_placement_bytes_per_block(s->placement), a, sizeof(a));
    cli_format_bytes(kvrt_placement_size(s->placement), b, sizeof(b));
    printf("cache     %" PRIu64 " blocks x %s = %s (%" PRIu64 " bytes; the batch uses %" PRIu64 " blocks)\n",
           s->num_blocks, a, b, kvrt_placement_size(s->placement), s->needed);
    printf("batch     %" PRIu64 " sequence%s x %" PRIu64 " tokens, %" PRIu64 " query heads, seed %" PRIu64 "\n",
           r->seqs, r->seqs == 1 ? "" : "s", r->context, t->q_heads, r->seed);
    print_op("write", &t->write, "", "");
    print_op("read", &t->read, "", t->read.failed ? "; read back DIFFERS" : "; read back bit-exact");
    snprintf(b, sizeof(b), "; max |error| %.3g <= %.3g", t->max_abs_error, t->tolerance);
    print_op("decode", &t->decode, " of K+V", t->max_abs_error <= t->tolerance ? b : "; ABOVE tolerance");
    if (t->decode_skipped)
        printf("          decode skipped on %" PRIu64 " layer%s: %s\n", t->decode_skipped,
               t->decode_skipped == 1 ? "" : "s", t->skip_reason);
    print_op("gather", &t->gather, " of state pages", "");
    print_op("scatter", &t->scatter, " of state pages", t->scatter.failed ? "" : "; round trip exact");
    printf("verified  %s%s%s\n", verified ? "yes" : "NO: ", verified ? "" : t->failure, "");
}

static int run_run(int argc, char **argv)
{
    struct run_request r;
    struct run_state s;
    struct run_totals t;
    bool help = false;
    int code = parse(argc, argv, &r, &help);
    if (help) {
        run_help(stdout);
        return CLI_EXIT_OK;
    }
    if (code != CLI_EXIT_OK)
        return code;
    memset(&s, 0, sizeof(s));
    memset(&t, 0, sizeof(t));
    code = set_up(&r, &s);
    struct numeric_rng rng = {r.seed};
    if (code == CLI_EXIT_OK && run_batch_create(s.model, r.seqs, r.context, s.num_blocks, &rng, &s.batch) != KVRT_OK)
        code = cli_error(CLI_EXIT_INTERNAL, "run: out of memory for the batch");
    if (code == CLI_EXIT_OK) {
        struct cli_progress progress;
        struct run_ctx ctx = {
            .backend = s.backend,
            .cache = s.cache,
            .model = s.model,
            .batch = &s.batch,
            .rng = rng,
            .q_heads = s.q_heads,
            .decode = r.decode,
            .progress = &progress,
            .layers_total = s.model->num_layers,
        };
        cli_progress_begin(&progress, "run", r.json);
        for (size_t g = 0; code == CLI_EXIT_OK && g < s.model->num_groups; g++)
            if (run_token_layer(&s.model->groups[g].layers[0].spec))
                code = run_attention_group(&ctx, g, &t);
        if (code == CLI_EXIT_OK)
            code = run_state_groups(&ctx, &t);
        cli_progress_end(&progress);
    }
    if (code == CLI_EXIT_OK) {
        bool verified = t.mismatches == 0;
        code = r.json ? print_json(&r, &s, &t, verified) : (print_human(&r, &s, &t, verified), CLI_EXIT_OK);
        if (code == CLI_EXIT_OK && !verified) {
            fflush(stdout);
            code = cli_error(CLI_EXIT_INTERNAL, "run: not verified on backend \"%s\", layout %s: %s", s.backend_name,
                             kvrt_layout_name(s.layout), t.failure);
        }
    }
    state_free(&s);
    return code;
}

const struct cli_command cli_run_command = {
    .name = "run",
    .summary = "run a synthetic batch through a real cache on a backend and verify it",
    .run = run_run,
    .help = run_help,
    .options = run_tables,
};
