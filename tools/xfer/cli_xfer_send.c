/* kvrt xfer send: connect, move blocks (push or pull), report the plan. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_xfer.h"

static const struct cli_option send_options[] = {
    {"--connect", "ADDR:PORT", XO_CONNECT, false, "the address a 'kvrt xfer serve' listens on (required)"},
    {"--ids", "LIST", XO_IDS, false, "block ids and ranges, e.g. 0-7,12,9 (default: every block)"},
    {"--remote-ids", "LIST", XO_REMOTE_IDS, false, "the peer's blocks, same count (default: --ids)"},
    {"--layer-range", "A-B", XO_LAYER_RANGE, false, "only layers A..B (placement order; default all)"},
    {"--heads", "L:R:N", XO_HEADS, false,
     "heads L..L+N-1 here to/from R..R+N-1 on the peer\n"
     "(tensor parallel slices; default all heads)"},
    {"--pull", NULL, XO_PULL, false, "read the peer's blocks into this cache instead of pushing"},
    {"--method", "NAME", XO_METHOD, false, "force a method (listed below; docs/xfer.md)"},
    {"--repeat", "N", XO_REPEAT, false, "transfers, each verified by its notification (default 1)"},
    {"--inflight", "N", XO_INFLIGHT, false, "transfers posted at a time (default 1)"},
    {"--peer-seed", "N", XO_PEER_SEED, false, "the peer's pattern, checked with --pull (default 2)"},
    {"--peer-head-offset", "H", XO_PEER_HEAD_OFFSET, false, "the peer's --head-offset, for --pull (default 0)"},
    CLI_OPTIONS_END,
};

static const struct cli_option *const send_tables[] = {send_options, xfer_common_options, cli_model_options, NULL};

void cli_xfer_send_help(FILE *out, bool common)
{
    fprintf(out, "kvrt xfer send --connect ADDR:PORT [--ids LIST] [--remote-ids LIST]\n"
                 "               [--layer-range A-B] [--heads LOCAL:REMOTE:COUNT] [--pull]\n"
                 "               [--method NAME] [--repeat N] [--inflight N]\n"
                 "               [--key-file FILE] [--insecure]\n"
                 "               [--backend NAME] [--layout NAME] (--model FILE | --layers L ...)\n"
                 "               [--blocks B] [--seed N] [--peer-seed N] [--timeout S] [--json]\n"
                 "  Fill a cache with the pattern of --seed (default 1), connect (metadata is\n"
                 "  exchanged and checked on both sides first), and move the blocks --ids of\n"
                 "  this cache to the blocks --remote-ids of the peer (push), or the reverse\n"
                 "  with --pull (then this side verifies against the peer's pattern,\n"
                 "  --peer-seed, default 2, and --peer-head-offset).  Each of the N transfers\n"
                 "  (--repeat, default 1; --inflight of them posted at a time) ends with a\n"
                 "  notification the peer verifies.\n");
    cli_print_options(out, send_options, 22);
    struct kvrt_xfer_request defaults;
    kvrt_xfer_request_default(&defaults);
    fprintf(out, "  Methods: %s (default %s)\n", kvrt_xfer_method_valid_names(),
            kvrt_xfer_method_name(defaults.method));
    if (common)
        xfer_print_common_options(out);
    else
        fputs("  (and the options common to both, below)\n", out);
    fputs("  Prints the plan (method and why, planned regions, data messages, staging\n"
          "  chunks), the bytes, the time and GB/s (10^9 bytes/s) of the transfers.\n"
          "  Exit status: 0 moved (and verified with --pull); 1 a transfer failed, timed\n"
          "  out or did not verify; 2 bad input, a block id out of range on either side\n"
          "  or an incompatible peer (nothing moved); 4 no backend.\n"
          "  Example: kvrt xfer send --connect 127.0.0.1:13337 --layers 2 --kv-heads 8 \\\n"
          "           --head-size 128 --dtype bf16 --blocks 64 --layout BLHNC --ids 0-15\n",
          out);
    if (common)
        cli_model_print_options(out);
}

static void send_help(FILE *out)
{
    cli_xfer_send_help(out, true);
}

struct send {
    struct xfer_side side;
    char addr[64];
    uint16_t port;
    bool connect_given, pull, layers_given;
    int64_t *ids, *remote_ids;
    uint64_t num_ids, num_remote;
    uint64_t layer_first, layer_last;
    uint64_t lh, rh, nh;
    enum kvrt_xfer_method method;
    uint64_t repeat, inflight, peer_seed, peer_head_offset;
};

static bool parse_method(const char *option, const char *v, enum kvrt_xfer_method *m)
{
    if (kvrt_xfer_method_parse(v, m) == KVRT_OK)
        return true;
    cli_error(CLI_EXIT_USAGE, "%s: %s", option, kvrt_error_message());
    return false;
}

static const char *method_name(enum kvrt_xfer_method m)
{
    const char *name = kvrt_xfer_method_name(m);
    return name ? name : "?";
}

static bool parse_range(const char *option, const char *v, uint64_t *a, uint64_t *b)
{
    unsigned long long x, y;
    char tail;
    if (sscanf(v, "%llu-%llu%c", &x, &y, &tail) == 2 && x <= y && v[0] != '-') {
        *a = x;
        *b = y;
        return true;
    }
    cli_error(CLI_EXIT_USAGE, "%s: \"%s\" is not a range; write FIRST-LAST, e.g. 0-15", option, v);
    return false;
}

static bool parse_heads(const char *option, const char *v, uint64_t *l, uint64_t *r, uint64_t *n)
{
    unsigned long long a, b, c;
    char tail;
    if (sscanf(v, "%llu:%llu:%llu%c", &a, &b, &c, &tail) == 3 && c > 0 && v[0] != '-' && !strchr(v, '-')) {
        *l = a;
        *r = b;
        *n = c;
        return true;
    }
    cli_error(CLI_EXIT_USAGE, "%s: \"%s\" is not LOCAL:REMOTE:COUNT with COUNT > 0, e.g. 0:4:4", option, v);
    return false;
}

static int apply(void *request, const struct cli_option *opt, const char *v)
{
    struct send *d = request;
    bool ok = true;
    if (xfer_side_option(&d->side, opt, v, &ok))
        return ok ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    switch (opt->id) {
    case XO_CONNECT:
        ok = xfer_parse_endpoint(opt->name, v, d->addr, sizeof(d->addr), &d->port);
        d->connect_given = true;
        break;
    case XO_IDS: ok = xfer_parse_ids(opt->name, v, &d->ids, &d->num_ids); break;
    case XO_REMOTE_IDS: ok = xfer_parse_ids(opt->name, v, &d->remote_ids, &d->num_remote); break;
    case XO_LAYER_RANGE:
        ok = parse_range(opt->name, v, &d->layer_first, &d->layer_last);
        d->layers_given = true;
        break;
    case XO_HEADS: ok = parse_heads(opt->name, v, &d->lh, &d->rh, &d->nh); break;
    case XO_PULL: d->pull = true; break;
    case XO_METHOD: ok = parse_method(opt->name, v, &d->method); break;
    case XO_REPEAT: ok = cli_parse_u64(opt->name, v, 1, 1000000, &d->repeat); break;
    case XO_INFLIGHT: ok = cli_parse_u64(opt->name, v, 1, 256, &d->inflight); break;
    case XO_PEER_SEED: ok = cli_parse_u64(opt->name, v, 0, UINT64_MAX, &d->peer_seed); break;
    case XO_PEER_HEAD_OFFSET: ok = cli_parse_u64(opt->name, v, 0, XFER_MAX_HEAD_OFFSET, &d->peer_head_offset); break;
    }
    return ok ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

static int parse(int argc, char **argv, struct send *d, bool *help)
{
    int code = cli_parse_options("xfer send", argc, argv, send_tables, apply, d, help);
    if (code == CLI_EXIT_OK && !*help && !d->connect_given)
        return cli_error(CLI_EXIT_USAGE,
                         "xfer send: %s ADDR:PORT is required (the address a "
                         "'kvrt xfer serve' listens on)",
                         cli_option_name(send_tables, XO_CONNECT));
    return code;
}

static int print_report(const struct send *d, const struct kvrt_xfer_plan *plan, double seconds, uint64_t bad,
                        const char *where)
{
    const struct xfer_side *s = &d->side;
    uint64_t bytes = plan->bytes * d->repeat;
    double gbps = seconds > 0 ? (double)bytes / seconds / 1e9 : 0;
    if (s->json) {
        char connect[320];
        snprintf(connect, sizeof(connect), "%s:%u", d->addr, d->port);
        const uint64_t wire_bytes = (uint64_t)plan->wire_bytes * (uint64_t)d->repeat;
        json_t *o = json_object();
        bool ok = kvrt_json_put(o, "command", kvrt_json_str("xfer send")) &&
                  kvrt_json_put(o, "connect", kvrt_json_str(connect)) &&
                  kvrt_json_put(o, "backend", kvrt_json_str(s->backend_name)) &&
                  kvrt_json_put(o, "layout", kvrt_json_str(kvrt_layout_name(s->layout))) &&
                  kvrt_json_put(o, "direction", kvrt_json_str(d->pull ? "pull" : "push")) &&
                  kvrt_json_put(o, "method", kvrt_json_str(method_name(plan->method))) &&
                  kvrt_json_put(o, "why", kvrt_json_str(plan->why)) &&
                  kvrt_json_put(o, "blocks", cli_json_u64(d->num_ids, "blocks")) &&
                  kvrt_json_put(o, "regions", cli_json_u64(plan->regions, "regions")) &&
                  kvrt_json_put(o, "messages", cli_json_u64(plan->messages, "messages")) &&
                  kvrt_json_put(o, "chunks", cli_json_u64(plan->chunks, "chunks")) &&
                  kvrt_json_put(o, "staging", xfer_side_staging_json(s)) &&
                  kvrt_json_put(o, "transfers", cli_json_u64(d->repeat, "transfers")) &&
                  kvrt_json_put(o, "bytes", cli_json_u64(bytes, "bytes")) &&
                  kvrt_json_put(o, "wire_bytes", cli_json_u64(wire_bytes, "wire_bytes")) &&
                  kvrt_json_put(o, "seconds", json_real(seconds)) && kvrt_json_put(o, "gbps", json_real(gbps)) &&
                  kvrt_json_put(o, "verified", d->pull ? json_boolean(bad == 0) : json_null());
        if (!ok) {
            json_decref(o);
            return cli_error(CLI_EXIT_INTERNAL, "xfer send: could not build the JSON output");
        }
        return cli_json_print(o) == 0 && (!d->pull || bad == 0)
                   ? CLI_EXIT_OK
                   : cli_error(CLI_EXIT_INTERNAL, "xfer send: the pulled blocks differ (first: %s)", where);
    }
    char human[32];
    cli_format_bytes(bytes, human, sizeof(human));
    printf("plan       %s: %s\n", method_name(plan->method), plan->why);
    xfer_side_print_staging(s);
    printf("regions    %llu planned, %llu data messages per transfer%s", (unsigned long long)plan->regions,
           (unsigned long long)plan->messages, plan->method == KVRT_XFER_STAGING ? "" : "\n");
    if (plan->method == KVRT_XFER_STAGING)
        printf(", %llu staging chunks of %llu blocks\n", (unsigned long long)plan->chunks,
               (unsigned long long)plan->chunk_blocks);
    printf("bytes      %llu (%s) in %llu transfers of %llu blocks (%s)\n", (unsigned long long)bytes, human,
           (unsigned long long)d->repeat, (unsigned long long)d->num_ids, d->pull ? "pull" : "push");
    printf("time       %.6f s, %.3f GB/s\n", seconds, gbps);
    if (d->pull)
        printf("verified   %s%s%s\n", bad == 0 ? "yes" : "NO", bad ? "; first mismatch: " : "", bad ? where : "");
    fflush(stdout);
    if (d->pull && bad)
        return cli_error(CLI_EXIT_INTERNAL, "xfer send: the pulled blocks differ (first: %s)", where);
    return CLI_EXIT_OK;
}

static int run(struct send *d)
{
    struct xfer_side *s = &d->side;
    int code = xfer_side_set_up(s);
    if (code != CLI_EXIT_OK)
        return code;
    if (!d->ids) {
        d->num_ids = s->num_blocks;
        d->ids = malloc(d->num_ids * sizeof(*d->ids));
        if (!d->ids)
            return cli_error(CLI_EXIT_INTERNAL, "xfer send: out of memory");
        for (uint64_t i = 0; i < d->num_ids; i++)
            d->ids[i] = (int64_t)i;
    }
    if (!d->remote_ids) {
        d->num_remote = d->num_ids;
        d->remote_ids = malloc(d->num_ids * sizeof(*d->ids));
        if (!d->remote_ids)
            return cli_error(CLI_EXIT_INTERNAL, "xfer send: out of memory");
        memcpy(d->remote_ids, d->ids, d->num_ids * sizeof(*d->ids));
    }
    if (d->num_remote != d->num_ids)
        return cli_error(CLI_EXIT_USAGE, "xfer send: %s has %llu blocks but %s %llu; give the same count",
                         cli_option_name(send_tables, XO_IDS), (unsigned long long)d->num_ids,
                         cli_option_name(send_tables, XO_REMOTE_IDS), (unsigned long long)d->num_remote);
    kvrt_xfer_peer *peer;
    int rc = kvrt_xfer_connect(s->agent, d->addr, d->port, &peer);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    struct kvrt_xfer_request req;
    kvrt_xfer_request_default(&req);
    req.direction = d->pull ? KVRT_XFER_PULL : KVRT_XFER_PUSH;
    req.method = d->method;
    req.num_blocks = d->num_ids;
    req.local_ids = d->ids;
    req.remote_ids = d->remote_ids;
    if (d->layers_given) {
        req.layer_start = d->layer_first;
        req.num_layers = d->layer_last - d->layer_first + 1;
    }
    req.local_head_start = d->lh;
    req.remote_head_start = d->rh;
    req.num_heads = d->nh;
    struct xpat_record rec = {
        .src_ids = d->pull ? d->remote_ids : d->ids,
        .dst_ids = d->pull ? d->ids : d->remote_ids,
        .num_blocks = d->num_ids,
        .layer_start = req.layer_start,
        .num_layers = req.num_layers,
        .src_head_start = d->pull ? d->rh : d->lh,
        .dst_head_start = d->pull ? d->lh : d->rh,
        .num_heads = d->nh,
        .seed = d->pull ? d->peer_seed : s->seed,
        .head_offset = d->pull ? d->peer_head_offset : s->head_offset,
        .pull = d->pull,
    };
    struct kvrt_xfer_plan plan;
    memset(&plan, 0, sizeof(plan));
    /* --repeat transfers, --inflight of them posted at a time; this side
     * sleeps on the agent's event fd while they run. */
    kvrt_xfer_handle **h = calloc(d->inflight, sizeof(kvrt_xfer_handle *));
    uint64_t *index = calloc(d->inflight, sizeof(*index));
    if (!h || !index) {
        free(h);
        free(index);
        kvrt_xfer_peer_close(peer);
        return cli_error(CLI_EXIT_INTERNAL, "xfer send: out of memory");
    }
    int efd = -1;
    kvrt_xfer_event_fd(s->agent, &efd);
    uint64_t posted = 0, done = 0;
    double t0 = cli_now();
    while (done < d->repeat && rc == KVRT_OK) {
        for (uint64_t w = 0; w < d->inflight && posted < d->repeat && rc == KVRT_OK; w++) {
            if (h[w])
                continue;
            rec.index = posted;
            rec.last = posted + 1 == d->repeat;
            char *note = xpat_record_text(&rec);
            req.notification = note;
            req.notification_len = note ? strlen(note) : 0;
            rc = note ? kvrt_xfer_post(s->agent, peer, &req, &h[w]) : KVRT_ERR_NOMEM;
            free(note);
            index[w] = posted++;
        }
        bool progressed = false;
        for (uint64_t w = 0; w < d->inflight && rc == KVRT_OK; w++) {
            int st = h[w] ? kvrt_xfer_test(h[w]) : KVRT_XFER_PENDING;
            if (st == KVRT_XFER_PENDING)
                continue;
            rc = st;
            if (rc == KVRT_OK) {
                kvrt_xfer_handle_plan(h[w], &plan);
                done++;
                progressed = true;
                if (d->pull)
                    xpat_apply(&s->pattern, &rec);
                if (!s->json && d->repeat > 1) {
                    printf("transfer   %llu of %llu complete\n", (unsigned long long)index[w] + 1,
                           (unsigned long long)d->repeat);
                    fflush(stdout);
                }
                kvrt_xfer_release(h[w]);
                h[w] = NULL;
            }
        }
        if (rc == KVRT_OK && !progressed && kvrt_xfer_arm(s->agent) == KVRT_OK) {
            struct pollfd pfd = {efd, POLLIN, 0};
            poll(&pfd, 1, 10);
        }
    }
    double seconds = cli_now() - t0;
    if (rc != KVRT_OK) {
        char why[2048];
        snprintf(why, sizeof(why), "%s", kvrt_error_message());
        for (uint64_t w = 0; w < d->inflight; w++)
            kvrt_xfer_release(h[w]);
        free(h);
        free(index);
        kvrt_xfer_peer_close(peer);
        if (done > 0)
            return cli_error(cli_exit_for_status(rc), "xfer send: a transfer failed after %llu of %llu complete: %s",
                             (unsigned long long)done, (unsigned long long)d->repeat, why);
        return cli_error(cli_exit_for_status(rc), "%s", why);
    }
    free(h);
    free(index);
    kvrt_xfer_peer_close(peer);
    char where[256] = "";
    uint64_t bad = d->pull ? xfer_side_verify(s, where, sizeof(where)) : 0;
    return print_report(d, &plan, seconds, bad, where);
}

int cli_xfer_send(int argc, char **argv)
{
    struct send d;
    memset(&d, 0, sizeof(d));
    d.side.command = "xfer send";
    d.side.seed = 1;
    d.side.timeout = 30;
    d.repeat = 1;
    d.inflight = 1;
    d.peer_seed = 2;
    cli_model_flags_init(&d.side.flags, "xfer send");
    bool help = false;
    int code = parse(argc, argv, &d, &help);
    if (code == CLI_EXIT_OK && help)
        cli_xfer_send_help(stdout, true);
    else if (code == CLI_EXIT_OK)
        code = run(&d);
    xfer_side_free(&d.side);
    free(d.ids);
    free(d.remote_ids);
    return code;
}

const struct cli_command cli_xfer_send_command = {
    .name = "send",
    .summary = "connect, move blocks (push or pull), report the plan",
    .run = cli_xfer_send,
    .help = send_help,
    .options = send_tables,
};
