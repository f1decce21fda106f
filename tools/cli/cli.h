/*
 * The kvrt command-line tool: what every subcommand shares.
 *
 * Exit status (documented in `kvrt --help`):
 *   0 success, 1 internal error or a result that did not verify, 2 invalid
 *   input or usage, 3 layout refused or unsatisfiable, 4 no backend or no
 *   device.  Errors go to stderr as one line "kvrt: error: ...".
 */
#ifndef KVRT_TOOLS_CLI_H
#define KVRT_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include <kvrt/common.h>

#include "json_text.h"

enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_INTERNAL = 1,
    CLI_EXIT_USAGE = 2,
    CLI_EXIT_REFUSED = 3,
    CLI_EXIT_NODEV = 4,
};

struct cli_option;

/* One subcommand.  `run` gets argv with argv[0] = the subcommand name. */
struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
    void (*help)(FILE *out);
    /* The option tables its parser reads (NULL-terminated; NULL: none), so
     * a test can hold the help and the parser to every row. */
    const struct cli_option *const *options;
    /* Commands under this one ("xfer serve"), NULL-terminated; or NULL. */
    const struct cli_command *const *subcommands;
};

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

/* Every subcommand, in the order `kvrt --help` lists them. */
extern const struct cli_command *const cli_commands[];
extern const size_t cli_num_commands;

/* A number macro as text, for help strings built at compile time. */
#define CLI_TEXT_(x) #x
#define CLI_TEXT(x) CLI_TEXT_(x)

/* `text` on lines of at most `width` columns, each after `indent` spaces,
 * broken at spaces (a longer word gets its own line): for lists the
 * library renders, whose length help texts cannot know. */
void cli_print_wrapped(FILE *out, int indent, int width, const char *text);

/* The top-level help (also the man page's synopsis and exit statuses). */
void cli_main_help(FILE *out);

/* `kvrt --man`: the manual page kvrt(1) in roff, built from the help texts. */
int cli_print_man(FILE *out);

/* Print "kvrt: error: <message>" as one line on stderr; return `code`. */
int cli_error(int code, const char *fmt, ...) KVRT_PRINTF(2, 3);

/* `text` (NULL: "") made printable in buf, for tables that show names,
 * paths and versions from outside; returns buf. */
const char *cli_printable(const char *text, char *buf, size_t size);

/* Flush stdout and check it: a write error (full disk, closed stdout) is
 * reported and turns a success into exit status 1.  main() ends with it. */
int cli_finish_output(int code);

/* Report a failed libkvrt call (its thread message) and return the exit
 * status for its status code: invalid/overflow 2, refused 3, no device 4,
 * else 1. */
int cli_fail_status(int status);

/* Print the steps of a runtime's trace that explain automatic selection,
 * one per line after `indent`: each backend passed over because its bind
 * failed, and each KVRT_TRACE_PREFERRED step (a backend ranked lower). */
struct kvrt_runtime;
struct kvrt_trace_step;
void cli_print_selection(const struct kvrt_runtime *rt, const char *indent);
/* Whether a step passed a backend over because its bind failed (it has a
 * device and declares the step's layout). */
bool cli_bind_failure_step(const struct kvrt_runtime *rt, const struct kvrt_trace_step *st);

/* The exit status for a libkvrt status code. */
int cli_exit_for_status(int status);

/* ---- options ------------------------------------------------------------ */

/* One row of a command's option table: the parser, the help text and the
 * messages all take the option's name from here. */
struct cli_option {
    const char *name;    /* "--layers" */
    const char *metavar; /* "L" when the option takes a value; NULL for a switch */
    int id;
    bool repeatable;
    const char *help; /* for --help; each '\n' goes on under the text column */
};

#define CLI_OPTIONS_END                                                                                                \
    {                                                                                                                  \
        NULL, NULL, 0, false, NULL                                                                                     \
    }

/* --help is answered by the parser itself (CLI_NEXT_HELP, also for "-h");
 * this row only shows it in a table's help. */
#define CLI_OPT_HELP (-1)
#define CLI_HELP_ROW                                                                                                   \
    {                                                                                                                  \
        "--help", NULL, CLI_OPT_HELP, false, "show this help"                                                          \
    }

/* Applies one option given on the command line to a command's request:
 * CLI_EXIT_OK, or the exit status after printing the error (cli_error). */
typedef int (*cli_apply_fn)(void *request, const struct cli_option *opt, const char *value);

/* The option loop of every command: each option of argv (after argv[0])
 * goes to `apply` with the row of `tables` (a NULL-terminated list of
 * tables, each ended by CLI_OPTIONS_END) that names it; the first such row
 * wins, so a command can describe a shared option in its own words ahead of
 * the shared table.  "--name value" and "--name=value" are accepted;
 * unknown options, positional arguments, missing values and non-repeatable
 * options given twice are refused.  Returns CLI_EXIT_OK, with *help set
 * when --help or -h was given (the rest is then not read), or the exit
 * status of the first refusal (its error line printed). */
int cli_parse_options(const char *command, int argc, char **argv, const struct cli_option *const *tables,
                      cli_apply_fn apply, void *request, bool *help);

/* The apply function of a command whose only option is one switch:
 * `request` is the bool it sets. */
int cli_apply_switch(void *request, const struct cli_option *opt, const char *value);

/* The name of option `id` in `tables` (NULL when none has it), for messages
 * about an option other than the one being parsed. */
const char *cli_option_name(const struct cli_option *const *tables, int id);

/* The rows of `table` as help lines: "  --name METAVAR" padded to `column`
 * (or followed by two spaces when it reaches it), then the help text, its
 * further lines indented to `column`. */
void cli_print_options(FILE *out, const struct cli_option *table, int column);

/* Strict unsigned parse: decimal digits only, the whole string, within
 * [min, max].  Prints the error and returns false otherwise. */
bool cli_parse_u64(const char *option, const char *text, uint64_t min, uint64_t max, uint64_t *out);

/* A byte size: plain bytes, or a number (fractions allowed) followed by B,
 * KiB, MiB, GiB or TiB.  Prints the error and returns false otherwise. */
bool cli_parse_size(const char *option, const char *text, uint64_t *out);

/* "1.50 GiB", "512 B": for people; JSON always carries exact bytes. */
void cli_format_bytes(uint64_t bytes, char *buf, size_t size);

/* ---- progress on a terminal ---------------------------------------------- */

/* One status line on stderr, redrawn in place; only when stderr is a
 * terminal and the output is not JSON, so logs and pipes stay clean. */
struct cli_progress {
    bool on;
    const char *what;
    double started;
    double last_drawn;
};

void cli_progress_begin(struct cli_progress *p, const char *what, bool json);
void cli_progress_update(struct cli_progress *p, uint64_t done, uint64_t total, const char *detail);
void cli_progress_end(struct cli_progress *p);

/* Monotonic seconds. */
double cli_now(void);

/* ---- JSON output --------------------------------------------------------- */

/* A JSON integer for a 64-bit size; NULL (error printed) when it exceeds the
 * largest JSON integer jansson can hold. */
json_t *cli_json_u64(uint64_t value, const char *what);

/* A JSON string for any bytes, and adding a value that may have failed to
 * build, are libkvrt's kvrt_json_str / kvrt_json_strn and kvrt_json_put
 * (json_text.h, linked from its own archive). */

/* Print JSON a libkvrt function wrote (`status` its result, `text` its
 * output, freed here) as it is, or report the failure; the exit status. */
int cli_print_json_text(int status, char *text);

/* Print `root` (stealing the reference) on stdout with a trailing newline. */
int cli_json_print(json_t *root);

/* One trace step as {"step": its kind's name, "text", and "layout" and
 * "backend" when the step is about one}. */
struct kvrt_trace_step;
json_t *cli_json_trace_step(const struct kvrt_trace_step *st);

#endif
