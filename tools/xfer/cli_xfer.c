/* kvrt xfer: the two sides' shared set-up, pattern and expected state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/layout.h>
#include <kvrt/placement.h>

#include "cli_xfer.h"

const struct cli_option xfer_common_options[] = {
    {"--backend", "NAME", XO_BACKEND, false,
     "backend of the cache (default: $" KVRT_BACKEND_ENV ", else the first\n"
     "available); caches without registrable memory use host staging"},
    {"--layout", "NAME", XO_LAYOUT, false,
     "layout of this side's cache (default: $" KVRT_LAYOUT_ENV ",\n"
     "else kvrt's default, below); the two sides may differ:\n"
     "kvrt converts"},
    {"--seed", "N", XO_SEED, false, "pattern of this side's cache (default: serve 2, send 1)"},
    {"--head-offset", "H", XO_HEAD_OFFSET, false,
     "global index of this side's head 0 in the pattern (tensor\n"
     "parallel ranks: rank x heads per rank; default 0)"},
    {"--timeout", "S", XO_TIMEOUT, false, "longest wait in seconds (connect, accept, a transfer; default 30)"},
    {"--staging-bytes", "SIZE", XO_STAGING, false,
     "registered staging area (default: the whole cache's\n"
     "staging bytes, at most 64 MiB)"},
    {"--json", NULL, XO_JSON, false, "print one JSON object"},
    CLI_OPTIONS_END,
};

void xfer_print_common_options(FILE *out)
{
    cli_print_options(out, xfer_common_options, 20);
    fprintf(out, "  (kvrt's default layout: %s)\n", kvrt_layout_name(kvrt_layout_default()));
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
    case XO_HEAD_OFFSET: *ok = cli_parse_u64(opt->name, v, 0, 1u << 20, &s->head_offset); return true;
    case XO_TIMEOUT: *ok = parse_seconds(opt->name, v, &s->timeout); return true;
    case XO_STAGING: *ok = cli_parse_size(opt->name, v, &s->staging_bytes); return true;
    default: return false;
    }
}

/* ---- the pattern ------------------------------------------------------------ */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* The C bytes of one (layer, block, global head, state) cell: defined on
 * logical coordinates only, so every layout holds the same values. */
static void pattern_cell(uint64_t seed, uint64_t l, uint64_t b, uint64_t g, uint64_t st, uint8_t *out, uint64_t c)
{
    uint64_t base = mix(seed ^ mix(l + 1) ^ mix((b + 1) << 20) ^ mix((g + 1) << 40) ^ mix(st * 0x9e3779b97f4a7c15ull));
    for (uint64_t i = 0; i < c; i += 8) {
        uint64_t w = mix(base + i);
        uint64_t n = c - i < 8 ? c - i : 8;
        for (uint64_t k = 0; k < n; k++)
            out[i + k] = (uint8_t)(w >> (8 * k));
    }
}

static uint8_t *cell_at(struct xfer_side *s, uint64_t b, uint64_t l, uint64_t h, uint64_t st)
{
    return s->expected + b * s->staging_per_block + s->layer_offset[l] +
           (h * s->layer_states[l] + st) * s->layer_content[l];
}

static int describe_layers(struct xfer_side *s)
{
    size_t nsets = kvrt_placement_num_sets(s->placement);
    s->num_layers = kvrt_cache_num_layers(s->cache);
    s->layer_offset = calloc(s->num_layers, sizeof(uint64_t));
    s->layer_heads = calloc(s->num_layers, sizeof(uint64_t));
    s->layer_states = calloc(s->num_layers, sizeof(uint64_t));
    s->layer_content = calloc(s->num_layers, sizeof(uint64_t));
    if (!s->layer_offset || !s->layer_heads || !s->layer_states || !s->layer_content)
        return cli_error(CLI_EXIT_INTERNAL, "%s: out of memory", s->command);
    uint64_t n = 0, off = 0;
    for (size_t i = 0; i < nsets; i++) {
        struct kvrt_placement_set set;
        kvrt_placement_get_set(s->placement, i, &set);
        for (uint64_t l = 0; l < set.num_layers; l++, n++) {
            s->layer_offset[n] = off;
            s->layer_heads[n] = set.geometry.info.head_slots;
            s->layer_states[n] = set.geometry.info.states_per_block;
            s->layer_content[n] = set.geometry.info.content_bytes;
            off += s->layer_heads[n] * s->layer_states[n] * s->layer_content[n];
        }
    }
    s->staging_per_block = off;
    return CLI_EXIT_OK;
}

static int move_all(struct xfer_side *s, bool to_cache, uint8_t *host)
{
    uint64_t bytes = s->num_blocks * s->staging_per_block;
    int64_t *ids = malloc(s->num_blocks * sizeof(*ids));
    kvrt_buffer *buf = NULL;
    if (!ids)
        return KVRT_ERR_NOMEM;
    for (uint64_t b = 0; b < s->num_blocks; b++)
        ids[b] = (int64_t)b;
    int rc = kvrt_buffer_create(s->backend, bytes, &buf);
    if (rc == KVRT_OK && to_cache) {
        rc = kvrt_buffer_upload(buf, 0, host, bytes);
        if (rc == KVRT_OK)
            rc = kvrt_cache_scatter(s->cache, s->num_blocks, ids, buf, 0);
    } else if (rc == KVRT_OK) {
        rc = kvrt_cache_gather(s->cache, s->num_blocks, ids, buf, 0);
        if (rc == KVRT_OK)
            rc = kvrt_buffer_download(buf, 0, host, bytes);
    }
    kvrt_buffer_destroy(buf);
    free(ids);
    return rc;
}

int xfer_side_set_up(struct xfer_side *s)
{
    int code = cli_model_build(&s->flags, true, &s->model);
    if (code != CLI_EXIT_OK)
        return code;
    int rc = kvrt_runtime_open(NULL, &s->rt);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    const char *backend = s->backend_name;
    size_t index;
    if (backend && (rc = kvrt_runtime_find_plugin(s->rt, backend, &index)) != KVRT_OK)
        return cli_fail_status(rc);
    if (!backend && (rc = kvrt_runtime_default_backend(s->rt, &backend)) != KVRT_OK)
        return cli_fail_status(rc);
    s->backend_name = backend;
    const char *source;
    enum kvrt_layout given = KVRT_LAYOUT_LBNHC;
    if (s->layout_name && (rc = kvrt_layout_parse(s->layout_name, &given)) != KVRT_OK)
        return cli_fail_status(rc);
    if ((code = cli_layout_or_env(s->layout_name ? s->layout_option : NULL, given, &s->layout, &source)) != CLI_EXIT_OK)
        return code;
    if ((rc = kvrt_runtime_bind(s->rt, backend, kvrt_layout_name(s->layout), &s->backend)) != KVRT_OK)
        return cli_fail_status(rc);
    if ((code = cli_model_num_blocks(&s->flags, s->model, s->layout, 64, &s->num_blocks)) != CLI_EXIT_OK)
        return code;
    rc = kvrt_placement_create(s->layout, s->model->placement_groups, s->model->num_groups, s->num_blocks, 0,
                               &s->placement);
    if (rc == KVRT_OK)
        rc = kvrt_cache_create(s->backend, s->placement, &s->cache);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    if ((code = describe_layers(s)) != CLI_EXIT_OK)
        return code;
    uint64_t bytes;
    if (__builtin_mul_overflow(s->num_blocks, s->staging_per_block, &bytes) || bytes > (1ull << 36) ||
        !(s->expected = malloc(bytes ? bytes : 1)))
        return cli_error(CLI_EXIT_USAGE,
                         "%s: the cache's %llu blocks need %llu staging bytes, more than this "
                         "tool holds; lower --blocks",
                         s->command, (unsigned long long)s->num_blocks, (unsigned long long)s->staging_per_block);
    for (uint64_t b = 0; b < s->num_blocks; b++)
        for (uint64_t l = 0; l < s->num_layers; l++)
            for (uint64_t h = 0; h < s->layer_heads[l]; h++)
                for (uint64_t st = 0; st < s->layer_states[l]; st++)
                    pattern_cell(s->seed, l, b, s->head_offset + h, st, cell_at(s, b, l, h, st), s->layer_content[l]);
    if ((rc = move_all(s, true, s->expected)) != KVRT_OK)
        return cli_fail_status(rc);
    struct kvrt_xfer_agent_options o;
    kvrt_xfer_agent_options_default(&o);
    o.timeout_s = s->timeout;
    o.staging_bytes = s->staging_bytes;
    if ((rc = kvrt_xfer_agent_create(s->backend, s->cache, &o, &s->agent)) != KVRT_OK)
        return cli_fail_status(rc);
    return CLI_EXIT_OK;
}

void xfer_side_free(struct xfer_side *s)
{
    kvrt_xfer_agent_destroy(s->agent);
    kvrt_placement_destroy(s->placement);
    if (s->rt)
        kvrt_runtime_close(s->rt);
    cli_model_flags_free(&s->flags);
    free(s->layer_offset);
    free(s->layer_heads);
    free(s->layer_states);
    free(s->layer_content);
    free(s->expected);
}

uint64_t xfer_side_verify(struct xfer_side *s, char *where, size_t size)
{
    uint64_t bytes = s->num_blocks * s->staging_per_block, bad = 0;
    uint8_t *got = malloc(bytes ? bytes : 1);
    where[0] = '\0';
    if (!got || move_all(s, false, got) != KVRT_OK) {
        snprintf(where, size, "%s", got ? kvrt_error_message() : "out of memory");
        free(got);
        return UINT64_MAX;
    }
    for (uint64_t i = 0; i < bytes; i++) {
        if (got[i] == s->expected[i])
            continue;
        if (bad++ == 0) {
            uint64_t b = i / s->staging_per_block, r = i % s->staging_per_block, l = 0;
            while (l + 1 < s->num_layers && s->layer_offset[l + 1] <= r)
                l++;
            uint64_t in = r - s->layer_offset[l], cell = in / s->layer_content[l];
            snprintf(where, size, "block %llu layer %llu head %llu state %llu byte %llu", (unsigned long long)b,
                     (unsigned long long)l, (unsigned long long)(cell / s->layer_states[l]),
                     (unsigned long long)(cell % s->layer_states[l]), (unsigned long long)(in % s->layer_content[l]));
        }
    }
    free(got);
    return bad;
}

void xfer_side_apply(struct xfer_side *s, const struct xfer_record *r)
{
    for (uint64_t i = 0; i < r->num_blocks; i++) {
        uint64_t d = (uint64_t)r->dst_ids[i], src = (uint64_t)r->src_ids[i];
        if (d >= s->num_blocks)
            continue;
        uint64_t end = r->num_layers ? r->layer_start + r->num_layers : s->num_layers;
        for (uint64_t l = r->layer_start; l < end && l < s->num_layers; l++) {
            uint64_t nh = r->num_heads ? r->num_heads : s->layer_heads[l];
            for (uint64_t h = 0; h < nh && r->dst_head_start + h < s->layer_heads[l]; h++)
                for (uint64_t st = 0; st < s->layer_states[l]; st++)
                    pattern_cell(r->seed, l, src, r->head_offset + r->src_head_start + h, st,
                                 cell_at(s, d, l, r->dst_head_start + h, st), s->layer_content[l]);
        }
    }
}

/* ---- records ---------------------------------------------------------------- */

char *xfer_record_json(const struct xfer_record *r)
{
    json_t *o = json_object(), *src = json_array(), *dst = json_array();
    for (uint64_t i = 0; i < r->num_blocks; i++) {
        json_array_append_new(src, json_integer(r->src_ids[i]));
        json_array_append_new(dst, json_integer(r->dst_ids[i]));
    }
    json_object_set_new(o, "index", json_integer((json_int_t)r->index));
    json_object_set_new(o, "last", json_boolean(r->last));
    json_object_set_new(o, "pull", json_boolean(r->pull));
    json_object_set_new(o, "src", src);
    json_object_set_new(o, "dst", dst);
    json_object_set_new(o, "layers", json_pack("[II]", (json_int_t)r->layer_start, (json_int_t)r->num_layers));
    json_object_set_new(
        o, "heads",
        json_pack("[III]", (json_int_t)r->src_head_start, (json_int_t)r->dst_head_start, (json_int_t)r->num_heads));
    json_object_set_new(o, "seed", json_integer((json_int_t)r->seed));
    json_object_set_new(o, "head_offset", json_integer((json_int_t)r->head_offset));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

static bool ids_from(json_t *a, int64_t **out, uint64_t n)
{
    if (!json_is_array(a) || json_array_size(a) != n)
        return false;
    *out = malloc((n ? n : 1) * sizeof(**out));
    if (!*out)
        return false;
    for (uint64_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v))
            return false;
        (*out)[i] = json_integer_value(v);
    }
    return true;
}

bool xfer_record_parse(const char *text, struct xfer_record *r, const char *command)
{
    memset(r, 0, sizeof(*r));
    json_error_t err;
    json_t *o = json_loads(text, 0, &err);
    json_int_t idx, ls, ln, sh, dh, nh, seed, ho;
    int last, pull;
    json_t *src, *dst;
    bool ok = o && json_unpack(o, "{s:I, s:b, s:b, s:o, s:o, s:[II], s:[III], s:I, s:I}", "index", &idx, "last", &last,
                               "pull", &pull, "src", &src, "dst", &dst, "layers", &ls, &ln, "heads", &sh, &dh, &nh,
                               "seed", &seed, "head_offset", &ho) == 0;
    if (ok) {
        r->num_blocks = json_array_size(src);
        ok = idx >= 0 && ls >= 0 && ln >= 0 && sh >= 0 && dh >= 0 && nh >= 0 && ho >= 0 &&
             ids_from(src, &r->src_ids, r->num_blocks) && ids_from(dst, &r->dst_ids, r->num_blocks);
        r->index = (uint64_t)idx;
        r->last = last;
        r->pull = pull;
        r->layer_start = (uint64_t)ls;
        r->num_layers = (uint64_t)ln;
        r->src_head_start = (uint64_t)sh;
        r->dst_head_start = (uint64_t)dh;
        r->num_heads = (uint64_t)nh;
        r->seed = (uint64_t)seed;
        r->head_offset = (uint64_t)ho;
    }
    json_decref(o);
    if (!ok) {
        xfer_record_free(r);
        cli_error(CLI_EXIT_INTERNAL, "%s: a notification is not a kvrt xfer record", command);
    }
    return ok;
}

void xfer_record_free(struct xfer_record *r)
{
    free(r->src_ids);
    free(r->dst_ids);
    r->src_ids = r->dst_ids = NULL;
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
                 "Move KV blocks between two caches over UCX (libkvrt-xfer): both sides fill\n"
                 "their cache with a deterministic pattern of their --seed; send moves blocks\n"
                 "(push, or --pull) and the receiving side verifies every byte against the\n"
                 "sender's pattern, converted through its own layout.  Both print the plan\n"
                 "(method, regions, RMA operations), the bytes, the time and GB/s.  Same\n"
                 "layout: one RMA per planned region; other layouts: region-to-region RMA\n"
                 "when the runs are long, else staging order and the receiver's scatter.\n"
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
