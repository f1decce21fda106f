/* The top of the kvrt tool: the list of commands, the top-level help and
 * the man page's source. */
#ifndef KVRT_TOOLS_CLI_MAIN_H
#define KVRT_TOOLS_CLI_MAIN_H

#include <stddef.h>
#include <stdio.h>

#include "commands.h"

/* Every subcommand, in the order `kvrt --help` lists them. */
extern const struct cli_command *const cli_commands[];
extern const size_t cli_num_commands;

/* The top-level help (also the man page's synopsis and exit statuses). */
void cli_main_help(FILE *out);

/* `kvrt --man-source`: the source of the manual page kvrt(1), in the
 * Markdown scripts/man.py turns into roff, built from the help texts. */
int cli_print_man_source(FILE *out);

#endif
