/* The slot file (slots.dat): entries' bytes read into slot-sized buffers,
 * runs of neighbouring slots in one request, O_DIRECT where the file system
 * takes it; a batch's slots written (and synced) before its index commits,
 * so an entry is never indexed before its bytes are complete.
 *
 * Layer 3 of libkvrt-store (docs/store.md, "Layers").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <lmdb.h>

#include "disk_parts.h"

/* slots.dat, for reading and, unless inspecting, for O_DIRECT writes
 * (buffered where the file system refuses them). */
int disk_open_slots(struct disk_env *e, const char *path, bool inspect, uint64_t slot_bytes)
{
    char file[4200];
    snprintf(file, sizeof(file), "%s/slots.dat", path);
    if (e->slots_fd >= 0)
        close(e->slots_fd);
    if (e->direct_fd >= 0)
        close(e->direct_fd);
    if (e->read_direct_fd >= 0)
        close(e->read_direct_fd);
    e->direct_fd = e->read_direct_fd = -1;
    e->slots_writable = !inspect;
    e->slots_fd = open(file, (inspect ? O_RDONLY : O_RDWR | O_CREAT) | O_CLOEXEC, 0644);
    if (e->slots_fd < 0 && inspect && errno == ENOENT)
        e->slots_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* an index without entries yet */
    if (e->slots_fd < 0) {
        int err = errno;
        return BASE_FAIL(KVRT_ERR_INVALID, "kvrt-store: cannot open \"%s\": %s", file, strerror(err));
    }
    if (!inspect)
        e->direct_fd = open(file, O_WRONLY | O_DIRECT | O_CLOEXEC);
    e->read_direct_fd = open(file, O_RDONLY | O_DIRECT | O_CLOEXEC);
    e->slot_bytes = slot_bytes;
    return KVRT_OK;
}

uint64_t disk_read_slot(struct disk_env *e, uint64_t slot, uint8_t *buf, uint64_t bytes)
{
    uint64_t got = 0;
    while (got < bytes) {
        ssize_t n = pread(e->slots_fd, buf + got, bytes - got, (off_t)(slot * e->slot_bytes + got));
        if (n <= 0)
            break;
        got += (uint64_t)n;
    }
    return got;
}

/* Slots [slot, slot + n) into bufs[0..n) (slot-sized, 4 KiB-aligned), 64
 * at a time in one request: with O_DIRECT straight into the buffers, no
 * copy out of the page cache (buffered where the file system refuses it).
 * lens[i]: the entry bytes buffer i got (fewer where the file is cut). */
static void read_run(struct disk_tier *d, uint8_t *const *bufs, uint64_t slot, uint64_t n, uint64_t *lens)
{
    struct disk_env *e = d->env;
    struct iovec iov[64];
    for (uint64_t done = 0; done < n;) {
        int m = (int)(n - done < 64 ? n - done : 64);
        for (int i = 0; i < m; i++)
            iov[i] = (struct iovec){bufs[done + (uint64_t)i], e->slot_bytes};
        off_t at = (off_t)((slot + done) * e->slot_bytes);
        ssize_t got = -1;
        if (e->read_direct_fd >= 0)
            do
                got = preadv(e->read_direct_fd, iov, m, at);
            while (got < 0 && errno == EINTR);
        if (got < 0)
            do
                got = preadv(e->slots_fd, iov, m, at);
            while (got < 0 && errno == EINTR);
        uint64_t g = got > 0 ? (uint64_t)got : 0;
        for (int i = 0; i < m; i++) {
            uint64_t from = (uint64_t)i * e->slot_bytes, *len = &lens[done + (uint64_t)i];
            *len = g > from ? g - from : 0;
            if (*len > d->value_bytes)
                *len = d->value_bytes;
            /* a read cut short before the end of the file: the rest on its own */
            if (*len < d->value_bytes)
                *len = disk_read_slot(e, slot + done + (uint64_t)i, bufs[done + (uint64_t)i], d->value_bytes);
        }
        done += (uint64_t)m;
    }
}

void disk_read_slots(struct disk_tier *d, uint8_t *const *bufs, const uint64_t *slots, uint64_t n, uint64_t *lens)
{
    /* a slot whose bytes end past the largest file offset is a damaged
     * record: nothing read, which the checks refuse */
    const uint64_t last = (uint64_t)INT64_MAX / d->env->slot_bytes - 1;
    for (uint64_t i = 0; i < n;) {
        if (slots[i] > last) {
            lens[i++] = 0;
            continue;
        }
        uint64_t run = 1;
        while (i + run < n && slots[i] + run <= last && slots[i + run] == slots[i] + run)
            run++;
        read_run(d, bufs + i, slots[i], run, lens + i);
        i += run;
    }
}

int disk_read_get(struct disk_read *r, const struct store_id *id, uint8_t *buf, bool *found, uint64_t *slot,
                  uint64_t *len)
{
    *len = 0;
    int rc = disk_read_find(r, id, found, slot);
    if (rc == KVRT_OK && *found)
        disk_read_slots(r->d, &buf, slot, 1, len);
    return rc;
}

static int write_all(int fd, const uint8_t *buf, uint64_t bytes, uint64_t offset)
{
    uint64_t done = 0;
    while (done < bytes) {
        ssize_t n = pwrite(fd, buf + done, bytes - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EIO;
        done += (uint64_t)n;
    }
    return 0;
}

/* Slots [first, first + n) from n buffers in one call where it can. */
static int write_run(int fd, struct mem_entry *const *puts, uint64_t n, uint64_t slot_bytes, uint64_t first)
{
    struct iovec iov[64];
    uint64_t done = 0;
    while (done < n) {
        int m = (int)(n - done < 64 ? n - done : 64);
        for (int i = 0; i < m; i++)
            iov[i] = (struct iovec){puts[done + (uint64_t)i]->buf, slot_bytes};
        ssize_t w = pwritev(fd, iov, m, (off_t)((first + done) * slot_bytes));
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno;
        if ((uint64_t)w != (uint64_t)m * slot_bytes) {
            /* a short write (a full disk): the rest one by one, which says why */
            uint64_t whole = (uint64_t)w / slot_bytes;
            for (uint64_t i = whole; i < (uint64_t)m; i++) {
                int rc = write_all(fd, puts[done + i]->buf, slot_bytes, (first + done + i) * slot_bytes);
                if (rc != 0)
                    return rc;
            }
        }
        done += (uint64_t)m;
    }
    return 0;
}

/* The entries' bytes into their slots, synced: O_DIRECT from the entries'
 * own buffers where the file system takes it, else through the page cache;
 * runs of neighbouring slots (a growing file) in one call each. */
int disk_write_slots(struct disk_tier *d, struct mem_entry *const *puts, const uint64_t *slots, uint64_t n)
{
    struct disk_env *e = d->env;
    if (n == 0)
        return 0;
    for (uint64_t i = 0; i < n;) {
        uint64_t run = 1;
        while (i + run < n && slots[i + run] == slots[i] + run)
            run++;
        int rc = -1;
        if (e->direct_fd >= 0)
            rc = write_run(e->direct_fd, puts + i, run, d->slot_bytes, slots[i]);
        if (rc == EINVAL || rc == -1) /* no O_DIRECT here: buffered */
            rc = write_run(e->slots_fd, puts + i, run, d->slot_bytes, slots[i]);
        if (rc != 0)
            return rc;
        i += run;
    }
    /* the bytes are on disk before the index that names them */
    return fdatasync(e->slots_fd) == 0 ? 0 : errno;
}
