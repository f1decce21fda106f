/*
 * The manual page kvrt(1), made from the very help texts the commands print,
 * so the two can never disagree.  The tool writes the page's source as
 * Markdown (`kvrt --man-source`): every help text verbatim in a code block,
 * one section per command.  The build turns it into roff with
 * scripts/man.py, the one roff writer of the tree, as it does for the other
 * pages.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_main.h"

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

/* A help text as a fenced code block: shown exactly as printed. */
static void put_verbatim(FILE *out, const char *text)
{
    size_t len = strlen(text);
    fprintf(out, "```\n%s%s```\n\n", text, len && text[len - 1] == '\n' ? "" : "\n");
}

int cli_print_man_source(FILE *out)
{
    char *main_text = capture(cli_main_help);
    if (!main_text)
        return cli_error(CLI_EXIT_INTERNAL, "--man-source: out of memory");
    /* SYNOPSIS comes before the title, whose heading man.py makes the
     * DESCRIPTION. */
    fputs("## SYNOPSIS\n\n"
          "```\n"
          "kvrt command [options]\n"
          "kvrt --version | --help | help command\n"
          "```\n\n"
          "# kvrt\n\n",
          out);
    put_verbatim(out, main_text);
    free(main_text);
    fputs("## COMMANDS\n\n", out);
    for (size_t i = 0; i < cli_num_commands; i++) {
        char *text = capture(cli_commands[i]->help);
        if (!text)
            return cli_error(CLI_EXIT_INTERNAL, "--man-source: out of memory");
        fprintf(out, "### %s\n\n", cli_commands[i]->name);
        put_verbatim(out, text);
        free(text);
    }
    fputs("## FILES\n\n"
          "`examples/models/`: example Hugging Face configs and a kvrt model file (see docs/model-format.md)\n\n"
          "## SEE ALSO\n\n"
          "The kvrt README and docs/ folder; vLLM's VLLM_KV_CACHE_LAYOUT.\n",
          out);
    return fflush(out) == 0 ? CLI_EXIT_OK : cli_error(CLI_EXIT_INTERNAL, "--man-source: cannot write");
}
