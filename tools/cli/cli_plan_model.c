/* kvrt plan --model: a model's groups placed in one allocation, with the
 * bytes of each group and of the whole cache. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/placement.h>

#include "cli.h"
#include "cli_model.h"
#include "cli_plan.h"

struct group_sum {
    uint64_t bytes_per_block; /* the pages of all its layers, padded */
    uint64_t bytes;           /* for all blocks */
    uint64_t block_size;
};

static void sum_group(const struct kvrt_model_group *g, uint64_t blocks, struct group_sum *out)
{
    struct kvrt_spec_info in;
    out->bytes_per_block = 0;
    out->block_size = g->layers[0].spec.block_size;
    for (size_t i = 0; i < g->num_layers; i++)
        if (kvrt_spec_derive(&g->layers[i].spec, 0, &in) == KVRT_OK)
            out->bytes_per_block += in.page_size;
    out->bytes = out->bytes_per_block * blocks; /* bounded by the placement's checked size */
}

/* "L B N H C" (spaced) or "LBNHC". */
static void physical(enum kvrt_layout layout, bool spaced, char *out)
{
    static const char letters[KVRT_NUM_AXES] = {'L', 'B', 'H', 'N', 'C'};
    int o[KVRT_NUM_AXES];
    kvrt_layout_stride_order(layout, o);
    for (int p = 0; p < KVRT_NUM_AXES; p++) {
        *out++ = letters[o[p]];
        if (spaced && p + 1 < KVRT_NUM_AXES)
            *out++ = ' ';
    }
    *out = '\0';
}

/* 1234567 as vLLM logs it: "1,234,567". */
static void with_commas(uint64_t v, char *out, size_t size)
{
    char digits[24];
    int n = snprintf(digits, sizeof(digits), "%" PRIu64, v);
    size_t o = 0;
    for (int i = 0; i < n && o + 2 < size; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
}

/* vLLM's figures for the budget; *have_len false when neither the model
 * nor --max-model-len gives a request length (the tokens still count). */
struct vllm_figures {
    struct kvrt_model_capacity cap;
    const char *len_source;
    uint64_t batched;
    const char *batched_source;
    bool have_len;
    char log_tokens[96], log_concurrency[128];
};

static int vllm_figures(const struct kvrt_model *m, uint64_t budget, const struct plan_vllm *v, struct vllm_figures *f)
{
    char err[512], a[32];
    uint64_t len = v->max_model_len ? v->max_model_len : m->max_model_len;
    memset(f, 0, sizeof(*f));
    f->have_len = len != 0;
    f->len_source = v->max_model_len ? v->max_model_len_source : m->max_model_len_source;
    f->batched = v->batched_tokens ? v->batched_tokens : KVRT_MODEL_DEFAULT_BATCHED_TOKENS;
    f->batched_source =
        v->batched_tokens ? v->batched_tokens_source : "default (vllm serve on a GPU of 70 GiB or more)";
    int rc = kvrt_model_vllm_capacity(m, budget, f->have_len ? len : 1, f->batched, &f->cap, err, sizeof(err));
    if (rc != KVRT_OK)
        return cli_error(cli_exit_for_status(rc), "plan: %s", err);
    with_commas(f->cap.tokens, a, sizeof(a));
    snprintf(f->log_tokens, sizeof(f->log_tokens), "GPU KV cache size: %s tokens", a);
    if (f->have_len) {
        with_commas(len, a, sizeof(a));
        snprintf(f->log_concurrency, sizeof(f->log_concurrency), "Maximum concurrency for %s tokens per request: %.2fx",
                 a, f->cap.max_concurrency);
    }
    return CLI_EXIT_OK;
}

static void print_vllm(const struct kvrt_model *m, const struct vllm_figures *f)
{
    char a[32];
    printf("\nvLLM (for this budget, as vLLM logs it):\n");
    printf("  %s\n", f->log_tokens);
    if (!f->have_len) {
        printf("  (give --max-model-len for the concurrency: the model file gives no length)\n");
        return;
    }
    printf("  %s\n", f->log_concurrency);
    printf("  %" PRIu64 " blocks of %" PRIu64 " bytes; a request of %" PRIu64 " tokens (max_model_len "
           "from %s) takes %" PRIu64 " blocks\n",
           f->cap.num_blocks, f->cap.bytes_per_block, f->cap.max_model_len, f->len_source, f->cap.blocks_per_request);
    bool sliding = false;
    for (size_t g = 0; g < m->num_groups; g++)
        sliding = sliding || m->groups[g].usage == KVRT_USAGE_SLIDING;
    if (sliding)
        printf("  sliding windows keep window - 1 + %" PRIu64 " tokens (max_num_batched_tokens from %s)\n", f->batched,
               f->batched_source);
    if (!f->cap.fits_one_request) {
        cli_format_bytes(f->cap.request_bytes, a, sizeof(a));
        printf("  vLLM would refuse to start: one request of %" PRIu64 " tokens needs %s of KV cache, "
               "more than the budget (check_enough_kv_cache_memory); lower --max-model-len\n",
               f->cap.max_model_len, a);
    }
}

static void print_human(const struct kvrt_model *m, const kvrt_placement *p, const char *layout_source, uint64_t budget,
                        const struct vllm_figures *vf)
{
    char order[2 * KVRT_NUM_AXES], a[32], b[32];
    const enum kvrt_layout layout = kvrt_placement_layout(p);
    const uint64_t blocks = kvrt_placement_num_blocks(p);
    physical(layout, true, order);
    printf("model         %s (%s%s%s): %" PRIu64 " layer%s in %zu group%s\n", m->source, m->format,
           m->architecture[0] ? ", " : "", m->architecture, m->num_layers, m->num_layers == 1 ? "" : "s", m->num_groups,
           m->num_groups == 1 ? "" : "s");
    printf("layout        %s (physical order %s; from %s)\n", kvrt_layout_name(layout), order, layout_source);
    cli_format_bytes(kvrt_placement_bytes_per_block(p), a, sizeof(a));
    printf("per block     %" PRIu64 " bytes (%s) for every layer's page%s\n", kvrt_placement_bytes_per_block(p), a,
           m->num_groups > 1 ? " of the largest group" : "");
    cli_format_bytes(kvrt_placement_size(p), a, sizeof(a));
    printf("total         %" PRIu64 " bytes (%s) for %" PRIu64 " block%s\n", kvrt_placement_size(p), a, blocks,
           blocks == 1 ? "" : "s");
    if (budget) {
        cli_format_bytes(budget, b, sizeof(b));
        printf("memory        %" PRIu64 " blocks fit in --memory %s (%.1f%% used)\n", blocks, b,
               100.0 * (double)kvrt_placement_size(p) / (double)budget);
    }
    if (m->num_settings || m->max_model_len) {
        printf("\nsettings (value, and where it came from):\n");
        cli_model_print_settings(m);
    }
    if (vf)
        print_vllm(m, vf);
    for (size_t g = 0; g < m->num_groups; g++) {
        const struct kvrt_model_group *grp = &m->groups[g];
        struct group_sum s;
        char spec[256];
        sum_group(grp, blocks, &s);
        cli_describe_spec(&grp->layers[0].spec, spec, sizeof(spec));
        cli_format_bytes(s.bytes_per_block, a, sizeof(a));
        cli_format_bytes(s.bytes, b, sizeof(b));
        char names[256];
        size_t used = 0;
        names[0] = '\0';
        for (size_t i = 0; i < grp->num_layers && used < 200; i++)
            used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "", grp->layers[i].name);
        if (used >= 200)
            snprintf(names + 200, sizeof(names) - 200, ", ...");
        printf("\ngroup %-3zu     %s: %s\n", g, grp->name, grp->what);
        printf("              %zu layer%s: %s\n", grp->num_layers, grp->num_layers == 1 ? "" : "s", names);
        printf("              %s\n", spec);
        if (grp->layers[0].spec.kind == KVRT_SPEC_STATE)
            printf("              %s per block, %s for all blocks; one block holds one sequence's "
                   "state\n",
                   a, b);
        else
            printf("              %s per block, %s for all blocks; %" PRIu64 " tokens if it had every "
                   "block\n",
                   a, b, blocks * s.block_size);
    }
    printf("\nplacement (one row per set of identical specs; bytes):\n");
    printf("%-4s %-6s %-7s %-14s %-14s %-14s %s\n", "set", "group", "layers", "offset", "layer_stride", "block_stride",
           "first layer");
    for (size_t i = 0; i < kvrt_placement_num_sets(p); i++) {
        struct kvrt_placement_set s;
        if (kvrt_placement_get_set(p, i, &s) != KVRT_OK)
            continue;
        printf("%-4zu %-6zu %-7zu %-14" PRIu64 " %-14" PRIu64 " %-14" PRIu64 " %s\n", i, s.group, s.num_layers,
               s.offset, s.layer_stride, s.block_stride, s.layer_names[0]);
    }
    if (m->num_notes)
        printf("\nnotes:\n");
    for (size_t i = 0; i < m->num_notes; i++)
        printf("  - %s\n", m->notes[i]);
}

static json_t *groups_json(const struct kvrt_model *m, uint64_t blocks)
{
    json_t *a = json_array();
    for (size_t g = 0; a && g < m->num_groups; g++) {
        struct group_sum s;
        struct kvrt_spec_info in;
        sum_group(&m->groups[g], blocks, &s);
        kvrt_spec_derive(&m->groups[g].layers[0].spec, 0, &in);
        json_t *e = json_object();
        bool ok = cli_json_put(e, "name", cli_json_str(m->groups[g].name)) &&
                  cli_json_put(e, "num_layers", cli_json_u64(m->groups[g].num_layers, "num_layers")) &&
                  cli_json_put(e, "page_bytes", cli_json_u64(in.page_size, "page_bytes")) &&
                  cli_json_put(e, "bytes_per_block", cli_json_u64(s.bytes_per_block, "bytes_per_block")) &&
                  cli_json_put(e, "bytes", cli_json_u64(s.bytes, "bytes")) &&
                  cli_json_put(e, "tokens", cli_json_u64(blocks * s.block_size, "tokens")) &&
                  json_array_append_new(a, e) == 0;
        if (!ok) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *sets_json(const kvrt_placement *p)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < kvrt_placement_num_sets(p); i++) {
        struct kvrt_placement_set s;
        json_t *e = json_object(), *names = json_array();
        if (kvrt_placement_get_set(p, i, &s) != KVRT_OK || !e || !names) {
            json_decref(e);
            json_decref(names);
            json_decref(a);
            return NULL;
        }
        for (size_t l = 0; l < s.num_layers; l++)
            json_array_append_new(names, cli_json_str(s.layer_names[l]));
        bool ok =
            cli_json_put(e, "group", cli_json_u64(s.group, "group")) && cli_json_put(e, "layers", names) &&
            cli_json_put(e, "offset", cli_json_u64(s.offset, "offset")) &&
            cli_json_put(e, "layer_stride", cli_json_u64(s.layer_stride, "layer_stride")) &&
            cli_json_put(e, "block_stride", cli_json_u64(s.block_stride, "block_stride")) &&
            cli_json_put(e, "shape_bytes", cli_json_u64_array(s.geometry.shape_bytes, KVRT_NUM_AXES, "shape_bytes")) &&
            cli_json_put(e, "strides_bytes",
                         cli_json_u64_array(s.geometry.strides_bytes, KVRT_NUM_AXES, "strides_bytes")) &&
            json_array_append_new(a, e) == 0;
        if (!ok) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *vllm_json(const struct vllm_figures *f)
{
    if (!f)
        return json_null();
    json_t *o = json_object(), *log = json_array();
    json_array_append_new(log, cli_json_str(f->log_tokens));
    if (f->have_len)
        json_array_append_new(log, cli_json_str(f->log_concurrency));
    bool ok = cli_json_put(o, "kv_cache_tokens", cli_json_u64(f->cap.tokens, "kv_cache_tokens")) &&
              cli_json_put(o, "num_blocks", cli_json_u64(f->cap.num_blocks, "num_blocks")) &&
              cli_json_put(o, "bytes_per_block", cli_json_u64(f->cap.bytes_per_block, "bytes_per_block")) &&
              cli_json_put(o, "max_model_len",
                           f->have_len ? cli_json_u64(f->cap.max_model_len, "max_model_len") : json_null()) &&
              cli_json_put(o, "max_model_len_source", f->have_len ? cli_json_str(f->len_source) : json_null()) &&
              cli_json_put(o, "max_num_batched_tokens", cli_json_u64(f->batched, "max_num_batched_tokens")) &&
              cli_json_put(o, "max_num_batched_tokens_source", cli_json_str(f->batched_source)) &&
              cli_json_put(o, "blocks_per_request",
                           f->have_len ? cli_json_u64(f->cap.blocks_per_request, "blocks_per_request") : json_null()) &&
              cli_json_put(o, "max_concurrency", f->have_len ? json_real(f->cap.max_concurrency) : json_null()) &&
              cli_json_put(o, "request_bytes",
                           f->have_len ? cli_json_u64(f->cap.request_bytes, "request_bytes") : json_null()) &&
              cli_json_put(o, "fits_one_request", f->have_len ? json_boolean(f->cap.fits_one_request) : json_null()) &&
              cli_json_put(o, "log", log);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int print_json(const struct kvrt_model *m, const kvrt_placement *p, const char *layout_source, uint64_t budget,
                      const struct vllm_figures *vf)
{
    char order[2 * KVRT_NUM_AXES];
    const uint64_t blocks = kvrt_placement_num_blocks(p);
    physical(kvrt_placement_layout(p), false, order);
    json_t *root = json_object();
    bool ok =
        cli_json_put(root, "model", cli_model_json(m)) &&
        cli_json_put(root, "layout", cli_json_str(kvrt_layout_name(kvrt_placement_layout(p)))) &&
        cli_json_put(root, "layout_source", cli_json_str(layout_source)) &&
        cli_json_put(root, "physical_order", cli_json_str(order)) &&
        cli_json_put(root, "num_blocks", cli_json_u64(blocks, "num_blocks")) &&
        cli_json_put(root, "budget_bytes", budget ? cli_json_u64(budget, "budget_bytes") : json_null()) &&
        cli_json_put(root, "bytes_per_block", cli_json_u64(kvrt_placement_bytes_per_block(p), "bytes_per_block")) &&
        cli_json_put(root, "total_bytes", cli_json_u64(kvrt_placement_size(p), "total_bytes")) &&
        cli_json_put(root, "groups", groups_json(m, blocks)) && cli_json_put(root, "sets", sets_json(p)) &&
        cli_json_put(root, "vllm", vllm_json(vf));
    if (!ok) {
        json_decref(root);
        return cli_error(CLI_EXIT_INTERNAL, "plan: could not build the JSON output");
    }
    return cli_json_print(root);
}

int plan_model(const struct kvrt_model *m, enum kvrt_layout layout, const char *layout_source, uint64_t num_blocks,
               uint64_t kernel_block_size, uint64_t budget, const struct plan_vllm *vllm, bool json)
{
    struct vllm_figures vf;
    if (budget) {
        int code = vllm_figures(m, budget, vllm, &vf);
        if (code != CLI_EXIT_OK)
            return code;
    }
    struct kvrt_group *groups = kvrt_model_placement_groups(m);
    kvrt_placement *p = NULL;
    if (!groups)
        return cli_error(CLI_EXIT_INTERNAL, "plan: out of memory");
    int rc = kvrt_placement_create(layout, groups, m->num_groups, num_blocks, kernel_block_size, &p);
    free(groups);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    int code = CLI_EXIT_OK;
    if (json)
        code = print_json(m, p, layout_source, budget, budget ? &vf : NULL);
    else
        print_human(m, p, layout_source, budget, budget ? &vf : NULL);
    kvrt_placement_destroy(p);
    return code;
}
