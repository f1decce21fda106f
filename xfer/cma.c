/*
 * Reading a peer's memory on the same host (cma.h).
 *
 * Layer 1 of libkvrt-xfer (docs/xfer.md, "Layers").
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cma.h"

/* process_vm_readv takes at most this many pieces per side. */
#define CMA_MAX_IOV 1024

void xfer_cma_host(uint8_t host[XFER_HOST_BYTES])
{
    memset(host, 0, XFER_HOST_BYTES);
    char text[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(text, sizeof(text), f))
            text[0] = '\0';
        fclose(f);
    }
    /* The uuid's 32 hex digits, dashes skipped. */
    size_t k = 0;
    for (const char *p = text; *p && k < (size_t)2 * XFER_HOST_BYTES; p++) {
        int v = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (v < 0)
            continue;
        host[k / 2] = (uint8_t)(host[k / 2] | (k % 2 ? v : v << 4));
        k++;
    }
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0)
        for (size_t i = 0; i < sizeof(st.st_ino) && i < XFER_HOST_BYTES; i++)
            host[XFER_HOST_BYTES - 1 - i] ^= (uint8_t)(st.st_ino >> (8 * i));
}

/* UCX_TLS as UCX reads it: a list of transports, "^" first to exclude. */
static bool tls_has_shared_memory(const char *tls)
{
    bool exclude = tls[0] == '^';
    char list[512];
    snprintf(list, sizeof(list), "%s", tls + exclude);
    bool named = false;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
        named |= strcmp(t, "sm") == 0 || strcmp(t, "shm") == 0 || strcmp(t, "cma") == 0 || strcmp(t, "all") == 0;
    return exclude ? !named : named;
}

bool xfer_cma_allowed(const char **why)
{
    const char *own = secure_getenv("KVRT_XFER_CMA");
    if (own && strcmp(own, "0") == 0) {
        *why = "KVRT_XFER_CMA=0";
        return false;
    }
    const char *tls = getenv("UCX_TLS");
    if (tls && *tls && !tls_has_shared_memory(tls)) {
        *why = "UCX_TLS names no shared memory transport";
        return false;
    }
    *why = "";
    return true;
}

int xfer_cma_read(uint32_t pid, uint64_t remote, const struct iovec *local, size_t n, uint64_t len)
{
    uint64_t done = 0;
    size_t i = 0;
    while (i < n) {
        size_t m = n - i < CMA_MAX_IOV ? n - i : CMA_MAX_IOV;
        uint64_t want = 0;
        for (size_t j = 0; j < m; j++)
            want += local[i + j].iov_len;
        /* An address in the other process: never dereferenced here. */
        // NOLINTNEXTLINE(performance-no-int-to-ptr)
        struct iovec r = {(void *)(uintptr_t)(remote + done), (size_t)want};
        ssize_t got = process_vm_readv((pid_t)pid, local + i, (unsigned long)m, &r, 1, 0);
        if (got < 0)
            return errno;
        if ((uint64_t)got != want)
            return EIO; /* the remote range ends in memory it does not have */
        done += want;
        i += m;
    }
    return done == len ? 0 : EIO;
}

/* An abstract address (a leading NUL; nothing on disk, gone with the
 * socket): "kvrt-xfer-cma-" and the name's first 16 bytes in hex. */
static socklen_t cma_address(const uint8_t name[32], struct sockaddr_un *a)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "kvrt-xfer-cma-");
    for (int i = 0; i < 16; i++)
        n += snprintf(a->sun_path + 1 + n, sizeof(a->sun_path) - 1 - (size_t)n, "%02x", name[i]);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int xfer_cma_listen(const uint8_t name[32], int *fd)
{
    struct sockaddr_un a;
    socklen_t alen = cma_address(name, &a);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return errno;
    /* A backlog of a few: each reader connects once, and the listener is
     * closed once the peer answers. */
    if (bind(s, (struct sockaddr *)&a, alen) != 0 || listen(s, 4) != 0) {
        int e = errno;
        close(s);
        return e;
    }
    *fd = s;
    return 0;
}

int xfer_cma_listener(const uint8_t name[32], uint32_t *pid)
{
    struct sockaddr_un a;
    socklen_t alen = cma_address(name, &a);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return errno;
    /* A unix connect completes at once (or fails at once: nonblocking, so
     * a full queue is EAGAIN, never a wait).  The kernel records the
     * listener's credentials from its listen() call. */
    int e = 0;
    if (connect(s, (struct sockaddr *)&a, alen) != 0) {
        e = errno;
    } else {
        struct ucred cred;
        socklen_t clen = sizeof(cred);
        if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0)
            e = errno;
        else if (cred.pid <= 0)
            e = ESRCH; /* a process outside this pid namespace */
        else
            *pid = (uint32_t)cred.pid;
    }
    close(s);
    return e;
}
