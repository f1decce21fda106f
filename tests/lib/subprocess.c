#include <errno.h>
#include <poll.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "subprocess.h"

extern char **environ;

struct buffer {
    char *data;
    size_t len, cap;
};

static int buffer_add(struct buffer *b, const char *src, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

static size_t name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');
    return eq ? (size_t)(eq - entry) : strlen(entry);
}

/* A copy of environ with every variable named in changes removed, then the
 * "NAME=VALUE" changes appended. */
static char **build_env(const char *const changes[])
{
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    while (changes && changes[k])
        k++;
    char **env = calloc(n + k + 1, sizeof(*env));
    if (!env)
        return NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        bool drop = false;
        for (size_t j = 0; j < k && !drop; j++) {
            size_t len = name_len(changes[j]);
            drop = name_len(environ[i]) == len && strncmp(environ[i], changes[j], len) == 0;
        }
        if (!drop)
            env[m++] = environ[i];
    }
    for (size_t j = 0; j < k; j++)
        if (strchr(changes[j], '='))
            env[m++] = (char *)changes[j];
    return env;
}

static int fail_start(struct spawn_result *res, const char *what, int err)
{
    char msg[256];
    snprintf(msg, sizeof(msg), "%s: %s", what, strerror(err));
    res->err = strdup(msg);
    res->out = strdup("");
    res->status = -1;
    return -1;
}

int spawn_run(const char *path, char *const argv[], const char *const env_changes[], struct spawn_result *res)
{
    int out_pipe[2], err_pipe[2];
    memset(res, 0, sizeof(*res));
    if (pipe(out_pipe) != 0)
        return fail_start(res, "pipe", errno);
    if (pipe(err_pipe) != 0) {
        close(out_pipe[0]);
        close(out_pipe[1]);
        return fail_start(res, "pipe", errno);
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
    posix_spawn_file_actions_addclose(&fa, out_pipe[0]);
    posix_spawn_file_actions_addclose(&fa, err_pipe[0]);
    char **env = build_env(env_changes);
    pid_t pid;
    int rc = env ? posix_spawn(&pid, path, &fa, NULL, argv, env) : ENOMEM;
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (rc != 0) {
        close(out_pipe[0]);
        close(err_pipe[0]);
        return fail_start(res, path, rc);
    }

    /* Drain both pipes together: a child blocked on a full stderr pipe while
     * we wait on stdout would hang the test. */
    struct buffer out = {0}, err = {0};
    struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
    int open_fds = 2;
    buffer_add(&out, "", 0);
    buffer_add(&err, "", 0);
    while (open_fds > 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char chunk[4096];
            ssize_t got = read(fds[i].fd, chunk, sizeof(chunk));
            if (got > 0) {
                buffer_add(i == 0 ? &out : &err, chunk, (size_t)got);
            } else if (got == 0 || errno != EINTR) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
    int wstatus = 0;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
        ;
    res->status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    res->out = out.data ? out.data : strdup("");
    res->err = err.data ? err.data : strdup("");
    return 0;
}

void spawn_result_free(struct spawn_result *res)
{
    free(res->out);
    free(res->err);
    res->out = res->err = NULL;
}
