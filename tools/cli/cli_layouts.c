/* kvrt layouts: the six layouts, their orders and properties, the aliases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/layout.h>

#include "cli.h"

static const char axis_letters[KVRT_NUM_AXES] = {'L', 'B', 'H', 'N', 'C'};

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

/* Aliases are every valid spelling that is not a canonical name, so this
 * list can never drift from what kvrt_layout_parse accepts. */
static size_t collect_aliases(char names[][16], enum kvrt_layout *means, size_t max)
{
    char list[256];
    size_t n = 0;
    snprintf(list, sizeof(list), "%s", kvrt_layout_valid_names());
    for (char *save = NULL, *tok = strtok_r(list, ", ", &save); tok && n < max; tok = strtok_r(NULL, ", ", &save)) {
        enum kvrt_layout l;
        if (kvrt_layout_parse(tok, &l) == KVRT_OK && strcmp(tok, kvrt_layout_name(l)) != 0) {
            snprintf(names[n], sizeof(names[n]), "%s", tok);
            means[n++] = l;
        }
    }
    return n;
}

static const char *yes_no(bool b)
{
    return b ? "yes" : "no";
}

static int print_table(void)
{
    char alias[16][16];
    enum kvrt_layout means[16];
    size_t num_aliases = collect_aliases(alias, means, 16);

    printf("%-7s %-13s %-15s %-12s %-8s %-9s %-8s %s\n", "layout", "stride_order", "physical", "layer_view", "layer",
           "block", "block", "block");
    printf("%-7s %-13s %-15s %-12s %-8s %-9s %-8s %s\n", "", "", "order", "order", "compact", "outermost", "compact",
           "contiguous");
    for (int i = 0; i < KVRT_NUM_LAYOUTS; i++) {
        enum kvrt_layout l = (enum kvrt_layout)i;
        int o[KVRT_NUM_AXES], v[4];
        if (kvrt_layout_stride_order(l, o) != KVRT_OK || kvrt_layout_layer_view_order(l, v) != KVRT_OK)
            return cli_fail_status(KVRT_ERR_INTERNAL);
        char order[16], physical[16], view[16];
        snprintf(order, sizeof(order), "%d %d %d %d %d", o[0], o[1], o[2], o[3], o[4]);
        snprintf(physical, sizeof(physical), "%c %c %c %c %c", axis_letters[o[0]], axis_letters[o[1]],
                 axis_letters[o[2]], axis_letters[o[3]], axis_letters[o[4]]);
        snprintf(view, sizeof(view), "%d %d %d %d", v[0], v[1], v[2], v[3]);
        printf("%-7s %-13s %-15s %-12s %-8s %-9s %-8s %s\n", kvrt_layout_name(l), order, physical, view,
               yes_no(kvrt_layout_layer_compact(l)), yes_no(kvrt_layout_block_outermost(l)),
               yes_no(kvrt_layout_block_compact(l)), yes_no(kvrt_layout_block_contiguous(l)));
    }
    printf("\naliases:");
    for (size_t i = 0; i < num_aliases; i++)
        printf("%s %s = %s", i ? "," : "", alias[i], kvrt_layout_name(means[i]));
    printf("\naxes: L layer, B block, H head slot, N state (token), C content bytes\n"
           "names are exact and case-sensitive; %s accepts any of them\n",
           KVRT_LAYOUT_ENV);
    return CLI_EXIT_OK;
}

static int print_json(void)
{
    char alias[16][16];
    enum kvrt_layout means[16];
    size_t num_aliases = collect_aliases(alias, means, 16);
    json_t *root = json_object(), *layouts = json_array(), *aliases = json_object();
    json_t *valid = json_array();

    for (int i = 0; i < KVRT_NUM_LAYOUTS; i++) {
        enum kvrt_layout l = (enum kvrt_layout)i;
        int o[KVRT_NUM_AXES], v[4];
        if (kvrt_layout_stride_order(l, o) != KVRT_OK || kvrt_layout_layer_view_order(l, v) != KVRT_OK) {
            json_decref(root);
            return cli_fail_status(KVRT_ERR_INTERNAL);
        }
        char physical[KVRT_NUM_AXES + 1] = {0};
        for (int p = 0; p < KVRT_NUM_AXES; p++)
            physical[p] = axis_letters[o[p]];
        json_t *e = json_object();
        json_object_set_new(e, "name", cli_json_str(kvrt_layout_name(l)));
        json_object_set_new(e, "value", json_integer(i));
        json_object_set_new(e, "stride_order", cli_json_int_array(o, KVRT_NUM_AXES));
        json_object_set_new(e, "physical_order", cli_json_str(physical));
        json_object_set_new(e, "layer_view_order", cli_json_int_array(v, 4));
        json_object_set_new(e, "layer_compact", json_boolean(kvrt_layout_layer_compact(l)));
        json_object_set_new(e, "block_outermost", json_boolean(kvrt_layout_block_outermost(l)));
        json_object_set_new(e, "block_compact", json_boolean(kvrt_layout_block_compact(l)));
        json_object_set_new(e, "block_contiguous", json_boolean(kvrt_layout_block_contiguous(l)));
        json_array_append_new(layouts, e);
        json_array_append_new(valid, cli_json_str(kvrt_layout_name(l)));
    }
    for (size_t i = 0; i < num_aliases; i++) {
        json_object_set_new(aliases, alias[i], cli_json_str(kvrt_layout_name(means[i])));
        json_array_append_new(valid, cli_json_str(alias[i]));
    }
    json_object_set_new(root, "layouts", layouts);
    json_object_set_new(root, "aliases", aliases);
    json_object_set_new(root, "valid_names", valid);
    json_object_set_new(root, "env", cli_json_str(KVRT_LAYOUT_ENV));
    return cli_json_print(root);
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
    return json ? print_json() : print_table();
}

const struct cli_command cli_layouts_command = {
    .name = "layouts",
    .summary = "list the six layouts, their orders, properties and aliases",
    .run = layouts_run,
    .help = layouts_help,
    .options = layouts_tables,
};
