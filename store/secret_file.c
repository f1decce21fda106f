/* Reading the shared tier's ACL password from a file, refused unless it is
 * kept as a secret: the same rule libkvrt-xfer applies to its key file
 * (a regular file owned by this user or root, no bit for group or
 * others), so that an operator learns one rule for both.  The store does
 * not link libkvrt-xfer: the rule is repeated here, not shared code. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "store_internal.h"

#define PASSWORD_MAX 512

char *shared_read_password(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        (void)STORE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: cannot open shared_password_file \"%s\": %s", path,
                   strerror(errno));
        return NULL;
    }
    struct stat st;
    char why[160];
    const char *bad = NULL;
    if (fstat(fd, &st) != 0) {
        snprintf(why, sizeof(why), "cannot be examined: %s", strerror(errno));
        bad = why;
    } else if (!S_ISREG(st.st_mode)) {
        bad = "is not a regular file";
    } else if (st.st_uid != geteuid() && st.st_uid != 0) {
        snprintf(why, sizeof(why), "is owned by uid %u, not by this user (uid %u) or root", (unsigned)st.st_uid,
                 (unsigned)geteuid());
        bad = why;
    } else if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(why, sizeof(why), "has mode %04o: group or others may read or write it (chmod 600 it)",
                 (unsigned)(st.st_mode & 07777));
        bad = why;
    } else if (st.st_size > PASSWORD_MAX + 1 || st.st_size == 0) {
        snprintf(why, sizeof(why), "holds %lld bytes; a password is 1 to %d bytes", (long long)st.st_size,
                 PASSWORD_MAX);
        bad = why;
    }
    if (bad) {
        close(fd);
        (void)STORE_FAIL(KVRT_ERR_INVALID, "kvrt_store_open: refusing shared_password_file \"%s\": it %s", path, bad);
        return NULL;
    }
    char *buf = calloc(1, PASSWORD_MAX + 2);
    size_t n = 0;
    while (buf && n < PASSWORD_MAX + 1) {
        ssize_t r = read(fd, buf + n, PASSWORD_MAX + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (!buf) {
        (void)STORE_FAIL(KVRT_ERR_NOMEM, "kvrt-store: out of memory");
        return NULL;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    bool printable = n > 0;
    for (size_t i = 0; i < n; i++)
        printable = printable && buf[i] >= 0x20 && buf[i] != 0x7f;
    if (!printable) {
        OPENSSL_cleanse(buf, PASSWORD_MAX + 2);
        free(buf);
        (void)STORE_FAIL(KVRT_ERR_INVALID,
                         "kvrt_store_open: shared_password_file \"%s\" does not hold one line of 1 to %d printable bytes",
                   path, PASSWORD_MAX);
        return NULL;
    }
    return buf;
}
