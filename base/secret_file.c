/*
 * The rule a file must keep to hold a secret (base/secret_file.h), and
 * reading it.
 *
 * Base of libkvrt-xfer and libkvrt-store: below every layer of both.
 */
#include "secret_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *base_secret_refusal(int fd, const char *what, long long min_bytes, long long max_bytes, char *why,
                                size_t size)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, size, "cannot be examined: %s", strerror(errno));
        return why;
    }
    if (!S_ISREG(st.st_mode))
        return "is not a regular file";
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        snprintf(why, size, "is owned by uid %u, not by this user (uid %u) or root", (unsigned)st.st_uid,
                 (unsigned)geteuid());
        return why;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(why, size, "has mode %04o: group or others may read or write it (chmod 600 it)",
                 (unsigned)(st.st_mode & 07777));
        return why;
    }
    /* a trailing newline is allowed beyond max_bytes; an empty file holds
     * nothing, whatever min_bytes says */
    if (st.st_size > max_bytes + 1 || st.st_size == 0) {
        snprintf(why, size, "holds %lld bytes; %s is %lld to %lld bytes", (long long)st.st_size, what, min_bytes,
                 max_bytes);
        return why;
    }
    return NULL;
}

size_t base_secret_read(int fd, void *buf, size_t cap)
{
    size_t n = 0;
    while (n < cap) {
        ssize_t r = read(fd, (char *)buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    return n;
}
