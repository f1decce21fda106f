/*
 * Who may connect, and what a peer may touch: the pre-shared key (its file,
 * the handshake's proofs, signed metadata), the rules for listening beyond
 * loopback, the allow list, and grants.  The serving agent is a child
 * process (xfer_side.h); this process holds the connecting agents and, for
 * the replayed handshake, a raw UCP peer (raw_peer.h).  After every
 * refusal the child's cache is checked byte for byte: nothing moved.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "raw_peer.h"
#include "tap.h"
#include "xfer_side.h"

static const char *self;
static char dir[] = "/tmp/kvrt-auth-XXXXXX";
static char key_a[256], key_b[256], key_loose[256], key_short[256];

static void write_key(char *path, size_t size, const char *name, size_t bytes, mode_t mode)
{
    snprintf(path, size, "%s/%s", dir, name);
    uint8_t k[64];
    xfer_random(k, sizeof(k));
    /* a last byte of '\n' would not count (a trailing newline is no part
     * of a key): the file would hold one byte less than asked */
    if (bytes && k[bytes - 1] == '\n')
        k[bytes - 1] ^= 1;
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(k, 1, bytes, f);
        fclose(f);
    }
    chmod(path, mode);
}

static char reply[1 << 16];

static const char *cmd(struct child *c, const char *fmt, ...) KVRT_PRINTF(2, 3);

static const char *cmd(struct child *c, const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (!child_cmd(c, line, reply, sizeof(reply), 30))
        snprintf(reply, sizeof(reply), "error no answer to \"%s\"", line);
    return reply;
}

static bool unchanged(struct child *c)
{
    unsigned long long bad = 1;
    return sscanf(cmd(c, "verify-below 128"), "verify-below %llu", &bad) == 1 && bad == 0;
}

/* A server child: listening, with these options. */
static bool serve(struct child *c, const char *key, const char *flags, const char *allow)
{
    const char *args[12] = {"--listen", "--log", "--timeout", "3"};
    int n = 4;
    if (key) {
        args[n++] = "--key-file";
        args[n++] = key;
    }
    if (flags) {
        args[n++] = "--flags";
        args[n++] = flags;
    }
    if (allow) {
        args[n++] = "--allow";
        args[n++] = allow;
    }
    args[n] = NULL;
    return child_start(c, self, args);
}

static int open_side(struct side *s, const char *key, uint32_t flags)
{
    struct side_opts o;
    side_opts_default(&o);
    o.seed = 9;
    o.timeout_s = 3;
    o.key_file = key;
    o.flags = flags;
    return side_open(s, &o);
}

/* ---- the key file ------------------------------------------------------------- */

static void key_files(void)
{
    static const struct {
        const char *what;
        const char *path_of;
        const char *says;
    } bad[] = {
        {"a key file others may read", "loose", "mode 0644"},
        {"a key of 8 bytes", "short", "8-byte key"},
        {"a key file that is not there", "missing", "cannot open"},
        {"a folder for a key file", "folder", "not a regular file"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char missing[300], *path = key_loose;
        snprintf(missing, sizeof(missing), "%s/none", dir);
        if (strcmp(bad[i].path_of, "short") == 0)
            path = key_short;
        else if (strcmp(bad[i].path_of, "missing") == 0)
            path = missing;
        else if (strcmp(bad[i].path_of, "folder") == 0)
            path = dir;
        struct side s;
        int rc = open_side(&s, path, 0);
        const char *m = kvrt_error_message();
        tap_ok(rc == KVRT_ERR_INVALID && strstr(m, bad[i].says) && strstr(m, path),
               "%s is refused, naming the file: %s", bad[i].what, m);
        side_close(&s);
    }
    setenv("KVRT_XFER_KEY_FILE", key_loose, 1);
    struct side s;
    int rc = open_side(&s, NULL, 0);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "KVRT_XFER_KEY_FILE"),
           "the same through KVRT_XFER_KEY_FILE names the variable: %s", kvrt_error_message());
    side_close(&s);
    setenv("KVRT_XFER_KEY_FILE", key_a, 1);
    rc = open_side(&s, NULL, 0);
    void *blob = NULL;
    size_t len = 0;
    struct kvrt_xfer_metadata_info info = {.size = sizeof(info)};
    bool signed_ = rc == KVRT_OK && kvrt_xfer_metadata_export(s.a, &blob, &len) == KVRT_OK &&
                   kvrt_xfer_metadata_parse(blob, len, &info) == KVRT_OK && info.is_signed;
    tap_ok(signed_, "a good key through KVRT_XFER_KEY_FILE: the agent's metadata is signed");
    kvrt_free(blob);
    side_close(&s);
    unsetenv("KVRT_XFER_KEY_FILE");
}

/* ---- listening and connecting beyond loopback --------------------------------- */

static void exposure(void)
{
    struct side s;
    uint16_t port;
    if (open_side(&s, NULL, 0) != KVRT_OK) {
        tap_ok(false, "an agent: %s", kvrt_error_message());
        return;
    }
    int rc = kvrt_xfer_listen(s.a, "0.0.0.0", 0, &port);
    tap_ok(rc == KVRT_ERR_REFUSED && strstr(kvrt_error_message(), "without a key") &&
               strstr(kvrt_error_message(), "key_file") && strstr(kvrt_error_message(), "KVRT_XFER_INSECURE"),
           "listening on 0.0.0.0 without a key is refused, saying how to add one: %s", kvrt_error_message());
    kvrt_xfer_peer *p;
    rc = kvrt_xfer_connect(s.a, "10.255.255.1", 9, &p);
    tap_ok(rc == KVRT_ERR_REFUSED && strstr(kvrt_error_message(), "without a key"),
           "connecting to 10.255.255.1 without a key is refused before anything is sent: %s", kvrt_error_message());
    rc = kvrt_xfer_listen(s.a, "127.0.0.1", 0, &port);
    tap_ok(rc == KVRT_OK, "loopback needs no key");
    side_close(&s);
    if (open_side(&s, NULL, KVRT_XFER_INSECURE) == KVRT_OK) {
        rc = kvrt_xfer_listen(s.a, "0.0.0.0", 0, &port);
        tap_ok(rc == KVRT_OK, "with KVRT_XFER_INSECURE, 0.0.0.0 is the caller's choice");
    }
    side_close(&s);
    if (open_side(&s, key_a, 0) == KVRT_OK) {
        rc = kvrt_xfer_listen(s.a, "0.0.0.0", 0, &port);
        tap_ok(rc == KVRT_OK, "with a key, 0.0.0.0 is allowed");
    }
    side_close(&s);
    struct kvrt_xfer_agent_options o;
    kvrt_xfer_agent_options_default(&o);
    o.flags = 0x10;
    kvrt_xfer_agent *a = NULL;
    struct side t;
    open_side(&t, NULL, 0);
    rc = kvrt_xfer_agent_create(t.be, t.c, &o, &a);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "flags 0x10"), "unknown option flags are refused: %s",
           kvrt_error_message());
    static const char *const allows[] = {"300.1.1.1", "10.0.0.0/33", "ten", "10.0.0.1,,10.0.0.2"};
    for (size_t i = 0; i < sizeof(allows) / sizeof(allows[0]); i++) {
        kvrt_xfer_agent_options_default(&o);
        o.allow = allows[i];
        rc = kvrt_xfer_agent_create(t.be, t.c, &o, &a);
        tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "allow"), "allow list \"%s\" is refused: %s",
               allows[i], kvrt_error_message());
    }
    side_close(&t);
}

/* ---- the handshake ------------------------------------------------------------ */

static bool push_one(struct side *s, kvrt_xfer_peer *p, int64_t dst)
{
    int64_t mine[1] = {1}, theirs[1] = {dst};
    kvrt_xfer_handle *h = side_post(s, p, &s->o, mine, theirs, 1, false, 1);
    int rc = h ? kvrt_xfer_wait(h, 10) : KVRT_ERR_INVALID;
    if (rc != KVRT_OK)
        tap_diag("push: %s", kvrt_error_message());
    kvrt_xfer_release(h);
    return rc == KVRT_OK;
}

static void keys_meet(const char *server_key, const char *client_key, bool ok, const char *says, const char *what)
{
    struct child c;
    struct side s;
    if (!serve(&c, server_key, NULL, NULL) || open_side(&s, client_key, 0) != KVRT_OK) {
        tap_ok(false, "%s: set-up (%s)", what, kvrt_error_message());
        return;
    }
    kvrt_xfer_peer *p = NULL;
    int rc = kvrt_xfer_connect(s.a, "127.0.0.1", (uint16_t)c.port, &p);
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", kvrt_error_message());
    if (ok)
        tap_ok(rc == KVRT_OK && push_one(&s, p, 5), "%s: connected and transferred", what);
    else
        tap_ok(rc == KVRT_ERR_REFUSED && strstr(msg, says) && unchanged(&c), "%s: refused before any byte moved (%s)",
               what, msg);
    if (p)
        kvrt_xfer_peer_close(p);
    side_close(&s);
    child_stop(&c);
}

static void handshakes(void)
{
    keys_meet(key_a, key_a, true, NULL, "the same key on both sides");
    keys_meet(key_a, NULL, false, "requires a key", "a client without the server's key");
    keys_meet(key_a, key_b, false, "this agent's key", "a client with another key");
    keys_meet(NULL, key_a, false, "holds a key", "a keyed client at a server without a key");
}

/* A handshake recorded and played back against a fresh nonce. */
static void replay(void)
{
    struct child c;
    struct raw r;
    if (!serve(&c, key_a, NULL, NULL)) {
        tap_ok(false, "replay: a server");
        return;
    }
    struct xfer_md md;
    memset(&md, 0, sizeof(md));
    bool ok = xfer_md_parse((const uint8_t *)c.md, c.md_len, &md) == KVRT_OK && raw_open(&r, md.cache.placement) &&
              xfer_key_load(key_a, "the test", &r.key) == KVRT_OK;
    char why[512];
    ok = ok && raw_hello(&r, (uint16_t)c.port, NULL, 0) && raw_read_reply(&r, why, sizeof(why)) == KVRT_OK;
    /* Record what the client sent: HELLO's nonce and blob, then its proof. */
    uint8_t nonce[XFER_NONCE_BYTES];
    memcpy(nonce, r.nonce, sizeof(nonce));
    size_t hello_len = ok ? r.hello_len : 0;
    uint8_t *hello = calloc(1, hello_len + 1);
    if (ok)
        memcpy(hello, r.hello, hello_len);
    struct wire_proof proof;
    memset(&proof, 0, sizeof(proof));
    if (ok) {
        struct xfer_transcript t = {r.nonce, r.server_nonce, r.hello, r.hello_len, r.reply, r.reply_len};
        xfer_prove_client(&r.key, &t, proof.mac);
    }
    ok = ok && raw_proof(&r) && raw_read_accept(&r, why, sizeof(why)) == KVRT_OK;
    tap_ok(ok, "replay: a handshake with the key completes (%s)", why);
    /* Played back on a new connection: the server's nonce is new. */
    raw_drop_eps(&r);
    raw_forget(&r);
    ok = raw_connect(&r, (uint16_t)c.port);
    struct wire_hello h = {WIRE_MAGIC, WIRE_PROTOCOL, WIRE_KEYED, {0}};
    memcpy(h.nonce, nonce, sizeof(nonce));
    ok = ok && raw_send(&r, r.conn, WIRE_HELLO, &h, sizeof(h), hello, hello_len, false);
    struct raw_got *g = raw_wait(&r, WIRE_REPLY, 5);
    ok = ok && g && raw_send(&r, r.conn, WIRE_PROOF, &proof, sizeof(proof), NULL, 0, false);
    struct raw_got *acc = raw_wait(&r, WIRE_ACCEPT, 5);
    struct wire_accept a = {0, 0};
    if (acc)
        memcpy(&a, acc->hdr, sizeof(a));
    tap_ok(ok && acc && a.status == KVRT_ERR_REFUSED && acc->data && strstr((char *)acc->data, "did not prove") &&
               unchanged(&c),
           "replay: the recorded HELLO and PROOF, played back, are refused (%s)",
           acc && acc->data ? (char *)acc->data : "");
    free(hello);
    raw_close(&r);
    xfer_md_free(&md);
    child_stop(&c);
}

/* ---- signed metadata ---------------------------------------------------------- */

static void blobs(void)
{
    struct side a, b, k, none;
    if (open_side(&a, key_a, 0) != KVRT_OK || open_side(&b, key_b, 0) != KVRT_OK ||
        open_side(&k, key_a, 0) != KVRT_OK || open_side(&none, NULL, 0) != KVRT_OK) {
        tap_ok(false, "blobs: agents (%s)", kvrt_error_message());
        return;
    }
    void *ba, *bb, *bn;
    size_t la, lb, ln;
    kvrt_xfer_metadata_export(a.a, &ba, &la);
    kvrt_xfer_metadata_export(b.a, &bb, &lb);
    kvrt_xfer_metadata_export(none.a, &bn, &ln);
    kvrt_xfer_peer *p = NULL;
    int rc = kvrt_xfer_peer_load(k.a, bn, ln, &p);
    tap_ok(rc == KVRT_ERR_REFUSED && strstr(kvrt_error_message(), "not signed"),
           "a keyed agent refuses an unsigned blob: %s", kvrt_error_message());
    rc = kvrt_xfer_peer_load(k.a, bb, lb, &p);
    tap_ok(rc == KVRT_ERR_REFUSED && strstr(kvrt_error_message(), "not signed with this agent's key"),
           "and a blob signed with another key: %s", kvrt_error_message());
    uint8_t *bad = malloc(la);
    memcpy(bad, ba, la);
    bad[la - XFER_MAC_BYTES - 10] ^= 1; /* inside the worker address */
    rc = kvrt_xfer_peer_load(k.a, bad, la, &p);
    tap_ok(rc == KVRT_ERR_REFUSED && strstr(kvrt_error_message(), "altered"),
           "and a signed blob with one bit changed: %s", kvrt_error_message());
    free(bad);
    rc = kvrt_xfer_peer_load(none.a, ba, la, &p);
    tap_ok(rc == KVRT_ERR_REFUSED && strstr(kvrt_error_message(), "has none"),
           "an agent without a key refuses a signed blob: %s", kvrt_error_message());
    rc = kvrt_xfer_peer_load(k.a, ba, la, &p);
    tap_ok(rc == KVRT_OK, "a blob signed with the agent's own key loads (%s)", kvrt_error_message());
    kvrt_free(ba);
    kvrt_free(bb);
    kvrt_free(bn);
    side_close(&a);
    side_close(&b);
    side_close(&k);
    side_close(&none);
}

/* ---- the allow list ----------------------------------------------------------- */

static void allow_list(void)
{
    struct child c;
    struct side s;
    if (!serve(&c, NULL, NULL, "10.1.2.3,192.168.0.0/16") || open_side(&s, NULL, 0) != KVRT_OK) {
        tap_ok(false, "allow: set-up");
        return;
    }
    kvrt_xfer_peer *p = NULL;
    int rc = kvrt_xfer_connect(s.a, "127.0.0.1", (uint16_t)c.port, &p);
    const char *log = cmd(&c, "lastlog");
    tap_ok(rc != KVRT_OK && strstr(log, "not in the allow list") && unchanged(&c),
           "a peer from outside the allow list is refused at its connection (%s)", log);
    side_close(&s);
    child_stop(&c);
    if (!serve(&c, NULL, NULL, "10.1.2.3,127.0.0.0/8") || open_side(&s, NULL, 0) != KVRT_OK)
        return;
    rc = kvrt_xfer_connect(s.a, "127.0.0.1", (uint16_t)c.port, &p);
    tap_ok(rc == KVRT_OK && push_one(&s, p, 3), "one from inside it connects and transfers");
    kvrt_xfer_peer_close(p);
    side_close(&s);
    child_stop(&c);
}

/* ---- grants ------------------------------------------------------------------- */

static int transfer(struct side *s, kvrt_xfer_peer *p, bool pull, const int64_t *mine, const int64_t *theirs,
                    uint64_t n)
{
    kvrt_xfer_handle *h = side_post(s, p, &s->o, mine, theirs, n, pull, 1);
    int rc = h ? kvrt_xfer_wait(h, 10) : KVRT_ERR_INVALID;
    kvrt_xfer_release(h);
    return rc;
}

static void grants(void)
{
    char flags[8];
    snprintf(flags, sizeof(flags), "%u", (unsigned)KVRT_XFER_REQUIRE_GRANTS);
    struct child c;
    struct side s;
    if (!serve(&c, key_a, flags, NULL) || open_side(&s, key_a, 0) != KVRT_OK) {
        tap_ok(false, "grants: set-up");
        return;
    }
    kvrt_xfer_peer *p = NULL;
    if (kvrt_xfer_connect(s.a, "127.0.0.1", (uint16_t)c.port, &p) != KVRT_OK) {
        tap_ok(false, "grants: connect (%s)", kvrt_error_message());
        side_close(&s);
        child_stop(&c);
        return;
    }
    cmd(&c, "newest");
    int64_t mine[2] = {1, 2}, w10[2] = {10, 11}, w14[2] = {12, 14}, r20[2] = {20, 21};
    int rc = transfer(&s, p, false, mine, w10, 2);
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", kvrt_error_message());
    tap_ok(rc == KVRT_ERR_REFUSED && strstr(msg, "block 10 is not granted") && strstr(msg, "writing") && unchanged(&c),
           "a push into blocks not granted is refused, naming the block: %s", msg);
    const char *ev = cmd(&c, "events");
    tap_ok(strstr(ev, "denied=1") != NULL, "and counted (%s)", ev);
    cmd(&c, "grant 0 w 10,11,12,13");
    rc = transfer(&s, p, false, mine, w10, 2);
    tap_ok(rc == KVRT_OK, "granted for writing, blocks 10 and 11 take the push");
    rc = transfer(&s, p, false, mine, w14, 2);
    snprintf(msg, sizeof(msg), "%s", kvrt_error_message());
    tap_ok(rc == KVRT_ERR_REFUSED && strstr(msg, "block 14"), "one block outside the grant refuses it all: %s", msg);
    rc = transfer(&s, p, true, w10, r20, 2);
    snprintf(msg, sizeof(msg), "%s", kvrt_error_message());
    tap_ok(rc == KVRT_ERR_REFUSED && strstr(msg, "block 20 is not granted") && strstr(msg, "reading"),
           "a pull of blocks not granted for reading is refused: %s", msg);
    cmd(&c, "grant 0 r 20,21");
    rc = transfer(&s, p, true, w10, r20, 2);
    tap_ok(rc == KVRT_OK, "granted for reading, they can be pulled");
    cmd(&c, "revoke 0 w all");
    rc = transfer(&s, p, false, mine, w10, 2);
    tap_ok(rc == KVRT_ERR_REFUSED, "revoked, the push is refused again");
    /* Agent-wide grants cover peers to come: a new peer pushes at once. */
    cmd(&c, "agent-grant w 30,31");
    struct side s2;
    kvrt_xfer_peer *p2 = NULL;
    int64_t w30[2] = {30, 31}, w32[2] = {31, 32};
    if (open_side(&s2, key_a, 0) == KVRT_OK && kvrt_xfer_connect(s2.a, "127.0.0.1", (uint16_t)c.port, &p2) == KVRT_OK) {
        rc = transfer(&s2, p2, false, mine, w30, 2);
        tap_ok(rc == KVRT_OK, "an agent-wide grant lets a peer push right after its connect returns (%s)",
               rc ? kvrt_error_message() : "ok");
        rc = transfer(&s2, p2, false, mine, w32, 2);
        tap_ok(rc == KVRT_ERR_REFUSED && strstr(kvrt_error_message(), "block 32"),
               "and only into the blocks it names: %s", kvrt_error_message());
        cmd(&c, "agent-revoke w all");
        rc = transfer(&s2, p2, false, mine, w30, 2);
        tap_ok(rc == KVRT_ERR_REFUSED, "revoked agent-wide, the push is refused");
        kvrt_xfer_peer_close(p2);
    } else {
        tap_ok(false, "agent-wide grants: a second peer connects (%s)", kvrt_error_message());
        tap_skip("no second peer");
        tap_skip("no second peer");
    }
    side_close(&s2);
    unsigned long long bad = 1, notes = 0;
    sscanf(cmd(&c, "verify-below 128"), "verify-below %llu %llu", &bad, &notes);
    tap_ok(bad == 0 && notes == 3,
           "the server holds exactly its pattern and the two granted pushes, and heard of the granted pull (%llu "
           "notes)",
           notes);
    /* Misuse of the calls, here. */
    rc = kvrt_xfer_agent_grant(NULL, KVRT_XFER_GRANT_READ, mine, 1);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "agent is NULL"), "a NULL agent is refused: %s",
           kvrt_error_message());
    int64_t out[1] = {99999};
    rc = kvrt_xfer_grant(p, 0, mine, 1);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "access 0x0"), "access 0 is refused: %s",
           kvrt_error_message());
    rc = kvrt_xfer_grant(p, 4, mine, 1);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "access 0x4"), "access 4 is refused: %s",
           kvrt_error_message());
    rc = kvrt_xfer_expect(p, out, 1);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(kvrt_error_message(), "99999"), "a block past the cache is refused: %s",
           kvrt_error_message());
    rc = kvrt_xfer_grant(NULL, KVRT_XFER_GRANT_READ, mine, 1);
    tap_ok(rc == KVRT_ERR_INVALID, "a NULL peer is refused");
    kvrt_xfer_peer_close(p);
    side_close(&s);
    child_stop(&c);
}

int main(int argc, char **argv)
{
    self = argv[0];
    int rc = side_main(argc, argv);
    if (rc >= 0)
        return rc;
    if (!mkdtemp(dir)) {
        tap_ok(false, "a temporary folder: %s", strerror(errno));
        return tap_done();
    }
    write_key(key_a, sizeof(key_a), "a.key", 32, 0600);
    write_key(key_b, sizeof(key_b), "b.key", 32, 0600);
    write_key(key_loose, sizeof(key_loose), "loose.key", 32, 0644);
    write_key(key_short, sizeof(key_short), "short.key", 8, 0600);
    key_files();
    exposure();
    handshakes();
    replay();
    blobs();
    allow_list();
    grants();
    unlink(key_a);
    unlink(key_b);
    unlink(key_loose);
    unlink(key_short);
    rmdir(dir);
    return tap_done();
}
