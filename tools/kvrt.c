/*
 * kvrt — the command-line front end of libkvrt.
 *
 * Each subcommand lives in its own file and is listed once in cli_commands;
 * the help texts printed here are also the source of the man page (--man).
 */
#include <stdio.h>
#include <string.h>

#include <kvrt/common.h>
#include <kvrt/layout.h>
#include <kvrt/runtime.h>

#include "cli.h"

const struct cli_command *const cli_commands[] = {
    &cli_layouts_command, &cli_plan_command, &cli_resolve_command, &cli_plugins_command,
    &cli_explain_command, &cli_run_command,  &cli_bench_command,   &cli_draw_command,
    &cli_xfer_command,
};
const size_t cli_num_commands = sizeof(cli_commands) / sizeof(cli_commands[0]);

static const struct cli_command *find_command(const char *name)
{
    for (size_t i = 0; i < cli_num_commands; i++)
        if (strcmp(cli_commands[i]->name, name) == 0)
            return cli_commands[i];
    return NULL;
}

static void command_names(char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < cli_num_commands && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", cli_commands[i]->name);
}

void cli_main_help(FILE *out)
{
    fprintf(out,
            "Usage: kvrt <command> [options]\n"
            "       kvrt --version | --help | help <command>\n"
            "\n"
            "Plan, explain, draw, run and measure the physical layout of a paged KV\n"
            "cache, the way vLLM lays it out (layouts, geometry, layout resolution), on\n"
            "the backends kvrt finds (cpu, opencl, cuda, rocm plugins).\n"
            "\n"
            "Commands:\n");
    for (size_t i = 0; i < cli_num_commands; i++)
        fprintf(out, "  %-10s %s\n", cli_commands[i]->name, cli_commands[i]->summary);
    fprintf(out,
            "\n"
            "Run 'kvrt <command> --help' for its options and an example.\n"
            "\n"
            "Environment:\n"
            "  %s  a hard layout constraint (a layout name or alias);\n"
            "      honoured by plan, resolve, explain, run and bench (without --layout)\n"
            "      and reported by plugins.  Set but empty or misspelled is an error.\n"
            "  %s  the backend to use when --backend is not given\n"
            "  %s  colon-separated plugin folders or files searched\n"
            "      before the installed plugins (ignored by setuid programs)\n"
            "\n"
            "Exit status:\n"
            "  0  success\n"
            "  1  internal error, or a result that did not verify (run)\n"
            "  2  invalid input: a bad name, number or model file, or bad usage\n"
            "  3  the layout is refused or no layout satisfies the constraints\n"
            "  4  no backend or no device is available\n"
            "Errors are printed on stderr as one line starting \"kvrt: error: \".\n",
            KVRT_LAYOUT_ENV, KVRT_BACKEND_ENV, KVRT_PLUGIN_PATH_ENV);
}

static int dispatch(int argc, char **argv)
{
    char names[256];
    command_names(names, sizeof(names));
    if (argc < 2)
        return cli_error(CLI_EXIT_USAGE, "no command given; commands are %s (see 'kvrt --help')",
                         names);
    const char *first = argv[1];
    if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0) {
        cli_main_help(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(first, "--version") == 0) {
        printf("kvrt %s\n", kvrt_version());
        return CLI_EXIT_OK;
    }
    /* Hidden: the build writes the man page with it. */
    if (strcmp(first, "--man") == 0)
        return cli_print_man(stdout);
    if (strcmp(first, "help") == 0) {
        if (argc == 2) {
            cli_main_help(stdout);
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

int main(int argc, char **argv)
{
    return cli_finish_output(dispatch(argc, argv));
}
