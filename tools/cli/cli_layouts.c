/* kvrt layouts: the six layouts, their orders and properties, the aliases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/layout.h>

#include "commands.h"
#include "cli.h"

enum layouts_opt { OPT_JSON };

static const struct cli_option layouts_options[] = {
    {"--json", NULL, OPT_JSON, false, "print one JSON object instead of a table"},
    CLI_HELP_ROW,
    CLI_OPTIONS_END,
};

static const struct cli_option *const layouts_tables[] = {layouts_options, NULL};

static void layouts_help(FILE *out)
{
    fprintf(out, "Usage: kvrt layouts [--json]\n"
                 "\n"
                 "List the six KV-cache layouts in table order: the stride order (physical\n"
                 "position -> logical axis, axes L=0 B=1 H=2 N=3 C=4), the order of a\n"
                 "per-layer [B, H, N, C] view, the four properties derived from the stride\n"
                 "order, and the accepted aliases.\n"
                 "\n"
                 "Options:\n");
    cli_print_options(out, layouts_options, 11);
    fprintf(out,
            "\n"
            "Environment:\n"
            "  none read; every name listed here is a valid value of %s\n"
            "\n"
            "Example:\n"
            "  kvrt layouts --json\n",
            KVRT_LAYOUT_ENV);
}

static const char *yes_no(const json_t *o, const char *key)
{
    return json_is_true(json_object_get(o, key)) ? "yes" : "no";
}

/* "0 1 3 2 4" of a JSON array of integers. */
static void spaced(const json_t *a, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < json_array_size(a) && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? " " : "",
                                 (long long)json_integer_value(json_array_get(a, i)));
}

/* The table, read from libkvrt's own answer (kvrt_layouts_json), so that it
 * shows what --json and Python's kvrt.layouts() show. */
static int print_table(const json_t *root)
{
    printf("%-7s %-13s %-15s %-12s %-8s %-9s %-8s %s\n", "layout", "stride_order", "physical", "layer_view", "layer",
           "block", "block", "block");
    printf("%-7s %-13s %-15s %-12s %-8s %-9s %-8s %s\n", "", "", "order", "order", "compact", "outermost", "compact",
           "contiguous");
    const json_t *layouts = json_object_get(root, "layouts");
    for (size_t i = 0; i < json_array_size(layouts); i++) {
        const json_t *l = json_array_get(layouts, i);
        const char *letters = json_string_value(json_object_get(l, "physical_order"));
        char order[16], physical[16] = "", view[16];
        spaced(json_object_get(l, "stride_order"), order, sizeof(order));
        spaced(json_object_get(l, "layer_view_order"), view, sizeof(view));
        for (size_t p = 0, used = 0; letters && letters[p] && used < sizeof(physical); p++)
            used += (size_t)snprintf(physical + used, sizeof(physical) - used, "%s%c", p ? " " : "", letters[p]);
        printf("%-7s %-13s %-15s %-12s %-8s %-9s %-8s %s\n", json_string_value(json_object_get(l, "name")), order,
               physical, view, yes_no(l, "layer_compact"), yes_no(l, "block_outermost"), yes_no(l, "block_compact"),
               yes_no(l, "block_contiguous"));
    }
    printf("\naliases:");
    const char *alias;
    const json_t *means;
    size_t n = 0;
    json_object_foreach((json_t *)json_object_get(root, "aliases"), alias, means)
        printf("%s %s = %s", n++ ? "," : "", alias, json_string_value(means));
    printf("\naxes: L layer, B block, H head slot, N state (token), C content bytes\n"
           "names are exact and case-sensitive; %s accepts any of them\n",
           KVRT_LAYOUT_ENV);
    return CLI_EXIT_OK;
}

static int layouts_run(int argc, char **argv)
{
    bool json = false, help;
    int code = cli_parse_options("layouts", argc, argv, layouts_tables, cli_apply_switch, &json, &help);
    if (code != CLI_EXIT_OK)
        return code;
    if (help) {
        layouts_help(stdout);
        return CLI_EXIT_OK;
    }
    char *text = NULL;
    int rc = kvrt_layouts_json(&text);
    if (json || rc != KVRT_OK)
        return cli_print_json_text(rc, text);
    json_t *root = json_loads(text, 0, NULL);
    kvrt_free(text);
    code = root ? print_table(root) : cli_error(CLI_EXIT_INTERNAL, "layouts: could not read back libkvrt's JSON");
    json_decref(root);
    return code;
}

const struct cli_command cli_layouts_command = {
    .name = "layouts",
    .summary = "list the six layouts, their orders, properties and aliases",
    .run = layouts_run,
    .help = layouts_help,
    .options = layouts_tables,
};
