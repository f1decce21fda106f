/*
 * bench-xfer — libkvrt-xfer between two processes, through its own
 * asynchronous API: what an engine sees.  Not a test: bench/xfer.py runs it
 * next to ucx_perftest and bench-ucp-paths on the same transport.
 *
 *   bench-xfer [--size BYTES] [--src LAYOUT] [--dst LAYOUT] [--inflight N]
 *              [--repeat N] [--small N] [--window W] [--chunk BYTES] [--staging BYTES]
 *              [--heads H] [--head-size D] [--cache-blocks N] [--pull 0|1]
 *              [--src-heads N] [--head-start S] [--block-sizes SRC:DST]
 *
 * CPU caches of 32 layers x --heads KV heads (8) x --head-size (128), bf16,
 * 16-token blocks (with the defaults a page, one layer of one block, is
 * 64 KiB and a block 2 MiB).  The program forks before touching UCX; the
 * parent posts, the child serves; metadata goes over a socketpair both ways
 * (kvrt_xfer_peer_load), so no port is needed.
 *
 * The patterns engines send:
 *   --cache-blocks N  caches of N blocks, the transfer's blocks drawn at
 *                     random (seeded, distinct) from them on each side:
 *                     scattered ids, as an allocator hands them out
 *   --pull 1          the parent (the destination) reads from the child
 *   --src-heads N --head-start S
 *                     the source holds heads [S, S + N) of the
 *                     destination's --heads (a tensor-parallel rank's
 *                     slice) and moves them into those heads
 *   --block-sizes SRC:DST
 *                     the source's and the destination's tokens per block
 *                     (16:16); when they differ, each transfer is a token
 *                     range of one sequence between two block tables drawn
 *                     at random from the caches (--size bytes of the
 *                     source's blocks, --cache-blocks of them)
 *
 *   bandwidth  --size bytes of blocks per round (default 64 MiB), posted as
 *              --inflight transfers at once (default 1), --repeat rounds after
 *              a warm-up; GB/s (10^9 bytes/s) of the median and best round,
 *              and of memcpy of the same bytes after each round, both as one
 *              contiguous copy and as the transfer's pages (one layer of one
 *              block) copied one by one between two buffers of the caches'
 *              size, at the transfer's block ids: what this machine's
 *              memory gives a copy of those scattered pages in one process
 *   small      with --small N: N transfers of one block each (one 16-token
 *              block of one sequence, all 32 layers), --window of them in
 *              flight; transfers per second and latency percentiles (post to
 *              completion, p50 and p99)
 *
 * A last round carries records as notifications: the receiver applies them
 * to its expected contents and compares every byte of its cache.  Prints
 * one JSON object, with the method chosen and the registration cost.
 */
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <kvrt/kvrt.h>
#include <kvrt/xfer.h>

#include "xfer_pattern.h"

enum { LAYERS = 32, BLOCK = 16 };

struct opts {
    uint64_t size;
    enum kvrt_layout src, dst;
    int inflight, repeat, small, window;
    uint64_t chunk, staging; /* kvrt_xfer_agent_options; 0: the library's default */
    uint64_t heads, head_size, cache_blocks, src_heads, head_start;
    int pull;
    uint64_t src_bs, dst_bs; /* tokens per block; different: token ranges */
};

/* Bytes a transfer moves per source block: the source's heads, every
 * layer, K and V. */
static uint64_t block_bytes(const struct opts *o)
{
    return (uint64_t)LAYERS * o->src_heads * o->src_bs * 2 * o->head_size * 2;
}

static bool by_tokens(const struct opts *o)
{
    return o->src_bs != o->dst_bs;
}

/* One sequence's two block tables (token ranges) or the blocks' two id
 * lists (nsrc == ndst). */
struct seq {
    int64_t *src, *dst;
    uint64_t nsrc, ndst, tokens;
};

static bool sliced(const struct opts *o)
{
    return o->src_heads != o->heads;
}

struct side {
    kvrt_runtime *rt;
    kvrt_backend *be;
    kvrt_placement *p;
    kvrt_cache *c;
    struct xpat x;
    kvrt_xfer_agent *a;
    kvrt_xfer_peer *peer;
    bool keyed; /* the agent has a key (KVRT_XFER_KEY_FILE): its blob is signed */
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "bench-xfer: %s: %s\n", what, kvrt_error_message());
    exit(1);
}

static void xwrite(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k <= 0) {
            fprintf(stderr, "bench-xfer: the other process ended\n");
            exit(1);
        }
        b += k;
        n -= (size_t)k;
    }
}

static void xread(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t k = read(fd, b, n);
        if (k <= 0) {
            fprintf(stderr, "bench-xfer: the other process ended\n");
            exit(1);
        }
        b += k;
        n -= (size_t)k;
    }
}

/* A side's cache: --cache-blocks of the source's blocks, and as many tokens
 * in the destination's blocks. */
static uint64_t side_blocks(const struct opts *o, bool source)
{
    uint64_t tokens = o->cache_blocks * o->src_bs;
    return source ? o->cache_blocks : (tokens + o->dst_bs - 1) / o->dst_bs;
}

/* The source has seed 1 and its slice's heads; the destination seed 2 and
 * every head. */
static void open_side(struct side *s, const struct opts *o, bool source, uint64_t blocks, int sock)
{
    enum kvrt_layout layout = source ? o->src : o->dst;
    struct kvrt_spec spec;
    kvrt_spec_default(&spec);
    spec.dtype = KVRT_DTYPE_BF16;
    spec.block_size = source ? o->src_bs : o->dst_bs;
    spec.num_kv_heads = source ? o->src_heads : o->heads;
    spec.head_size = o->head_size;
    struct kvrt_layer_entry layers[LAYERS];
    char names[LAYERS][16];
    for (int l = 0; l < LAYERS; l++) {
        snprintf(names[l], sizeof(names[l]), "layer.%d", l);
        layers[l].name = names[l];
        layers[l].spec = spec;
    }
    struct kvrt_group g = {layers, LAYERS};
    struct kvrt_xfer_agent_options ao;
    kvrt_xfer_agent_options_default(&ao);
    ao.chunk_bytes = o->chunk;
    ao.staging_bytes = o->staging;
    if (kvrt_runtime_open(NULL, &s->rt) != KVRT_OK ||
        kvrt_runtime_bind_layout(s->rt, "cpu", layout, &s->be) != KVRT_OK ||
        kvrt_placement_create(layout, &g, 1, blocks, 0, &s->p) != KVRT_OK ||
        kvrt_cache_create(s->be, s->p, &s->c) != KVRT_OK ||
        xpat_init(&s->x, s->be, s->c, source ? 1 : 2, source && sliced(o) ? o->head_start : 0) != KVRT_OK ||
        kvrt_xfer_agent_create(s->be, s->c, &ao, &s->a) != KVRT_OK)
        die("setting up a cache and its agent");
    /* Metadata both ways over the socket, then each side loads the other's. */
    void *blob;
    size_t len;
    if (kvrt_xfer_metadata_export(s->a, &blob, &len) != KVRT_OK)
        die("kvrt_xfer_metadata_export");
    struct kvrt_xfer_metadata_info info = {.size = sizeof(info)};
    if (kvrt_xfer_metadata_parse(blob, len, &info) != KVRT_OK)
        die("kvrt_xfer_metadata_parse");
    s->keyed = info.is_signed;
    uint64_t n = len;
    xwrite(sock, &n, sizeof(n));
    xwrite(sock, blob, len);
    kvrt_free(blob);
    xread(sock, &n, sizeof(n));
    void *theirs = malloc(n);
    xread(sock, theirs, n);
    if (kvrt_xfer_peer_load(s->a, theirs, n, &s->peer) != KVRT_OK)
        die("kvrt_xfer_peer_load");
    free(theirs);
}

static void close_side(struct side *s)
{
    kvrt_xfer_peer_close(s->peer);
    kvrt_xfer_agent_destroy(s->a);
    xpat_free(&s->x);
    kvrt_placement_destroy(s->p);
    kvrt_runtime_close(s->rt);
}

/* ---- the receiver ------------------------------------------------------------ */

static void take_notes(struct side *s, uint64_t *notes)
{
    char *msg;
    size_t len;
    while (kvrt_xfer_notification(s->a, NULL, &msg, &len) == KVRT_OK && msg) {
        struct xpat_record r;
        if (xpat_record_parse(msg, &r)) {
            xpat_apply(&s->x, &r);
            xpat_record_free(&r);
        }
        ++*notes;
        kvrt_free(msg);
    }
}

/* The child: the destination of a push, the source of a pull. */
static int child_side(const struct opts *o, int sock)
{
    struct side s;
    open_side(&s, o, o->pull != 0, side_blocks(o, o->pull != 0), sock);
    int efd;
    kvrt_xfer_event_fd(s.a, &efd);
    uint64_t notes = 0;
    for (;;) {
        kvrt_xfer_progress(s.a);
        take_notes(&s, &notes);
        struct pollfd pfd[2] = {{sock, POLLIN, 0}, {efd, POLLIN, 0}};
        bool armed = kvrt_xfer_arm(s.a) == KVRT_OK;
        if (poll(pfd, armed ? 2 : 1, armed ? 10 : 0) <= 0 || !(pfd[0].revents & POLLIN))
            continue;
        char c;
        xread(sock, &c, 1);
        /* arm() progresses too: what it completed is in the queue. */
        take_notes(&s, &notes);
        if (c == 'v') {
            char where[256];
            /* A pull's source is read, not written: the parent checks. */
            uint64_t bad = o->pull ? 0 : xpat_verify(&s.x, where, sizeof(where));
            xwrite(sock, &bad, sizeof(bad));
            xwrite(sock, &notes, sizeof(notes));
        } else {
            break;
        }
    }
    close_side(&s);
    return 0;
}

/* ---- the sender -------------------------------------------------------------- */

/* Part `part` of `parts` of a sequence: blocks [part * n / parts, +n /
 * parts) of each list, or tokens [part * T / parts, + T / parts) of the
 * tables. */
struct piece {
    const int64_t *src, *dst;
    uint64_t nsrc, ndst, first, count;
};

static struct piece piece_of(const struct opts *o, const struct seq *q, uint64_t part, uint64_t parts)
{
    if (by_tokens(o))
        return (struct piece){q->src, q->dst, q->nsrc, q->ndst, part * (q->tokens / parts), q->tokens / parts};
    uint64_t per = q->nsrc / parts;
    return (struct piece){q->src + part * per, q->dst + part * per, per, per, 0, 0};
}

static struct xpat_record record_of(const struct opts *o, const struct piece *pc)
{
    struct xpat_record r = {.src_ids = (int64_t *)pc->src,
                            .dst_ids = (int64_t *)pc->dst,
                            .num_blocks = pc->ndst,
                            .seed = 1,
                            .pull = o->pull != 0};
    if (sliced(o)) {
        r.dst_head_start = o->head_start;
        r.num_heads = o->src_heads;
        r.head_offset = o->head_start;
    }
    if (by_tokens(o)) {
        r.num_src_blocks = pc->nsrc;
        r.token_first = pc->first;
        r.token_count = pc->count;
        r.src_bs = o->src_bs;
        r.dst_bs = o->dst_bs;
    }
    return r;
}

static void request_of(const struct opts *o, const struct piece *pc, struct kvrt_xfer_request *req)
{
    kvrt_xfer_request_default(req);
    req->num_blocks = o->pull ? pc->ndst : pc->nsrc;
    req->direction = o->pull ? KVRT_XFER_PULL : KVRT_XFER_PUSH;
    req->local_ids = o->pull ? pc->dst : pc->src;
    req->remote_ids = o->pull ? pc->src : pc->dst;
    if (by_tokens(o)) {
        req->remote_num_blocks = o->pull ? pc->nsrc : pc->ndst;
        req->token_start = pc->first;
        req->num_tokens = pc->count;
    }
    if (sliced(o)) {
        req->num_heads = o->src_heads;
        req->local_head_start = o->pull ? o->head_start : 0;
        req->remote_head_start = o->pull ? 0 : o->head_start;
    }
}

/* The piece's source and destination, whichever side posts. */
static kvrt_xfer_handle *post(struct side *s, const struct opts *o, const struct piece *pc, bool record)
{
    struct xpat_record r = record_of(o, pc);
    char *note = record ? xpat_record_text(&r) : NULL;
    struct kvrt_xfer_request req;
    request_of(o, pc, &req);
    req.notification = note ? note : "t";
    req.notification_len = note ? strlen(note) : 1;
    kvrt_xfer_handle *h;
    if (kvrt_xfer_post(s->a, s->peer, &req, &h) != KVRT_OK)
        die("kvrt_xfer_post");
    free(note);
    return h;
}

static void wait_ok(kvrt_xfer_handle *h)
{
    if (kvrt_xfer_wait(h, -1) != KVRT_OK)
        die("a transfer");
    kvrt_xfer_release(h);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *sorted, int n, double p)
{
    int i = (int)ceil(p / 100.0 * n) - 1;
    return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* One round: the whole sequence, split into `inflight` transfers posted at
 * once. */
static double round_trip(struct side *s, const struct opts *o, const struct seq *q, int inflight, bool record)
{
    kvrt_xfer_handle *h[256];
    double t0 = now();
    for (int i = 0; i < inflight; i++) {
        struct piece pc = piece_of(o, q, (uint64_t)i, (uint64_t)inflight);
        h[i] = post(s, o, &pc, record);
    }
    for (int i = 0; i < inflight; i++)
        wait_ok(h[i]);
    return now() - t0;
}

/* The transfer's pages copied one by one, from the source's block ids to
 * the destination's (the source's reversed for a token range), in two
 * buffers laid out as LBHNC caches of --cache-blocks: seconds. */
static double page_copy(const struct opts *o, const struct seq *q, uint64_t page, uint8_t *src, uint8_t *dst)
{
    uint64_t cb = o->cache_blocks;
    double t0 = now();
    for (uint64_t l = 0; l < LAYERS; l++)
        for (uint64_t i = 0; i < q->nsrc; i++) {
            uint64_t d = q->nsrc == q->ndst ? (uint64_t)q->dst[i] : (uint64_t)q->src[q->nsrc - 1 - i];
            memcpy(dst + (l * cb + d) * page, src + (l * cb + (uint64_t)q->src[i]) * page, page);
        }
    return now() - t0;
}

/* `n` distinct ids of [0, total): 0..n-1 when they are all, otherwise a
 * seeded random draw (the order an allocator's free list gives). */
static int64_t *draw_ids(uint64_t n, uint64_t total, uint64_t seed)
{
    int64_t *all = malloc(total * sizeof(*all));
    if (!all)
        return NULL;
    for (uint64_t b = 0; b < total; b++)
        all[b] = (int64_t)b;
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (uint64_t i = 0; n < total && i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t j = i + x % (total - i);
        int64_t t = all[i];
        all[i] = all[j];
        all[j] = t;
    }
    return all;
}

/* The parent: the source of a push, the destination of a pull. */
static int parent_side(const struct opts *o, uint64_t blocks, int sock, pid_t child)
{
    struct side s;
    open_side(&s, o, o->pull == 0, side_blocks(o, o->pull == 0), sock);
    const uint64_t per_block = block_bytes(o);
    /* Token ranges: one sequence of `blocks` source blocks' tokens between
     * two tables; whole blocks: the blocks' ids on each side. */
    struct seq q = {NULL, NULL, blocks, blocks, blocks * o->src_bs};
    if (by_tokens(o))
        q.ndst = (q.tokens + o->dst_bs - 1) / o->dst_bs;
    q.src = draw_ids(q.nsrc, side_blocks(o, true), 1);
    q.dst = draw_ids(q.ndst, side_blocks(o, false), 2);
    if (!q.src || !q.dst)
        die("memory for block ids");
    int64_t *ids = q.src; /* small transfers: one block, the same id on both sides */
    struct kvrt_xfer_plan plan;
    {
        struct kvrt_xfer_request req;
        struct piece pc = o->small ? (struct piece){ids, ids, 1, 1, 0, 0} : piece_of(o, &q, 0, (uint64_t)o->inflight);
        request_of(o, &pc, &req);
        if (kvrt_xfer_plan(s.a, s.peer, &req, &plan) != KVRT_OK)
            die("kvrt_xfer_plan");
    }
    printf("{\"src\": \"%s\", \"dst\": \"%s\", \"src_block\": %llu, \"dst_block\": %llu, "
           "\"direction\": \"%s\", \"page_bytes\": %llu, "
           "\"cache_blocks\": %llu, \"moved_heads\": %llu, \"heads\": %llu, \"method\": \"%s\", "
           "\"why\": \"%s\", \"messages\": %llu, \"chunks\": %llu, \"planned_regions\": %llu, ",
           kvrt_layout_name(o->src), kvrt_layout_name(o->dst), (unsigned long long)o->src_bs,
           (unsigned long long)o->dst_bs, o->pull ? "pull" : "push", (unsigned long long)(per_block / LAYERS),
           (unsigned long long)o->cache_blocks, (unsigned long long)o->src_heads, (unsigned long long)o->heads,
           plan.method == KVRT_XFER_REGIONS  ? "regions"
           : plan.method == KVRT_XFER_DIRECT ? "direct"
                                             : "staging",
           plan.why, (unsigned long long)plan.messages * (unsigned long long)o->inflight,
           (unsigned long long)plan.chunks * (unsigned long long)o->inflight,
           (unsigned long long)plan.regions * (unsigned long long)o->inflight);
    double *t = calloc((size_t)(o->small ? o->small : o->repeat) + 1, sizeof(double));
    if (!o->small) {
        /* memcpy of the same bytes after each round, in this process: the
         * ceiling at that moment of a shared machine. */
        uint64_t bytes = blocks * per_block, page = per_block / LAYERS, cache = o->cache_blocks * per_block;
        uint8_t *a = malloc(bytes), *b = malloc(bytes), *pa = malloc(cache), *pb = malloc(cache);
        double *m = calloc((size_t)o->repeat, sizeof(double)), *pm = calloc((size_t)o->repeat, sizeof(double));
        if (!a || !b || !m || !pa || !pb || !pm)
            die("memory for memcpy");
        memset(a, 1, bytes);
        memset(b, 2, bytes);
        memset(pa, 3, cache);
        memset(pb, 4, cache);
        round_trip(&s, o, &q, o->inflight, false); /* warm-up */
        for (int r = 0; r < o->repeat; r++) {
            t[r] = round_trip(&s, o, &q, o->inflight, false);
            double t0 = now();
            memcpy(b, a, bytes);
            m[r] = now() - t0;
            pm[r] = page_copy(o, &q, page, pa, pb);
        }
        qsort(t, (size_t)o->repeat, sizeof(double), cmp_double);
        qsort(m, (size_t)o->repeat, sizeof(double), cmp_double);
        qsort(pm, (size_t)o->repeat, sizeof(double), cmp_double);
        printf("\"mode\": \"bandwidth\", \"bytes\": %llu, \"inflight\": %d, \"rounds\": %d, \"gbps\": %.3f, "
               "\"best_gbps\": %.3f, \"memcpy_gbps\": %.3f, \"page_copy_gbps\": %.3f, ",
               (unsigned long long)bytes, o->inflight, o->repeat, (double)bytes / t[o->repeat / 2] / 1e9,
               (double)bytes / t[0] / 1e9, (double)bytes / m[o->repeat / 2] / 1e9,
               (double)bytes / pm[o->repeat / 2] / 1e9);
        free(a);
        free(b);
        free(m);
        free(pa);
        free(pb);
        free(pm);
        round_trip(&s, o, &q, o->inflight, true);
    } else {
        /* A window of one-block transfers, each to its own destination. */
        kvrt_xfer_handle *h[256];
        double *start = calloc((size_t)o->small, sizeof(double));
        int posted = 0, done = 0, live = 0, slot[256];
        for (int w = 0; w < o->window; w++)
            h[w] = NULL;
        double t0 = now();
        while (done < o->small) {
            for (int w = 0; w < o->window && posted < o->small; w++)
                if (!h[w]) {
                    uint64_t b = (uint64_t)posted % blocks;
                    start[posted] = now();
                    slot[w] = posted++;
                    struct piece pc = {&ids[b], &ids[b], 1, 1, 0, 0};
                    h[w] = post(&s, o, &pc, false);
                    live++;
                }
            for (int w = 0; w < o->window; w++) {
                if (!h[w])
                    continue;
                int rc = kvrt_xfer_test(h[w]);
                if (rc == KVRT_XFER_PENDING)
                    continue;
                if (rc != KVRT_OK)
                    die("a small transfer");
                t[done++] = now() - start[slot[w]];
                kvrt_xfer_release(h[w]);
                h[w] = NULL;
                live--;
            }
        }
        double total = now() - t0;
        qsort(t, (size_t)o->small, sizeof(double), cmp_double);
        printf("\"mode\": \"small\", \"transfers\": %d, \"window\": %d, \"bytes_each\": %llu, \"per_second\": %.1f, "
               "\"p50_us\": %.1f, \"p99_us\": %.1f, \"gbps\": %.3f, ",
               o->small, o->window, (unsigned long long)per_block, o->small / total, pct(t, o->small, 50) * 1e6,
               pct(t, o->small, 99) * 1e6, (double)o->small * (double)per_block / total / 1e9);
        free(start);
        round_trip(&s, o, &q, 1, true);
    }
    struct kvrt_xfer_stats st = {.size = sizeof(st)};
    kvrt_xfer_agent_stats(s.a, &st);
    xwrite(sock, "v", 1);
    uint64_t bad, notes;
    xread(sock, &bad, sizeof(bad));
    xread(sock, &notes, sizeof(notes));
    if (o->pull) {
        /* The destination is here: the last round's record, applied here. */
        struct piece whole = piece_of(o, &q, 0, 1);
        struct xpat_record r = record_of(o, &whole);
        char where[256];
        xpat_apply(&s.x, &r);
        bad = xpat_verify(&s.x, where, sizeof(where));
    }
    printf("\"keyed\": %s, \"registered_bytes\": %llu, \"registration_ms\": %.3f, \"handlers_ms\": %.3f, "
           "\"handler_bytes\": %llu, \"verified\": %s, \"mismatched_bytes\": %llu}\n",
           s.keyed ? "true" : "false", (unsigned long long)st.registered_bytes, st.registration_s * 1e3,
           st.handlers_s * 1e3, (unsigned long long)st.handler_bytes, bad == 0 ? "true" : "false",
           (unsigned long long)bad);
    fflush(stdout);
    xwrite(sock, "q", 1);
    int status;
    waitpid(child, &status, 0);
    free(t);
    free(q.src);
    free(q.dst);
    close_side(&s);
    return bad == 0 ? 0 : 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench-xfer [--size BYTES] [--src LAYOUT] [--dst LAYOUT] [--inflight N] [--repeat N] "
                    "[--small N] [--window W] [--chunk BYTES] [--staging BYTES] [--heads H] [--head-size D] "
                    "[--cache-blocks N] [--pull 0|1] [--src-heads N] [--head-start S] [--block-sizes SRC:DST]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct opts o = {64ull << 20, KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_LBHNC, 1, 5, 0, 1, 0, 0, 8, 128, 0, 0, 0, 0, BLOCK,
                     BLOCK};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        bool ok = true;
        if (strcmp(argv[i], "--size") == 0)
            o.size = strtoull(v, NULL, 0);
        else if (strcmp(argv[i], "--src") == 0 || strcmp(argv[i], "--dst") == 0)
            ok = kvrt_layout_parse(v, argv[i][2] == 's' ? &o.src : &o.dst) == KVRT_OK;
        else if (strcmp(argv[i], "--inflight") == 0)
            o.inflight = atoi(v);
        else if (strcmp(argv[i], "--repeat") == 0)
            o.repeat = atoi(v);
        else if (strcmp(argv[i], "--small") == 0)
            o.small = atoi(v);
        else if (strcmp(argv[i], "--window") == 0)
            o.window = atoi(v);
        else if (strcmp(argv[i], "--chunk") == 0)
            o.chunk = strtoull(v, NULL, 0);
        else if (strcmp(argv[i], "--staging") == 0)
            o.staging = strtoull(v, NULL, 0);
        else if (strcmp(argv[i], "--heads") == 0)
            o.heads = strtoull(v, NULL, 0);
        else if (strcmp(argv[i], "--head-size") == 0)
            o.head_size = strtoull(v, NULL, 0);
        else if (strcmp(argv[i], "--cache-blocks") == 0)
            o.cache_blocks = strtoull(v, NULL, 0);
        else if (strcmp(argv[i], "--pull") == 0)
            o.pull = atoi(v);
        else if (strcmp(argv[i], "--src-heads") == 0)
            o.src_heads = strtoull(v, NULL, 0);
        else if (strcmp(argv[i], "--head-start") == 0)
            o.head_start = strtoull(v, NULL, 0);
        else if (strcmp(argv[i], "--block-sizes") == 0)
            ok = sscanf(v, "%llu:%llu", (unsigned long long *)&o.src_bs, (unsigned long long *)&o.dst_bs) == 2 &&
                 o.src_bs >= 1 && o.src_bs <= 4096 && o.dst_bs >= 1 && o.dst_bs <= 4096;
        else
            ok = false;
        if (!ok)
            usage();
        i++;
    }
    if (!o.src_heads)
        o.src_heads = o.heads;
    if (o.heads < 1 || o.heads > 256 || o.head_size < 1 || o.head_size > 1024 || o.src_heads > o.heads ||
        o.head_start > o.heads - o.src_heads) {
        fprintf(stderr, "bench-xfer: --heads 1..256, --head-size 1..1024, and the source's heads [--head-start, "
                        "+ --src-heads) within --heads\n");
        return 2;
    }
    uint64_t per_block = block_bytes(&o);
    uint64_t blocks = o.size / per_block;
    if (!o.cache_blocks)
        o.cache_blocks = blocks;
    if (blocks == 0 || o.size % per_block || o.inflight < 1 || o.inflight > 256 || blocks % (uint64_t)o.inflight ||
        o.repeat < 1 || o.small < 0 || o.window < 1 || o.window > 256 || o.cache_blocks < blocks ||
        (by_tokens(&o) && o.small)) {
        fprintf(stderr,
                "bench-xfer: --size must be a multiple of %llu bytes (one block), --inflight (1..256) must divide "
                "its blocks, --window 1..256, --cache-blocks at least the %llu blocks moved, and --small moves "
                "whole blocks (one --block-sizes)\n",
                (unsigned long long)per_block, (unsigned long long)blocks);
        return 2;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 1;
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        close(sv[0]);
        _exit(child_side(&o, sv[1]));
    }
    close(sv[1]);
    return parent_side(&o, blocks, sv[0], child);
}
