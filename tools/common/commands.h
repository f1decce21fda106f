/*
 * The subcommands of kvrt, one object each: every part's library defines
 * its own (tools/run, tools/bench, tools/draw, tools/xfer, tools/store, and the
 * describing ones of tools/cli), and tools/cli lists them all
 * (tools/cli/cli_main.h).
 */
#ifndef KVRT_TOOLS_COMMANDS_H
#define KVRT_TOOLS_COMMANDS_H

#include "cli.h"

extern const struct cli_command cli_layouts_command;
extern const struct cli_command cli_plan_command;
extern const struct cli_command cli_resolve_command;
extern const struct cli_command cli_plugins_command;
extern const struct cli_command cli_explain_command;
extern const struct cli_command cli_run_command;
extern const struct cli_command cli_bench_command;
extern const struct cli_command cli_draw_command;
extern const struct cli_command cli_xfer_command;
extern const struct cli_command cli_store_command;
/* Its subcommands (tools/store), for their own help. */
extern const struct cli_command cli_store_stat_command;
extern const struct cli_command cli_store_ls_command;
extern const struct cli_command cli_store_verify_command;
extern const struct cli_command cli_store_gc_command;

#endif
