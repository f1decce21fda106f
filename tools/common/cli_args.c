/* Option parsing shared by every subcommand, from its option tables: strict,
 * and every refusal says which argument was wrong and where to look for the
 * valid ones.  The same tables print the option lists of the help. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct cli_args {
    const char *command; /* for messages: "plan" */
    int argc;
    char **argv;
    int next;           /* index of the next unread argument */
    unsigned long seen; /* bit i: row i of the tables (counted across them) was given */
};

enum cli_next {
    CLI_NEXT_END,    /* no more arguments */
    CLI_NEXT_OPTION, /* *opt and *value are set */
    CLI_NEXT_HELP,   /* --help / -h was given */
    CLI_NEXT_ERROR,  /* an error line was printed; exit CLI_EXIT_USAGE */
};

static void cli_args_init(struct cli_args *a, const char *command, int argc, char **argv)
{
    a->command = command;
    a->argc = argc;
    a->argv = argv;
    a->next = 1;
    a->seen = 0;
}

static const struct cli_option *find(const struct cli_option *const *tables, const char *arg, size_t len, size_t *index)
{
    size_t i = 0;
    for (size_t t = 0; tables[t]; t++)
        for (const struct cli_option *o = tables[t]; o->name; o++, i++)
            if (strlen(o->name) == len && strncmp(o->name, arg, len) == 0) {
                *index = i;
                return o;
            }
    return NULL;
}

/* The next option of `tables`.  The first row that names an option wins, so
 * a command can describe a shared option in its own words ahead of the
 * shared table.  Accepts "--name value" and "--name=value"; refuses unknown
 * options, positional arguments, missing values and non-repeatable options
 * given twice. */
static enum cli_next cli_args_next(struct cli_args *a, const struct cli_option *const *tables,
                                   const struct cli_option **opt, const char **value)
{
    if (a->next >= a->argc)
        return CLI_NEXT_END;
    const char *arg = a->argv[a->next++];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
        return CLI_NEXT_HELP;
    if (strncmp(arg, "--", 2) != 0) {
        cli_error(CLI_EXIT_USAGE,
                  "%s: unexpected argument \"%s\"; options start with \"--\" "
                  "(see 'kvrt %s --help')",
                  a->command, arg, a->command);
        return CLI_NEXT_ERROR;
    }
    const char *eq = strchr(arg, '=');
    size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
    size_t i = 0;
    const struct cli_option *o = find(tables, arg, name_len, &i);
    if (!o) {
        cli_error(CLI_EXIT_USAGE,
                  "%s: unknown option \"%.*s\" (see 'kvrt %s --help' for the valid "
                  "options)",
                  a->command, (int)name_len, arg, a->command);
        return CLI_NEXT_ERROR;
    }
    if (!o->repeatable && i < 8 * sizeof(a->seen)) {
        if (a->seen & (1UL << i)) {
            cli_error(CLI_EXIT_USAGE, "%s: option %s is given twice; give it once", a->command, o->name);
            return CLI_NEXT_ERROR;
        }
        a->seen |= 1UL << i;
    }
    *opt = o;
    *value = NULL;
    if (!o->metavar) {
        if (eq) {
            cli_error(CLI_EXIT_USAGE, "%s: option %s takes no value, but \"%s\" was given", a->command, o->name,
                      eq + 1);
            return CLI_NEXT_ERROR;
        }
    } else if (eq) {
        *value = eq + 1;
    } else if (a->next < a->argc) {
        *value = a->argv[a->next++];
    } else {
        cli_error(CLI_EXIT_USAGE, "%s: option %s needs a value (see 'kvrt %s --help')", a->command, o->name,
                  a->command);
        return CLI_NEXT_ERROR;
    }
    return CLI_NEXT_OPTION;
}

const char *cli_option_name(const struct cli_option *const *tables, int id)
{
    for (size_t t = 0; tables[t]; t++)
        for (const struct cli_option *o = tables[t]; o->name; o++)
            if (o->id == id)
                return o->name;
    return NULL;
}

void cli_print_wrapped(FILE *out, int indent, int width, const char *text)
{
    int used = 0;
    while (*text) {
        while (*text == ' ')
            text++;
        size_t word = strcspn(text, " ");
        if (word == 0)
            break;
        if (used > 0 && used + 1 + (int)word > width) {
            fputc('\n', out);
            used = 0;
        }
        used += used ? fprintf(out, " %.*s", (int)word, text) : fprintf(out, "%*s%.*s", indent, "", (int)word, text);
        text += word;
    }
    if (used)
        fputc('\n', out);
}

void cli_print_options(FILE *out, const struct cli_option *table, int column)
{
    for (const struct cli_option *o = table; o->name; o++) {
        int used = fprintf(out, "  %s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        fprintf(out, "%*s", used < column ? column - used : 2, "");
        for (const char *p = o->help; *p; p++) {
            fputc(*p, out);
            if (*p == '\n')
                fprintf(out, "%*s", column, "");
        }
        fputc('\n', out);
    }
}

bool cli_parse_u64(const char *option, const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    /* strtoull alone would accept " 12", "+12", "-1" (as a huge value) and
     * "12abc"; only plain decimal digits are a number here. */
    bool digits = text[0] != '\0';
    for (const char *p = text; *p && digits; p++)
        digits = *p >= '0' && *p <= '9';
    if (!digits) {
        cli_error(CLI_EXIT_USAGE, "%s \"%s\" is not a number: give a whole number from %llu to %llu", option, text,
                  (unsigned long long)min, (unsigned long long)max);
        return false;
    }
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno == ERANGE || *end != '\0' || v < min || v > max) {
        cli_error(CLI_EXIT_USAGE, "%s \"%s\" is out of range: give a whole number from %llu to %llu", option, text,
                  (unsigned long long)min, (unsigned long long)max);
        return false;
    }
    *out = v;
    return true;
}

int cli_parse_options(const char *command, int argc, char **argv, const struct cli_option *const *tables,
                      cli_apply_fn apply, void *request, bool *help)
{
    struct cli_args args;
    const struct cli_option *opt;
    const char *value;
    *help = false;
    cli_args_init(&args, command, argc, argv);
    for (;;) {
        switch (cli_args_next(&args, tables, &opt, &value)) {
        case CLI_NEXT_END: return CLI_EXIT_OK;
        case CLI_NEXT_HELP: *help = true; return CLI_EXIT_OK;
        case CLI_NEXT_ERROR: return CLI_EXIT_USAGE;
        case CLI_NEXT_OPTION: break;
        }
        int code = apply(request, opt, value);
        if (code != CLI_EXIT_OK)
            return code;
    }
}

int cli_apply_switch(void *request, const struct cli_option *opt, const char *value)
{
    (void)opt;
    (void)value;
    *(bool *)request = true;
    return CLI_EXIT_OK;
}
