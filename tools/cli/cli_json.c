/* JSON output through jansson, so quoting and escaping are never hand-made. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/layout.h>
#include <kvrt/trace.h>

#include "cli.h"

#if JSON_INTEGER_IS_LONG_LONG
#define CLI_JSON_INT_MAX LLONG_MAX
#else
#define CLI_JSON_INT_MAX LONG_MAX
#endif

json_t *cli_json_u64(uint64_t value, const char *what)
{
    /* jansson integers are signed 64-bit; a larger size must not wrap into a
     * negative number that a consumer would trust. */
    if (value > (uint64_t)CLI_JSON_INT_MAX) {
        cli_error(CLI_EXIT_USAGE,
                  "%s %llu exceeds the largest JSON integer %lld; use smaller "
                  "numbers or the human-readable output",
                  what, (unsigned long long)value, (long long)CLI_JSON_INT_MAX);
        return NULL;
    }
    return json_integer((json_int_t)value);
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

json_t *cli_json_trace_step(const struct kvrt_trace_step *st)
{
    json_t *o = json_object();
    const char *kind = kvrt_trace_kind_name(st->kind);
    bool ok = o && kvrt_json_put(o, "step", kvrt_json_str(kind ? kind : "unknown")) &&
              kvrt_json_put(o, "text", kvrt_json_str(st->text));
    if (ok && st->layout != KVRT_TRACE_NO_LAYOUT)
        ok = kvrt_json_put(o, "layout", kvrt_json_str(kvrt_layout_name((enum kvrt_layout)st->layout)));
    if (ok && st->backend)
        ok = kvrt_json_put(o, "backend", kvrt_json_str(st->backend));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}
