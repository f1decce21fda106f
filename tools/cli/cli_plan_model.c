/* kvrt plan --model: a model's groups placed in one allocation, with the
 * bytes of each group and of the whole cache.  libkvrt builds the plan
 * (kvrt_model_plan_json); --json prints it as it is, and the tables below
 * are read from it, so both say the same. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/model.h>

#include "cli.h"
#include "cli_model.h"
#include "cli_plan.h"

static uint64_t num(const json_t *o, const char *key)
{
    return (uint64_t)json_integer_value(json_object_get(o, key));
}

static const char *text(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static void print_vllm(const struct kvrt_model_info *m, const json_t *v)
{
    char a[32];
    const json_t *log = json_object_get(v, "log");
    const bool have_len = !json_is_null(json_object_get(v, "max_model_len"));
    printf("\nvLLM (for this budget, as vLLM logs it):\n");
    printf("  %s\n", json_string_value(json_array_get(log, 0)));
    if (!have_len) {
        printf("  (give --max-model-len for the concurrency: the model file gives no length)\n");
        return;
    }
    printf("  %s\n", json_string_value(json_array_get(log, 1)));
    printf("  %" PRIu64 " blocks of %" PRIu64 " bytes; a request of %" PRIu64 " tokens (max_model_len "
           "from %s) takes %" PRIu64 " blocks\n",
           num(v, "num_blocks"), num(v, "bytes_per_block"), num(v, "max_model_len"), text(v, "max_model_len_source"),
           num(v, "blocks_per_request"));
    bool sliding = false;
    for (size_t g = 0; g < m->num_groups; g++)
        sliding = sliding || m->groups[g].usage == KVRT_MODEL_USAGE_SLIDING;
    if (sliding)
        printf("  sliding windows keep window - 1 + %" PRIu64 " tokens (max_num_batched_tokens from %s)\n",
               num(v, "max_num_batched_tokens"), text(v, "max_num_batched_tokens_source"));
    if (!json_is_true(json_object_get(v, "fits_one_request"))) {
        cli_format_bytes(num(v, "request_bytes"), a, sizeof(a));
        printf("  vLLM would refuse to start: one request of %" PRIu64 " tokens needs %s of KV cache, "
               "more than the budget (check_enough_kv_cache_memory); lower --max-model-len\n",
               num(v, "max_model_len"), a);
    }
}

static void print_groups(const struct kvrt_model_info *m, const json_t *plan)
{
    char a[32], b[32];
    for (size_t g = 0; g < m->num_groups; g++) {
        const struct kvrt_model_group *grp = &m->groups[g];
        const json_t *sum = json_array_get(json_object_get(plan, "groups"), g);
        char spec[256];
        cli_describe_spec(&grp->layers[0].spec, spec, sizeof(spec));
        cli_format_bytes(num(sum, "bytes_per_block"), a, sizeof(a));
        cli_format_bytes(num(sum, "bytes"), b, sizeof(b));
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
                   a, b, num(sum, "tokens"));
    }
}

static void print_human(const struct kvrt_model_info *m, const json_t *plan)
{
    /* "LBNHC" as "L B N H C". */
    char order[2 * KVRT_NUM_AXES], a[32], b[32];
    const char *physical = text(plan, "physical_order");
    size_t o = 0;
    for (size_t p = 0; p < KVRT_NUM_AXES && physical[p]; p++) {
        order[o++] = physical[p];
        if (p + 1 < KVRT_NUM_AXES)
            order[o++] = ' ';
    }
    order[o] = '\0';
    const uint64_t blocks = num(plan, "num_blocks"), total = num(plan, "total_bytes");
    const uint64_t per_block = num(plan, "bytes_per_block"), budget = num(plan, "budget_bytes");
    printf("model         %s (%s%s%s): %" PRIu64 " layer%s in %zu group%s\n", m->source, m->format,
           m->architecture[0] ? ", " : "", m->architecture, m->num_layers, m->num_layers == 1 ? "" : "s", m->num_groups,
           m->num_groups == 1 ? "" : "s");
    printf("layout        %s (physical order %s; from %s)\n", text(plan, "layout"), order, text(plan, "layout_source"));
    cli_format_bytes(per_block, a, sizeof(a));
    printf("per block     %" PRIu64 " bytes (%s) for every layer's page%s\n", per_block, a,
           m->num_groups > 1 ? " of the largest group" : "");
    cli_format_bytes(total, a, sizeof(a));
    printf("total         %" PRIu64 " bytes (%s) for %" PRIu64 " block%s\n", total, a, blocks, blocks == 1 ? "" : "s");
    if (budget) {
        cli_format_bytes(budget, b, sizeof(b));
        printf("memory        %" PRIu64 " blocks fit in --memory %s (%.1f%% used)\n", blocks, b,
               100.0 * (double)total / (double)budget);
    }
    if (m->num_settings || m->max_model_len) {
        printf("\nsettings (value, and where it came from):\n");
        cli_model_print_settings(m);
    }
    const json_t *v = json_object_get(plan, "vllm");
    if (json_is_object(v))
        print_vllm(m, v);
    print_groups(m, plan);
    printf("\nplacement (one row per set of identical specs; bytes):\n");
    printf("%-4s %-6s %-7s %-14s %-14s %-14s %s\n", "set", "group", "layers", "offset", "layer_stride", "block_stride",
           "first layer");
    const json_t *sets = json_object_get(plan, "sets");
    for (size_t i = 0; i < json_array_size(sets); i++) {
        const json_t *s = json_array_get(sets, i);
        const json_t *layers = json_object_get(s, "layers");
        printf("%-4zu %-6" PRIu64 " %-7zu %-14" PRIu64 " %-14" PRIu64 " %-14" PRIu64 " %s\n", i, num(s, "group"),
               json_array_size(layers), num(s, "offset"), num(s, "layer_stride"), num(s, "block_stride"),
               json_string_value(json_array_get(layers, 0)));
    }
    if (m->num_notes)
        printf("\nnotes:\n");
    for (size_t i = 0; i < m->num_notes; i++)
        printf("  - %s\n", m->notes[i]);
}

int plan_model(const struct cli_model_flags *f, const struct kvrt_model_plan_request *req, bool json)
{
    char *out = NULL;
    int rc = kvrt_model_plan_json(f->model, req, &out);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    int code = CLI_EXIT_OK;
    if (json) {
        fputs(out, stdout);
        fputc('\n', stdout);
    } else {
        json_t *plan = json_loads(out, 0, NULL);
        if (plan)
            print_human(kvrt_model_get_info(f->model), plan);
        else
            code = cli_error(CLI_EXIT_INTERNAL, "plan: could not read back the plan's JSON");
        json_decref(plan);
    }
    kvrt_free(out);
    return code;
}
