/*
 * The shared tier's reply reader (store/resp.c) against streams a server
 * could send: well-formed replies of every type, then mutated (bytes
 * changed, lengths made huge or negative, the stream cut), written to one
 * end of a socket pair and read back through the connection's own code.
 * Every read must end -- in a reply, or the connection failed with a
 * reason -- within its deadline, with no value longer than the room it
 * was given; under ASan and UBSan no access out of bounds and no
 * overflow.  Seeded: KVRT_TEST_SEED=N replays a run.
 *
 *   test-store-resp-fuzz [ITERATIONS]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "redis_conn.h"
#include "resp.h"
#include "tap.h"

static uint64_t rng;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static size_t put(char *buf, size_t at, size_t cap, const char *fmt, long long v)
{
    if (at >= cap)
        return at;
    int n = snprintf(buf + at, cap - at, fmt, v);
    return n < 0 ? at : at + ((size_t)n < cap - at ? (size_t)n : cap - at - 1);
}

/* One reply of a random type, well-formed, nested at most depth. */
static size_t reply(char *buf, size_t at, size_t cap, int depth)
{
    switch (next() % 6) {
    case 0: return put(buf, at, cap, "+OK%lld\r\n", (long long)(next() % 100));
    case 1:
        return next() % 2 ? put(buf, at, cap, "-MOVED %lld 127.0.0.1:7000\r\n", (long long)(next() % 20000))
                          : put(buf, at, cap, "-ERR %lld\r\n", (long long)next() % 1000);
    case 2: return put(buf, at, cap, ":%lld\r\n", (long long)(next() % 1000) - 500);
    case 3: {
        long long n = (long long)(next() % 300);
        at = put(buf, at, cap, "$%lld\r\n", n);
        for (long long i = 0; i < n && at < cap; i++)
            buf[at++] = (char)next();
        return put(buf, at, cap, "\r\n", 0);
    }
    case 4: return put(buf, at, cap, "$-1\r\n", 0);
    default: {
        long long n = depth > 0 ? (long long)(next() % 5) : 0;
        at = put(buf, at, cap, "*%lld\r\n", n);
        for (long long i = 0; i < n; i++)
            at = reply(buf, at, cap, depth - 1);
        return at;
    }
    }
}

/* Change a few bytes: digits, type characters, CRLFs, anything. */
static void mutate(char *buf, size_t *len)
{
    static const char some[] = "$*:+-\r\n0123456789-";
    int k = (int)(next() % 4);
    for (int i = 0; i < k && *len; i++) {
        size_t at = next() % *len;
        if (next() % 2)
            buf[at] = some[next() % (sizeof(some) - 1)];
        else
            buf[at] = (char)(next() & 0x7fu);
    }
    if (next() % 4 == 0 && *len)
        *len = next() % *len;           /* cut */
    if (next() % 8 == 0 && *len > 16) { /* a huge length */
        size_t at = next() % (*len - 16);
        memcpy(buf + at, "$99999999999999\r\n", 16);
    }
}

struct feed {
    int fd;
    const char *buf;
    size_t len;
};

static void *writer(void *arg)
{
    struct feed *f = arg;
    for (size_t at = 0; at < f->len;) {
        ssize_t w = write(f->fd, f->buf + at, f->len - at);
        if (w <= 0)
            break;
        at += (size_t)w;
    }
    shutdown(f->fd, SHUT_WR);
    return NULL;
}

int main(int argc, char **argv)
{
    int iterations = argc > 1 ? atoi(argv[1]) : 2000;
    const char *seed = getenv("KVRT_TEST_SEED");
    rng = seed ? strtoull(seed, NULL, 10) : (uint64_t)time(NULL);
    if (!rng)
        rng = 1;
    tap_plan(3);
    tap_diag("seed %llu (KVRT_TEST_SEED replays it)", (unsigned long long)rng);
    static char buf[1 << 16];
    uint8_t *value = malloc(256);
    int bad = 0, slow = 0, failed = 0, replies = 0;
    double worst = 0;
    for (int it = 0; it < iterations && value; it++) {
        size_t len = 0;
        int n = 1 + (int)(next() % 8);
        for (int i = 0; i < n; i++)
            len = reply(buf, len, sizeof(buf), 3);
        if (next() % 4)
            mutate(buf, &len);
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
            break;
        struct feed f = {sv[0], buf, len};
        pthread_t th;
        pthread_create(&th, NULL, writer, &f);
        struct redis_conn c;
        redis_conn_init(&c);
        c.fd = sv[1];
        double t0 = base_now();
        double deadline = t0 + 0.5;
        for (int i = 0; i < 64 && redis_conn_is_open(&c); i++) {
            struct resp_reply r;
            enum resp_result res = RESP_FAILED;
            uint64_t vlen = 0;
            int64_t v;
            switch (next() % 4) {
            case 0:
                /* a value into 128 bytes of a 256-byte buffer: the rest must stay */
                memset(value, 0xa5, 256);
                res = resp_read_bulk(&c, value, 128, &vlen, &r, deadline);
                for (int b = 128; b < 256; b++)
                    bad += value[b] != 0xa5;
                bad += vlen > 128;
                break;
            case 1: res = resp_read_integer(&c, &v, &r, deadline); break;
            case 2: res = resp_read_status(&r, &c, deadline); break;
            default: {
                struct resp_node *t = resp_read_tree(&c, 1 << 16, deadline);
                res = t ? RESP_VALUE : RESP_FAILED;
                resp_tree_free(t);
            }
            }
            replies += res != RESP_FAILED;
            if (res == RESP_FAILED) {
                failed++;
                bad += !c.why || !c.why[0];
            }
            if (res == RESP_MOVED || res == RESP_ASK)
                bad += r.slot >= 16384 || r.to.port < 1 || r.to.port > 65535;
        }
        double took = base_now() - t0;
        worst = took > worst ? took : worst;
        slow += took > 0.6;
        redis_conn_close(&c);
        pthread_join(th, NULL);
        close(sv[0]);
    }
    free(value);
    tap_ok(bad == 0,
           "%d streams: no value past its room, every failure with a reason, redirections in range (%d "
           "bad)",
           iterations, bad);
    tap_ok(slow == 0, "every stream read within its 0.5 s deadline (slowest %.3f s)", worst);
    tap_ok(replies > 0 && failed > 0, "both replies (%d) and failed connections (%d) were seen", replies, failed);
    return tap_done();
}
