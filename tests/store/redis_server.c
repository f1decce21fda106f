#include "redis_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store_test.h"

const char *redis_server_path(char *why, size_t size)
{
    static const char *const where[] = {"/usr/bin/redis-server", "/usr/local/bin/redis-server",
                                        "/usr/sbin/redis-server"};
    for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
        if (access(where[i], X_OK) == 0)
            return where[i];
    snprintf(why, size, "redis-server is not installed (Debian package redis-server; scripts/setup.sh installs it)");
    return NULL;
}

/* A port nobody listens on now (the kernel's choice). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static bool answers(const char *netns, const char *addr, int port, const char *cli)
{
    char cmd[1024];
    if (netns)
        snprintf(cmd, sizeof(cmd), "ip netns exec %s redis-cli %s -h %s -p %d ping 2>/dev/null | grep -q PONG", netns,
                 cli ? cli : "", addr, port);
    else
        snprintf(cmd, sizeof(cmd), "redis-cli %s -h %s -p %d ping 2>/dev/null | grep -q PONG", cli ? cli : "", addr,
                 port);
    return system(cmd) == 0;
}

bool redis_server_start(struct redis_server *r, const char *addr, const char *netns, char *why, size_t size)
{
    return redis_server_start_with(r, addr, netns, NULL, NULL, why, size);
}

/* Servers this process started in namespaces so far. */
static int netns_started;

bool redis_server_start_with(struct redis_server *r, const char *addr, const char *netns, const char *const *extra,
                             const char *cli, char *why, size_t size)
{
    memset(r, 0, sizeof(*r));
    const char *server = redis_server_path(why, size);
    if (!server)
        return false;
    char *dir = st_tempdir("redis");
    if (!dir) {
        snprintf(why, size, "no temporary folder");
        return false;
    }
    snprintf(r->dir, sizeof(r->dir), "%s", dir);
    free(dir);
    for (int attempt = 0; attempt < 5; attempt++) {
        /* in a namespace: 6379 for the first server, then others apart
         * (a second one on a taken port would seem to answer) */
        r->port = netns ? 6379 + 10 * netns_started + attempt : free_port();
        char port[16];
        snprintf(port, sizeof(port), "%d", r->port);
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (!freopen("/dev/null", "w", stdout) || chdir(r->dir) != 0)
                _exit(126);
            char *args[] = {"--bind",
                            (char *)addr,
                            "--port",
                            port,
                            "--dir",
                            r->dir,
                            "--save",
                            "",
                            "--appendonly",
                            "no",
                            "--protected-mode",
                            "no",
                            "--maxmemory",
                            "256mb",
                            "--maxmemory-policy",
                            "allkeys-lru",
                            "--loglevel",
                            "warning",
                            NULL};
            char *argv[80];
            int n = 0;
            bool tls_port = false;
            for (int i = 0; extra && extra[i]; i++)
                tls_port = tls_port || strcmp(extra[i], "--tls-port") == 0;
            if (tls_port) /* the port is TLS's; no plain one */
                args[3] = "0";
            if (netns) {
                argv[n++] = "ip";
                argv[n++] = "netns";
                argv[n++] = "exec";
                argv[n++] = (char *)netns;
            }
            argv[n++] = (char *)server;
            for (int i = 0; args[i]; i++)
                argv[n++] = args[i];
            for (int i = 0; extra && extra[i] && n < 78; i++)
                argv[n++] = strcmp(extra[i], "PORT") == 0 ? port : (char *)extra[i];
            argv[n] = NULL;
            execvp(argv[0], argv);
            _exit(127);
        }
        r->pid = pid;
        for (int i = 0; i < 100; i++) {
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid) {
                r->pid = 0;
                break;
            }
            if (answers(netns, addr, r->port, cli)) {
                netns_started += netns != NULL;
                snprintf(r->url, sizeof(r->url), "redis://%s:%d", addr, r->port);
                return true;
            }
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (r->pid) {
            kill(r->pid, SIGKILL);
            waitpid(r->pid, NULL, 0);
            r->pid = 0;
        }
    }
    snprintf(why, size, "redis-server did not start on %s (5 ports tried)", addr);
    st_rmdir(r->dir);
    return false;
}

void redis_server_stop(struct redis_server *r)
{
    if (r->pid > 0) {
        kill(r->pid, SIGKILL);
        waitpid(r->pid, NULL, 0);
    }
    r->pid = 0;
    if (r->dir[0])
        st_rmdir(r->dir);
    r->dir[0] = '\0';
}
