/* What the newer CLI tests share: their arguments, and small checks. */
#ifndef KVRT_TESTS_CLI_ENV_H
#define KVRT_TESTS_CLI_ENV_H

#include <stdbool.h>

#include <jansson.h>

#include "cli_run.h"
#include "subprocess.h"
#include "tap.h"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define MENTIONS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* argv: kvrt, subset plugin, nodev plugin, models folder, rsvg-convert. */
struct cli_env {
    const char *subset, *nodev, *models, *rsvg;
    char subset_path_env[1024]; /* KVRT_PLUGIN_PATH=<subset> */
    char nodev_path_env[1024];
};

extern struct cli_env cli_env;

/* Read argv, start TAP (dynamic plan).  Bails out on bad usage. */
void cli_env_init(int argc, char **argv);

/* "<models>/<file>" in a static buffer ring (8 live results). */
const char *cli_model_path(const char *file);

/* Run and expect a JSON object on stdout (one TAP point); NULL otherwise. */
json_t *cli_json(const char *const *args, const char *const *env);

/* Run and expect the one-line error contract (one TAP point). */
void cli_error_case(const char *const *args, const char *const *env, int status, const char *const *mentions);

/* Run and expect exit 0 with every `mentions` on stdout (one TAP point). */
void cli_ok_case(const char *const *args, const char *const *env, const char *const *mentions);

/* A whole file as a NUL-terminated string (free it); NULL when unreadable. */
char *cli_read_text(const char *path);

/* JSON helpers that tolerate NULL. */
const char *js(const json_t *o, const char *key);
double jnum(const json_t *o, const char *key);

#endif
