/* kvrt bench: throughput of every operation on every layout, measured next to
 * the machine's own limits (memcpy, streaming read) so the numbers mean
 * something on any machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/runtime.h>

#include "commands.h"
#include "bench.h"

#define MAX_BACKENDS 8
/* Bytes of the device-copy roofline a plugin measures. */
#define MEMCPY_BYTES (256ull << 20)

enum bench_opt {
    OPT_JSON,
    OPT_BACKEND,
    OPT_LAYOUT,
    OPT_OP,
    OPT_DTYPE,
    OPT_KV_HEADS,
    OPT_HEAD_SIZE,
    OPT_BLOCK_SIZE,
    OPT_LAYERS,
    OPT_TOKENS,
    OPT_PAIRS,
    OPT_GATHER,
    OPT_SEQS,
    OPT_CONTEXT,
    OPT_Q_HEADS,
    OPT_REPEAT,
    OPT_THREADS,
    OPT_PLOT
};

static const struct cli_option bench_options[] = {
    {"--backend", "NAME", OPT_BACKEND, true,
     "backend to measure; repeat for several (default:\n"
     "$" KVRT_BACKEND_ENV ", else the first available)"},
    {"--layout", "NAME", OPT_LAYOUT, true,
     "layout to measure; repeat for several (default: every\n"
     "layout the backend declares, or " KVRT_LAYOUT_ENV " when set)"},
    {"--op", "OP", OPT_OP, true,
     "write, read, copy_blocks, gather, scatter or decode;\n"
     "repeat (default: all)"},
    {"--dtype", "T", OPT_DTYPE, false, "element type (default bf16)"},
    {"--kv-heads", "H", OPT_KV_HEADS, false, "KV heads (default 8)"},
    {"--head-size", "D", OPT_HEAD_SIZE, false, "elements per head, K and V (default 128)"},
    {"--block-size", "N", OPT_BLOCK_SIZE, false, "tokens per block (default 16)"},
    {"--layers", "L", OPT_LAYERS, false, "layers in the cache (default 4)"},
    {"--tokens", "T", OPT_TOKENS, false, "tokens written and read per layer (default 4096)"},
    {"--pairs", "P", OPT_PAIRS, false, "block pairs copied (default 256)"},
    {"--gather-blocks", "G", OPT_GATHER, false, "random blocks gathered and scattered (default 256)"},
    {"--seqs", "S", OPT_SEQS, false, "decode: sequences (default 16)"},
    {"--context", "C", OPT_CONTEXT, false, "decode: tokens per sequence (default 2048)"},
    {"--q-heads", "Q", OPT_Q_HEADS, false, "decode: query heads (default 32)"},
    {"--repeat", "N", OPT_REPEAT, false, "timed repetitions (default 5)"},
    {"--threads", "N", OPT_THREADS, false,
     "worker threads of the cpu backend (sets KVRT_CPU_THREADS;\n"
     "default: one per CPU)"},
    {"--plot", "FILE.svg", OPT_PLOT, false,
     "also draw a bar chart of GB/s per layout and op, with\n"
     "the best memcpy sample as a line"},
    {"--json", NULL, OPT_JSON, false,
     "print one JSON object: {\"memcpy_gbps\", \"read_gbps\",\n"
     "\"results\": [{\"backend\", \"op\", \"layout\", \"dtype\",\n"
     "\"gbps\", \"memcpy_gbps\", \"read_gbps\", \"roofline\"\n"
     "(\"memcpy\" or \"read\"), \"ratio\" (to that roofline),\n"
     "\"ratio_to_memcpy\", \"median_gbps\", \"bytes\",\n"
     "\"seconds\", \"skipped\", \"reason\"}], \"shape\": {...},\n"
     "\"threads\", \"roofline\", \"roofline_gbps\"}; roofline_gbps\n"
     "and ratio_to_roofline: a plugin's device-copy roofline"},
    CLI_HELP_ROW,
    CLI_OPTIONS_END,
};

static const struct cli_option *const bench_tables[] = {bench_options, NULL};

static void bench_help(FILE *out)
{
    fprintf(out, "Usage: kvrt bench [--json] [--backend NAME ...] [--layout NAME ...]\n"
                 "                  [--op write|read|copy_blocks|gather|scatter|decode ...]\n"
                 "                  [--dtype T] [--kv-heads H] [--head-size D] [--block-size N]\n"
                 "                  [--layers L] [--tokens T] [--pairs P] [--gather-blocks G]\n"
                 "                  [--seqs S] [--context C] [--q-heads Q] [--repeat N]\n"
                 "                  [--threads N] [--plot FILE.svg]\n"
                 "\n"
                 "Measure each operation's throughput on each layout of a backend, and report\n"
                 "it as GB/s (10^9 bytes per second) and as a ratio to the physical limit\n"
                 "that bounds it, measured in the same run: decode only reads the cache and\n"
                 "is rated against a streaming read; every other op moves bytes and is\n"
                 "rated against memcpy.  Both use the cpu backend's threads (--threads, else\n"
                 "one per CPU), over at least 64 MiB, timed after every repetition of every\n"
                 "op (best of each).\n"
                 "Every op runs once to warm up, then --repeat times; the best time is\n"
                 "reported (the median is in the JSON).  The default shapes are a\n"
                 "Llama-3-8B-like attention layer.\n"
                 "\n"
                 "Bytes counted per repetition:\n"
                 "  write, read      layers x tokens x KV heads x (D + Dv) x element size: the\n"
                 "                   K and V bytes moved through the slot mapping (every layer)\n"
                 "  copy_blocks      pairs x the bytes of one block across all layers\n"
                 "  gather, scatter  the staging buffer: blocks x the page of every layer\n"
                 "  decode           seqs x context x KV heads x (D + Dv) x element size: the K\n"
                 "                   and V bytes one layer's paged decode reads\n"
                 "\n"
                 "Options:\n");
    cli_print_options(out, bench_options, 21);
    fprintf(out,
            "\n"
            "Environment:\n"
            "  %s  the backend when --backend is not given\n"
            "  %s  the only layout measured when --layout is not given\n"
            "  KVRT_CPU_THREADS  worker threads of the cpu backend\n"
            "  %s  plugin folders or files searched first\n"
            "\n"
            "A progress line is shown on a terminal (not with --json).  The defaults take\n"
            "a few seconds per layout on a small CPU.\n"
            "\n"
            "Example:\n"
            "  kvrt bench --backend cpu --op write --op decode --plot bench.svg\n",
            KVRT_BACKEND_ENV, KVRT_LAYOUT_ENV, KVRT_PLUGIN_PATH_ENV);
}

struct bench_request {
    bool json;
    const char *backends[MAX_BACKENDS];
    size_t num_backends;
    bool layouts[KVRT_NUM_LAYOUTS];
    bool any_layout;
    bool ops[BENCH_NUM_OPS];
    bool any_op;
    const char *plot;
    struct bench_shape sh;
};

static bool number(const char *opt, const char *v, uint64_t max, uint64_t *out)
{
    return cli_parse_u64(opt, v, 1, max, out);
}

static int apply(void *request, const struct cli_option *opt, const char *v)
{
    struct bench_request *r = request;
    uint64_t n;
    bool ok = true;
    enum kvrt_layout l;
    switch (opt->id) {
    case OPT_JSON: r->json = true; break;
    case OPT_PLOT: r->plot = v; break;
    case OPT_BACKEND:
        if (r->num_backends == MAX_BACKENDS)
            return cli_error(CLI_EXIT_USAGE, "bench: at most %d %s options", MAX_BACKENDS, opt->name);
        r->backends[r->num_backends++] = v;
        break;
    case OPT_LAYOUT:
        if (kvrt_layout_parse(v, &l) != KVRT_OK)
            return cli_error(CLI_EXIT_USAGE, "%s: %s", opt->name, kvrt_error_message());
        r->layouts[l] = r->any_layout = true;
        break;
    case OPT_OP: {
        int k = 0;
        while (k < BENCH_NUM_OPS && strcmp(bench_op_names[k], v) != 0)
            k++;
        if (k == BENCH_NUM_OPS)
            return cli_error(CLI_EXIT_USAGE,
                             "%s \"%s\" is not an operation: valid ones are write, read, "
                             "copy_blocks, gather, scatter, decode",
                             opt->name, v);
        r->ops[k] = r->any_op = true;
        break;
    }
    case OPT_DTYPE:
        if (kvrt_dtype_parse(v, &r->sh.dtype) != KVRT_OK)
            return cli_error(CLI_EXIT_USAGE, "%s: %s", opt->name, kvrt_error_message());
        break;
    case OPT_KV_HEADS: ok = number(opt->name, v, 1u << 16, &r->sh.kv_heads); break;
    case OPT_HEAD_SIZE: ok = number(opt->name, v, 1u << 16, &r->sh.head_size); break;
    case OPT_BLOCK_SIZE: ok = number(opt->name, v, 1u << 16, &r->sh.block_size); break;
    case OPT_LAYERS: ok = number(opt->name, v, 4096, &r->sh.layers); break;
    case OPT_TOKENS: ok = number(opt->name, v, 1u << 24, &r->sh.tokens); break;
    case OPT_PAIRS: ok = number(opt->name, v, 1u << 20, &r->sh.pairs); break;
    case OPT_GATHER: ok = number(opt->name, v, 1u << 20, &r->sh.blocks); break;
    case OPT_SEQS: ok = number(opt->name, v, 4096, &r->sh.seqs); break;
    case OPT_CONTEXT: ok = number(opt->name, v, 1u << 24, &r->sh.context); break;
    case OPT_Q_HEADS: ok = number(opt->name, v, 1u << 16, &r->sh.q_heads); break;
    case OPT_REPEAT:
        ok = number(opt->name, v, 1000, &n);
        r->sh.repeat = (unsigned)n;
        break;
    case OPT_THREADS:
        ok = number(opt->name, v, 1024, &n);
        if (ok)
            setenv("KVRT_CPU_THREADS", v, 1);
        break;
    }
    return ok ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

static int parse(int argc, char **argv, struct bench_request *r, bool *help)
{
    memset(r, 0, sizeof(*r));
    r->sh = (struct bench_shape){KVRT_DTYPE_BF16, 8, 128, 16, 4, 4096, 256, 256, 16, 2048, 32, 5};
    return cli_parse_options("bench", argc, argv, bench_tables, apply, r, help);
}

/* The layouts to measure on backend i: asked for, else the env, else all
 * the backend declares (in its order of preference). */
static size_t pick_layouts(const struct bench_request *r, const kvrt_runtime *rt, size_t i,
                           enum kvrt_layout out[KVRT_NUM_LAYOUTS])
{
    size_t n = 0;
    bool set = false;
    enum kvrt_layout env;
    if (!r->any_layout && kvrt_layout_from_env(&set, &env) == KVRT_OK && set) {
        out[n++] = env;
        return n;
    }
    if (r->any_layout) {
        for (int l = 0; l < KVRT_NUM_LAYOUTS; l++)
            if (r->layouts[l])
                out[n++] = (enum kvrt_layout)l;
        return n;
    }
    struct kvrt_plugin_info in;
    if (kvrt_runtime_plugin_info(rt, i, &in) != KVRT_OK)
        return 0;
    if (in.any_layout) {
        for (int l = 0; l < KVRT_NUM_LAYOUTS; l++)
            out[n++] = (enum kvrt_layout)l;
        return n;
    }
    for (size_t k = 0; k < in.num_layouts; k++)
        out[n++] = in.layouts[k];
    return n;
}

static int print_json(const struct bench_request *r, double memcpy_gbps, double read_gbps,
                      const struct bench_result *res, size_t n)
{
    json_t *root = json_object(), *results = json_array(), *shape = json_object();
    for (size_t i = 0; i < n; i++) {
        const double g = bench_gbps(res[i].bytes, res[i].best_s);
        json_t *o = json_object();
        bool skip = res[i].skipped;
        kvrt_json_put(o, "backend", kvrt_json_str(res[i].backend));
        kvrt_json_put(o, "op", kvrt_json_str(bench_op_names[res[i].op]));
        kvrt_json_put(o, "layout", kvrt_json_str(kvrt_layout_name(res[i].layout)));
        kvrt_json_put(o, "dtype", kvrt_json_str(kvrt_dtype_name(res[i].dtype)));
        kvrt_json_put(o, "gbps", skip ? json_null() : json_real(g));
        const double mc = res[i].memcpy_gbps;
        kvrt_json_put(o, "memcpy_gbps", skip ? json_null() : json_real(mc));
        kvrt_json_put(o, "read_gbps", skip ? json_null() : json_real(res[i].read_gbps));
        kvrt_json_put(o, "roofline", json_string(bench_roofline_names[res[i].roofline]));
        kvrt_json_put(o, "ratio",
                      skip || bench_roof_gbps(&res[i]) <= 0 ? json_null() : json_real(bench_ratio(&res[i])));
        kvrt_json_put(o, "ratio_to_memcpy", skip || mc <= 0 ? json_null() : json_real(g / mc));
        const double droof = res[i].roofline_gbps;
        kvrt_json_put(o, "roofline_gbps", droof > 0 ? json_real(droof) : json_null());
        kvrt_json_put(o, "ratio_to_roofline", skip || droof <= 0 ? json_null() : json_real(g / droof));
        kvrt_json_put(o, "median_gbps", skip ? json_null() : json_real(bench_gbps(res[i].bytes, res[i].median_s)));
        kvrt_json_put(o, "bytes", cli_json_u64(res[i].bytes, "bytes"));
        kvrt_json_put(o, "seconds", skip ? json_null() : json_real(res[i].best_s));
        kvrt_json_put(o, "skipped", json_boolean(skip));
        kvrt_json_put(o, "reason", kvrt_json_str(res[i].reason));
        json_array_append_new(results, o);
    }
    const struct bench_shape *s = &r->sh;
    kvrt_json_put(shape, "dtype", kvrt_json_str(kvrt_dtype_name(s->dtype)));
    kvrt_json_put(shape, "kv_heads", json_integer((json_int_t)s->kv_heads));
    kvrt_json_put(shape, "head_size", json_integer((json_int_t)s->head_size));
    kvrt_json_put(shape, "block_size", json_integer((json_int_t)s->block_size));
    kvrt_json_put(shape, "layers", json_integer((json_int_t)s->layers));
    kvrt_json_put(shape, "tokens", json_integer((json_int_t)s->tokens));
    kvrt_json_put(shape, "pairs", json_integer((json_int_t)s->pairs));
    kvrt_json_put(shape, "gather_blocks", json_integer((json_int_t)s->blocks));
    kvrt_json_put(shape, "seqs", json_integer((json_int_t)s->seqs));
    kvrt_json_put(shape, "context", json_integer((json_int_t)s->context));
    kvrt_json_put(shape, "q_heads", json_integer((json_int_t)s->q_heads));
    kvrt_json_put(shape, "repeat", json_integer((json_int_t)s->repeat));
    /* One backend: its device-copy roofline at the top, for scripts
     * (gpu-check.sh). */
    const double roof = n > 0 && r->num_backends == 1 ? res[0].roofline_gbps : 0;
    kvrt_json_put(root, "roofline", kvrt_json_str(roof > 0 ? "device copy" : "memcpy"));
    kvrt_json_put(root, "roofline_gbps", json_real(roof > 0 ? roof : memcpy_gbps));
    bool ok = kvrt_json_put(root, "memcpy_gbps", json_real(memcpy_gbps)) &&
              kvrt_json_put(root, "read_gbps", json_real(read_gbps)) && kvrt_json_put(root, "results", results) &&
              kvrt_json_put(root, "shape", shape) &&
              kvrt_json_put(root, "threads", json_integer((json_int_t)bench_roof_threads()));
    if (!ok) {
        json_decref(root);
        return cli_error(CLI_EXIT_INTERNAL, "bench: could not build the JSON output");
    }
    return cli_json_print(root);
}

static void print_human(double memcpy_gbps, double read_gbps, const struct bench_result *res, size_t n)
{
    printf("limits    memcpy %.2f GB/s, read %.2f GB/s (best samples; %u thread%s, timed after every\n"
           "          repetition of every op; each op's own samples are in the table)\n\n",
           memcpy_gbps, read_gbps, bench_roof_threads(), bench_roof_threads() == 1 ? "" : "s");
    printf("%-8s %-11s %-7s %-8s %9s %9s %9s %-7s %6s  %s\n", "backend", "op", "layout", "dtype", "GB/s", "memcpy",
           "read", "roof", "ratio", "bytes");
    const char *last = NULL;
    for (size_t i = 0; i < n; i++)
        if (res[i].roofline_gbps > 0 && res[i].backend != last) {
            last = res[i].backend;
            printf("device    %.2f GB/s: %s's device-to-device copy of 256 MiB, timed by the plugin\n",
                   res[i].roofline_gbps, last);
        }
    for (size_t i = 0; i < n; i++) {
        char b[32];
        cli_format_bytes(res[i].bytes, b, sizeof(b));
        if (res[i].skipped) {
            printf("%-8s %-11s %-7s %-8s %9s %9s %9s %-7s %6s  skipped: %s\n", res[i].backend,
                   bench_op_names[res[i].op], kvrt_layout_name(res[i].layout), kvrt_dtype_name(res[i].dtype), "-", "-",
                   "-", "-", "-", res[i].reason);
            continue;
        }
        const double g = bench_gbps(res[i].bytes, res[i].best_s);
        /* On a device the limit is the plugin's own device-to-device copy. */
        const bool device = res[i].roofline_gbps > 0;
        printf("%-8s %-11s %-7s %-8s %9.2f %9.2f %9.2f %-7s %6.2f  %s\n", res[i].backend, bench_op_names[res[i].op],
               kvrt_layout_name(res[i].layout), kvrt_dtype_name(res[i].dtype), g, res[i].memcpy_gbps, res[i].read_gbps,
               device ? "device" : bench_roofline_names[res[i].roofline],
               device ? g / res[i].roofline_gbps : bench_ratio(&res[i]), b);
    }
}

static int bench_run(int argc, char **argv)
{
    struct bench_request r;
    bool help = false;
    int code = parse(argc, argv, &r, &help);
    if (help) {
        bench_help(stdout);
        return CLI_EXIT_OK;
    }
    if (code != CLI_EXIT_OK)
        return code;
    if (!r.any_op)
        for (int k = 0; k < BENCH_NUM_OPS; k++)
            r.ops[k] = true;
    bool env_set;
    enum kvrt_layout env_layout;
    if (!r.any_layout && kvrt_layout_from_env(&env_set, &env_layout) != KVRT_OK)
        return cli_fail_status(KVRT_ERR_INVALID);
    kvrt_runtime *rt = NULL;
    int rc = kvrt_runtime_open(NULL, &rt);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    if (r.num_backends == 0 && (rc = kvrt_runtime_default_backend(rt, &r.backends[r.num_backends++])) != KVRT_OK) {
        kvrt_runtime_close(rt);
        return cli_fail_status(rc);
    }
    /* Plan every step first, for the progress line and the result table. */
    enum kvrt_layout layouts[MAX_BACKENDS][KVRT_NUM_LAYOUTS];
    size_t num_layouts[MAX_BACKENDS], ops = 0, total = 0;
    for (int k = 0; k < BENCH_NUM_OPS; k++)
        ops += r.ops[k];
    for (size_t b = 0; b < r.num_backends; b++) {
        size_t i;
        if ((rc = kvrt_runtime_find_plugin(rt, r.backends[b], &i)) != KVRT_OK) {
            kvrt_runtime_close(rt);
            return cli_fail_status(rc);
        }
        num_layouts[b] = pick_layouts(&r, rt, i, layouts[b]);
        total += num_layouts[b] * ops;
    }
    struct bench_result *res = calloc(total + 1, sizeof(*res));
    if (!res) {
        kvrt_runtime_close(rt);
        return cli_error(CLI_EXIT_INTERNAL, "bench: out of memory");
    }
    struct cli_progress progress;
    cli_progress_begin(&progress, "bench", r.json);
    double roofline[MAX_BACKENDS] = {0};
    uint64_t done = 0;
    size_t n = 0;
    for (size_t b = 0; code == CLI_EXIT_OK && b < r.num_backends; b++) {
        for (size_t l = 0; code == CLI_EXIT_OK && l < num_layouts[b]; l++) {
            kvrt_backend *be;
            if ((rc = kvrt_runtime_bind_layout(rt, r.backends[b], layouts[b][l], &be)) != KVRT_OK) {
                code = cli_fail_status(rc);
                break;
            }
            if (l == 0) {
                /* The backend's copy roofline, where its plugin measures one
                 * (device-to-device on a GPU); else host memcpy. */
                double bps = 0;
                cli_progress_update(&progress, done, total + 1, "roofline");
                if (kvrt_backend_copy_bandwidth(be, MEMCPY_BYTES, &bps) == KVRT_OK)
                    roofline[b] = bps / 1e9;
            }
            struct bench_result one[BENCH_NUM_OPS];
            memset(one, 0, sizeof(one));
            code = bench_layout(be, &r.sh, r.ops, one, &progress, &done, total);
            for (int k = 0; code == CLI_EXIT_OK && k < BENCH_NUM_OPS; k++) {
                if (!r.ops[k])
                    continue;
                res[n] = one[k];
                res[n].backend = r.backends[b];
                res[n].op = (enum bench_op)k;
                res[n].layout = layouts[b][l];
                res[n].dtype = r.sh.dtype;
                res[n].roofline_gbps = roofline[b];
                n++;
            }
        }
    }
    cli_progress_end(&progress);
    double memcpy_gbps = 0, read_gbps = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy_gbps = res[i].memcpy_gbps > memcpy_gbps ? res[i].memcpy_gbps : memcpy_gbps;
        read_gbps = res[i].read_gbps > read_gbps ? res[i].read_gbps : read_gbps;
    }
    if (code == CLI_EXIT_OK) {
        /* Group the table and the chart by operation, layouts in table order. */
        struct bench_result *sorted = calloc(n + 1, sizeof(*sorted));
        size_t m = 0;
        for (size_t b = 0; sorted && b < r.num_backends; b++)
            for (int k = 0; k < BENCH_NUM_OPS; k++)
                for (int l = 0; l < KVRT_NUM_LAYOUTS; l++)
                    for (size_t i = 0; i < n; i++)
                        if (res[i].op == (enum bench_op)k && res[i].layout == (enum kvrt_layout)l &&
                            res[i].backend == r.backends[b])
                            sorted[m++] = res[i];
        if (sorted)
            memcpy(res, sorted, n * sizeof(*res));
        free(sorted);
        if (r.plot)
            code = bench_plot_svg(r.plot, memcpy_gbps, res, n);
        if (code == CLI_EXIT_OK) {
            if (r.json)
                code = print_json(&r, memcpy_gbps, read_gbps, res, n);
            else
                print_human(memcpy_gbps, read_gbps, res, n);
        }
    }
    free(res);
    kvrt_runtime_close(rt);
    return code;
}

const struct cli_command cli_bench_command = {
    .name = "bench",
    .summary = "measure each operation's GB/s per layout against the machine's memcpy and read limits",
    .run = bench_run,
    .help = bench_help,
    .options = bench_tables,
};
