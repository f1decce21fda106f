/* Test helper: run a program with a controlled environment and capture its
 * stdout, stderr and exit status. */
#ifndef KVRT_TESTS_SUBPROCESS_H
#define KVRT_TESTS_SUBPROCESS_H

struct spawn_result {
    int status; /* exit code; 128 + signal when killed; -1 when it could not start */
    char *out;  /* NUL-terminated stdout */
    char *err;  /* NUL-terminated stderr */
};

/*
 * Run path with argv (argv[0] included, NULL-terminated).  env_changes is a
 * NULL-terminated list of "NAME=VALUE" (set) or "NAME" (remove) applied to a
 * copy of this process's environment; NULL means no change.
 * Returns 0, or -1 when the program could not be run (res->err says why).
 */
int spawn_run(const char *path, char *const argv[], const char *const env_changes[], struct spawn_result *res);
void spawn_result_free(struct spawn_result *res);

#endif
