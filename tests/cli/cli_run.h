/* Test helper: run the built kvrt executable and check how it answered. */
#ifndef KVRT_TESTS_CLI_RUN_H
#define KVRT_TESTS_CLI_RUN_H

#include <stdbool.h>

#include <jansson.h>

#include "subprocess.h"

/* The kvrt executable under test (argv[1] of every CLI test). */
void cli_set_exe(const char *path);

/* Run kvrt with `args` (NULL-terminated, without argv[0]) and the
 * environment changes of spawn_run (NULL entries end the list).  Unless a
 * change names it, VLLM_KV_CACHE_LAYOUT is removed, so the caller's shell
 * cannot change a test's outcome. */
struct spawn_result cli_run(const char *const *args, const char *const *env);

/* A command line for messages: "plan --json --layers 2 ...". */
void cli_describe(const char *const *args, char *buf, size_t size);

/* The failure contract: exit `status`, nothing on stdout, exactly one line
 * on stderr beginning "kvrt: error: " and containing every `mentions`
 * string (NULL-terminated; may be NULL).  One TAP point. */
bool cli_expect_error(const struct spawn_result *res, int status, const char *const *mentions, const char *what);

/* Parse stdout as JSON; one TAP point (exit 0, valid JSON, empty stderr). */
json_t *cli_expect_json(const struct spawn_result *res, const char *what);

#endif
