/* A redis-server of a test's own: on loopback (or inside a network
 * namespace) on a free port, in a temporary folder, dying with the test. */
#ifndef KVRT_TESTS_REDIS_SERVER_H
#define KVRT_TESTS_REDIS_SERVER_H

#include <stdbool.h>
#include <sys/types.h>

struct redis_server {
    pid_t pid;
    int port;
    char dir[4096];
    char url[128];
};

/* The redis-server program, or NULL with why (not installed). */
const char *redis_server_path(char *why, size_t size);

/* Start one bound to addr; netns NULL or a namespace to run it in (through
 * `ip netns exec`).  false with why. */
bool redis_server_start(struct redis_server *r, const char *addr, const char *netns, char *why, size_t size);
/* The same with more arguments for redis-server (NULL-terminated; "PORT"
 * stands for the chosen port: "--tls-port", "PORT" makes it TLS's and
 * turns the plain port off) and for the redis-cli that pings it. */
bool redis_server_start_with(struct redis_server *r, const char *addr, const char *netns, const char *const *extra,
                             const char *cli, char *why, size_t size);
/* SIGKILL and reap it, remove its folder. */
void redis_server_stop(struct redis_server *r);

#endif
