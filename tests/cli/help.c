/*
 * Help, version and the man page: every subcommand's --help names its
 * usage, options, environment and an example; kvrt(1), which the build
 * makes from `kvrt --man-source` (KVRT_TEST_MAN_PAGE is the built page), is
 * the same text as roff, one section per command.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_env.h"

static const char *const commands[] = {"layouts", "plan",  "resolve", "plugins", "explain",
                                       "run",     "bench", "draw",    "xfer"};
#define NUM (sizeof(commands) / sizeof(commands[0]))

int main(int argc, char **argv)
{
    cli_env_init(argc, argv);
    for (size_t i = 0; i < NUM; i++) {
        char usage[64];
        snprintf(usage, sizeof(usage), "Usage: kvrt %s", commands[i]);
        cli_ok_case(ARGS(commands[i], "--help"), NULL, MENTIONS(usage, "Options:", "Environment:", "Example"));
        cli_ok_case(ARGS("help", commands[i]), NULL, MENTIONS(usage));
    }
    cli_ok_case(ARGS("--help"), NULL,
                MENTIONS("plugins", "explain", "run", "bench", "draw", "Exit status", "4  no backend",
                         "VLLM_KV_CACHE_LAYOUT", "KVRT_BACKEND", "KVRT_PLUGIN_PATH"));
    cli_ok_case(ARGS("--version"), NULL, MENTIONS("kvrt 0."));
    cli_ok_case(ARGS("run", "--help"), NULL, MENTIONS("--seqs", "--context", "default 4", "default 512", "tolerance"));
    cli_ok_case(ARGS("bench", "--help"), NULL, MENTIONS("Bytes counted per repetition", "memcpy", "--plot"));
    cli_ok_case(ARGS("plan", "--help"), NULL, MENTIONS("--model FILE", "--memory SIZE", "GiB"));

    struct spawn_result res = cli_run(ARGS("--man-source"), NULL);
    bool sources = res.status == 0;
    for (size_t i = 0; i < NUM; i++) {
        char ss[32];
        snprintf(ss, sizeof(ss), "\n### %s\n\n```\n", commands[i]);
        sources &= strstr(res.out, ss) != NULL;
    }
    tap_ok(sources && strstr(res.out, "Bytes counted per repetition"),
           "kvrt --man-source: Markdown with one section per command, the help texts in code blocks");
    spawn_result_free(&res);

    const char *path = getenv("KVRT_TEST_MAN_PAGE");
    char *page = NULL;
    size_t len = 0;
    FILE *f = path ? fopen(path, "r") : NULL;
    if (f) {
        FILE *m = open_memstream(&page, &len);
        int c;
        while (m && (c = fgetc(f)) != EOF)
            fputc(c, m);
        if (m)
            fclose(m);
        fclose(f);
    }
    if (!page) {
        tap_ok(false, "the built kvrt(1) is readable (KVRT_TEST_MAN_PAGE=%s)", path ? path : "(unset)");
        return tap_done();
    }
    bool sections = true;
    for (size_t i = 0; i < NUM; i++) {
        char ss[32];
        snprintf(ss, sizeof(ss), "\n.SS %s\n", commands[i]);
        sections &= strstr(page, ss) != NULL;
    }
    /* No help line may start a roff request by accident. */
    static const char *const requests[] = {".TH", ".SH", ".SS", ".PP", ".RS", ".RE", ".nf", ".fi", ".TP", ".IP"};
    bool escaped = true;
    for (const char *p = page; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
        bool known = *p != '.';
        for (size_t r = 0; !known && r < sizeof(requests) / sizeof(requests[0]); r++)
            known = strncmp(p, requests[r], 3) == 0 && (p[3] == ' ' || p[3] == '\n');
        escaped &= known;
    }
    tap_ok(strncmp(page, ".TH KVRT 1", 10) == 0 && sections && escaped && strstr(page, "Bytes counted per repetition"),
           "kvrt(1): a roff page with one section per command, the help texts verbatim");
    free(page);
    return tap_done();
}
