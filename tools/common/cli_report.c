/* Error reporting and exit statuses shared by every subcommand. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <kvrt/common.h>
#include <kvrt/runtime.h>

#include "cli.h"

int cli_error(int code, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* Scripts grep for one line per error, and a value from the command
     * line, the environment or a file may carry any byte: control bytes are
     * written as escapes (the library's messages already are). */
    char line[4 * sizeof(msg)];
    kvrt_escape_controls(line, sizeof(line), msg);
    fprintf(stderr, "kvrt: error: %s\n", line);
    return code;
}

const char *cli_printable(const char *text, char *buf, size_t size)
{
    kvrt_escape_controls(buf, size, text ? text : "");
    return buf;
}

int cli_finish_output(int code)
{
    /* A full disk, a closed stdout or a broken pipe must not look like
     * success: buffered output is flushed and checked before exiting. */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int e = errno;
        clearerr(stdout);
        cli_error(CLI_EXIT_INTERNAL, "could not write the output to stdout: %s", e ? strerror(e) : "write error");
        return code == CLI_EXIT_OK ? CLI_EXIT_INTERNAL : code;
    }
    return code;
}

int cli_exit_for_status(int status)
{
    switch (status) {
    case KVRT_OK: return CLI_EXIT_OK;
    case KVRT_ERR_INVALID:
    case KVRT_ERR_OVERFLOW: return CLI_EXIT_USAGE;
    case KVRT_ERR_REFUSED: return CLI_EXIT_REFUSED;
    case KVRT_ERR_NODEV: return CLI_EXIT_NODEV;
    default: return CLI_EXIT_INTERNAL;
    }
}

int cli_fail_status(int status)
{
    const char *msg = kvrt_error_message();
    return cli_error(cli_exit_for_status(status), "%s", msg[0] ? msg : kvrt_status_name(status));
}

/* A passed-over step about a backend that has a device and declares the
 * layout: what passed it over was its bind failing. */
bool cli_bind_failure_step(const struct kvrt_runtime *rt, const struct kvrt_trace_step *st)
{
    size_t i;
    struct kvrt_plugin_info in;
    return st->kind == KVRT_TRACE_PASSED_OVER && st->backend && st->layout != KVRT_TRACE_NO_LAYOUT &&
           kvrt_runtime_find_plugin(rt, st->backend, &i) == KVRT_OK &&
           kvrt_runtime_plugin_info(rt, i, &in) == KVRT_OK && in.available &&
           kvrt_runtime_plugin_admits(rt, i, (enum kvrt_layout)st->layout);
}

void cli_print_selection(const struct kvrt_runtime *rt, const char *indent)
{
    size_t n = kvrt_runtime_num_trace_steps(rt);
    for (size_t i = 0; i < n; i++) {
        struct kvrt_trace_step st;
        if (kvrt_runtime_trace_step(rt, i, &st) != KVRT_OK)
            continue;
        if (cli_bind_failure_step(rt, &st))
            printf("%spassed over \"%s\": %s\n", indent, st.backend, st.text);
        else if (st.kind == KVRT_TRACE_PREFERRED)
            printf("%spreferred %s\n", indent, st.text);
    }
}
