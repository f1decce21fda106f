/*
 * libkvrt-xfer through its own API, two (and more) processes: this program
 * holds caches and agents and drives them; children (this program again,
 * --child) hold the other caches, serve them and check every byte against
 * the records the notifications carry (tests/xfer/xfer_side.h).
 *
 *   test-xfer-transfers   TAP; UCX_TLS and friends come from the
 *                         environment (meson runs it under tcp and sm)
 *
 * Covered: many transfers in flight to two peers at once (same layout:
 * regions; converting: pipelined chunks, more than the staging slots),
 * pulls from both at once, the event fd, threads posting and waiting on one
 * agent while another progresses, a handle released in flight, a peer
 * closed with transfers in flight and connected again, metadata loaded both
 * ways without a listener, refusals by name, all 36 layout pairs at once
 * (six agents here, six children there), and no request, stream or
 * staging chunk left behind on either side.
 */
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tap.h"
#include "xfer_side.h"

static const char *self;

/* Pushes read and write blocks below PUSHED; pulls read and write blocks
 * from PUSHED on, which no push touches, so every source is known. */
enum { PUSHED = 64 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool start(struct child *c, enum kvrt_layout layout, uint64_t seed, bool listen)
{
    char seedtxt[32];
    snprintf(seedtxt, sizeof(seedtxt), "%llu", (unsigned long long)seed);
    const char *args[] = {"--layout", kvrt_layout_name(layout), "--seed", seedtxt, listen ? "--listen" : NULL, NULL};
    return child_start(c, self, args);
}

/* ---- many in flight, two peers --------------------------------------------- */

enum { NPOST = 8, PER = 4 };

static void in_flight(struct side *s, kvrt_xfer_peer *pa, kvrt_xfer_peer *pb, struct child *ca, struct child *cb)
{
    kvrt_xfer_handle *h[2 * NPOST];
    int64_t src[2 * NPOST][PER], dst[2 * NPOST][PER];
    int pending_seen = 0, posted = 0;
    for (int i = 0; i < 2 * NPOST; i++) {
        side_ids(src[i], PER, (uint64_t)i * 7 + 3, 5, PUSHED);
        side_ids(dst[i], PER, (uint64_t)(i % NPOST) * PER, 1, s->o.blocks); /* disjoint per peer */
        h[i] = side_post(s, i < NPOST ? pa : pb, &s->o, src[i], dst[i], PER, false, (uint64_t)i);
        posted += h[i] != NULL;
        pending_seen += h[i] && kvrt_xfer_test(h[i]) == KVRT_XFER_PENDING;
    }
    tap_ok(posted == 2 * NPOST, "%d pushes posted at once, %d to each of two peers (%d still pending when tested)",
           posted, NPOST, pending_seen);
    struct kvrt_xfer_plan plan;
    kvrt_xfer_handle_plan(h[0], &plan);
    tap_ok(plan.method == KVRT_XFER_REGIONS, "same layout: method regions (%s)", plan.why);
    kvrt_xfer_handle_plan(h[NPOST], &plan);
    tap_ok(plan.method != KVRT_XFER_REGIONS && plan.chunks > 1,
           "converting: %s in %llu chunks, more than the staging slots (%s)", kvrt_xfer_method_name(plan.method),
           (unsigned long long)plan.chunks, plan.why);
    int ok = 0;
    for (int i = 0; i < 2 * NPOST; i++) {
        int rc = h[i] ? kvrt_xfer_wait(h[i], 30) : KVRT_ERR_INVALID;
        if (rc == KVRT_OK)
            ok++;
        else
            tap_diag("transfer %d: %d %s", i, rc, kvrt_error_message());
        kvrt_xfer_release(h[i]);
    }
    tap_ok(ok == 2 * NPOST, "all %d complete", ok);
    child_verified(ca, NPOST, "same layout, in flight");
    child_verified(cb, NPOST, "converting, in flight");
}

static void pulls(struct side *s, kvrt_xfer_peer *pa, kvrt_xfer_peer *pb, const struct side_opts *oa,
                  const struct side_opts *ob, struct child *ca, struct child *cb, uint64_t na, uint64_t nb)
{
    kvrt_xfer_handle *h[2 * NPOST];
    int64_t mine[2 * NPOST][PER], theirs[2 * NPOST][PER];
    struct xpat_record rec[2 * NPOST];
    for (int i = 0; i < 2 * NPOST; i++) {
        side_ids(mine[i], PER, PUSHED + (uint64_t)i * PER, 1, s->o.blocks); /* every pulled block once */
        side_ids(theirs[i], PER, (uint64_t)i * 11 + 1, 3, PUSHED);
        for (int k = 0; k < PER; k++)
            theirs[i][k] += PUSHED;
        const struct side_opts *src = i < NPOST ? oa : ob;
        h[i] = side_post(s, i < NPOST ? pa : pb, src, mine[i], theirs[i], PER, true, (uint64_t)i);
        rec[i] = (struct xpat_record){
            .src_ids = theirs[i], .dst_ids = mine[i], .num_blocks = PER, .seed = src->seed, .pull = true};
    }
    int ok = 0;
    for (int i = 0; i < 2 * NPOST; i++) {
        if (h[i] && kvrt_xfer_wait(h[i], 30) == KVRT_OK) {
            ok++;
            xpat_apply(&s->x, &rec[i]);
        } else {
            tap_diag("pull %d: %s", i, kvrt_error_message());
        }
        kvrt_xfer_release(h[i]);
    }
    char where[256];
    uint64_t bad = xpat_verify(&s->x, where, sizeof(where));
    tap_ok(ok == 2 * NPOST && bad == 0, "%d pulls from two peers at once (regions and staging): every byte here (%s)",
           ok, where[0] ? where : "no mismatch");
    /* The pulled peers were notified and left unchanged. */
    child_verified(ca, na, "pulled from, same layout");
    child_verified(cb, nb, "pulled from, converting");
}

/* ---- the event fd ----------------------------------------------------------- */

static void event_fd(struct side *s, kvrt_xfer_peer *pb, struct child *cb, uint64_t notes)
{
    int64_t src[16], dst[16];
    side_ids(src, 16, 40, 1, PUSHED);
    side_ids(dst, 16, 48, 1, PUSHED);
    kvrt_xfer_handle *h = side_post(s, pb, &s->o, src, dst, 16, false, 100);
    int fd = -1, sleeps = 0, rc = KVRT_XFER_PENDING;
    kvrt_xfer_event_fd(s->a, &fd);
    double deadline = now() + 30;
    while (h && (rc = kvrt_xfer_test(h)) == KVRT_XFER_PENDING && now() < deadline) {
        if (kvrt_xfer_arm(s->a) == KVRT_OK) {
            struct pollfd pfd = {fd, POLLIN, 0};
            poll(&pfd, 1, 100);
            sleeps++;
        }
    }
    tap_ok(fd >= 0 && rc == KVRT_OK, "a transfer driven by kvrt_xfer_arm and poll() on the event fd (%d sleeps): %s",
           sleeps, rc == KVRT_OK ? "complete" : kvrt_error_message());
    kvrt_xfer_release(h);
    child_verified(cb, notes, "event fd");
}

/* ---- threads ------------------------------------------------------------------ */

enum { THREADS = 4, EACH = 6 };

struct worker {
    struct side *s;
    kvrt_xfer_peer *peer[2];
    int index, ok;
    atomic_int *stop;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < EACH; i++) {
        int64_t src[2], dst[2];
        /* Each thread writes its own destination blocks on each peer. */
        side_ids(src, 2, (uint64_t)(w->index * EACH + i) * 3, 1, PUSHED);
        side_ids(dst, 2, (uint64_t)(w->index * 2) + 56 - 8 * (i % 2), 1, PUSHED);
        kvrt_xfer_handle *h = side_post(w->s, w->peer[i % 2], &w->s->o, src, dst, 2, false, 1000u + (unsigned)i);
        if (h && kvrt_xfer_wait(h, 30) == KVRT_OK)
            w->ok++;
        kvrt_xfer_release(h);
    }
    return NULL;
}

static void *progress_loop(void *arg)
{
    struct worker *w = arg;
    while (!atomic_load(w->stop))
        kvrt_xfer_progress(w->s->a);
    return NULL;
}

static void threads(struct side *s, kvrt_xfer_peer *pa, kvrt_xfer_peer *pb, struct child *ca, struct child *cb,
                    uint64_t notes_a, uint64_t notes_b)
{
    pthread_t t[THREADS + 1];
    struct worker w[THREADS + 1];
    atomic_int stop = 0;
    for (int i = 0; i <= THREADS; i++) {
        w[i] = (struct worker){s, {pa, pb}, i, 0, &stop};
        pthread_create(&t[i], NULL, i < THREADS ? work : progress_loop, &w[i]);
    }
    int ok = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        ok += w[i].ok;
    }
    atomic_store(&stop, 1);
    pthread_join(t[THREADS], NULL);
    tap_ok(ok == THREADS * EACH,
           "%d threads posting and waiting on one agent while another progresses: %d of %d complete", THREADS, ok,
           THREADS * EACH);
    child_verified(ca, notes_a, "threads, same layout");
    child_verified(cb, notes_b, "threads, converting");
}

/* ---- released, closed, reconnected ---------------------------------------- */

static void release_in_flight(struct side *s, kvrt_xfer_peer *pb, struct child *cb, uint64_t notes)
{
    int64_t src[32], dst[32];
    side_ids(src, 32, 0, 1, PUSHED);
    side_ids(dst, 32, 32, 1, PUSHED);
    kvrt_xfer_handle *h = side_post(s, pb, &s->o, src, dst, 32, false, 200);
    kvrt_xfer_release(h); /* abandoned at once: no notification there */
    /* The same blocks again, complete this time: the peer's check then
     * covers what the abandoned one may have written. */
    h = side_post(s, pb, &s->o, src, dst, 32, false, 201);
    int rc = h ? kvrt_xfer_wait(h, 30) : KVRT_ERR_INVALID;
    tap_ok(rc == KVRT_OK, "after a transfer released in flight, the next one to the peer completes: %s",
           rc == KVRT_OK ? "yes" : kvrt_error_message());
    kvrt_xfer_release(h);
    child_verified(cb, notes, "released in flight: only the completed transfer was notified");
}

static kvrt_xfer_peer *closed_and_back(struct side *s, kvrt_xfer_peer *pa, struct child *ca, uint64_t *notes)
{
    int64_t src[8], dst[8];
    side_ids(src, 8, 8, 1, PUSHED);
    side_ids(dst, 8, 0, 1, PUSHED);
    kvrt_xfer_handle *h = side_post(s, pa, &s->o, src, dst, 8, false, 300);
    kvrt_xfer_peer_close(pa);
    int rc = h ? kvrt_xfer_wait(h, 5) : KVRT_OK;
    const char *m = kvrt_error_message();
    /* It may have completed before the close; if not, it says why -- and
     * the peer may still have had every byte (the acknowledgement was on
     * its way), so it may or may not have been notified. */
    tap_ok(h && (rc == KVRT_OK || (rc == KVRT_ERR_STATE && strstr(m, "closed here"))),
           "a peer closed with a transfer in flight: the handle stays valid and reports it (%s)",
           rc == KVRT_OK ? "it had completed" : m);
    uint64_t lo = *notes + (rc == KVRT_OK), hi = *notes + 1;
    kvrt_xfer_release(h);
    kvrt_xfer_peer *p = NULL;
    rc = kvrt_xfer_connect(s->a, "127.0.0.1", (uint16_t)ca->port, &p);
    tap_ok(rc == KVRT_OK, "connecting again to the same peer: %s", rc == KVRT_OK ? "yes" : kvrt_error_message());
    if (rc != KVRT_OK)
        return NULL;
    h = side_post(s, p, &s->o, src, dst, 8, false, 301);
    rc = h ? kvrt_xfer_wait(h, 30) : KVRT_ERR_INVALID;
    tap_ok(rc == KVRT_OK, "and a transfer over the new connection completes");
    kvrt_xfer_release(h);
    child_verified_range(ca, lo + 1, hi + 1, "closed and connected again", notes);
    return p;
}

/* ---- metadata both ways, no listener ----------------------------------------- */

static void loaded(struct side *s, struct child *cc, const struct side_opts *oc)
{
    kvrt_xfer_peer *p = NULL;
    int rc = kvrt_xfer_peer_load(s->a, cc->md, cc->md_len, &p);
    void *blob = NULL;
    size_t len = 0;
    kvrt_xfer_metadata_export(s->a, &blob, &len);
    char *hex = to_hex(blob, len), *cmd = malloc(strlen(hex) + 8), reply[1024] = "";
    sprintf(cmd, "load %s", hex);
    bool there = child_cmd(cc, cmd, reply, sizeof(reply), 30) && strcmp(reply, "loaded") == 0;
    free(cmd);
    free(hex);
    kvrt_free(blob);
    tap_ok(rc == KVRT_OK && there, "metadata loaded both ways, no listener: %s / %s",
           rc == KVRT_OK ? "here" : kvrt_error_message(), reply);
    if (rc != KVRT_OK || !there)
        return;
    int64_t src[6] = {1, 3, 5, 7, 9, 11}, dst[6] = {2, 4, 6, 8, 10, 12};
    kvrt_xfer_handle *push = side_post(s, p, &s->o, src, dst, 6, false, 0);
    int64_t mine[3] = {125, 126, 127}, theirs[3] = {20, 30, 40};
    kvrt_xfer_handle *pull = side_post(s, p, oc, mine, theirs, 3, true, 1);
    int a = push ? kvrt_xfer_wait(push, 30) : -1, b = pull ? kvrt_xfer_wait(pull, 30) : -1;
    struct xpat_record rec = {.src_ids = theirs, .dst_ids = mine, .num_blocks = 3, .seed = oc->seed, .pull = true};
    if (b == KVRT_OK)
        xpat_apply(&s->x, &rec);
    char where[256];
    tap_ok(a == KVRT_OK && b == KVRT_OK && xpat_verify(&s->x, where, sizeof(where)) == 0,
           "a push and a pull at once with a loaded peer, the pull verified here");
    kvrt_xfer_release(push);
    kvrt_xfer_release(pull);
    child_verified(cc, 2, "loaded peer");
    kvrt_xfer_peer_close(p);
}

/* ---- refusals ------------------------------------------------------------------ */

static bool one_line_with(const char *want)
{
    const char *m = kvrt_error_message();
    return m[0] && !strchr(m, '\n') && strstr(m, want);
}

/* On one host with shared memory allowed, this agent's pulls read the
 * peers' memory in place; with UCX_TLS=tcp nothing does. */
static void read_in_place(struct side *s)
{
    struct kvrt_xfer_stats st = {.size = sizeof(st)};
    kvrt_xfer_agent_stats(s->a, &st);
    const char *tls = getenv("UCX_TLS");
    if (!tls || strstr(tls, "sm"))
        tap_ok(st.bytes_read_in_place > 0 && st.peers_read_in_place == 2,
               "one host: the pulls read the peers' memory in place (%llu of %llu bytes received, %u peers)",
               (unsigned long long)st.bytes_read_in_place, (unsigned long long)st.bytes_received,
               st.peers_read_in_place);
    else
        tap_ok(st.bytes_read_in_place == 0 && st.peers_read_in_place == 0,
               "UCX_TLS=%s: no peer is read in place (%llu bytes, %u peers)", tls,
               (unsigned long long)st.bytes_read_in_place, st.peers_read_in_place);
}

static void refusals(struct side *s, kvrt_xfer_peer *p)
{
    int64_t a[2] = {0, 1}, b[2] = {5, 5}, big[1] = {128};
    struct kvrt_xfer_request r;
    kvrt_xfer_handle *h = NULL;
    struct {
        const char *what, *want;
        int field;
    } cases[] = {
        {"request size not set", "request size", 0},
        {"a reserved byte set", "reserved[3]", 1},
        {"a repeated destination block", "appears twice", 2},
        {"a local id out of range", "valid ids 0..127", 3},
        {"heads out of range", "out of range", 4},
        {"a method out of range", "method 9", 5},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kvrt_xfer_request_default(&r);
        r.num_blocks = 2;
        r.local_ids = a;
        r.remote_ids = a;
        switch (cases[i].field) {
        case 0: r.size = 0; break;
        case 1: r.reserved[3] = 1; break;
        case 2: r.remote_ids = b; break;
        case 3:
            r.num_blocks = 1;
            r.local_ids = big;
            break;
        case 4:
            r.local_head_start = 3;
            r.num_heads = 2;
            break;
        case 5: r.method = (enum kvrt_xfer_method)9; break;
        }
        int rc = kvrt_xfer_post(s->a, p, &r, &h);
        if (!tap_ok(rc == KVRT_ERR_INVALID && h == NULL && one_line_with(cases[i].want), "refused: %s (%s)",
                    cases[i].what, kvrt_error_message()))
            tap_diag("status %d", rc);
    }
    struct kvrt_xfer_agent_options o;
    kvrt_xfer_agent_options_default(&o);
    o.reserved[0] = 7;
    kvrt_xfer_agent *bad = NULL;
    int rc = kvrt_xfer_agent_create(s->be, s->c, &o, &bad);
    tap_ok(rc == KVRT_ERR_INVALID && !bad && one_line_with("reserved[0] is 7"),
           "agent options with a reserved byte set are refused (%s)", kvrt_error_message());
    kvrt_xfer_agent_options_default(&o);
    o.staging_bytes = 3 * o.size;
    rc = kvrt_xfer_agent_create(s->be, s->c, &o, &bad);
    tap_ok(rc == KVRT_ERR_INVALID && !bad && one_line_with("valid are 4"),
           "a staging pool of fewer than four chunks is refused (%s)", kvrt_error_message());
}

/* ---- every layout pair at once ---------------------------------------------- */

static void pairs(void)
{
    struct side src[KVRT_NUM_LAYOUTS];
    struct child dst[KVRT_NUM_LAYOUTS];
    struct side_opts o;
    side_opts_default(&o);
    int up = 0;
    for (int l = 0; l < KVRT_NUM_LAYOUTS; l++) {
        o.layout = (enum kvrt_layout)l;
        o.seed = 10 + (uint64_t)l;
        up += side_open(&src[l], &o) == KVRT_OK;
        up += start(&dst[l], (enum kvrt_layout)l, 100 + (uint64_t)l, true);
    }
    if (!tap_ok(up == 2 * KVRT_NUM_LAYOUTS, "six source agents here, six destination processes"))
        return;
    kvrt_xfer_peer *p[KVRT_NUM_LAYOUTS][KVRT_NUM_LAYOUTS];
    kvrt_xfer_handle *h[KVRT_NUM_LAYOUTS][KVRT_NUM_LAYOUTS];
    int64_t sid[KVRT_NUM_LAYOUTS][5], did[KVRT_NUM_LAYOUTS][5];
    int connected = 0;
    double t0 = now();
    for (int s = 0; s < KVRT_NUM_LAYOUTS; s++)
        for (int d = 0; d < KVRT_NUM_LAYOUTS; d++) {
            p[s][d] = NULL;
            connected += kvrt_xfer_connect(src[s].a, "127.0.0.1", (uint16_t)dst[d].port, &p[s][d]) == KVRT_OK;
        }
    tap_ok(connected == 36, "36 connections (%d) in %.1f s", connected, now() - t0);
    for (int s = 0; s < KVRT_NUM_LAYOUTS; s++) {
        /* Sparse, reordered source ids; each source its own destination
         * blocks, so that one conversion cannot hide another. */
        int64_t pick[5] = {5, 2, 9, 10, 0};
        memcpy(sid[s], pick, sizeof(pick));
        for (int k = 0; k < 5; k++)
            did[s][k] = s * 8 + (int64_t)((k * 3) % 5);
        for (int d = 0; d < KVRT_NUM_LAYOUTS; d++)
            h[s][d] = p[s][d] ? side_post(&src[s], p[s][d], &src[s].o, sid[s], did[s], 5, false, 0) : NULL;
    }
    /* Six agents in one thread: each test() progresses its own agent, so
     * all of them are driven together. */
    int ok = 0, rcs[KVRT_NUM_LAYOUTS][KVRT_NUM_LAYOUTS], pending;
    double deadline = now() + 60;
    do {
        pending = 0;
        for (int s = 0; s < KVRT_NUM_LAYOUTS; s++)
            for (int d = 0; d < KVRT_NUM_LAYOUTS; d++)
                pending += (rcs[s][d] = h[s][d] ? kvrt_xfer_test(h[s][d]) : -1) == KVRT_XFER_PENDING;
    } while (pending && now() < deadline);
    for (int s = 0; s < KVRT_NUM_LAYOUTS; s++)
        for (int d = 0; d < KVRT_NUM_LAYOUTS; d++) {
            int rc = rcs[s][d] == KVRT_XFER_PENDING || rcs[s][d] == -1 ? rcs[s][d] : kvrt_xfer_test(h[s][d]);
            if (rc == KVRT_OK)
                ok++;
            else
                tap_diag("%s -> %s: %s", kvrt_layout_name((enum kvrt_layout)s), kvrt_layout_name((enum kvrt_layout)d),
                         kvrt_error_message());
            kvrt_xfer_release(h[s][d]);
        }
    tap_ok(ok == 36, "all 36 layout pairs in flight at once: %d complete", ok);
    for (int d = 0; d < KVRT_NUM_LAYOUTS; d++) {
        char what[64];
        snprintf(what, sizeof(what), "destination %s", kvrt_layout_name((enum kvrt_layout)d));
        child_verified(&dst[d], 6, what);
    }
    for (int s = 0; s < KVRT_NUM_LAYOUTS; s++) {
        for (int d = 0; d < KVRT_NUM_LAYOUTS; d++)
            kvrt_xfer_peer_close(p[s][d]);
        side_close(&src[s]);
    }
    for (int d = 0; d < KVRT_NUM_LAYOUTS; d++)
        child_stop(&dst[d]);
}

int main(int argc, char **argv)
{
    self = argv[0];
    int child = side_main(argc, argv);
    if (child >= 0)
        return child;
    if (argc > 1 && strcmp(argv[1], "--pairs") == 0) {
        pairs();
        return tap_done();
    }
    tap_diag("UCX_TLS=%s", getenv("UCX_TLS") ? getenv("UCX_TLS") : "(all)");
    struct side s;
    struct side_opts o, oa, ob, oc;
    side_opts_default(&o);
    int rc = side_open(&s, &o);
    /* Only a machine whose UCX has no transport skips; a refused option
     * (a bad KVRT_XFER_KEY_FILE in the keyed runs) is a failure. */
    if (rc == KVRT_ERR_DEVICE)
        tap_skip_all("no agent on this machine: %s", kvrt_error_message());
    if (!tap_ok(rc == KVRT_OK, "the agent is created (%s)", rc ? kvrt_error_message() : "ok"))
        return tap_done();
    tap_diag("key: %s", getenv("KVRT_XFER_KEY_FILE") ? getenv("KVRT_XFER_KEY_FILE") : "none");
    oa = ob = oc = o;
    oa.seed = 2;
    ob.seed = 3;
    ob.layout = KVRT_LAYOUT_BLNHC;
    oc.seed = 4;
    oc.layout = KVRT_LAYOUT_BHLNC;
    struct child ca, cb, cc;
    bool up = start(&ca, oa.layout, oa.seed, true) && start(&cb, ob.layout, ob.seed, true) &&
              start(&cc, oc.layout, oc.seed, false);
    kvrt_xfer_peer *pa = NULL, *pb = NULL;
    if (up)
        up = kvrt_xfer_connect(s.a, "127.0.0.1", (uint16_t)ca.port, &pa) == KVRT_OK &&
             kvrt_xfer_connect(s.a, "127.0.0.1", (uint16_t)cb.port, &pb) == KVRT_OK;
    if (!tap_ok(up, "three peer processes up, two connected: %s", up ? kvrt_xfer_peer_name(pa) : kvrt_error_message()))
        return tap_done();
    /* Notifications each peer has had, for its check; pushes first (they
     * send this cache's own pattern), pulls into this cache last. */
    uint64_t na = NPOST, nb = NPOST;
    in_flight(&s, pa, pb, &ca, &cb);
    event_fd(&s, pb, &cb, ++nb);
    threads(&s, pa, pb, &ca, &cb, na += THREADS * EACH / 2, nb += THREADS * EACH / 2);
    release_in_flight(&s, pb, &cb, ++nb);
    pa = closed_and_back(&s, pa, &ca, &na);
    loaded(&s, &cc, &oc);
    if (pa)
        pulls(&s, pa, pb, &oa, &ob, &ca, &cb, na + NPOST, nb + NPOST);
    read_in_place(&s);
    refusals(&s, pb);
    side_agent_clean(s.a, "after all of it");
    child_clean(&ca, "same-layout peer");
    child_clean(&cb, "converting peer");
    kvrt_xfer_peer_close(pa);
    kvrt_xfer_peer_close(pb);
    tap_ok(child_stop(&ca) == 0 && child_stop(&cb) == 0 && child_stop(&cc) == 0, "the peers exit cleanly");
    side_close(&s);
    pairs();
    return tap_done();
}
