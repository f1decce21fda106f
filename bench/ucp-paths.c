/*
 * bench-ucp-paths — the ways UCX 1.13 can move a large buffer from one
 * process into another process's memory, measured on this machine next to
 * memcpy.  Not a test and not kvrt: plain UCP, so that the choice of data
 * path in libkvrt-xfer rests on figures (docs/xfer.md, BENCHMARKS.md).
 *
 *   bench-ucp-paths --path NAME [--size BYTES] [--msg BYTES] [--repeat N]
 *                   [--peer-mode] [--defer] [--register] [--wakeup]
 *                   [--child-netns FILE --child-devices DEVICES]
 *
 * The program forks before touching UCX; the parent sends, the child
 * receives; worker addresses go over a socketpair (no port).  Paths:
 *
 *   put-malloc  ucp_put_nbx + flush into memory the target allocated itself
 *               (registered once with ucp_mem_map); the target only progresses
 *   put-alloc   the same into UCP_MEM_MAP_ALLOCATE memory
 *   am-rndv     ucp_am_send_nbx(UCP_AM_SEND_FLAG_RNDV) in --msg pieces; the
 *               target's handler calls ucp_am_recv_data_nbx straight into the
 *               destination and returns UCS_INPROGRESS (--defer: the handler
 *               queues the descriptor and the main loop receives it later)
 *   am-auto     the same without forcing rendezvous (UCX picks eager or
 *               rendezvous per message)
 *
 * A transfer ends when the target has every byte (an acknowledgement after
 * the last piece for the AM paths, the flush for puts).  --peer-mode opens
 * both endpoints with UCP_ERR_HANDLING_MODE_PEER; --register registers both
 * buffers once and passes the memory handles; --wakeup asks for
 * UCP_FEATURE_WAKEUP (what an event fd needs), to see the lanes it leaves.  After the timed transfers one
 * more moves a second pattern into a zeroed destination and every byte is
 * compared.  --child-netns puts the receiver in another network namespace
 * (setns on FILE, e.g. /var/run/netns/NAME) with UCX_NET_DEVICES set to
 * DEVICES there before it touches UCX: two hosts made on one machine
 * (bench/xfer-hosts.py), the worker addresses still crossing the
 * socketpair.  Prints one JSON object: the path, GB/s (10^9 bytes/s) overall,
 * of the best and the median transfer, memcpy of the same bytes, verified.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

enum { AM_DATA = 1, AM_DONE = 2, MAX_PIECES = 1 << 16 };

struct opts {
    const char *path;
    uint64_t size, msg;
    int repeat;
    bool peer_mode, defer, reg, wakeup;
    const char *child_netns, *child_devices;
};

struct piece_hdr {
    uint64_t round, offset;
};

struct side {
    struct opts o;
    int sock;
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_ep_h ep;
    ucp_mem_h memh;
    uint8_t *buf;
    bool ep_failed;
    /* receiver */
    uint64_t got, round;
    void *deferred[MAX_PIECES];
    struct piece_hdr deferred_hdr[MAX_PIECES];
    size_t deferred_len[MAX_PIECES];
    int ndeferred;
    /* sender */
    int inflight;
    uint64_t done_round;
    bool done_seen;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, ucs_status_t st)
{
    fprintf(stderr, "bench-ucp-paths: %s: %s\n", what, st == UCS_OK ? strerror(errno) : ucs_status_string(st));
    exit(1);
}

static void xwrite(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k <= 0)
            die("socket write", UCS_OK);
        b += k;
        n -= (size_t)k;
    }
}

static void xread(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t k = read(fd, b, n);
        if (k <= 0)
            die("socket read (the other process ended)", UCS_OK);
        b += k;
        n -= (size_t)k;
    }
}

static void send_blob(int fd, const void *p, uint64_t n)
{
    xwrite(fd, &n, sizeof(n));
    xwrite(fd, p, n);
}

static void *recv_blob(int fd, uint64_t *n)
{
    xread(fd, n, sizeof(*n));
    void *p = malloc(*n ? *n : 1);
    if (!p)
        die("malloc", UCS_OK);
    xread(fd, p, *n);
    return p;
}

static uint8_t pattern(uint64_t i, uint64_t seed)
{
    uint64_t x = (i >> 3) * 0x9e3779b97f4a7c15ull + seed;
    x ^= x >> 29;
    return (uint8_t)(x >> (8 * (i & 7)));
}

static void fill(uint8_t *b, uint64_t n, uint64_t seed)
{
    for (uint64_t i = 0; i < n; i++)
        b[i] = pattern(i, seed);
}

static void ep_error(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    struct side *s = arg;
    (void)ep;
    (void)st;
    s->ep_failed = true;
}

static void progress(struct side *s)
{
    ucp_worker_progress(s->worker);
    if (s->ep_failed) {
        fprintf(stderr, "bench-ucp-paths: the peer failed\n");
        exit(1);
    }
}

static void wait_req(struct side *s, void *req, const char *what)
{
    if (req == NULL)
        return;
    if (UCS_PTR_IS_ERR(req))
        die(what, UCS_PTR_STATUS(req));
    ucs_status_t st;
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS)
        progress(s);
    ucp_request_free(req);
    if (st != UCS_OK)
        die(what, st);
}

static void set_up(struct side *s)
{
    ucp_config_t *cfg;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st != UCS_OK)
        die("ucp_config_read", st);
    ucp_params_t pp = {0};
    pp.field_mask = UCP_PARAM_FIELD_FEATURES;
    /* RMA only for the put paths: with it, UCX 1.13 picks other lanes. */
    pp.features = UCP_FEATURE_AM | (strncmp(s->o.path, "put-", 4) == 0 ? UCP_FEATURE_RMA : 0) |
                  (s->o.wakeup ? UCP_FEATURE_WAKEUP : 0);
    st = ucp_init(&pp, cfg, &s->ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK)
        die("ucp_init", st);
    ucp_worker_params_t wp = {0};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    if ((st = ucp_worker_create(s->ctx, &wp, &s->worker)) != UCS_OK)
        die("ucp_worker_create", st);
    ucp_address_t *addr;
    size_t len;
    if ((st = ucp_worker_get_address(s->worker, &addr, &len)) != UCS_OK)
        die("ucp_worker_get_address", st);
    send_blob(s->sock, addr, len);
    ucp_worker_release_address(s->worker, addr);
    uint64_t plen;
    void *peer = recv_blob(s->sock, &plen);
    ucp_ep_params_t ep = {0};
    ep.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = peer;
    ep.err_mode = s->o.peer_mode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    ep.err_handler.cb = ep_error;
    ep.err_handler.arg = s;
    if ((st = ucp_ep_create(s->worker, &ep, &s->ep)) != UCS_OK)
        die("ucp_ep_create", st);
    free(peer);
}

static void set_handler(struct side *s, unsigned id, ucp_am_recv_callback_t cb)
{
    ucp_am_handler_param_t hp = {0};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = id;
    hp.cb = cb;
    hp.arg = s;
    ucs_status_t st = ucp_worker_set_am_recv_handler(s->worker, &hp);
    if (st != UCS_OK)
        die("ucp_worker_set_am_recv_handler", st);
}

static void map(struct side *s, bool allocate)
{
    ucp_mem_map_params_t mp = {0};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = allocate ? NULL : s->buf;
    mp.length = s->o.size;
    mp.flags = allocate ? UCP_MEM_MAP_ALLOCATE : 0;
    double t0 = now();
    ucs_status_t st = ucp_mem_map(s->ctx, &mp, &s->memh);
    if (st != UCS_OK)
        die("ucp_mem_map", st);
    if (allocate) {
        ucp_mem_attr_t attr = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS};
        ucp_mem_query(s->memh, &attr);
        s->buf = attr.address;
    }
    fprintf(stderr, "# %s: ucp_mem_map of %llu bytes%s took %.3f ms\n", s->o.path, (unsigned long long)s->o.size,
            allocate ? " (allocate)" : "", (now() - t0) * 1e3);
}

static uint8_t *alloc_buf(uint64_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, n) != 0)
        die("posix_memalign", UCS_OK);
    memset(p, 0, n);
    return p;
}

/* ---- the receiving side ------------------------------------------------------ */

static void recv_done(void *req, ucs_status_t st, size_t len, void *arg)
{
    struct side *s = arg;
    if (st != UCS_OK)
        die("ucp_am_recv_data_nbx completion", st);
    s->got += len;
    ucp_request_free(req);
}

static void start_recv(struct side *s, void *desc, const struct piece_hdr *h, size_t len)
{
    ucp_request_param_t prm = {0};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    prm.cb.recv_am = recv_done;
    prm.user_data = s;
    if (s->memh) {
        prm.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        prm.memh = s->memh;
    }
    void *r = ucp_am_recv_data_nbx(s->worker, desc, s->buf + h->offset, len, &prm);
    if (UCS_PTR_IS_ERR(r))
        die("ucp_am_recv_data_nbx", UCS_PTR_STATUS(r));
    if (r == NULL)
        s->got += len; /* else recv_done counts it and frees the request (a
                        * request freed earlier gets no callback) */
}

static ucs_status_t on_data(void *arg, const void *header, size_t hlen, void *data, size_t len,
                            const ucp_am_recv_param_t *param)
{
    struct side *s = arg;
    struct piece_hdr h;
    if (hlen != sizeof(h))
        return UCS_OK;
    memcpy(&h, header, sizeof(h));
    if (h.offset > s->o.size || len > s->o.size - h.offset) {
        fprintf(stderr, "bench-ucp-paths: a piece outside the buffer\n");
        exit(1);
    }
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        if (s->o.defer) {
            if (s->ndeferred == MAX_PIECES)
                die("too many deferred pieces", UCS_OK);
            s->deferred_hdr[s->ndeferred] = h;
            s->deferred_len[s->ndeferred] = len;
            s->deferred[s->ndeferred++] = data;
        } else {
            start_recv(s, data, &h, len);
        }
        return UCS_INPROGRESS;
    }
    memcpy(s->buf + h.offset, data, len);
    s->got += len;
    return UCS_OK;
}

static void send_done_msg(struct side *s, uint64_t round)
{
    static uint64_t hdr;
    hdr = round;
    ucp_request_param_t prm = {0};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = UCP_AM_SEND_FLAG_EAGER;
    wait_req(s, ucp_am_send_nbx(s->ep, AM_DONE, &hdr, sizeof(hdr), NULL, 0, &prm), "sending the acknowledgement");
}

static int receiver(struct side *s)
{
    bool am = strncmp(s->o.path, "am-", 3) == 0;
    bool alloc = strcmp(s->o.path, "put-alloc") == 0;
    set_up(s);
    if (!alloc)
        s->buf = alloc_buf(s->o.size);
    if (!am || s->o.reg)
        map(s, alloc);
    if (!am) {
        void *rkey;
        size_t rlen;
        ucs_status_t st = ucp_rkey_pack(s->ctx, s->memh, &rkey, &rlen);
        if (st != UCS_OK)
            die("ucp_rkey_pack", st);
        uint64_t addr = (uint64_t)(uintptr_t)s->buf;
        xwrite(s->sock, &addr, sizeof(addr));
        send_blob(s->sock, rkey, rlen);
        ucp_rkey_buffer_release(rkey);
    } else {
        set_handler(s, AM_DATA, on_data);
    }
    /* Commands from the sender over the socket: 'r' a round starts (AM
     * paths acknowledge it when complete), 'z' zero the buffer, 'v' verify
     * against a seed, 'q' quit.  In between: progress. */
    fcntl(s->sock, F_SETFL, O_NONBLOCK);
    for (;;) {
        progress(s);
        for (int i = 0; i < s->ndeferred; i++)
            start_recv(s, s->deferred[i], &s->deferred_hdr[i], s->deferred_len[i]);
        s->ndeferred = 0;
        if (am && s->round && s->got >= s->o.size) {
            send_done_msg(s, s->round);
            s->round = 0;
            s->got -= s->o.size;
        }
        char c;
        ssize_t k = read(s->sock, &c, 1);
        if (k == 0)
            return 1;
        if (k < 0)
            continue;
        fcntl(s->sock, F_SETFL, 0);
        if (c == 'r') {
            xread(s->sock, &s->round, sizeof(s->round));
        } else if (c == 'z') {
            memset(s->buf, 0, s->o.size);
            xwrite(s->sock, "z", 1);
        } else if (c == 'v') {
            uint64_t seed, bad = 0;
            xread(s->sock, &seed, sizeof(seed));
            for (uint64_t i = 0; i < s->o.size; i++)
                bad += s->buf[i] != pattern(i, seed);
            xwrite(s->sock, &bad, sizeof(bad));
        } else if (c == 'q') {
            break;
        }
        fcntl(s->sock, F_SETFL, O_NONBLOCK);
    }
    xwrite(s->sock, "q", 1);
    return 0;
}

/* ---- the sending side -------------------------------------------------------- */

static void send_cb(void *req, ucs_status_t st, void *arg)
{
    struct side *s = arg;
    if (st != UCS_OK)
        die("ucp_am_send_nbx completion", st);
    s->inflight--;
    ucp_request_free(req);
}

static ucs_status_t on_done(void *arg, const void *header, size_t hlen, void *data, size_t len,
                            const ucp_am_recv_param_t *param)
{
    struct side *s = arg;
    (void)data;
    (void)len;
    (void)param;
    if (hlen == sizeof(uint64_t)) {
        memcpy(&s->done_round, header, sizeof(uint64_t));
        s->done_seen = true;
    }
    return UCS_OK;
}

static struct piece_hdr hdrs[MAX_PIECES]; /* alive until each send completes */

static void am_round(struct side *s, uint64_t round)
{
    xwrite(s->sock, "r", 1);
    xwrite(s->sock, &round, sizeof(round));
    bool rndv = strcmp(s->o.path, "am-rndv") == 0;
    s->done_seen = false;
    int n = 0;
    for (uint64_t off = 0; off < s->o.size; off += s->o.msg, n++) {
        uint64_t len = s->o.size - off < s->o.msg ? s->o.size - off : s->o.msg;
        hdrs[n] = (struct piece_hdr){round, off};
        ucp_request_param_t prm = {0};
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
        prm.cb.send = send_cb;
        prm.user_data = s;
        prm.flags = rndv ? UCP_AM_SEND_FLAG_RNDV : 0;
        if (s->memh) {
            prm.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
            prm.memh = s->memh;
        }
        void *r = ucp_am_send_nbx(s->ep, AM_DATA, &hdrs[n], sizeof(hdrs[n]), s->buf + off, len, &prm);
        if (UCS_PTR_IS_ERR(r))
            die("ucp_am_send_nbx", UCS_PTR_STATUS(r));
        if (r)
            s->inflight++; /* send_cb frees it */
    }
    while (s->inflight > 0 || !s->done_seen || s->done_round != round)
        progress(s);
}

static void put_round(struct side *s, uint64_t raddr, ucp_rkey_h rkey)
{
    ucp_request_param_t prm = {0};
    if (s->memh) {
        prm.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
        prm.memh = s->memh;
    }
    for (uint64_t off = 0; off < s->o.size; off += s->o.msg) {
        uint64_t len = s->o.size - off < s->o.msg ? s->o.size - off : s->o.msg;
        void *r = ucp_put_nbx(s->ep, s->buf + off, len, raddr + off, rkey, &prm);
        if (UCS_PTR_IS_ERR(r))
            die("ucp_put_nbx", UCS_PTR_STATUS(r));
        if (r)
            ucp_request_free(r);
    }
    ucp_request_param_t fp = {0};
    wait_req(s, ucp_ep_flush_nbx(s->ep, &fp), "ucp_ep_flush_nbx");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int sender(struct side *s, pid_t child)
{
    bool am = strncmp(s->o.path, "am-", 3) == 0;
    set_up(s);
    s->buf = alloc_buf(s->o.size);
    uint8_t *copy = alloc_buf(s->o.size);
    if (s->o.reg || !am)
        map(s, false);
    uint64_t raddr = 0;
    ucp_rkey_h rkey = NULL;
    if (!am) {
        xread(s->sock, &raddr, sizeof(raddr));
        uint64_t rlen;
        void *packed = recv_blob(s->sock, &rlen);
        ucs_status_t st = ucp_ep_rkey_unpack(s->ep, packed, &rkey);
        if (st != UCS_OK)
            die("ucp_ep_rkey_unpack", st);
        free(packed);
    } else {
        set_handler(s, AM_DONE, on_done);
    }
    fill(s->buf, s->o.size, 1);
    int total = s->o.repeat + 2;
    double *t = calloc((size_t)total, sizeof(double)), *m = calloc((size_t)total, sizeof(double));
    double busy = 0;
    for (int i = 0; i < total; i++) {
        double t0 = now();
        if (am)
            am_round(s, (uint64_t)i + 1);
        else
            put_round(s, raddr, rkey);
        t[i] = now() - t0;
        if (i >= 2)
            busy += t[i];
        t0 = now();
        memcpy(copy, s->buf, s->o.size);
        m[i] = now() - t0;
    }
    /* The checked transfer: a second pattern into a zeroed destination. */
    xwrite(s->sock, "z", 1);
    char c;
    xread(s->sock, &c, 1);
    fill(s->buf, s->o.size, 2);
    if (am)
        am_round(s, (uint64_t)total + 1);
    else
        put_round(s, raddr, rkey);
    uint64_t seed = 2, bad;
    xwrite(s->sock, "v", 1);
    xwrite(s->sock, &seed, sizeof(seed));
    xread(s->sock, &bad, sizeof(bad));
    xwrite(s->sock, "q", 1);
    xread(s->sock, &c, 1);
    int n = s->o.repeat;
    qsort(t + 2, (size_t)n, sizeof(double), cmp_double);
    qsort(m + 2, (size_t)n, sizeof(double), cmp_double);
    double gb = (double)s->o.size / 1e9;
    printf("{\"path\": \"%s\", \"size\": %llu, \"msg\": %llu, \"peer_mode\": %s, \"defer\": %s, \"register\": %s, "
           "\"transfers\": %d, \"gbps\": %.3f, \"best_gbps\": %.3f, \"median_gbps\": %.3f, \"memcpy_gbps\": %.3f, "
           "\"verified\": %s, \"mismatched_bytes\": %llu}\n",
           s->o.path, (unsigned long long)s->o.size, (unsigned long long)s->o.msg, s->o.peer_mode ? "true" : "false",
           s->o.defer ? "true" : "false", s->o.reg ? "true" : "false", n, gb * n / busy, gb / t[2], gb / t[2 + n / 2],
           gb / m[2 + n / 2], bad == 0 ? "true" : "false", (unsigned long long)bad);
    fflush(stdout);
    if (rkey)
        ucp_rkey_destroy(rkey);
    int status;
    waitpid(child, &status, 0);
    return bad == 0 ? 0 : 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench-ucp-paths --path put-malloc|put-alloc|am-rndv|am-auto [--size BYTES] "
                    "[--msg BYTES] [--repeat N] [--peer-mode] [--defer] [--register] [--wakeup] "
                    "[--child-netns FILE --child-devices DEVICES]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct opts o = {NULL, 64ull << 20, 0, 5, false, false, false, false, NULL, NULL};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--path") == 0 && i + 1 < argc)
            o.path = argv[++i];
        else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
            o.size = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--msg") == 0 && i + 1 < argc)
            o.msg = strtoull(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            o.repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--peer-mode") == 0)
            o.peer_mode = true;
        else if (strcmp(argv[i], "--defer") == 0)
            o.defer = true;
        else if (strcmp(argv[i], "--register") == 0)
            o.reg = true;
        else if (strcmp(argv[i], "--wakeup") == 0)
            o.wakeup = true;
        else if (strcmp(argv[i], "--child-netns") == 0 && i + 1 < argc)
            o.child_netns = argv[++i];
        else if (strcmp(argv[i], "--child-devices") == 0 && i + 1 < argc)
            o.child_devices = argv[++i];
        else
            usage();
    }
    static const char *const paths[] = {"put-malloc", "put-alloc", "am-rndv", "am-auto"};
    bool known = false;
    for (size_t i = 0; o.path && i < sizeof(paths) / sizeof(paths[0]); i++)
        known |= strcmp(o.path, paths[i]) == 0;
    if (!known || o.size == 0 || o.repeat < 1)
        usage();
    if (o.msg == 0 || o.msg > o.size)
        o.msg = o.size;
    if ((o.size + o.msg - 1) / o.msg > MAX_PIECES) {
        fprintf(stderr, "bench-ucp-paths: --size / --msg gives more than %d pieces\n", MAX_PIECES);
        return 2;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        die("socketpair", UCS_OK);
    pid_t child = fork();
    if (child < 0)
        die("fork", UCS_OK);
    static struct side s;
    s.o = o;
    if (child == 0) {
        close(sv[0]);
        s.sock = sv[1];
        if (o.child_netns) {
            int fd = open(o.child_netns, O_RDONLY | O_CLOEXEC);
            if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
                fprintf(stderr, "bench-ucp-paths: cannot enter the network namespace %s: %s\n", o.child_netns,
                        strerror(errno));
                _exit(1);
            }
            close(fd);
            /* UCX finds devices in /sys/class/net: mount this namespace's
             * sysfs, in a mount namespace of our own, as ip-netns does. */
            if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_SLAVE | MS_REC, NULL) != 0 ||
                umount2("/sys", MNT_DETACH) != 0 || mount("sysfs", "/sys", "sysfs", 0, NULL) != 0) {
                fprintf(stderr, "bench-ucp-paths: cannot mount the namespace's /sys: %s\n", strerror(errno));
                _exit(1);
            }
        }
        if (o.child_devices)
            setenv("UCX_NET_DEVICES", o.child_devices, 1);
        _exit(receiver(&s));
    }
    close(sv[1]);
    s.sock = sv[0];
    return sender(&s, child);
}
