/*
 * Every subcommand, listed once, and the top-level help.  Apart from main()
 * (kvrt.c) so tests can link the commands and read their option tables.
 */
#include <stdio.h>

#include <kvrt/settings.h>

#include "cli_main.h"

const struct cli_command *const cli_commands[] = {
    &cli_layouts_command, &cli_plan_command,  &cli_resolve_command, &cli_plugins_command, &cli_explain_command,
    &cli_run_command,     &cli_bench_command, &cli_draw_command,    &cli_xfer_command,    &cli_store_command,
};
const size_t cli_num_commands = sizeof(cli_commands) / sizeof(cli_commands[0]);

void cli_main_help(FILE *out)
{
    fprintf(out, "Usage: kvrt <command> [options]\n"
                 "       kvrt --version | --help | help <command>\n"
                 "\n"
                 "Plan, explain, draw, run and measure the physical layout of a paged KV\n"
                 "cache, the way vLLM lays it out (layouts, geometry, layout resolution), on\n"
                 "the backends kvrt finds (cpu, opencl, cuda, rocm plugins).\n"
                 "\n"
                 "Commands:\n");
    for (size_t i = 0; i < cli_num_commands; i++)
        fprintf(out, "  %-10s %s\n", cli_commands[i]->name, cli_commands[i]->summary);
    fputs("\n"
          "Run 'kvrt <command> --help' for its options and an example.\n"
          "\n"
          "Environment (read by libkvrt; a command's --layout or --backend comes first):\n",
          out);
    for (int s = 0; s < KVRT_NUM_SETTINGS; s++) {
        fprintf(out, "  %s\n", kvrt_setting_variable((enum kvrt_setting)s));
        cli_print_wrapped(out, 6, 78, kvrt_setting_summary((enum kvrt_setting)s));
    }
    fprintf(out, "\n"
                 "Exit status:\n"
                 "  0  success\n"
                 "  1  internal error, or a result that did not verify (run)\n"
                 "  2  invalid input: a bad name, number or model file, or bad usage\n"
                 "  3  the layout is refused or no layout satisfies the constraints\n"
                 "  4  no backend or no device is available\n"
                 "Errors are printed on stderr as one line starting \"kvrt: error: \".\n");
}
