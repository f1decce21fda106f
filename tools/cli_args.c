/* Option parsing shared by every subcommand: strict, and every refusal says
 * which argument was wrong and where to look for the valid ones. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_args_init(struct cli_args *a, const char *command, int argc, char **argv)
{
    a->command = command;
    a->argc = argc;
    a->argv = argv;
    a->next = 1;
    a->seen = 0;
}

enum cli_next cli_args_next(struct cli_args *a, const struct cli_option *table,
                            const struct cli_option **opt, const char **value)
{
    if (a->next >= a->argc)
        return CLI_NEXT_END;
    const char *arg = a->argv[a->next++];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
        return CLI_NEXT_HELP;
    if (strncmp(arg, "--", 2) != 0) {
        cli_error(CLI_EXIT_USAGE, "%s: unexpected argument \"%s\"; options start with \"--\" "
                  "(see 'kvrt %s --help')", a->command, arg, a->command);
        return CLI_NEXT_ERROR;
    }
    const char *eq = strchr(arg, '=');
    size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
    for (size_t i = 0; table[i].name; i++) {
        const struct cli_option *o = &table[i];
        if (strlen(o->name) != name_len || strncmp(o->name, arg, name_len) != 0)
            continue;
        if (!o->repeatable && i < 8 * sizeof(a->seen)) {
            if (a->seen & (1UL << i)) {
                cli_error(CLI_EXIT_USAGE, "%s: option %s is given twice; give it once",
                          a->command, o->name);
                return CLI_NEXT_ERROR;
            }
            a->seen |= 1UL << i;
        }
        *opt = o;
        *value = NULL;
        if (!o->takes_value) {
            if (eq) {
                cli_error(CLI_EXIT_USAGE, "%s: option %s takes no value, but \"%s\" was given",
                          a->command, o->name, eq + 1);
                return CLI_NEXT_ERROR;
            }
        } else if (eq) {
            *value = eq + 1;
        } else if (a->next < a->argc) {
            *value = a->argv[a->next++];
        } else {
            cli_error(CLI_EXIT_USAGE, "%s: option %s needs a value (see 'kvrt %s --help')",
                      a->command, o->name, a->command);
            return CLI_NEXT_ERROR;
        }
        return CLI_NEXT_OPTION;
    }
    cli_error(CLI_EXIT_USAGE, "%s: unknown option \"%.*s\" (see 'kvrt %s --help' for the valid "
              "options)", a->command, (int)name_len, arg, a->command);
    return CLI_NEXT_ERROR;
}

bool cli_parse_u64(const char *option, const char *text, uint64_t min, uint64_t max,
                   uint64_t *out)
{
    /* strtoull alone would accept " 12", "+12", "-1" (as a huge value) and
     * "12abc"; only plain decimal digits are a number here. */
    bool digits = text[0] != '\0';
    for (const char *p = text; *p && digits; p++)
        digits = *p >= '0' && *p <= '9';
    if (!digits) {
        cli_error(CLI_EXIT_USAGE, "%s \"%s\" is not a number: give a whole number from %llu to %llu",
                  option, text, (unsigned long long)min, (unsigned long long)max);
        return false;
    }
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno == ERANGE || *end != '\0' || v < min || v > max) {
        cli_error(CLI_EXIT_USAGE, "%s \"%s\" is out of range: give a whole number from %llu to %llu",
                  option, text, (unsigned long long)min, (unsigned long long)max);
        return false;
    }
    *out = v;
    return true;
}
