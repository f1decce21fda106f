/* JSON output through jansson, so quoting and escaping are never hand-made. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

json_t *cli_json_u64(uint64_t value, const char *what)
{
    json_t *v = kvrt_json_u64(value, what);
    if (!v)
        cli_error(CLI_EXIT_USAGE, "%s", kvrt_error_message());
    return v;
}

int cli_print_json_text(int status, char *text)
{
    if (status != KVRT_OK)
        return cli_fail_status(status);
    fputs(text, stdout);
    fputc('\n', stdout);
    kvrt_free(text);
    return CLI_EXIT_OK;
}

int cli_json_print(json_t *root)
{
    if (!root)
        return cli_error(CLI_EXIT_INTERNAL, "could not build the JSON output (out of memory)");
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text)
        return cli_error(CLI_EXIT_INTERNAL, "could not format the JSON output (out of memory)");
    fputs(text, stdout);
    fputc('\n', stdout);
    free(text);
    return CLI_EXIT_OK;
}
