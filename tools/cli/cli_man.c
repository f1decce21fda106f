/*
 * The manual page kvrt(1), made from the very help texts the commands print,
 * so the two can never disagree.  The build runs `kvrt --man` to write it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/common.h>

#include "cli.h"

/* Help text, verbatim, as roff: no-fill mode, with roff's special characters
 * escaped so a line starting with "." or "'" is never read as a request. */
static void put_verbatim(FILE *out, const char *text)
{
    bool line_start = true;
    fputs(".nf\n", out);
    for (const char *p = text; *p; p++) {
        if (line_start && (*p == '.' || *p == '\''))
            fputs("\\&", out);
        if (*p == '\\')
            fputs("\\e", out);
        else if (*p == '-')
            fputs("\\-", out);
        else
            fputc(*p, out);
        line_start = *p == '\n';
    }
    if (!line_start)
        fputc('\n', out);
    fputs(".fi\n", out);
}

/* What `help` writes to a FILE, as a string (caller frees). */
static char *capture(void (*help)(FILE *))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    help(f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

int cli_print_man(FILE *out)
{
    char *main_text = capture(cli_main_help);
    if (!main_text)
        return cli_error(CLI_EXIT_INTERNAL, "--man: out of memory");
    fprintf(out, ".TH KVRT 1 \"\" \"kvrt %s\" \"User Commands\"\n", kvrt_version());
    fputs(".SH NAME\nkvrt \\- plan, explain, draw, run and measure paged KV\\-cache layouts\n", out);
    fputs(".SH SYNOPSIS\n.B kvrt\n.I command\n[\\fIoptions\\fR]\n.br\n"
          ".B kvrt\n\\-\\-version | \\-\\-help | help \\fIcommand\\fR\n",
          out);
    fputs(".SH DESCRIPTION\n", out);
    put_verbatim(out, main_text);
    free(main_text);
    fputs(".SH COMMANDS\n", out);
    for (size_t i = 0; i < cli_num_commands; i++) {
        char *text = capture(cli_commands[i]->help);
        if (!text)
            return cli_error(CLI_EXIT_INTERNAL, "--man: out of memory");
        fprintf(out, ".SS %s\n", cli_commands[i]->name);
        put_verbatim(out, text);
        free(text);
    }
    fputs(".SH FILES\n.TP\n.I examples/models/\nexample Hugging Face configs and a kvrt model file "
          "(see docs/model\\-format.md)\n",
          out);
    fputs(".SH SEE ALSO\nThe kvrt README and docs/ folder; vLLM's VLLM_KV_CACHE_LAYOUT.\n", out);
    return fflush(out) == 0 ? CLI_EXIT_OK : cli_error(CLI_EXIT_INTERNAL, "--man: cannot write");
}
