/* Error reporting and exit statuses shared by every subcommand. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <kvrt/common.h>

#include "cli.h"

int cli_error(int code, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* Scripts grep for one line per error: fold any line breaks. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fprintf(stderr, "kvrt: error: %s\n", msg);
    return code;
}

int cli_exit_for_status(int status)
{
    switch (status) {
    case KVRT_OK:
        return CLI_EXIT_OK;
    case KVRT_ERR_INVALID:
    case KVRT_ERR_OVERFLOW:
        return CLI_EXIT_USAGE;
    case KVRT_ERR_REFUSED:
        return CLI_EXIT_REFUSED;
    case KVRT_ERR_NODEV:
        return CLI_EXIT_NODEV;
    default:
        return CLI_EXIT_INTERNAL;
    }
}

int cli_fail_status(int status)
{
    const char *msg = kvrt_error_message();
    return cli_error(cli_exit_for_status(status), "%s", msg[0] ? msg : kvrt_status_name(status));
}

void cli_print_preferences(const char *trace, const char *indent)
{
    static const char key[] = "preferred: ";
    for (const char *p = trace ? strstr(trace, key) : NULL; p; p = strstr(p, key)) {
        p += sizeof(key) - 1;
        size_t len = strcspn(p, "\n");
        printf("%spreferred %.*s\n", indent, (int)len, p);
        p += len;
    }
}
