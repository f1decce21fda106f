/*
 * libkvrt-xfer tried as an attacker would: a peer written against UCP
 * directly (raw_peer.h, in this process) forges handshakes, metadata,
 * addresses and messages at a real agent (the victim, a child process),
 * while a real peer (another child) transfers with it.  Each process holds
 * one UCX worker: UCX 1.13's event handling is not safe for several
 * workers in one process that open and close connections by the hundred
 * (docs/xfer.md, "Faults").  Every point checks that the victim neither
 * crashed nor hung (every wait is bounded), reported nothing complete that
 * was not, wrote nothing outside what a peer was allowed to write, and went
 * on serving its honest peer; the ASan/UBSan run adds that nothing leaked.
 *
 * The victim's blocks below SCRATCH hold its pattern (and what the honest
 * peer pushed, applied from its notifications) and must stay so; the
 * attacker's sessions may write only blocks from SCRATCH up.  The victim
 * requires grants (KVRT_XFER_REQUIRE_GRANTS): the honest peer is granted
 * the blocks below SCRATCH, every peer those from SCRATCH up, except while
 * the insiders run: each of them is granted its own few blocks only.
 *
 * usage: test-xfer-attack [key]   with `key`, every agent and the raw peer
 * hold one pre-shared key (data endpoints to worker addresses, shared
 * memory); without, sessions run on their connection endpoints.
 */
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "address.h"
#include "cma.h"
#include "link.h"
#include "raw_peer.h"
#include "tap.h"
#include "xfer_side.h"

enum { SCRATCH = 96, BLOCKS = 128, TIMEOUT = 2, CHUNK = 64 << 10 };

static struct child V, L; /* the victim, the honest peer */
static uint16_t port;
static struct raw R;
static struct xfer_md vmd, lmd; /* their metadata */
static char *vmd_hex;
static int raw_sessions; /* peers the victim accepted so far */
static bool keyed;       /* the victim, its honest peer and the raw peer share a key */
static const char *self_path;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- talking to the children ---------------------------------------------------- */

static char reply[1 << 16];

static const char *cmd(struct child *c, const char *fmt, ...) KVRT_PRINTF(2, 3);

static const char *cmd(struct child *c, const char *fmt, ...)
{
    char line[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (!child_cmd(c, line, reply, sizeof(reply), 30))
        snprintf(reply, sizeof(reply), "error no answer to \"%s\"", line);
    return reply;
}

struct events {
    unsigned long long refused, violations, strangers, denied, notes, accept_errors, log_lines;
};

static struct events events(void)
{
    struct events e = {0};
    const char *r = cmd(&V, "events");
    if (sscanf(r,
               "events refused=%llu violations=%llu strangers=%llu denied=%llu notes=%llu accept_errors=%llu "
               "log_lines=%llu",
               &e.refused, &e.violations, &e.strangers, &e.denied, &e.notes, &e.accept_errors, &e.log_lines) != 7)
        tap_diag("events: %s", r);
    return e;
}

/* The victim's last line of `what` ("lastlog", "lastrefusal", "lastfailed")
 * says text; waits up to `seconds` for it. */
static bool last_says(const char *what, const char *text, double seconds)
{
    double deadline = now() + seconds;
    const char *r;
    do {
        r = cmd(&V, "%s", what);
        if (strstr(r, text) && !strchr(r, '\n'))
            return true;
        raw_pump(&R, 0.02, NULL, NULL);
    } while (now() < deadline);
    tap_diag("%s", r);
    return false;
}

/* A sample of the victim's Prometheus text ("kvrt_xfer_failures_total{
 * reason=\"violation\"}"), or ~0 when it has none. */
static unsigned long long metric(const char *sample)
{
    unsigned long long v = ~0ull;
    if (sscanf(cmd(&V, "metric %s", sample), "metric %llu", &v) != 1)
        tap_diag("metric %s: %s", sample, reply);
    return v;
}

/* Blocks below SCRATCH hold exactly their pattern and the honest pushes. */
static bool untouched(void)
{
    unsigned long long bad = 1, notes = 0;
    const char *r = cmd(&V, "verify-below %d", SCRATCH);
    if (sscanf(r, "verify-below %llu %llu", &bad, &notes) != 2 || bad)
        tap_diag("%s", r);
    return bad == 0;
}

static int honest_peer = -1; /* L's index on the victim */
static int honest_l = 0;     /* the victim's index on L */
static unsigned long long honest_index = 0;

/* The victim still serves its honest peer: a push from L arrives whole. */
static bool honest_push_works(void)
{
    unsigned long long before = events().notes;
    unsigned long long k = honest_index++;
    char mine[64], theirs[64];
    snprintf(mine, sizeof(mine), "%llu,%llu", k % 40, k % 40 + 1);
    snprintf(theirs, sizeof(theirs), "%llu,%llu", (k * 2) % SCRATCH, (k * 2) % SCRATCH + 1);
    int h = -1, rc = -100;
    if (sscanf(cmd(&L, "post %d push %s %s", honest_l, mine, theirs), "posted %d", &h) != 1 ||
        sscanf(cmd(&L, "wait %d 10", h), "done %d", &rc) != 1 || rc != KVRT_OK) {
        tap_diag("honest push: %s", reply);
        return false;
    }
    double deadline = now() + 5;
    while (events().notes == before && now() < deadline)
        usleep(2000);
    return events().notes == before + 1 && untouched();
}

/* Grant (or revoke) blocks [first, end) to peer p, or with p -1 to every
 * peer of the victim. */
static bool grant_range(bool grant, int p, const char *access, int first, int end)
{
    char ids[1024];
    size_t at = 0;
    for (int b = first; b < end && at < sizeof(ids) - 16; b++)
        at += (size_t)snprintf(ids + at, sizeof(ids) - at, "%s%d", b > first ? "," : "", b);
    const char *r = p < 0 ? cmd(&V, "agent-%s %s %s", grant ? "grant" : "revoke", access, ids)
                          : cmd(&V, "%s %d %s %s", grant ? "grant" : "revoke", p, access, ids);
    if (strcmp(r, "granted") != 0)
        tap_diag("%s", r);
    return strcmp(r, "granted") == 0;
}

/* ---- helpers for the attacker -------------------------------------------------- */

/* The victim accepted one more peer: its index there. */
static int accepted(double seconds)
{
    double deadline = now() + seconds;
    int n = -1;
    do {
        if (sscanf(cmd(&V, "newest"), "newest %d", &n) == 1 && n > raw_sessions)
            break;
        raw_pump(&R, 0.01, NULL, NULL);
    } while (now() < deadline);
    if (n <= raw_sessions)
        return -1;
    raw_sessions = n;
    return n - 1;
}

/* A fresh session with the victim: its index there. */
static int session(void)
{
    char why[512];
    raw_drop_eps(&R);
    int rc = raw_handshake(&R, port, NULL, 0, why, sizeof(why));
    if (rc != KVRT_OK) {
        tap_diag("raw handshake: %d %s", rc, why);
        return -1;
    }
    int p = accepted(5);
    if (p < 0)
        tap_diag("the victim did not accept the raw session");
    return p;
}

static void end_session(int p)
{
    if (p >= 0)
        cmd(&V, "close %d", p);
    raw_drop_eps(&R);
    raw_forget(&R);
}

/* A push BEGIN in the raw peer's name into the victim's blocks, in
 * staging order, in the victim's chunks (64 KiB: two blocks). */
static struct wire_begin push_begin(uint64_t xid, uint64_t n)
{
    struct wire_begin b;
    memset(&b, 0, sizeof(b));
    b.h = raw_hdr(&R, xid);
    b.kind = WIRE_PUSH;
    b.flags = WIRE_BEGIN_NOTE;
    b.order = WIRE_ORDER_STAGING;
    b.count = n;
    b.num_layers = vmd.cache.num_layers;
    b.num_heads = vmd.cache.layers[0].heads;
    b.chunk_bytes = CHUNK;
    b.total_bytes = n * vmd.cache.staging_per_block;
    b.note_len = 5;
    return b;
}

static bool send_begin(struct wire_begin *b, const int64_t *ids)
{
    uint8_t payload[64 * 8 + 5];
    memcpy(payload, ids, b->count * 8);
    static const uint8_t note[5] = {'n', 'o', 't', 'e', '!'};
    memcpy(payload + b->count * 8, note, sizeof(note));
    return raw_session_send(&R, WIRE_BEGIN, b, sizeof(*b), payload, b->count * 8 + b->note_len, false);
}

static uint8_t junk[CHUNK];

static bool send_chunk(uint64_t xid, uint64_t k, size_t len, uint32_t flags)
{
    struct wire_data d = {raw_hdr(&R, xid), k, flags, 0};
    return raw_session_send(&R, WIRE_DATA, &d, sizeof(d), junk, len, len > (16 << 10));
}

/* ---- a stranger, in a process of its own --------------------------------------- */

/* `self --stranger MDHEX KIND [AGENT_ID]`: messages at the victim's worker
 * address from a worker that never handshook. */
static int stranger_main(int argc, char **argv)
{
    dup2(2, 1); /* UCX's own complaints must not reach the TAP stream */
    size_t len;
    uint8_t *blob = from_hex(argv[2], &len);
    struct xfer_md md;
    struct raw S;
    if (!blob || xfer_md_parse(blob, len, &md) != KVRT_OK || !raw_open(&S, md.cache.placement) ||
        !raw_connect_data(&S, md.f.worker_addr, md.f.worker_addr_len))
        return 2;
    const char *kind = argv[3];
    if (strcmp(kind, "stolen") == 0 && argc > 4) {
        /* Another peer's agent id, which anyone with its published metadata
         * has, and a made-up token. */
        S.me.from = strtoull(argv[4], NULL, 0);
        memset(S.me.token, 0x5a, sizeof(S.me.token));
        int64_t ids[2] = {3, 4};
        struct wire_begin b;
        memset(&b, 0, sizeof(b));
        b.h = raw_hdr(&S, 1000);
        b.kind = WIRE_PUSH;
        b.order = WIRE_ORDER_STAGING;
        b.count = 2;
        b.num_layers = md.cache.num_layers;
        b.num_heads = md.cache.layers[0].heads;
        b.chunk_bytes = CHUNK;
        b.total_bytes = 2 * md.cache.staging_per_block;
        raw_send(&S, S.data, WIRE_BEGIN, &b, sizeof(b), ids, sizeof(ids), false);
        struct wire_data d = {raw_hdr(&S, 1000), 0, 0, 0};
        raw_send(&S, S.data, WIRE_DATA, &d, sizeof(d), junk, CHUNK, true);
        struct wire_status ack = {raw_hdr(&S, 1), KVRT_OK, 0};
        raw_send(&S, S.data, WIRE_ACK, &ack, sizeof(ack), NULL, 0, false);
        struct wire_abort ab = {raw_hdr(&S, 1), 0, 0};
        raw_send(&S, S.data, WIRE_ABORT, &ab, sizeof(ab), NULL, 0, false);
        struct wire_hdr note = raw_hdr(&S, 1);
        raw_send(&S, S.data, WIRE_NOTIFY, &note, sizeof(note), "forged", 6, false);
        struct wire_hdr bye = raw_hdr(&S, 0);
        raw_send(&S, S.data, WIRE_BYE, &bye, sizeof(bye), NULL, 0, false);
    } else if (strcmp(kind, "unknown") == 0) {
        static const unsigned ids[] = {0, 13, 200, 4096, 65535};
        uint8_t hdr[64] = {0};
        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
            raw_send(&S, S.data, ids[i], hdr, sizeof(hdr), junk, 64, false);
            raw_send(&S, S.data, ids[i], hdr, sizeof(hdr), junk, sizeof(junk), true);
        }
    } else if (strcmp(kind, "flood") == 0) {
        for (unsigned i = 0; i < 3000; i++) {
            uint8_t hdr[104];
            xfer_random(hdr, sizeof(hdr));
            raw_send(&S, S.data, WIRE_READY + i % (WIRE_NUM_IDS - WIRE_READY), hdr, 16 + i % 88, junk, i % 512, false);
        }
    }
    raw_pump(&S, 0.2, NULL, NULL);
    raw_close(&S);
    xfer_md_free(&md);
    free(blob);
    return 0;
}

static bool run_self(char **args, double seconds)
{
    pid_t pid;
    extern char **environ;
    if (posix_spawn(&pid, self_path, NULL, NULL, args, environ) != 0)
        return false;
    int status = 0;
    double deadline = now() + seconds;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return false;
        }
        usleep(2000);
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static bool stranger(const char *kind, const char *arg)
{
    char *args[] = {(char *)self_path, "--stranger", vmd_hex, (char *)kind, (char *)arg, NULL};
    return run_self(args, 60);
}

/* ---- A: the handshake ------------------------------------------------------------ */

/* The victim's next accept error came, and said text. */
static bool refusal_says(unsigned long long before, const char *text)
{
    double deadline = now() + 5;
    while (events().accept_errors == before && now() < deadline)
        raw_pump(&R, 0.01, NULL, NULL);
    return events().accept_errors == before + 1 && last_says("lastrefusal", text, 1);
}

static void garbage_metadata(void)
{
    struct events before = events();
    raw_forget(&R);
    raw_drop_eps(&R);
    uint8_t blob[200];
    xfer_random(blob, sizeof(blob));
    struct wire_hello h = {WIRE_MAGIC, WIRE_PROTOCOL, keyed ? WIRE_KEYED : 0, {0}};
    bool sent = raw_connect(&R, port) && raw_send(&R, R.conn, WIRE_HELLO, &h, sizeof(h), blob, sizeof(blob), false);
    struct raw_got *g = raw_wait(&R, WIRE_REPLY, 5);
    struct wire_reply rep = {0};
    if (g)
        memcpy(&rep, g->hdr, sizeof(rep));
    tap_ok(sent && g && rep.status == KVRT_ERR_INVALID && g->data && strstr((char *)g->data, "metadata") &&
               refusal_says(before.accept_errors, "metadata") && events().refused == before.refused + 1,
           "a HELLO with garbage metadata is refused, told why (\"%.60s\"), and accept reports it",
           g && g->data ? (char *)g->data : "");
    raw_drop_eps(&R);
}

static void malformed_hellos(void)
{
    static const struct {
        const char *what;
        uint32_t magic;
        uint16_t protocol, flags;
        size_t hlen;
        bool rndv;
        const char *says;
    } cases[] = {
        {"a HELLO without the magic", 0x12345678, WIRE_PROTOCOL, 0xffff, 40, false, "magic"},
        {"a HELLO of protocol 2", WIRE_MAGIC, 2, 0xffff, 40, false, "protocol version 2"},
        {"a HELLO with a 39-byte header", WIRE_MAGIC, WIRE_PROTOCOL, 0xffff, 39, false, "39-byte header"},
        {"a HELLO sent as a rendezvous", WIRE_MAGIC, WIRE_PROTOCOL, 0xffff, 40, true, "rendezvous"},
        {"a HELLO with unknown flags", WIRE_MAGIC, WIRE_PROTOCOL, 0x80, 40, false, "flags 0x80"},
        {"a HELLO that disagrees with the agent about a key", WIRE_MAGIC, WIRE_PROTOCOL, 0xfffe, 40, false, "key"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct events before = events();
        raw_forget(&R);
        raw_drop_eps(&R);
        size_t blen;
        uint8_t *blob = raw_blob(&R, NULL, 0, &blen);
        /* 0xffff: the agent's own key state; 0xfffe: the opposite. */
        uint16_t flags = cases[i].flags == 0xffff   ? (keyed ? WIRE_KEYED : 0)
                         : cases[i].flags == 0xfffe ? (keyed ? 0 : WIRE_KEYED)
                                                    : cases[i].flags;
        struct wire_hello h = {cases[i].magic, cases[i].protocol, flags, {0}};
        static uint8_t big[64 << 10];
        memset(big, 0, sizeof(big));
        if (blob)
            memcpy(big, blob, blen);
        free(blob);
        if (raw_connect(&R, port))
            raw_send(&R, R.conn, WIRE_HELLO, &h, cases[i].hlen, big, cases[i].rndv ? sizeof(big) : blen, cases[i].rndv);
        struct raw_got *g = raw_wait(&R, WIRE_REPLY, 3);
        bool told = g && g->data && strstr((char *)g->data, cases[i].says);
        tap_ok(refusal_says(before.accept_errors, cases[i].says) && told,
               "%s is refused before anything else, and told why: %s", cases[i].what, reply);
        raw_drop_eps(&R);
    }
}

/* Mutations of a real worker address. */
static void mutate(uint8_t *a, size_t *len, unsigned kind, uint64_t rnd)
{
    switch (kind % 6) {
    case 0: a[rnd % *len] ^= (uint8_t)(1u << (rnd >> 8) % 8); break;
    case 1: *len = 1 + rnd % *len; break;
    case 2:
        for (unsigned k = 0; k < 8; k++)
            a[(*len)++] = (uint8_t)(rnd >> k);
        break;
    case 3: a[rnd % *len] = 0xff; break;
    case 4:
        for (size_t k = 0; k < *len; k++)
            a[k] = (uint8_t)(rnd * (k + 7) >> 3);
        break;
    default: a[rnd % *len] = (uint8_t)(rnd >> 16); break;
    }
}

/* `self --probe-address HEX`: hand the address to UCX in a fresh process
 * (a crash there would have been the victim's). */
static int probe_address(const char *hex)
{
    dup2(2, 1); /* UCX's own complaints must not reach the TAP stream */
    size_t len;
    uint8_t *addr = from_hex(hex, &len);
    ucp_config_t *cfg;
    ucp_context_h ctx;
    ucp_worker_h w;
    ucp_params_t pp = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
    ucp_worker_params_t wp = {0};
    if (!addr || ucp_config_read(NULL, NULL, &cfg) != UCS_OK || ucp_init(&pp, cfg, &ctx) != UCS_OK ||
        ucp_worker_create(ctx, &wp, &w) != UCS_OK)
        return 2;
    ucp_config_release(cfg);
    uint8_t *copy = calloc(1, len + XFER_ADDR_PAD);
    memcpy(copy, addr, len);
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
                          .address = (const ucp_address_t *)copy,
                          .err_mode = UCP_ERR_HANDLING_MODE_PEER};
    ucp_ep_h e;
    if (ucp_ep_create(w, &ep, &e) == UCS_OK) {
        for (int i = 0; i < 1000; i++)
            ucp_worker_progress(w);
        ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
        void *req = ucp_ep_close_nbx(e, &prm);
        while (UCS_PTR_IS_PTR(req) && ucp_request_check_status(req) == UCS_INPROGRESS)
            ucp_worker_progress(w);
        if (UCS_PTR_IS_PTR(req))
            ucp_request_free(req);
    }
    ucp_worker_destroy(w);
    ucp_cleanup(ctx);
    free(copy);
    free(addr);
    return 0;
}

static bool ucx_survives(const uint8_t *addr, size_t len)
{
    char *hex = to_hex(addr, len);
    char *args[] = {(char *)self_path, "--probe-address", hex, NULL};
    bool ok = run_self(args, 20);
    free(hex);
    if (!ok)
        tap_diag("UCX did not survive an address the check passed");
    return ok;
}

static void garbage_addresses(void)
{
    struct xfer_addr_shape mine;
    char why[512];
    if (xfer_addr_parse(R.addr, R.addr_len, &mine, why, sizeof(why)) != 0) {
        tap_ok(false, "this UCX's own worker address parses: %s", why);
        return;
    }
    int refused = 0, accepted_ = 0, passed = 0, survived = 0, other = 0, tried = 0;
    for (unsigned i = 0; i < 60; i++) {
        uint8_t a[2048];
        size_t len = R.addr_len;
        memcpy(a, R.addr, len);
        uint64_t rnd;
        xfer_random(&rnd, sizeof(rnd));
        mutate(a, &len, i, rnd | 1);
        if (xfer_addr_check(&mine, a, len, why, sizeof(why)) == 0) {
            passed++;
            survived += ucx_survives(a, len);
            /* A key holder's address is trusted for what it says
             * (docs/security.md): one that passes the check is not tried
             * on the victim. */
            if (keyed)
                continue;
        }
        tried++;
        raw_drop_eps(&R);
        unsigned long long errors = events().accept_errors;
        int rc = raw_handshake(&R, port, a, len, why, sizeof(why));
        if (rc == KVRT_OK && accepted(5) >= 0)
            accepted_++;
        else if (strstr(why, "worker address is malformed") && refusal_says(errors, "malformed"))
            refused++;
        else
            other++;
        if (raw_sessions > 0)
            cmd(&V, "close %d", raw_sessions - 1);
    }
    raw_drop_eps(&R);
    raw_forget(&R);
    if (keyed)
        tap_ok(refused == tried && tried > 0 && survived == passed,
               "%d handshakes with worker addresses the check refuses: %d refused as malformed before UCX saw "
               "them (%d otherwise); UCX took each of the %d mutations the check let pass in a child (%d survived)",
               tried, refused, other, passed, survived);
    else
        tap_ok(accepted_ == tried && survived == passed,
               "%d handshakes with mutated worker addresses: a victim without a key never hands one to UCX (%d "
               "went through on the connection endpoint, %d did not); UCX took each of the %d the check would "
               "pass in a child (%d survived)",
               tried, accepted_, other, passed, survived);
    tap_ok(honest_push_works(), "after them the victim still serves its honest peer");
}

static void hello_and_vanish(void)
{
    struct events before = events();
    raw_forget(&R);
    raw_drop_eps(&R);
    bool sent = raw_hello(&R, port, NULL, 0);
    raw_drop_eps(&R);
    double t0 = now();
    bool reported = refusal_says(before.accept_errors, "went away");
    tap_ok(sent && reported && now() - t0 < 6,
           "a client that sends HELLO and vanishes: accept reports it in %.2f s (%s)", now() - t0, reply);
}

static void stall(void)
{
    char why[256];
    struct events before = events();
    raw_forget(&R);
    raw_drop_eps(&R);
    /* The honest peer leaves, to come back while a handshake stalls. */
    cmd(&L, "close %d", honest_l);
    cmd(&V, "close %d", honest_peer);
    bool halfway = raw_hello(&R, port, NULL, 0) && raw_read_reply(&R, why, sizeof(why)) == KVRT_OK;
    /* Meanwhile the honest peer connects again: one stalled handshake
     * holds up only itself. */
    double t0 = now();
    bool connected = sscanf(cmd(&L, "connect %u", port), "peer %d", &honest_l) == 1;
    honest_peer = accepted(5);
    /* A new peer: the victim grants it what it granted the old one. */
    bool granted = honest_peer >= 0 && grant_range(true, honest_peer, "rw", 0, SCRATCH);
    tap_ok(halfway && connected && granted && now() - t0 < TIMEOUT,
           "while a client stalls after REPLY, an honest peer connects and is accepted in %.2f s", now() - t0);
    t0 = now();
    bool ended = refusal_says(before.accept_errors, "did not complete the handshake");
    tap_ok(ended, "the stalled handshake ends after the victim's timeout (%.1f s more): %s", now() - t0, reply);
    raw_drop_eps(&R);
    tap_ok(honest_push_works(), "the honest peer transfers meanwhile");
}

static void out_of_turn(void)
{
    struct events before = events();
    raw_forget(&R);
    raw_drop_eps(&R);
    struct wire_proof pr;
    memset(&pr, 0, sizeof(pr));
    bool sent = raw_connect(&R, port) && raw_send(&R, R.conn, WIRE_PROOF, &pr, sizeof(pr), NULL, 0, false);
    tap_ok(sent && refusal_says(before.accept_errors, "out of turn"), "a PROOF before HELLO is refused: %s", reply);
    raw_drop_eps(&R);
}

static void no_ready(void)
{
    char why[256];
    struct events before = events();
    raw_forget(&R);
    raw_drop_eps(&R);
    bool half = raw_hello(&R, port, NULL, 0) && raw_read_reply(&R, why, sizeof(why)) == KVRT_OK && raw_proof(&R) &&
                raw_read_accept(&R, why, sizeof(why)) == KVRT_OK;
    /* Data without READY first, on the endpoint a session uses. */
    if (half && keyed)
        half = raw_connect_data(&R, R.server.f.worker_addr, R.server.f.worker_addr_len);
    else if (half)
        R.data = R.conn;
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(1, 2);
    bool sent = half && send_begin(&b, ids);
    send_chunk(1, 0, CHUNK, 0); /* refused: the session is closed by then */
    bool failed = refusal_says(before.accept_errors, "before READY");
    char refusal[1024];
    snprintf(refusal, sizeof(refusal), "%.1000s", reply);
    const char *v = cmd(&V, "verify-below %d", BLOCKS);
    unsigned long long bad = 1;
    sscanf(v, "verify-below %llu", &bad);
    tap_ok(sent && failed && bad == 0 && last_says("lastlog", "before READY", 1),
           "a client that never says READY writes nothing and its handshake fails: %s", refusal);
    if (!keyed)
        R.data = NULL;
    raw_drop_eps(&R);
}

/* ---- B: stolen identity, strangers ---------------------------------------------- */

static void stolen_id(void)
{
    struct events before = events();
    char id[32];
    snprintf(id, sizeof(id), "%llu", (unsigned long long)lmd.f.agent_id);
    bool ran = stranger("stolen", id);
    struct events after = events();
    const char *st = cmd(&V, "peerstate %d", honest_peer);
    tap_ok(ran && after.strangers >= before.strangers + 5 && after.notes == before.notes &&
               strncmp(st, "peerstate 0", 11) == 0 && untouched(),
           "messages with the honest peer's agent id but not its token (BEGIN, DATA, ACK, ABORT, NOTIFY, BYE) "
           "are dropped (%llu strangers): the peer stays connected, nothing is written or notified",
           after.strangers - before.strangers);
    tap_ok(honest_push_works(), "the honest peer whose id was used still transfers");
}

static void unknown_ids(void)
{
    struct events before = events();
    bool ran = stranger("unknown", NULL);
    struct events after = events();
    tap_ok(ran && after.strangers >= before.strangers + 10 && untouched(),
           "active messages of ids nobody registered (0, 13, 200, 4096, 65535; eager and rendezvous) are dropped "
           "and counted (%llu)",
           after.strangers - before.strangers);
    tap_ok(honest_push_works(), "the victim goes on serving");
}

/* ---- D: a session that breaks the protocol ------------------------------------- */

struct breach {
    const char *what;
    const char *says;
    void (*send)(void);
    bool stream; /* a stream had begun: the violation fails it */
};

static void dup_chunk(void)
{
    int64_t ids[4] = {SCRATCH, SCRATCH + 1, SCRATCH + 2, SCRATCH + 3};
    struct wire_begin b = push_begin(1, 4);
    send_begin(&b, ids);
    send_chunk(1, 0, CHUNK, 0);
    send_chunk(1, 0, CHUNK, 0);
}

static void chunk_out_of_range(void)
{
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
    send_chunk(1, 5, CHUNK, 0);
}

static void chunk_wrong_length(void)
{
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
    send_chunk(1, 0, CHUNK - 8, 0);
}

static void data_before_begin(void)
{
    send_chunk(7, 0, CHUNK, 0);
}

static void ids_out_of_range(void)
{
    int64_t ids[2] = {SCRATCH, 5000};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
}

static void ids_repeated(void)
{
    int64_t ids[2] = {SCRATCH, SCRATCH};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
}

static void total_wrong(void)
{
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(1, 2);
    b.total_bytes += 64;
    send_begin(&b, ids);
}

static void xid_backwards(void)
{
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(5, 2);
    send_begin(&b, ids);
    b = push_begin(3, 2);
    send_begin(&b, ids);
}

static void count_mismatch(void)
{
    int64_t ids[4] = {SCRATCH, SCRATCH + 1, SCRATCH + 2, SCRATCH + 3};
    struct wire_begin b = push_begin(1, 4);
    b.count = 3; /* the data holds 4 ids and the note */
    uint8_t payload[4 * 8 + 5];
    memcpy(payload, ids, sizeof(ids));
    static const uint8_t note[5] = {'n', 'o', 't', 'e', '!'};
    memcpy(payload + 32, note, sizeof(note));
    raw_session_send(&R, WIRE_BEGIN, &b, sizeof(b), payload, sizeof(payload), false);
}

static void bad_kind(void)
{
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(1, 2);
    b.kind = 7;
    send_begin(&b, ids);
}

static void ack_never_begun(void)
{
    struct wire_status ack = {raw_hdr(&R, 99999), KVRT_OK, 0};
    raw_session_send(&R, WIRE_ACK, &ack, sizeof(ack), NULL, 0, false);
}

static void notify_never_begun(void)
{
    struct wire_hdr h = raw_hdr(&R, 42);
    raw_session_send(&R, WIRE_NOTIFY, &h, sizeof(h), "hello", 5, false);
}

static void reserved_set(void)
{
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
    struct wire_data d = {raw_hdr(&R, 1), 0, 0, 7};
    raw_session_send(&R, WIRE_DATA, &d, sizeof(d), junk, CHUNK, true);
}

static void short_header(void)
{
    struct wire_status ack = {raw_hdr(&R, 1), KVRT_OK, 0};
    raw_session_send(&R, WIRE_ACK, &ack, sizeof(ack) - 4, NULL, 0, false);
}

static void second_ready(void)
{
    struct wire_hdr h = raw_hdr(&R, 0);
    raw_session_send(&R, WIRE_READY, &h, sizeof(h), NULL, 0, false);
}

/* Token ranges (protocol 4): the receiver holds a BEGIN's range to what
 * its own table and block size say. */
static void tokens_whole_with_first(void)
{
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(1, 2);
    b.token_first = 3;
    send_begin(&b, ids);
}

static void tokens_no_segment(void)
{
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(1, 2);
    b.order = (uint32_t)vmd.cache.layout;
    b.token_count = 8;
    send_begin(&b, ids);
}

static void tokens_more_blocks_than_touched(void)
{
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(1, 2);
    b.order = (uint32_t)vmd.cache.layout;
    b.token_first = 1;
    b.token_count = 2; /* inside one block */
    b.token_seg = vmd.cache.layers[0].spec->block_size;
    send_begin(&b, ids);
}

/* One host: a peer that says where its cookie lies (CMA), and then gives
 * chunks by reference.  The raw peer is this process; it listens on its
 * session's socket, so that the kernel names its process to the victim
 * (xfer/link_cma.c).  After its cookie and challenge lie the ranges it
 * gives by reference: `junk` as its cache, unless a case says otherwise. */
static struct xfer_offer raw_offer;
static uint8_t beyond[CHUNK]; /* memory of the raw peer it never announces */
static int raw_listener = -1;
static uint8_t raw_listening[XFER_TOKEN_BYTES]; /* the session it listens for */

static void raw_listen(void)
{
    if (raw_listener >= 0 && memcmp(raw_listening, R.me.token, XFER_TOKEN_BYTES) == 0)
        return;
    if (raw_listener >= 0)
        close(raw_listener);
    raw_listener = -1;
    uint8_t name[XFER_MAC_BYTES];
    xfer_cma_socket_name(R.me.token, R.me.from, name);
    int e = xfer_cma_listen(name, &raw_listener);
    if (e)
        tap_diag("the raw peer cannot listen: %s", strerror(e));
    memcpy(raw_listening, R.me.token, XFER_TOKEN_BYTES);
}

static void send_cma_as(uint32_t pid, uint64_t addr)
{
    struct wire_cma c;
    memset(&c, 0, sizeof(c));
    c.h = raw_hdr(&R, 0);
    c.cookie = addr;
    c.pid = pid;
    xfer_cma_host(c.host);
    raw_session_send(&R, WIRE_CMA, &c, sizeof(c), NULL, 0, false);
}

static void send_cma(const uint8_t *cookie)
{
    raw_listen();
    send_cma_as((uint32_t)getpid(), (uint64_t)(uintptr_t)cookie);
}

/* The cookie and one announced range. */
static void offer_one(uint32_t kind, uint64_t addr, uint64_t len)
{
    memset(&raw_offer, 0, sizeof(raw_offer));
    xfer_cma_cookie(R.me.token, R.me.from, raw_offer.cookie);
    raw_offer.nranges = 1;
    raw_offer.ranges[0] = (struct xfer_range){addr, len, kind, 0};
}

static void honest_cma(void)
{
    offer_one(XFER_RANGE_CACHE, (uint64_t)(uintptr_t)junk, sizeof(junk));
    send_cma((const uint8_t *)&raw_offer);
}

static void send_ref(uint64_t xid, uint64_t k, uint64_t addr, uint64_t len)
{
    struct wire_data d = {raw_hdr(&R, xid), k, WIRE_DATA_REF, 0};
    struct wire_ref ref = {addr, len, 0, 0};
    raw_session_send(&R, WIRE_DATA, &d, sizeof(d), &ref, sizeof(ref), false);
}

static void ref_unoffered(void)
{
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
    send_ref(1, 0, (uint64_t)(uintptr_t)junk, CHUNK);
}

static void cma_not_its_cookie(void)
{
    static const uint8_t wrong[XFER_MAC_BYTES] = {1, 2, 3};
    send_cma(wrong);
}

/* More ranges than a peer may announce. */
static void cma_too_many_ranges(void)
{
    offer_one(XFER_RANGE_CACHE, (uint64_t)(uintptr_t)junk, sizeof(junk));
    raw_offer.nranges = XFER_REF_RANGES + 1;
    send_cma((const uint8_t *)&raw_offer);
}

/* A range that wraps past 2^64. */
static void cma_wrapping_range(void)
{
    offer_one(XFER_RANGE_CACHE, UINT64_MAX - 4095, 8192);
    send_cma((const uint8_t *)&raw_offer);
}

static void cma_twice(void)
{
    honest_cma();
    honest_cma();
}

static void ref_to_nothing(void)
{
    /* Announced, so that the range check passes and the read itself
     * finds no memory there. */
    offer_one(XFER_RANGE_CACHE, 4096, CHUNK);
    send_cma((const uint8_t *)&raw_offer);
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
    send_ref(1, 0, 4096, CHUNK); /* the first page is never mapped */
}

/* A push of two scratch blocks given by reference at addr, len (the raw
 * peer announced `junk` as its cache). */
static void ref_push(uint64_t addr, uint64_t len)
{
    honest_cma();
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
    send_ref(1, 0, addr, len);
}

static void ref_outside(void)
{
    ref_push((uint64_t)(uintptr_t)beyond, CHUNK);
}

static void ref_straddling(void)
{
    ref_push((uint64_t)(uintptr_t)junk + CHUNK / 2, CHUNK);
}

static void ref_huge(void)
{
    ref_push((uint64_t)(uintptr_t)junk, UINT64_MAX - 4095);
}

/* A sealed chunk (a send slot's) at the announced cache: of the wrong kind. */
static void ref_sealed_in_cache(void)
{
    honest_cma();
    int64_t ids[2] = {SCRATCH, SCRATCH + 1};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
    struct wire_data d = {raw_hdr(&R, 1), 0, WIRE_DATA_REF, 0};
    static uint64_t seal = 7;
    struct wire_ref ref = {(uint64_t)(uintptr_t)junk, CHUNK, (uint64_t)(uintptr_t)&seal, seal};
    raw_session_send(&R, WIRE_DATA, &d, sizeof(d), &ref, sizeof(ref), false);
}

static void release_never_begun(void)
{
    struct wire_release r = {raw_hdr(&R, 777), 0, 0, 0};
    raw_session_send(&R, WIRE_RELEASE, &r, sizeof(r), NULL, 0, false);
}

static bool acked_ok(void)
{
    for (size_t k = 0; k < R.ngot; k++)
        if (R.got[k].id == WIRE_ACK) {
            struct wire_status st;
            memcpy(&st, R.got[k].hdr, sizeof(st));
            if (st.status == KVRT_OK)
                return true;
        }
    return false;
}

/* Each case in a session of its own: one violation, one line naming the
 * peer, nothing acknowledged, notified or written. */
static void run_breaches(const struct breach *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int p = session();
        if (p < 0) {
            tap_ok(false, "%s: a session for it", cases[i].what);
            continue;
        }
        char name[128] = "";
        sscanf(cmd(&V, "newest"), "newest %*d %127s", name);
        struct events before = events();
        unsigned long long failed_before = metric("kvrt_xfer_failures_total{reason=\"violation\"}");
        cases[i].send();
        double deadline = now() + 5;
        while (events().violations == before.violations && now() < deadline)
            raw_pump(&R, 0.01, NULL, NULL);
        raw_pump(&R, 0.05, NULL, NULL);
        struct events after = events();
        bool said = last_says("lastlog", cases[i].says, 1) && last_says("lastlog", name, 1);
        char line[1024];
        snprintf(line, sizeof(line), "%.1000s", reply + 8);
        /* A stream the violation ended counts as failed for it (a case
         * without a stream, e.g. CMA twice, ends none). */
        unsigned long long failed = metric("kvrt_xfer_failures_total{reason=\"violation\"}") - failed_before;
        tap_ok(after.violations == before.violations + 1 && said && !acked_ok() && after.notes == before.notes &&
                   untouched() && failed <= 1 && (failed == 1 || !cases[i].stream),
               "%s fails that peer with one line naming it (\"%s\"), acknowledges and notifies nothing (%llu "
               "transfers failed for a violation)",
               cases[i].what, line, failed);
        end_session(p);
    }
}

static void breaches(void)
{
    static const struct breach cases[] = {
        {"a chunk sent twice", "twice", dup_chunk, true},
        {"a chunk index past the stream", "which has 1 chunks", chunk_out_of_range, true},
        {"a chunk of the wrong length", "bytes; it has", chunk_wrong_length, true},
        {"data for a stream never begun", "before its BEGIN", data_before_begin, false},
        {"a BEGIN naming a block past the cache", "out of range", ids_out_of_range, false},
        {"a push naming one block twice", "appears twice", ids_repeated, false},
        {"a BEGIN announcing the wrong total", "announced", total_wrong, false},
        {"a stream id that goes back", "only grow", xid_backwards, false},
        {"a BEGIN whose count disagrees with its data", "naming 3 blocks", count_mismatch, false},
        {"a BEGIN of an unknown kind", "kind 7", bad_kind, false},
        {"an ACK for a stream never begun", "never began", ack_never_begun, false},
        {"a notification for a stream never begun", "never began", notify_never_begun, false},
        {"a reserved field set", "reserved field", reserved_set, false},
        {"a header cut short", "36-byte header", short_header, false},
        {"READY twice", "READY twice", second_ready, false},
        {"a whole-block BEGIN with a first token", "both must be 0", tokens_whole_with_first, false},
        {"a token range without segments", "segments of 1..", tokens_no_segment, false},
        {"a token range naming more blocks than it touches", "which touch 1", tokens_more_blocks_than_touched, false},
        {"a chunk by reference from a peer the victim never read", "did not offer to read", ref_unoffered, true},
        {"CMA twice", "sent CMA twice", cma_twice, false},
        {"a RELEASE for a stream never begun", "never began", release_never_begun, false},
    };
    /* Only where the victim reads its peers' memory (cma.h). */
    static const struct breach one_host[] = {
        {"a CMA naming memory without the session's cookie", "does not hold its session cookie", cma_not_its_cookie,
         false},
        {"a chunk by reference at memory the peer does not have", "cannot give", ref_to_nothing, true},
        {"a chunk by reference outside the ranges its peer announced", "outside the cache ranges", ref_outside, true},
        {"a chunk by reference straddling the end of an announced range", "outside the cache ranges", ref_straddling,
         true},
        {"a chunk by reference of a huge length", "outside the cache ranges", ref_huge, true},
        {"a sealed chunk by reference in the announced cache", "outside the staging and seal ranges",
         ref_sealed_in_cache, true},
        {"a CMA announcing more ranges than allowed", "announced 9 ranges", cma_too_many_ranges, false},
        {"a CMA announcing a range that wraps", "ending below 2^64", cma_wrapping_range, false},
    };
    size_t n = sizeof(cases) / sizeof(cases[0]), m = sizeof(one_host) / sizeof(one_host[0]);
    run_breaches(cases, n);
    const char *no_cma;
    if (xfer_cma_allowed(&no_cma))
        run_breaches(one_host, m);
    else
        for (size_t i = 0; i < m; i++)
            tap_skip("%s: the victim reads no peer's memory here (%s)", one_host[i].what, no_cma);
    tap_ok(honest_push_works(), "after %zu broken sessions the victim serves its honest peer", n + m);
}

/* ---- an insider: a keyed peer granted rw 96-97, r 100-101 ---------------------- */

/* The victim's CMA_OK to the raw peer's CMA: its status, or INT32_MIN when
 * none came. */
static int32_t cma_answer(double seconds)
{
    struct raw_got *g = raw_wait(&R, WIRE_CMA_OK, seconds);
    if (!g || g->hlen < sizeof(struct wire_status))
        return INT32_MIN;
    struct wire_status st;
    memcpy(&st, g->hdr, sizeof(st));
    return st.status;
}

/* The victim's own CMA offer to the raw peer (it makes one once the
 * session is open, where it reads and is read). */
static bool victim_offered(double seconds)
{
    return raw_wait(&R, WIRE_CMA, seconds) != NULL;
}

/* One insider step in a fresh session with grants rw:96-97, r:100-101:
 * `step` runs, and the victim must answer as `want_violation` says (a
 * violation naming `says`, or none), acknowledge nothing and leave every
 * block below SCRATCH as it was. */
static void insider(const char *what, bool (*step)(void), bool want_violation, const char *says)
{
    int p = session();
    if (p < 0) {
        tap_ok(false, "%s: a session for it", what);
        return;
    }
    bool granted = strcmp(cmd(&V, "grant %d rw 96,97", p), "granted") == 0;
    if (!granted || strcmp(cmd(&V, "grant %d r 100,101", p), "granted") != 0) {
        tap_diag("%s", reply);
        granted = false;
    }
    struct events before = events();
    bool stepped = step();
    double deadline = now() + (want_violation ? 5 : 1);
    while (events().violations == before.violations && now() < deadline)
        raw_pump(&R, 0.01, NULL, NULL);
    raw_pump(&R, 0.05, NULL, NULL);
    struct events after = events();
    bool said = !want_violation || last_says("lastlog", says, 1);
    bool acked = acked_ok(), kept = untouched();
    if (!granted || !stepped || acked || !kept)
        tap_diag("granted %d, stepped %d, acknowledged %d, blocks kept %d", granted, stepped, acked, kept);
    tap_ok(granted && stepped && after.violations == before.violations + (want_violation ? 1 : 0) && said && !acked &&
               kept,
           "insider: %s (%llu violations)", what, after.violations - before.violations);
    end_session(p);
}

/* (1) The victim offers to be read; the insider answers CMA_OK 0 without
 * having read anything: no proof, so its link fails and no address of
 * the victim's ever reaches it. */
static bool bare_cma_ok(void)
{
    if (!victim_offered(3))
        return false;
    struct wire_status st = {raw_hdr(&R, 0), KVRT_OK, 0};
    return raw_session_send(&R, WIRE_CMA_OK, &st, sizeof(st), NULL, 0, false);
}

/* (1') The same with 32 bytes that are not the MAC of the challenge. */
static bool forged_cma_ok(void)
{
    if (!victim_offered(3))
        return false;
    struct wire_status st = {raw_hdr(&R, 0), KVRT_OK, 0};
    uint8_t proof[XFER_MAC_BYTES];
    xfer_random(proof, sizeof(proof));
    return raw_session_send(&R, WIRE_CMA_OK, &st, sizeof(st), proof, sizeof(proof), false);
}

/* (2)+(5) With no proven reader, a pull by reference comes by value; a
 * push "by reference" is a violation: the victim never reads for it. */
static bool ref_push_at_victim(void)
{
    int64_t ids[2] = {96, 97};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
    send_ref(1, 0, (uint64_t)(uintptr_t)junk, CHUNK);
    return true;
}

/* (4) A CMA naming the victim's own process: declined (nothing is read
 * there, whatever lies at the address), and a chunk by reference after it
 * is a violation. */
static bool cma_names_victim(void)
{
    raw_listen();
    send_cma_as((uint32_t)V.pid, 4096);
    int32_t st = cma_answer(3);
    if (st == INT32_MIN || st == KVRT_OK) {
        tap_diag("the victim answered a CMA naming itself with %d", st);
        return false;
    }
    return ref_push_at_victim();
}

/* (4') A CMA naming the honest peer's process (a real agent of the same
 * user) while the raw peer listens on the session's socket: the kernel
 * says whose socket it is, and the claim is a violation. */
static bool cma_names_other(void)
{
    offer_one(XFER_RANGE_CACHE, (uint64_t)(uintptr_t)junk, sizeof(junk));
    raw_listen();
    send_cma_as((uint32_t)L.pid, (uint64_t)(uintptr_t)&raw_offer);
    return true;
}

/* (4'') The same without the socket: no process of the session listens,
 * so the victim declines to read (another namespace looks so too). */
static bool cma_names_other_unheard(void)
{
    if (raw_listener >= 0)
        close(raw_listener);
    raw_listener = -1;
    send_cma_as((uint32_t)L.pid, 4096);
    int32_t st = cma_answer(3);
    return st != INT32_MIN && st != KVRT_OK;
}

/* (6) A pull of what it was granted, by reference where the victim would
 * give references: only with a proven reader, which this peer is not. */
static bool pull_granted_by_ref(void)
{
    struct wire_begin b;
    memset(&b, 0, sizeof(b));
    b.h = raw_hdr(&R, 1);
    b.kind = WIRE_PULL;
    b.flags = WIRE_BEGIN_REFS;
    b.order = WIRE_ORDER_STAGING;
    b.count = 2;
    b.num_layers = vmd.cache.num_layers;
    b.num_heads = vmd.cache.layers[0].heads;
    b.chunk_bytes = CHUNK;
    b.total_bytes = 2 * vmd.cache.staging_per_block;
    int64_t ids[2] = {100, 101};
    raw_session_send(&R, WIRE_BEGIN, &b, sizeof(b), ids, sizeof(ids), false);
    raw_pump(&R, 1, NULL, NULL);
    for (size_t k = 0; k < R.ngot; k++)
        if (R.got[k].id == WIRE_DATA && R.got[k].hlen >= sizeof(struct wire_data)) {
            struct wire_data d;
            memcpy(&d, R.got[k].hdr, sizeof(d));
            if (d.flags & WIRE_DATA_REF) {
                tap_diag("the victim gave an unproven reader a reference");
                return false;
            }
        }
    return true;
}

/* The status of the victim's answer `id` (ACK or END) for stream xid, or
 * INT32_MIN when none came. */
static int32_t answer_status(unsigned id, uint64_t xid, double seconds)
{
    double deadline = now() + seconds;
    do {
        for (size_t k = 0; k < R.ngot; k++)
            if (R.got[k].id == id && R.got[k].hlen >= sizeof(struct wire_status)) {
                struct wire_status st;
                memcpy(&st, R.got[k].hdr, sizeof(st));
                if (st.h.xid == xid)
                    return st.status;
            }
        raw_pump(&R, 0.01, NULL, NULL);
    } while (now() < deadline);
    return INT32_MIN;
}

/* (7) A push into blocks it was not granted (below SCRATCH, the honest
 * peer's): refused before a byte lands, counted as not granted, no
 * violation. */
static bool push_not_granted(void)
{
    unsigned long long denied = events().denied;
    int64_t ids[2] = {10, 11};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
    send_chunk(1, 0, CHUNK, 0);
    int32_t st = answer_status(WIRE_ACK, 1, 3);
    unsigned long long now_denied = events().denied;
    if (st != KVRT_ERR_REFUSED || now_denied != denied + 1)
        tap_diag("a push outside its grants: status %d, denied %llu -> %llu", st, denied, now_denied);
    return st == KVRT_ERR_REFUSED && now_denied == denied + 1 && last_says("lastlog", "not granted", 1);
}

/* (7') One granted block and one not: the whole push is refused. */
static bool push_half_granted(void)
{
    int64_t ids[2] = {96, 98};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
    send_chunk(1, 0, CHUNK, 0);
    return answer_status(WIRE_ACK, 1, 3) == KVRT_ERR_REFUSED;
}

/* (8) A pull of blocks granted for writing only, and of blocks never
 * granted: refused, nothing sent. */
static bool pull_not_granted_ids(int64_t a, int64_t b2)
{
    struct wire_begin b;
    memset(&b, 0, sizeof(b));
    b.h = raw_hdr(&R, 1);
    b.kind = WIRE_PULL;
    b.order = WIRE_ORDER_STAGING;
    b.count = 2;
    b.num_layers = vmd.cache.num_layers;
    b.num_heads = vmd.cache.layers[0].heads;
    b.chunk_bytes = CHUNK;
    b.total_bytes = 2 * vmd.cache.staging_per_block;
    int64_t ids[2] = {a, b2};
    raw_session_send(&R, WIRE_BEGIN, &b, sizeof(b), ids, sizeof(ids), false);
    int32_t st = answer_status(WIRE_END, 1, 3);
    for (size_t k = 0; k < R.ngot; k++)
        if (R.got[k].id == WIRE_DATA) {
            tap_diag("the victim sent data for a pull it refused");
            return false;
        }
    return st == KVRT_ERR_REFUSED;
}

static bool pull_not_granted(void)
{
    return pull_not_granted_ids(20, 21);
}

static bool pull_write_only(void)
{
    /* 96 and 97 are granted rw; 98 is not granted at all. */
    return pull_not_granted_ids(97, 98);
}

/* (9) A proven reader of the raw peer (the victim read its cookie) that
 * pushes into its granted blocks by reference outside the ranges it
 * announced: a violation, nothing read. */
static bool granted_ref_outside(void)
{
    honest_cma();
    if (cma_answer(3) != KVRT_OK)
        return false;
    int64_t ids[2] = {96, 97};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
    send_ref(1, 0, (uint64_t)(uintptr_t)beyond, CHUNK);
    return true;
}

/* (9') The same inside the announced range: read and acknowledged, the
 * bytes exactly the raw peer's (the check refuses only what it must). */
static void granted_ref_inside(void)
{
    int p = session();
    bool granted = p >= 0 && strcmp(cmd(&V, "grant %d rw 96,97", p), "granted") == 0;
    struct events before = events();
    honest_cma();
    int32_t st = cma_answer(3);
    int64_t ids[2] = {96, 97};
    struct wire_begin b = push_begin(1, 2);
    send_begin(&b, ids);
    send_ref(1, 0, (uint64_t)(uintptr_t)junk, CHUNK);
    int32_t ack = answer_status(WIRE_ACK, 1, 5);
    struct events after = events();
    tap_ok(granted && st == KVRT_OK && ack == KVRT_OK && after.violations == before.violations && untouched(),
           "insider: a chunk by reference inside its announced cache range lands in its granted blocks (CMA_OK %d, "
           "ACK %d)",
           st, ack);
    end_session(p);
}

static void insiders(void)
{
    /* Only the insider's own grants from here on. */
    bool revoked = grant_range(false, -1, "rw", SCRATCH, BLOCKS);
    tap_ok(revoked, "the victim takes back the blocks it granted every peer");
    insider("a push into blocks not granted is refused and counted as not granted", push_not_granted, false, "");
    insider("a push into one granted block and one not is refused whole", push_half_granted, false, "");
    insider("a pull of blocks never granted is refused", pull_not_granted, false, "");
    insider("a pull of blocks granted for writing only is refused", pull_write_only, false, "");
    const char *no_cma;
    if (!xfer_cma_allowed(&no_cma) || !keyed) {
        tap_skip("an insider on the same host: %s", keyed ? no_cma : "runs with a key (test-xfer-attack key)");
        tap_ok(grant_range(true, -1, "rw", SCRATCH, BLOCKS), "every peer is granted %d..%d again", SCRATCH, BLOCKS - 1);
        return;
    }
    insider("a proven reader's chunk by reference outside its announced ranges fails its link", granted_ref_outside,
            true, "outside the cache ranges");
    granted_ref_inside();
    insider("a bare CMA_OK 0 (it read nothing) fails its link", bare_cma_ok, true, "proof");
    insider("a CMA_OK 0 with a forged proof fails its link", forged_cma_ok, true, "without proof");
    insider("a pull by reference of granted blocks comes by value to an unproven reader", pull_granted_by_ref, false,
            "");
    insider("a CMA naming the victim's own process is declined; a chunk by reference then fails its link",
            cma_names_victim, true, "did not offer to read");
    insider("a CMA naming another agent's process is refused by what the kernel says", cma_names_other, true,
            "the kernel says");
    insider("a CMA naming another process, no socket of the session's heard, is declined", cma_names_other_unheard,
            false, "");
    tap_ok(grant_range(true, -1, "rw", SCRATCH, BLOCKS), "every peer is granted %d..%d again", SCRATCH, BLOCKS - 1);
}

static void missing_chunk(void)
{
    int p = session();
    struct events before = events();
    int64_t ids[4] = {SCRATCH, SCRATCH + 1, SCRATCH + 2, SCRATCH + 3};
    struct wire_begin b = push_begin(1, 4);
    bool sent = p >= 0 && send_begin(&b, ids) && send_chunk(1, 0, CHUNK, 0);
    double t0 = now();
    bool failed = p >= 0 && last_says("lastfailed", "no progress", TIMEOUT + 5);
    raw_pump(&R, 0.1, NULL, NULL);
    tap_ok(sent && failed && !acked_ok() && events().notes == before.notes,
           "a push whose second chunk never comes is never acknowledged; its peer fails after %.1f s", now() - t0);
    end_session(p);
}

/* ---- E: the victim's own transfers, answered by a liar --------------------------- */

static void lying_acks(void)
{
    static const int32_t lies[] = {KVRT_XFER_PENDING, 12345, -99};
    for (size_t i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
        int p = session();
        int h = -1;
        if (p >= 0)
            sscanf(cmd(&V, "post %d push 10,11 0,1", p), "posted %d", &h);
        struct raw_got *begin = raw_wait(&R, WIRE_BEGIN, 5);
        struct raw_got *data = raw_wait(&R, WIRE_DATA, 5);
        static uint8_t buf[CHUNK];
        bool took = data && (!data->rndv || raw_take_data(&R, data, buf, data->len));
        struct wire_begin b;
        memset(&b, 0, sizeof(b));
        if (begin)
            memcpy(&b, begin->hdr, sizeof(b));
        struct wire_status ack = {raw_hdr(&R, b.h.xid), lies[i], 0};
        raw_session_send(&R, WIRE_ACK, &ack, sizeof(ack), NULL, 0, false);
        double t0 = now();
        int rc = KVRT_OK;
        const char *r = h >= 0 ? cmd(&V, "wait %d 10", h) : "no post";
        sscanf(r, "done %d", &rc);
        char why[64];
        snprintf(why, sizeof(why), "invalid status %d", (int)lies[i]);
        tap_ok(h >= 0 && took && rc != KVRT_OK && rc != KVRT_XFER_PENDING && strstr(r, why) && now() - t0 < 5,
               "an ACK with status %d fails the victim's push in %.2f s: %s", (int)lies[i], now() - t0, r);
        end_session(p);
    }
}

enum lie { DUP, HALF, END1, END0, PAST, SHORT, STRANGE };

static void lying_pull(enum lie lie, const char *what, const char *says)
{
    int p = session();
    int h = -1;
    if (p >= 0)
        sscanf(cmd(&V, "post %d pull %d,%d,%d,%d 0,1,2,3", p, SCRATCH + 4, SCRATCH + 5, SCRATCH + 6, SCRATCH + 7),
               "posted %d", &h);
    struct raw_got *begin = raw_wait(&R, WIRE_BEGIN, 5);
    struct wire_begin b;
    memset(&b, 0, sizeof(b));
    if (begin)
        memcpy(&b, begin->hdr, sizeof(b));
    uint64_t xid = b.h.xid, c = b.chunk_bytes;
    switch (lie) {
    case DUP:
        send_chunk(xid, 0, c, WIRE_DATA_REPLY);
        send_chunk(xid, 0, c, WIRE_DATA_REPLY);
        break;
    case HALF: send_chunk(xid, 0, c, WIRE_DATA_REPLY); break;
    case END1:
    case END0: {
        struct wire_status e = {raw_hdr(&R, xid), lie == END1 ? 1 : 0, 0};
        raw_session_send(&R, WIRE_END, &e, sizeof(e), "no", 2, false);
        break;
    }
    case PAST: send_chunk(xid, 9, c, WIRE_DATA_REPLY); break;
    case SHORT: send_chunk(xid, 1, c / 2, WIRE_DATA_REPLY); break;
    default: send_chunk(xid + 100, 0, c, WIRE_DATA_REPLY); break;
    }
    double t0 = now();
    int rc = KVRT_OK;
    const char *r = h >= 0 ? cmd(&V, "wait %d %d", h, TIMEOUT + 5) : "no post";
    sscanf(r, "done %d", &rc);
    tap_ok(begin && b.kind == WIRE_PULL && rc != KVRT_OK && rc != KVRT_XFER_PENDING && strstr(r, says) && untouched(),
           "a pull answered with %s fails in %.2f s, never complete: %s", what, now() - t0, r);
    end_session(p);
}

static void lying_pulls(void)
{
    lying_pull(DUP, "a chunk twice", "twice");
    lying_pull(HALF, "half its chunks", "no progress");
    lying_pull(END1, "END of status 1", "invalid status 1");
    lying_pull(END0, "END of status 0", "END with status 0");
    lying_pull(PAST, "a chunk past the end", "which has 2 chunks");
    lying_pull(SHORT, "a short chunk", "bytes; it has");
    lying_pull(STRANGE, "a reply for a stream it never asked for", "never asked for");
}

/* ---- F: floods ------------------------------------------------------------------ */

static void flood(void)
{
    int p = session();
    struct events before = events();
    /* Many pushes begun at once: past the per-peer limit they are refused,
     * not the peer. */
    int64_t ids[1] = {SCRATCH + 8};
    bool ok = p >= 0;
    for (uint64_t x = 1; ok && x <= 1100; x++) {
        struct wire_begin b = push_begin(x, 1);
        ok = send_begin(&b, ids);
    }
    raw_pump(&R, 0.5, NULL, NULL);
    size_t refused = 0;
    for (size_t k = 0; k < R.ngot; k++)
        if (R.got[k].id == WIRE_ACK) {
            struct wire_status st;
            memcpy(&st, R.got[k].hdr, sizeof(st));
            refused += st.status == KVRT_ERR_REFUSED;
        }
    const char *st = p >= 0 ? cmd(&V, "peerstate %d", p) : "none";
    tap_ok(ok && refused >= 1100 - 1024 && strncmp(st, "peerstate 0", 11) == 0 &&
               events().violations == before.violations,
           "1100 pushes begun at once: %zu refused past the limit of 1024 under way, the peer stays (%s)", refused, st);
    end_session(p);
    before = events();
    bool ran = stranger("flood", NULL);
    struct events after = events();
    tap_ok(ran && after.strangers >= before.strangers + 2900 && untouched(),
           "3000 random messages from a stranger are dropped (%llu)", after.strangers - before.strangers);
    tap_ok(honest_push_works(), "and the victim serves its honest peer");
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    if (argc == 3 && strcmp(argv[1], "--probe-address") == 0)
        return probe_address(argv[2]);
    if (argc >= 4 && strcmp(argv[1], "--stranger") == 0)
        return stranger_main(argc, argv);
    int rc = side_main(argc, argv);
    if (rc >= 0)
        return rc;
    keyed = argc > 1 && strcmp(argv[1], "key") == 0;
    /* The raw peer stands for a kvrt agent, whose process sets this before
     * its first UCX context (xfer/transport.c): two workers that open
     * endpoints to each other must agree on their transports' settings,
     * or UCX 1.13 aborts in its wire-up (docs/xfer.md, "Faults"). */
    if (!getenv("UCX_CMA_MEMORY_INVALIDATE"))
        setenv("UCX_CMA_MEMORY_INVALIDATE", "y", 0);
    if (!getenv("UCX_TCP_PUT_ENABLE"))
        setenv("UCX_TCP_PUT_ENABLE", "n", 0);
    char key_path[] = "/tmp/kvrt-attack-key-XXXXXX";
    if (keyed) {
        int fd = mkstemp(key_path);
        uint8_t key[32];
        xfer_random(key, sizeof(key));
        if (fd < 0 || write(fd, key, sizeof(key)) != (ssize_t)sizeof(key)) {
            tap_ok(false, "a key file");
            return tap_done();
        }
        close(fd);
        tap_diag("victim, honest peer and raw peer share the key %s", key_path);
    }
    char blocks[16], timeout[16], flags[16];
    snprintf(blocks, sizeof(blocks), "%d", BLOCKS);
    snprintf(timeout, sizeof(timeout), "%d", TIMEOUT);
    snprintf(flags, sizeof(flags), "%u", (unsigned)KVRT_XFER_REQUIRE_GRANTS);
    const char *vargs[] = {"--listen", "--log", "--blocks",   blocks,   "--timeout", timeout,
                           "--flags",  flags,   "--key-file", key_path, NULL};
    const char *largs[] = {"--seed", "7", "--blocks", blocks, "--timeout", timeout, "--key-file", key_path, NULL};
    if (!keyed)
        vargs[8] = largs[6] = NULL;
    if (!child_start(&V, self_path, vargs) || !child_start(&L, self_path, largs)) {
        tap_ok(false, "the victim and its honest peer start");
        return tap_done();
    }
    port = (uint16_t)V.port;
    vmd_hex = to_hex(V.md, V.md_len);
    if (xfer_md_parse((const uint8_t *)V.md, V.md_len, &vmd) != KVRT_OK ||
        xfer_md_parse((const uint8_t *)L.md, L.md_len, &lmd) != KVRT_OK || !raw_open(&R, vmd.cache.placement) ||
        (keyed && xfer_key_load(key_path, "the test", &R.key) != KVRT_OK)) {
        tap_ok(false, "set-up: %s", kvrt_error_message());
        return tap_done();
    }
    xfer_random(junk, sizeof(junk));
    int lp = -1;
    bool connected = sscanf(cmd(&L, "connect %u", port), "peer %d", &lp) == 1 && lp == 0;
    honest_peer = accepted(5);
    tap_ok(connected && honest_peer >= 0, "an honest peer connects to the victim");
    tap_ok(honest_peer >= 0 && grant_range(true, honest_peer, "rw", 0, SCRATCH) &&
               grant_range(true, -1, "rw", SCRATCH, BLOCKS),
           "the victim, which requires grants, grants its honest peer blocks 0..%d and every peer %d..%d", SCRATCH - 1,
           SCRATCH, BLOCKS - 1);
    tap_ok(honest_push_works(), "and pushes into it");

    static const struct {
        const char *name;
        void (*run)(void);
    } groups[] = {
        {"garbage_metadata", garbage_metadata},
        {"malformed_hellos", malformed_hellos},
        {"hello_and_vanish", hello_and_vanish},
        {"out_of_turn", out_of_turn},
        {"no_ready", no_ready},
        {"stall", stall},
        {"stolen_id", stolen_id},
        {"unknown_ids", unknown_ids},
        {"breaches", breaches},
        {"insiders", insiders},
        {"missing_chunk", missing_chunk},
        {"lying_acks", lying_acks},
        {"lying_pulls", lying_pulls},
        {"flood", flood},
        {"garbage_addresses", garbage_addresses},
    };
    /* KVRT_ATTACK_ONLY=name,name runs those groups alone (while debugging). */
    const char *only = getenv("KVRT_ATTACK_ONLY");
    for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
        if (!only || strstr(only, groups[i].name))
            groups[i].run();

    tap_ok(untouched(), "the victim's blocks below %d hold exactly their pattern and the honest pushes", SCRATCH);
    if (raw_listener >= 0)
        close(raw_listener);
    raw_close(&R);
    child_clean(&V, "the victim after every attack");
    int vs = child_stop(&V), ls = child_stop(&L);
    tap_ok(vs == 0 && ls == 0, "both children end cleanly, their memory handed back (exit %d, %d)", vs, ls);
    xfer_md_free(&vmd);
    xfer_md_free(&lmd);
    free(vmd_hex);
    if (keyed)
        unlink(key_path);
    return tap_done();
}
