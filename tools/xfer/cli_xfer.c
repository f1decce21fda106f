/* kvrt xfer: the two sides' shared options and set-up; the pattern and its
 * check are tools/xfer/xfer_pattern.c, which the C tests share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/layout.h>
#include <kvrt/placement.h>

#include "commands.h"
#include "cli_xfer.h"

const struct cli_option xfer_common_options[] = {
    {"--backend", "NAME", XO_BACKEND, false,
     "backend of the cache (default: $" KVRT_BACKEND_ENV ", else the first\n"
     "available); caches without a host address use host staging"},
    {"--layout", "NAME", XO_LAYOUT, false,
     "layout of this side's cache (default: $" KVRT_LAYOUT_ENV ",\n"
     "else kvrt's default, below); the two sides may differ:\n"
     "kvrt converts"},
    {"--seed", "N", XO_SEED, false, "pattern of this side's cache (default: serve 2, send 1)"},
    {"--head-offset", "H", XO_HEAD_OFFSET, false,
     "global index of this side's head 0 in the pattern (tensor\n"
     "parallel ranks: rank x heads per rank; default 0)"},
    {"--timeout", "S", XO_TIMEOUT, false,
     "longest wait in seconds (connect, accept; a transfer\n"
     "without progress; default 30)"},
    {"--chunk-bytes", "SIZE", XO_CHUNK, false,
     "staging chunk of converting transfers (at least one\n"
     "block's staging bytes; default: libkvrt-xfer's)"},
    {"--staging-bytes", "SIZE", XO_STAGING, false,
     "registered staging pool: half to send, half to receive\n"
     "(default: libkvrt-xfer's)"},
    {"--key-file", "FILE", XO_KEY_FILE, false,
     "pre-shared key both sides must prove they hold (e.g. head\n"
     "-c 32 /dev/urandom, mode 600; default: $KVRT_XFER_KEY_FILE,\n"
     "else none: loopback only)"},
    {"--insecure", NULL, XO_INSECURE, false,
     "allow an address other than loopback without a key (any\n"
     "host that reaches it may read and write the cache)"},
    {"--json", NULL, XO_JSON, false, "print one JSON object"},
    CLI_OPTIONS_END,
};

void xfer_print_common_options(FILE *out)
{
    cli_print_options(out, xfer_common_options, 20);
    fprintf(out,
            "  (kvrt's default layout: %s; the staging chunk and pool the agent took\n"
            "  are printed, from kvrt_xfer_agent_stats)\n",
            kvrt_layout_name(kvrt_layout_default()));
}

static bool parse_seconds(const char *option, const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (!*text || *end || !(v > 0) || v > 1e6) {
        cli_error(CLI_EXIT_USAGE, "%s: \"%s\" is not a number of seconds; valid are > 0 up to 1e6", option, text);
        return false;
    }
    *out = v;
    return true;
}

bool xfer_side_option(struct xfer_side *s, const struct cli_option *opt, const char *v, bool *ok)
{
    if (cli_model_flags_apply(&s->flags, opt, v, ok))
        return true;
    *ok = true;
    switch (opt->id) {
    case XO_JSON: s->json = true; return true;
    case XO_BACKEND: s->backend_name = v; return true;
    case XO_LAYOUT:
        s->layout_name = v;
        s->layout_option = opt->name;
        return true;
    case XO_SEED: *ok = cli_parse_u64(opt->name, v, 0, UINT64_MAX, &s->seed); return true;
    case XO_HEAD_OFFSET: *ok = cli_parse_u64(opt->name, v, 0, XFER_MAX_HEAD_OFFSET, &s->head_offset); return true;
    case XO_TIMEOUT: *ok = parse_seconds(opt->name, v, &s->timeout); return true;
    case XO_STAGING: *ok = cli_parse_size(opt->name, v, &s->staging_bytes); return true;
    case XO_CHUNK: *ok = cli_parse_size(opt->name, v, &s->chunk_bytes); return true;
    case XO_KEY_FILE: s->key_file = v; return true;
    case XO_INSECURE: s->insecure = true; return true;
    default: return false;
    }
}

/* ---- the cache and its pattern ------------------------------------------ */

int xfer_side_set_up(struct xfer_side *s)
{
    int code = cli_model_build(&s->flags, true, &s->model);
    if (code != CLI_EXIT_OK)
        return code;
    int rc = kvrt_runtime_open(NULL, &s->rt);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    const char *backend = NULL;
    if ((rc = kvrt_runtime_choose_backend(s->rt, s->backend_name, &backend, NULL)) != KVRT_OK)
        return cli_fail_status(rc);
    s->backend_name = backend;
    if ((rc = kvrt_layout_choose(s->layout_name, &s->layout, NULL)) != KVRT_OK)
        return s->layout_name ? cli_error(CLI_EXIT_USAGE, "%s: %s", s->layout_option, kvrt_error_message())
                              : cli_fail_status(rc);
    if ((rc = kvrt_runtime_bind_layout(s->rt, backend, s->layout, &s->backend)) != KVRT_OK)
        return cli_fail_status(rc);
    if ((code = cli_model_num_blocks(&s->flags, s->model, s->layout, 64, &s->num_blocks)) != CLI_EXIT_OK)
        return code;
    rc = kvrt_placement_create(s->layout, s->model->placement_groups, s->model->num_groups, s->num_blocks, 0,
                               &s->placement);
    if (rc == KVRT_OK)
        rc = kvrt_cache_create(s->backend, s->placement, &s->cache);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    uint64_t per_block, bytes;
    if ((rc = kvrt_placement_staging_bytes(s->placement, &per_block)) != KVRT_OK)
        return cli_fail_status(rc);
    if (__builtin_mul_overflow(s->num_blocks, per_block, &bytes) || bytes > (1ull << 36))
        return cli_error(CLI_EXIT_USAGE,
                         "%s: the cache's %llu blocks need %llu staging bytes each, more than this tool holds; lower "
                         "--blocks",
                         s->command, (unsigned long long)s->num_blocks, (unsigned long long)per_block);
    /* The pattern of --seed, this side's head 0 being global head
     * --head-offset, written into the cache. */
    if ((rc = xpat_init(&s->pattern, s->backend, s->cache, s->seed, s->head_offset)) != KVRT_OK)
        return cli_fail_status(rc);
    struct kvrt_xfer_agent_options o;
    kvrt_xfer_agent_options_default(&o);
    o.timeout_s = s->timeout;
    o.staging_bytes = s->staging_bytes;
    o.chunk_bytes = s->chunk_bytes;
    o.key_file = s->key_file;
    o.allow = s->allow;
    o.flags = (s->insecure ? KVRT_XFER_INSECURE : 0) | (s->require_grants ? KVRT_XFER_REQUIRE_GRANTS : 0);
    if ((rc = kvrt_xfer_agent_create(s->backend, s->cache, &o, &s->agent)) != KVRT_OK)
        return cli_fail_status(rc);
    /* Agent-wide: the peer pushes as soon as its connect returns. */
    if (s->num_grant_ids && kvrt_xfer_agent_grant(s->agent, KVRT_XFER_GRANT_READ | KVRT_XFER_GRANT_WRITE, s->grant_ids,
                                                  (size_t)s->num_grant_ids) != KVRT_OK)
        return cli_error(CLI_EXIT_USAGE, "--grant: %s", kvrt_error_message());
    return CLI_EXIT_OK;
}

void xfer_side_free(struct xfer_side *s)
{
    kvrt_xfer_agent_destroy(s->agent);
    xpat_free(&s->pattern);
    for (size_t i = 0; i < s->num_records; i++)
        xpat_record_free(&s->records[i]);
    free(s->records);
    free(s->grant_ids);
    kvrt_placement_destroy(s->placement);
    if (s->rt)
        kvrt_runtime_close(s->rt);
    cli_model_flags_free(&s->flags);
}

int xfer_side_staging(const struct xfer_side *s, uint64_t *chunks, uint64_t *chunk_bytes)
{
    struct kvrt_xfer_stats st;
    memset(&st, 0, sizeof(st));
    st.size = sizeof(st);
    int rc = kvrt_xfer_agent_stats(s->agent, &st);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    *chunks = st.staging_chunks;
    *chunk_bytes = st.chunk_bytes;
    return CLI_EXIT_OK;
}

json_t *xfer_side_staging_json(const struct xfer_side *s)
{
    uint64_t chunks = 0, chunk_bytes = 0;
    if (xfer_side_staging(s, &chunks, &chunk_bytes) != CLI_EXIT_OK)
        return NULL;
    json_t *o = json_object();
    if (!kvrt_json_put(o, "chunks", cli_json_u64(chunks, "staging chunks")) ||
        !kvrt_json_put(o, "chunk_bytes", cli_json_u64(chunk_bytes, "chunk_bytes"))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

void xfer_side_print_staging(const struct xfer_side *s)
{
    uint64_t chunks = 0, chunk_bytes = 0;
    char size[32];
    if (xfer_side_staging(s, &chunks, &chunk_bytes) != CLI_EXIT_OK)
        return;
    cli_format_bytes(chunk_bytes, size, sizeof(size));
    printf("staging    %llu chunks of %s (%llu bytes)\n", (unsigned long long)chunks, size,
           (unsigned long long)chunk_bytes);
}

uint64_t xfer_side_verify(struct xfer_side *s, char *where, size_t size)
{
    for (size_t i = 0; i < s->num_records; i++) {
        xpat_apply(&s->pattern, &s->records[i]);
        xpat_record_free(&s->records[i]);
    }
    s->num_records = 0;
    return xpat_verify(&s->pattern, where, size);
}

bool xfer_side_take_record(struct xfer_side *s, const char *text, struct xpat_record *r)
{
    if (!xpat_record_parse(text, r)) {
        cli_error(CLI_EXIT_INTERNAL, "%s: a notification is not a kvrt xfer record", s->command);
        return false;
    }
    if (r->pull)
        return true;
    if (s->num_records == s->cap_records) {
        size_t cap = s->cap_records ? 2 * s->cap_records : 16;
        struct xpat_record *v = realloc(s->records, cap * sizeof(*v));
        if (!v) {
            xpat_record_free(r);
            cli_error(CLI_EXIT_INTERNAL, "%s: out of memory for a transfer's record", s->command);
            return false;
        }
        s->records = v;
        s->cap_records = cap;
    }
    struct xpat_record *keep = &s->records[s->num_records];
    if (!xpat_record_parse(text, keep)) {
        xpat_record_free(r);
        cli_error(CLI_EXIT_INTERNAL, "%s: out of memory for a transfer's record", s->command);
        return false;
    }
    s->num_records++;
    return true;
}

/* ---- parsing ---------------------------------------------------------------- */

bool xfer_parse_endpoint(const char *option, const char *text, char *addr, size_t size, uint16_t *port)
{
    const char *colon = strrchr(text, ':');
    const char *p = colon ? colon + 1 : text;
    uint64_t v;
    size_t alen = colon ? (size_t)(colon - text) : 0;
    if (alen >= size) {
        cli_error(CLI_EXIT_USAGE, "%s: address in \"%s\" is too long", option, text);
        return false;
    }
    if (!cli_parse_u64(option, p, 0, 65535, &v))
        return false;
    if (alen == 0)
        snprintf(addr, size, "127.0.0.1");
    else {
        memcpy(addr, text, alen);
        addr[alen] = '\0';
    }
    *port = (uint16_t)v;
    return true;
}

bool xfer_parse_ids(const char *option, const char *text, int64_t **ids, uint64_t *n)
{
    size_t cap = 16;
    *n = 0;
    *ids = malloc(cap * sizeof(**ids));
    const char *p = text;
    while (*ids && *p) {
        char *end;
        unsigned long long a = strtoull(p, &end, 10), b;
        if (end == p || *p == '-' || *p == '+')
            goto bad;
        b = a;
        if (*end == '-') {
            const char *q = end + 1;
            b = strtoull(q, &end, 10);
            if (end == q || *q == '-' || *q == '+' || b < a)
                goto bad;
        }
        if (*end != ',' && *end != '\0')
            goto bad;
        if (b > (1ull << 40) || b - a > (1u << 24))
            goto bad;
        for (unsigned long long v = a; v <= b; v++) {
            if (*n == cap) {
                int64_t *g = realloc(*ids, cap * 2 * sizeof(**ids));
                if (!g)
                    goto bad;
                *ids = g;
                cap *= 2;
            }
            (*ids)[(*n)++] = (int64_t)v;
        }
        p = *end ? end + 1 : end;
    }
    if (*ids && *n > 0)
        return true;
bad:
    free(*ids);
    *ids = NULL;
    cli_error(CLI_EXIT_USAGE, "%s: \"%s\" is not a block id list; write ids and ranges like 0-7,12,9", option, text);
    return false;
}

/* ---- the subcommand ------------------------------------------------------- */

static void xfer_help(FILE *out)
{
    fprintf(out, "Usage: kvrt xfer serve [options]                  (one terminal)\n"
                 "       kvrt xfer send --connect ADDR:PORT [options]   (another)\n"
                 "\n"
                 "A demo of libkvrt-xfer's asynchronous API between two processes: both\n"
                 "sides fill their cache with a deterministic pattern of their --seed; send\n"
                 "posts transfers (push, or --pull; --inflight at a time) and the receiving\n"
                 "side verifies every byte against the sender's pattern, converted through\n"
                 "its own layout, as the notifications say.  Both sleep on the agent's event\n"
                 "fd between rounds of progress.  send prints the plan (method, regions, data\n"
                 "messages, staging chunks), the bytes, the time and GB/s.  Same layout: one\n"
                 "message per planned region; other layouts: one per region-to-region run\n"
                 "when the runs are long, else pipelined staging-order chunks.\n"
                 "\n"
                 "Options:\n");
    cli_xfer_serve_help(out, false);
    fprintf(out, "\n");
    cli_xfer_send_help(out, false);
    fprintf(out, "\n"
                 "Common to both:\n");
    xfer_print_common_options(out);
    cli_model_print_options(out);
    fprintf(out,
            "\n"
            "Environment:\n"
            "  UCX_TLS           UCX transports: tcp, or sm,tcp for shared memory on one host\n"
            "                    (the listener handshake needs tcp)\n"
            "  UCX_NET_DEVICES   e.g. lo to keep tcp on loopback\n"
            "  %s, %s  as for the other commands\n"
            "\n"
            "Example (two terminals):\n"
            "  kvrt xfer serve --layers 2 --kv-heads 8 --head-size 128 --dtype bf16 --blocks 64 \\\n"
            "                  --layout LBNHC\n"
            "  kvrt xfer send --connect 127.0.0.1:13337 --layers 2 --kv-heads 8 --head-size 128 \\\n"
            "                 --dtype bf16 --blocks 64 --layout BLHNC --ids 0-15 --remote-ids 32-47\n",
            KVRT_LAYOUT_ENV, KVRT_BACKEND_ENV);
}

static const struct cli_command *const xfer_subcommands[] = {&cli_xfer_serve_command, &cli_xfer_send_command, NULL};

static int xfer_run(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        if (argc < 2)
            return cli_error(CLI_EXIT_USAGE, "xfer: a subcommand is required: serve or send (see 'kvrt xfer --help')");
        xfer_help(stdout);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; xfer_subcommands[i]; i++)
        if (strcmp(argv[1], xfer_subcommands[i]->name) == 0)
            return xfer_subcommands[i]->run(argc - 1, argv + 1);
    return cli_error(CLI_EXIT_USAGE, "xfer: unknown subcommand \"%s\"; valid are serve and send", argv[1]);
}

const struct cli_command cli_xfer_command = {
    .name = "xfer",
    .summary = "move KV blocks between two processes over UCX (serve / send)",
    .run = xfer_run,
    .help = xfer_help,
    .subcommands = xfer_subcommands,
};
