/*
 * The option tables against what kvrt shows and does: for every command
 * (xfer serve and send included), every row of the tables its parser reads
 * is printed in `kvrt X --help` and in kvrt(1), is accepted by the
 * parser, and a wrong value is refused by an error that names the option
 * exactly as the row spells it; every option the help shows is a row.
 * The tables come from the tool's own code (linked); the checks run the
 * built executable (argv[1]) and read the built page (argv[2]).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_main.h"
#include "cli_run.h"
#include "tap.h"

/* Options whose value may be taken as text when parsed and checked later
 * (a file, a backend name; run and xfer look --layout up once the backend is
 * known; xfer's --allow list is libkvrt-xfer's to parse when the agent is
 * created): a wrong value may pass the parser there.  Every other option
 * that takes a value, each number among them, must refuse WRONG_VALUE at
 * once. */
static const char *const checked_later[] = {"--model",  "--backend",  "--svg",   "--plot", "--port-file",
                                            "--layout", "--key-file", "--allow", NULL};
#define WRONG_VALUE "x!"

static bool is_checked_later(const char *name)
{
    for (size_t i = 0; checked_later[i]; i++)
        if (strcmp(checked_later[i], name) == 0)
            return true;
    return false;
}

/* The row the parser takes for `name`: the first in the tables. */
static const struct cli_option *find_row(const struct cli_option *const *tables, const char *name, size_t len)
{
    for (size_t t = 0; tables && tables[t]; t++)
        for (const struct cli_option *o = tables[t]; o->name; o++)
            if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
                return o;
    return NULL;
}

/* `name` in `text` as a whole option name: not the start of a longer one
 * ("--head-size" inside "--head-size-v"). */
static bool names_option(const char *text, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = strstr(text, name); p; p = strstr(p + 1, name)) {
        char next = p[len];
        bool longer = (next >= 'a' && next <= 'z') || (next >= '0' && next <= '9') || next == '-';
        bool inside = p > text && (p[-1] == '-' || (p[-1] >= 'a' && p[-1] <= 'z'));
        if (!longer && !inside)
            return true;
    }
    return false;
}

/* The help line of `o` as cli_print_options starts it, in plain text or
 * in the man page's roff (hyphens escaped). */
static void row_start(const struct cli_option *o, bool roff, char *buf, size_t size)
{
    char plain[256];
    snprintf(plain, sizeof(plain), "\n  %s%s%s ", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
    size_t used = 0;
    for (const char *p = plain; *p && used + 3 < size; p++) {
        if (roff && *p == '-')
            buf[used++] = '\\';
        buf[used++] = *p;
    }
    buf[used] = '\0';
}

static void check_row(const char *const *words, size_t nwords, const struct cli_option *o, const char *help,
                      const char *man_section)
{
    char what[512], line[300], roff[600];
    cli_describe(words, what, sizeof(what));
    row_start(o, false, line, sizeof(line));
    row_start(o, true, roff, sizeof(roff));

    /* kvrt X OPTION [WRONG_VALUE] --help: the parser reads the option (and
     * its value) before it meets --help. */
    const char *args[16];
    size_t n = 0;
    for (size_t i = 0; i < nwords; i++)
        args[n++] = words[i];
    args[n++] = o->name;
    if (o->metavar)
        args[n++] = WRONG_VALUE;
    args[n++] = "--help";
    args[n] = NULL;
    struct spawn_result res = cli_run(args, NULL);
    const char *nl = strchr(res.err, '\n');
    bool one_error = strncmp(res.err, "kvrt: error: ", 13) == 0 && nl && nl[1] == '\0';
    bool refused = res.status == CLI_EXIT_USAGE && res.out[0] == '\0' && one_error && names_option(res.err, o->name) &&
                   !strstr(res.err, "unknown option");
    bool accepted = res.status == 0 && res.err[0] == '\0' && strcmp(res.out, help) == 0;
    bool must_refuse = o->metavar && !is_checked_later(o->name);
    bool answered = must_refuse ? refused : !o->metavar ? accepted : accepted || refused;

    bool in_help = strstr(help, line) != NULL, in_man = strstr(man_section, roff) != NULL;
    if (!tap_ok(in_help && in_man && answered, "%s %s: in --help and kvrt(1), %s", what, o->name,
                must_refuse ? "the value \"" WRONG_VALUE "\" refused by an error naming it" : "parsed"))
        tap_diag("help line%s found, man line%s found; exit %d, stderr: %s", in_help ? "" : " not",
                 in_man ? "" : " not", res.status, res.err);
    spawn_result_free(&res);
}

/* Every "  --name" that starts a line of `help` must be a row of `tables`. */
static void check_shown(const char *what, const char *help, const struct cli_option *const *const *tables)
{
    size_t shown = 0, unknown = 0;
    for (const char *p = strstr(help, "\n  --"); p; p = strstr(p + 1, "\n  --")) {
        const char *name = p + 3;
        size_t len = strspn(name, "-abcdefghijklmnopqrstuvwxyz0123456789");
        bool found = false;
        for (size_t t = 0; tables[t] && !found; t++)
            found = find_row(tables[t], name, len) != NULL;
        shown++;
        if (!found) {
            unknown++;
            tap_diag("%s --help shows %.*s, which no option table holds", what, (int)len, name);
        }
    }
    tap_ok(shown > 0 && unknown == 0, "%s --help: all %zu options shown are options the parser reads", what, shown);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text = NULL;
    size_t len = 0;
    FILE *m = f ? open_memstream(&text, &len) : NULL;
    int c;
    while (m && (c = fgetc(f)) != EOF)
        fputc(c, m);
    if (m)
        fclose(m);
    if (f)
        fclose(f);
    return text;
}

static char *run_text(const char *const *args)
{
    struct spawn_result res = cli_run(args, NULL);
    char *text = res.status == 0 ? res.out : NULL;
    if (!text) {
        tap_diag("kvrt %s: exit %d, stderr: %s", args[0], res.status, res.err);
        free(res.out);
    }
    free(res.err);
    return text;
}

/* The man page's section of `command` (".SS command" up to the next
 * section), or "" when it has none; caller frees. */
static char *man_section(const char *man, const char *command)
{
    char head[64];
    snprintf(head, sizeof(head), "\n.SS %s\n", command);
    const char *start = strstr(man, head);
    if (!start)
        return strdup("");
    start += strlen(head);
    const char *ss = strstr(start, "\n.SS "), *sh = strstr(start, "\n.SH ");
    const char *end = ss && (!sh || ss < sh) ? ss : sh ? sh : start + strlen(start);
    return strndup(start, (size_t)(end - start));
}

static void check_command(const char *const *words, size_t nwords, const struct cli_command *c, const char *man)
{
    char what[512];
    cli_describe(words, what, sizeof(what));
    const char *args[8];
    for (size_t i = 0; i < nwords; i++)
        args[i] = words[i];
    args[nwords] = "--help";
    args[nwords + 1] = NULL;
    char *help = run_text(args);
    if (!tap_ok(help != NULL, "%s --help: exit 0", what))
        return;
    /* A command with subcommands shows theirs (xfer); the others their own. */
    const struct cli_option *const *tables[16] = {c->options};
    size_t n = c->options ? 1 : 0;
    for (size_t s = 0; c->subcommands && c->subcommands[s] && n < 15; s++)
        tables[n++] = c->subcommands[s]->options;
    tables[n] = NULL;
    if (n > 0)
        check_shown(what, help, tables);
    /* The parser keeps "given once" in one bit per row of an unsigned long. */
    size_t rows = 0;
    for (size_t t = 0; c->options && c->options[t]; t++)
        for (const struct cli_option *o = c->options[t]; o->name; o++)
            rows++;
    if (c->options)
        tap_ok(rows <= 8 * sizeof(unsigned long), "%s: %zu rows, within what the parser tracks", what, rows);
    /* xfer serve and send are documented in xfer's section. */
    char *section = man_section(man, words[0]);
    for (size_t t = 0; c->options && c->options[t]; t++)
        for (const struct cli_option *o = c->options[t]; o->name; o++)
            if (find_row(c->options, o->name, strlen(o->name)) == o) /* the row the parser takes */
                check_row(words, nwords, o, help, section);
    free(section);
    free(help);
    for (size_t s = 0; c->subcommands && c->subcommands[s]; s++) {
        const char *sub[4] = {words[0], c->subcommands[s]->name, NULL};
        check_command(sub, 2, c->subcommands[s], man);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        printf("Bail out! usage: %s KVRT KVRT.1\n", argv[0]);
        return 1;
    }
    cli_set_exe(argv[1]);
    tap_plan_dynamic();
    char *man = read_file(argv[2]);
    if (!tap_ok(man != NULL, "kvrt(1) readable: %s", argv[2]))
        return tap_done();
    size_t rows = 0;
    for (size_t i = 0; i < cli_num_commands; i++) {
        const char *words[2] = {cli_commands[i]->name, NULL};
        int before = tap_count();
        check_command(words, 1, cli_commands[i], man);
        rows += (size_t)(tap_count() - before);
    }
    tap_ok(rows > cli_num_commands, "%zu checks over %zu commands", rows, cli_num_commands);
    free(man);
    return tap_done();
}
