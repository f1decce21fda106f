/*
 * Help, version and the man page: every subcommand's --help names its
 * usage, options, environment and an example; `kvrt --man` is the same text
 * as roff, one section per command.
 */
#include <stdio.h>
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

    struct spawn_result res = cli_run(ARGS("--man"), NULL);
    bool sections = true;
    for (size_t i = 0; i < NUM; i++) {
        char ss[32];
        snprintf(ss, sizeof(ss), "\n.SS %s\n", commands[i]);
        sections &= strstr(res.out, ss) != NULL;
    }
    /* No help line may start a roff request by accident. */
    bool escaped = true;
    for (const char *p = res.out; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
        if (*p == '.' && strncmp(p, ".TH", 3) != 0 && strncmp(p, ".SH", 3) != 0 && strncmp(p, ".SS", 3) != 0 &&
            strncmp(p, ".nf", 3) != 0 && strncmp(p, ".fi", 3) != 0 && strncmp(p, ".B", 2) != 0 &&
            strncmp(p, ".I", 2) != 0 && strncmp(p, ".br", 3) != 0 && strncmp(p, ".TP", 3) != 0)
            escaped = false;
    tap_ok(res.status == 0 && strncmp(res.out, ".TH KVRT 1", 10) == 0 && sections && escaped &&
               strstr(res.out, "Bytes counted per repetition"),
           "kvrt --man: a roff page with one section per command, the help texts verbatim");
    spawn_result_free(&res);
    return tap_done();
}
