/*
 * kvrt — the command-line front end of libkvrt.
 *
 * Each subcommand lives in its own file and is listed once in cli_commands
 * (cli_commands.c); the help texts are also the source of the man page
 * (--man-source).
 */
#include <stdio.h>
#include <string.h>

#include <kvrt/common.h>

#include "cli_main.h"

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

static int dispatch(int argc, char **argv)
{
    char names[256];
    command_names(names, sizeof(names));
    if (argc < 2)
        return cli_error(CLI_EXIT_USAGE, "no command given; commands are %s (see 'kvrt --help')", names);
    const char *first = argv[1];
    if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0) {
        cli_main_help(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(first, "--version") == 0) {
        printf("kvrt %s\n", kvrt_version());
        return CLI_EXIT_OK;
    }
    /* Hidden: the build writes the man page from it. */
    if (strcmp(first, "--man-source") == 0)
        return cli_print_man_source(stdout);
    if (strcmp(first, "help") == 0) {
        if (argc == 2) {
            cli_main_help(stdout);
            return CLI_EXIT_OK;
        }
        const struct cli_command *c = find_command(argv[2]);
        if (!c)
            return cli_error(CLI_EXIT_USAGE, "help: unknown command \"%s\"; commands are %s", argv[2], names);
        c->help(stdout);
        return CLI_EXIT_OK;
    }
    const struct cli_command *c = find_command(first);
    if (!c)
        return cli_error(CLI_EXIT_USAGE, "unknown command \"%s\"; commands are %s (see 'kvrt --help')", first, names);
    return c->run(argc - 1, argv + 1);
}

int main(int argc, char **argv)
{
    return cli_finish_output(dispatch(argc, argv));
}
