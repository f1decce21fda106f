/*
 * kvrt — the command-line front end of libkvrt.
 *
 * Each subcommand lives in its own file and is listed once in `commands`;
 * adding one (plugins, run, bench) means adding a file and a table row.
 */
#include <stdio.h>
#include <string.h>

#include <kvrt/common.h>
#include <kvrt/layout.h>

#include "cli.h"

static const struct cli_command *const commands[] = {
    &cli_layouts_command,
    &cli_plan_command,
    &cli_resolve_command,
};
#define NUM_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct cli_command *find_command(const char *name)
{
    for (size_t i = 0; i < NUM_COMMANDS; i++)
        if (strcmp(commands[i]->name, name) == 0)
            return commands[i];
    return NULL;
}

static void command_names(char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < NUM_COMMANDS && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", commands[i]->name);
}

static void main_help(FILE *out)
{
    fprintf(out,
            "Usage: kvrt <command> [options]\n"
            "       kvrt --version | --help | help <command>\n"
            "\n"
            "Plan and explain the physical layout of a paged KV cache, the way vLLM\n"
            "lays it out (layouts, geometry, layout resolution).\n"
            "\n"
            "Commands:\n");
    for (size_t i = 0; i < NUM_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(out,
            "\n"
            "Run 'kvrt <command> --help' for its options and an example.\n"
            "\n"
            "Environment:\n"
            "  %s  a hard layout constraint (a layout name or alias);\n"
            "      honoured by 'plan' (without --layout) and 'resolve'.  Set but empty\n"
            "      or misspelled is an error.\n"
            "\n"
            "Exit status:\n"
            "  0  success\n"
            "  1  internal error\n"
            "  2  invalid input: a bad name or number, or bad usage\n"
            "  3  the layout is refused or no layout satisfies the constraints\n"
            "Errors are printed on stderr as one line starting \"kvrt: error: \".\n",
            KVRT_LAYOUT_ENV);
}

int main(int argc, char **argv)
{
    char names[256];
    command_names(names, sizeof(names));
    if (argc < 2)
        return cli_error(CLI_EXIT_USAGE, "no command given; commands are %s (see 'kvrt --help')",
                         names);
    const char *first = argv[1];
    if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0) {
        main_help(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(first, "--version") == 0) {
        printf("kvrt %s\n", kvrt_version());
        return CLI_EXIT_OK;
    }
    if (strcmp(first, "help") == 0) {
        if (argc == 2) {
            main_help(stdout);
            return CLI_EXIT_OK;
        }
        const struct cli_command *c = find_command(argv[2]);
        if (!c)
            return cli_error(CLI_EXIT_USAGE, "help: unknown command \"%s\"; commands are %s",
                             argv[2], names);
        c->help(stdout);
        return CLI_EXIT_OK;
    }
    const struct cli_command *c = find_command(first);
    if (!c)
        return cli_error(CLI_EXIT_USAGE, "unknown command \"%s\"; commands are %s (see 'kvrt --help')",
                         first, names);
    return c->run(argc - 1, argv + 1);
}
