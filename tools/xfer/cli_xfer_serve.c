/* kvrt xfer serve: hold a cache, accept peers, verify what they moved. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_xfer.h"

static const struct cli_option serve_options[] = {
    {"--listen", "ADDR:PORT", XO_LISTEN, false, "default 127.0.0.1:13337; port 0 picks a free port"},
    {"--port-file", "FILE", XO_PORT_FILE, false, "write the bound port there once listening"},
    {"--sessions", "N", XO_SESSIONS, false, "peers served one after another (default 1)"},
    {"--keep-going", NULL, XO_KEEP_GOING, false,
     "a failed session does not end the serve: the next peer is\n"
     "served (the first failure is still reported and the exit status)"},
    {"--allow", "LIST", XO_ALLOW, false,
     "accept peers only from these IPv4 or IPv6 addresses or networks\n"
     "(\"10.0.0.7,10.1.0.0/16,fd00::/64\"; default: any)"},
    {"--grant", "IDS", XO_GRANT, false,
     "peers may write and read only these blocks (\"0-7,12\";\n"
     "default: every block)"},
    CLI_OPTIONS_END,
};

static const struct cli_option *const serve_tables[] = {serve_options, xfer_common_options, cli_model_options, NULL};

void cli_xfer_serve_help(FILE *out, bool common)
{
    fprintf(out, "kvrt xfer serve [--listen ADDR:PORT] [--port-file FILE] [--sessions N] [--keep-going]\n"
                 "                [--key-file FILE] [--insecure] [--allow LIST] [--grant IDS]\n"
                 "                [--backend NAME] [--layout NAME] (--model FILE | --layers L ...)\n"
                 "                [--blocks B] [--seed N] [--head-offset H] [--timeout S] [--json]\n"
                 "  Fill a cache with the pattern of --seed (default 2), listen, and for each of\n"
                 "  N sessions (default 1) accept a peer, check its metadata, serve its\n"
                 "  transfers (staged ones are scattered here) and apply each notification to\n"
                 "  the expected contents; a session ends when the peer says goodbye.  Then\n"
                 "  every byte of the cache is compared with what it should hold: the blocks\n"
                 "  moved by completed transfers, the own pattern everywhere else.\n");
    cli_print_options(out, serve_options, 22);
    if (common)
        xfer_print_common_options(out);
    else
        fputs("  (and the options common to both, below)\n", out);
    fputs("  An incompatible peer, or one that does not prove the key, is told why and\n"
          "  refused before any byte moves (a refused session counts as served).\n"
          "  Exit status: 0 verified; 1 a mismatch, a timeout or a failed peer; 2 bad\n"
          "  input; 4 no backend.\n",
          out);
    if (common)
        cli_model_print_options(out);
}

static void serve_help(FILE *out)
{
    cli_xfer_serve_help(out, true);
}

struct serve {
    struct xfer_side side;
    char addr[64];
    uint16_t port;
    const char *port_file;
    uint64_t sessions;
    bool keep_going;
    uint64_t transfers, done_sessions, refused;
    double busy_seconds;
    uint64_t bytes;
    char error[2048];
    int error_code;
};

static int write_port(const char *path, uint16_t port)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%u\n", port) < 0 || fclose(f) != 0 || rename(tmp, path) != 0)
        return cli_error(CLI_EXIT_USAGE, "xfer serve: cannot write the port to \"%s\"", path);
    return CLI_EXIT_OK;
}

static void fail(struct serve *v, int code, const char *msg)
{
    if (v->error_code == CLI_EXIT_OK) {
        v->error_code = code;
        snprintf(v->error, sizeof(v->error), "%s", msg);
    }
}

/* One peer: accept, serve until it says goodbye, fails or goes quiet. */
static void session(struct serve *v, uint64_t index)
{
    struct xfer_side *s = &v->side;
    kvrt_xfer_peer *peer;
    int rc = kvrt_xfer_accept(s->agent, s->timeout, &peer);
    char msg[1536];
    if (rc == KVRT_XFER_PENDING) {
        snprintf(msg, sizeof(msg), "xfer serve: session %llu: no peer connected within %g s",
                 (unsigned long long)index + 1, s->timeout);
        fail(v, CLI_EXIT_INTERNAL, msg);
        return;
    }
    if (rc == KVRT_ERR_INVALID || rc == KVRT_ERR_REFUSED) {
        /* An incompatible peer, or one without the key, was told why;
         * nothing moved.  Serve on. */
        v->refused++;
        v->done_sessions++;
        if (!s->json) {
            printf("session %llu: %s\n", (unsigned long long)index + 1, kvrt_error_message());
            fflush(stdout);
        }
        return;
    }
    if (rc != KVRT_OK) {
        snprintf(msg, sizeof(msg), "xfer serve: session %llu: %s", (unsigned long long)index + 1, kvrt_error_message());
        fail(v, cli_exit_for_status(rc), msg);
        return;
    }
    if (!s->json) {
        printf("session %llu: peer connected, metadata checked\n", (unsigned long long)index + 1);
        fflush(stdout);
    }
    double quiet_since = cli_now();
    uint64_t in_session = 0;
    int efd = -1;
    kvrt_xfer_event_fd(s->agent, &efd);
    for (;;) {
        rc = kvrt_xfer_progress(s->agent);
        char *note;
        size_t len;
        kvrt_xfer_peer *from;
        bool noted = false;
        while (kvrt_xfer_notification(s->agent, &from, &note, &len) == KVRT_OK && note) {
            struct xpat_record r;
            noted = true;
            if (xfer_side_take_record(s, note, &r)) {
                v->transfers++;
                in_session++;
                if (!s->json) {
                    printf("session %llu: transfer %llu complete: %llu blocks\n", (unsigned long long)index + 1,
                           (unsigned long long)r.index + 1, (unsigned long long)r.num_blocks);
                    fflush(stdout);
                }
                xpat_record_free(&r);
            }
            kvrt_free(note);
            quiet_since = cli_now();
        }
        const char *why;
        enum kvrt_xfer_peer_state st = kvrt_xfer_peer_state(peer, &why);
        if (st == KVRT_XFER_PEER_CLOSED)
            break;
        if (st == KVRT_XFER_PEER_FAILED) {
            snprintf(msg, sizeof(msg),
                     "xfer serve: session %llu: the peer failed after %llu complete transfers "
                     "(%s); those stay, nothing else is marked complete",
                     (unsigned long long)index + 1, (unsigned long long)in_session, why);
            fail(v, CLI_EXIT_INTERNAL, msg);
            break;
        }
        if (rc != KVRT_OK)
            quiet_since = cli_now(); /* a refused staged request: the peer was told */
        if (cli_now() - quiet_since > s->timeout) {
            snprintf(msg, sizeof(msg),
                     "xfer serve: session %llu: the peer was silent for %g s after %llu "
                     "transfers",
                     (unsigned long long)index + 1, s->timeout, (unsigned long long)in_session);
            fail(v, CLI_EXIT_INTERNAL, msg);
            break;
        }
        /* Nothing to do: sleep on the agent's event fd (bounded, so the
         * peer's state and the silence are looked at again). */
        if (!noted && kvrt_xfer_arm(s->agent) == KVRT_OK) {
            struct pollfd pfd = {efd, POLLIN, 0};
            poll(&pfd, 1, 10);
        }
    }
    kvrt_xfer_peer_close(peer);
    v->done_sessions++;
}

static int report(struct serve *v, uint64_t bad, const char *where)
{
    struct xfer_side *s = &v->side;
    bool verified = bad == 0;
    if (s->json) {
        char listen[320];
        snprintf(listen, sizeof(listen), "%s:%u", v->addr, v->port);
        json_t *o = json_object();
        bool ok = kvrt_json_put(o, "command", kvrt_json_str("xfer serve")) &&
                  kvrt_json_put(o, "listen", kvrt_json_str(listen)) &&
                  kvrt_json_put(o, "backend", kvrt_json_str(s->backend_name)) &&
                  kvrt_json_put(o, "layout", kvrt_json_str(kvrt_layout_name(s->layout))) &&
                  kvrt_json_put(o, "blocks", cli_json_u64(s->num_blocks, "blocks")) &&
                  kvrt_json_put(o, "staging", xfer_side_staging_json(s)) &&
                  kvrt_json_put(o, "sessions", cli_json_u64(v->done_sessions, "sessions")) &&
                  kvrt_json_put(o, "transfers", cli_json_u64(v->transfers, "transfers")) &&
                  kvrt_json_put(o, "refused", cli_json_u64(v->refused, "refused")) &&
                  kvrt_json_put(o, "verified", json_boolean(verified)) &&
                  kvrt_json_put(o, "mismatched_bytes",
                                bad == UINT64_MAX ? json_null() : cli_json_u64(bad, "mismatched_bytes")) &&
                  kvrt_json_put(o, "first_mismatch", kvrt_json_str(where)) &&
                  kvrt_json_put(o, "error", v->error_code ? kvrt_json_str(v->error) : json_null());
        if (!ok) {
            json_decref(o);
            return cli_error(CLI_EXIT_INTERNAL, "xfer serve: could not build the JSON output");
        }
        cli_json_print(o);
    } else {
        printf("verified   %s (%llu blocks, %llu transfers in %llu sessions)%s%s\n", verified ? "yes" : "NO",
               (unsigned long long)s->num_blocks, (unsigned long long)v->transfers,
               (unsigned long long)v->done_sessions, verified ? "" : "; first mismatch: ", verified ? "" : where);
    }
    fflush(stdout);
    if (v->error_code != CLI_EXIT_OK)
        return cli_error(v->error_code, "%s", v->error);
    if (!verified)
        return cli_error(CLI_EXIT_INTERNAL, "xfer serve: %llu bytes differ from the expected contents (first: %s)",
                         (unsigned long long)bad, where);
    return CLI_EXIT_OK;
}

static int apply(void *request, const struct cli_option *opt, const char *val)
{
    struct serve *v = request;
    bool ok = true;
    if (xfer_side_option(&v->side, opt, val, &ok))
        return ok ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    switch (opt->id) {
    case XO_LISTEN: ok = xfer_parse_endpoint(opt->name, val, v->addr, sizeof(v->addr), &v->port); break;
    case XO_PORT_FILE: v->port_file = val; break;
    case XO_SESSIONS: ok = cli_parse_u64(opt->name, val, 1, 1000000, &v->sessions); break;
    case XO_KEEP_GOING: v->keep_going = true; break;
    case XO_ALLOW: v->side.allow = val; break;
    case XO_GRANT:
        free(v->side.grant_ids);
        v->side.grant_ids = NULL;
        ok = xfer_parse_ids(opt->name, val, &v->side.grant_ids, &v->side.num_grant_ids);
        v->side.require_grants = true;
        break;
    }
    return ok ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

int cli_xfer_serve(int argc, char **argv)
{
    struct serve v;
    memset(&v, 0, sizeof(v));
    v.sessions = 1;
    v.side.command = "xfer serve";
    v.side.seed = 2;
    v.side.timeout = 30;
    snprintf(v.addr, sizeof(v.addr), "127.0.0.1");
    v.port = 13337;
    cli_model_flags_init(&v.side.flags, "xfer serve");
    bool help;
    int code = cli_parse_options("xfer serve", argc, argv, serve_tables, apply, &v, &help);
    if (code != CLI_EXIT_OK)
        return code;
    if (help) {
        cli_xfer_serve_help(stdout, true);
        return CLI_EXIT_OK;
    }
    code = xfer_side_set_up(&v.side);
    if (code == CLI_EXIT_OK) {
        int rc = kvrt_xfer_listen(v.side.agent, v.addr, v.port, &v.port);
        if (rc != KVRT_OK)
            code = cli_fail_status(rc);
    }
    if (code == CLI_EXIT_OK && v.port_file)
        code = write_port(v.port_file, v.port);
    if (code != CLI_EXIT_OK) {
        xfer_side_free(&v.side);
        return code;
    }
    if (!v.side.json) {
        printf("listening  %s:%u (%s, %s, %llu blocks)\n", v.addr, v.port, v.side.backend_name,
               kvrt_layout_name(v.side.layout), (unsigned long long)v.side.num_blocks);
        xfer_side_print_staging(&v.side);
        fflush(stdout);
    }
    for (uint64_t i = 0; i < v.sessions && (v.keep_going || v.error_code == CLI_EXIT_OK); i++)
        session(&v, i);
    char where[256];
    uint64_t bad = xfer_side_verify(&v.side, where, sizeof(where));
    code = report(&v, bad, where);
    xfer_side_free(&v.side);
    return code;
}

const struct cli_command cli_xfer_serve_command = {
    .name = "serve",
    .summary = "hold a cache, accept peers, verify what they moved",
    .run = cli_xfer_serve,
    .help = serve_help,
    .options = serve_tables,
};
