/* kvrt store stat|ls|verify|gc DIR: a store folder as it is, read through
 * libkvrt-store (the description and every check are the library's). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/store.h>

#include "commands.h"

enum store_opt { SO_JSON, SO_DROP, SO_TARGET, SO_PROMETHEUS };

static const struct cli_option json_options[] = {
    {"--json", NULL, SO_JSON, false, "print one JSON object"},
    CLI_OPTIONS_END,
};
static const struct cli_option prometheus_options[] = {
    {"--prometheus", NULL, SO_PROMETHEUS, false,
     "print the directory's counters (every process's) in Prometheus'\n"
     "text exposition format"},
    CLI_OPTIONS_END,
};
static const struct cli_option verify_options[] = {
    {"--drop", NULL, SO_DROP, false, "delete the entries that fail (they would be dropped when read)"},
    CLI_OPTIONS_END,
};
static const struct cli_option gc_options[] = {
    {"--target", "SIZE", SO_TARGET, false,
     "trim to this many bytes (default: the store's capacity);\n"
     "least recently used entries go first"},
    CLI_OPTIONS_END,
};

struct store_args {
    bool json, drop, prometheus;
    uint64_t target;
};

static int apply(void *request, const struct cli_option *opt, const char *value)
{
    struct store_args *a = request;
    switch (opt->id) {
    case SO_JSON: a->json = true; return CLI_EXIT_OK;
    case SO_DROP: a->drop = true; return CLI_EXIT_OK;
    case SO_PROMETHEUS: a->prometheus = true; return CLI_EXIT_OK;
    case SO_TARGET: return cli_parse_size(opt->name, value, &a->target) ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    default: return cli_error(CLI_EXIT_INTERNAL, "store: option %s has no handler", opt->name);
    }
}

/* The folder (the first argument that is neither an option nor an option's
 * value) out of argv, the options parsed; the exit status. */
static int parse(const char *command, int argc, char **argv, const struct cli_option *const *tables,
                 struct store_args *a, const char **dir, bool *help)
{
    *help = false;
    *dir = NULL;
    *a = (struct store_args){false, false, false, 0};
    char **rest = calloc((size_t)argc + 1, sizeof(*rest));
    if (!rest)
        return cli_error(CLI_EXIT_INTERNAL, "%s: out of memory", command);
    int n = 0;
    *dir = NULL;
    rest[n++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) == 0 || strcmp(arg, "-h") == 0) {
            rest[n++] = argv[i];
            size_t len = strcspn(arg, "=");
            bool takes_value = false;
            for (size_t t = 0; tables[t]; t++)
                for (const struct cli_option *o = tables[t]; o->name; o++)
                    if (strlen(o->name) == len && strncmp(o->name, arg, len) == 0 && o->metavar && !arg[len])
                        takes_value = true;
            if (takes_value && i + 1 < argc)
                rest[n++] = argv[++i];
        } else if (!*dir) {
            *dir = arg;
        } else {
            free(rest);
            return cli_error(CLI_EXIT_USAGE, "%s: one store folder, not \"%s\" as well (see 'kvrt %s --help')", command,
                             arg, command);
        }
    }
    *a = (struct store_args){false, false, false, 0};
    int code = cli_parse_options(command, n, rest, tables, apply, a, help);
    free(rest);
    if (code == CLI_EXIT_OK && !*help && !*dir)
        return cli_error(CLI_EXIT_USAGE, "%s: the store folder is required (see 'kvrt %s --help')", command, command);
    return code;
}

static int open_dir(const char *dir, kvrt_store **s)
{
    struct kvrt_store_options o;
    kvrt_store_options_default(&o);
    o.path = dir;
    o.memory_bytes = 0;
    int rc = kvrt_store_open(&o, s);
    return rc == KVRT_OK ? CLI_EXIT_OK : cli_fail_status(rc);
}

/* ---- stat ------------------------------------------------------------------ */

static uint64_t num(json_t *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    json_t *v = o;
    char *save = NULL;
    for (char *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
        v = json_object_get(v, k);
    return json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

static const char *str(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(json_object_get(o, a), b);
    return json_is_string(v) ? json_string_value(v) : "";
}

static void print_stat(json_t *d)
{
    char b1[32], b2[32], b3[32], buf[512];
    printf("store %s (format version %llu)\n", cli_printable(str(d, "disk", "path"), buf, sizeof(buf)),
           (unsigned long long)num(d, "format_version"));
    printf("  model        %s\n", cli_printable(str(d, "model", "model_id"), buf, sizeof(buf)));
    printf("  fingerprint  %s\n", str(d, "model", "fingerprint"));
    json_t *layers = json_object_get(json_object_get(d, "model"), "layers");
    json_t *l0 = json_array_get(layers, 0);
    printf("  layers       %zu, %llu KV heads each; layer 0: %s %s, head size %llu (V %llu)\n", json_array_size(layers),
           (unsigned long long)num(d, "model.num_heads"), json_string_value(json_object_get(l0, "kind")),
           json_string_value(json_object_get(l0, "dtype")), (unsigned long long)num(l0, "head_size"),
           (unsigned long long)num(l0, "head_size_v"));
    if (num(d, "model.layers_per_entry"))
        printf("  layer groups %llu layers per entry (the last group may be shorter, its entries padded)\n",
               (unsigned long long)num(d, "model.layers_per_entry"));
    cli_format_bytes(num(d, "model.entry_bytes"), b1, sizeof(b1));
    printf("  entries of   %llu tokens of one head: %s each (%llu bytes with the header)\n",
           (unsigned long long)num(d, "model.chunk_tokens"), b1,
           (unsigned long long)num(d, "model.entry_bytes_stored"));
    cli_format_bytes(num(d, "disk.bytes"), b1, sizeof(b1));
    cli_format_bytes(num(d, "disk.capacity"), b2, sizeof(b2));
    cli_format_bytes(num(d, "disk.file_bytes"), b3, sizeof(b3));
    printf("  stored       %llu entries, %s of %s (data file %s)\n", (unsigned long long)num(d, "disk.entries"), b1, b2,
           b3);
    printf("  hits         %llu, misses %llu, entries written %llu, evicted %llu (every process)\n",
           (unsigned long long)num(d, "disk.hits"), (unsigned long long)num(d, "disk.misses"),
           (unsigned long long)num(d, "disk.writes"), (unsigned long long)num(d, "disk.evictions"));
}

/* The store's Prometheus text (kvrt_store_metrics), then the store closed. */
static int print_metrics(kvrt_store *s)
{
    size_t need = 0;
    char *buf = NULL;
    int rc = kvrt_store_metrics(s, NULL, 0, &need);
    if (rc == KVRT_OK && !(buf = malloc(need)))
        rc = KVRT_ERR_NOMEM;
    if (rc == KVRT_OK)
        rc = kvrt_store_metrics(s, buf, need, NULL);
    kvrt_store_close(s);
    if (rc == KVRT_OK)
        fputs(buf, stdout);
    free(buf);
    if (rc == KVRT_ERR_NOMEM && !buf)
        return cli_error(CLI_EXIT_INTERNAL, "store stat: out of memory");
    return rc == KVRT_OK ? CLI_EXIT_OK : cli_fail_status(rc);
}

static int stat_run(int argc, char **argv)
{
    static const struct cli_option *const tables[] = {json_options, prometheus_options, NULL};
    struct store_args a;
    const char *dir;
    bool help;
    int code = parse("store stat", argc, argv, tables, &a, &dir, &help);
    if (code != CLI_EXIT_OK || help) {
        if (help)
            cli_store_stat_command.help(stdout);
        return code;
    }
    if (a.json && a.prometheus)
        return cli_error(CLI_EXIT_USAGE, "store stat: give --json or --prometheus, not both");
    kvrt_store *s;
    if ((code = open_dir(dir, &s)) != CLI_EXIT_OK)
        return code;
    if (a.prometheus)
        return print_metrics(s);
    char *text = NULL;
    int rc = kvrt_store_describe_json(s, &text);
    kvrt_store_close(s);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    if (a.json)
        return cli_print_json_text(rc, text);
    json_t *d = json_loads(text, 0, NULL);
    kvrt_free(text);
    if (!d)
        return cli_error(CLI_EXIT_INTERNAL, "store stat: the store's description is not JSON");
    print_stat(d);
    json_decref(d);
    return CLI_EXIT_OK;
}

/* ---- ls -------------------------------------------------------------------- */

struct ls_ctx {
    json_t *list; /* --json */
    uint64_t n;
    bool failed;
};

static json_t *entry_json(const struct kvrt_store_entry_info *e)
{
    char hex[65];
    kvrt_store_hex(e->key, hex);
    json_t *o = json_object();
    bool ok = o && kvrt_json_put(o, "key", kvrt_json_str(hex)) &&
              kvrt_json_put(o, "head", cli_json_u64(e->head, "head")) &&
              kvrt_json_put(o, "bytes", cli_json_u64(e->bytes, "bytes")) &&
              kvrt_json_put(o, "last_used", cli_json_u64(e->last_used, "last_used"));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int ls_one(void *user, const struct kvrt_store_entry_info *e)
{
    struct ls_ctx *c = user;
    c->n++;
    if (c->list) {
        c->failed = !kvrt_json_append(c->list, entry_json(e));
        return c->failed;
    }
    char hex[65];
    kvrt_store_hex(e->key, hex);
    printf("%s %4llu %10llu %10llu\n", hex, (unsigned long long)e->head, (unsigned long long)e->bytes,
           (unsigned long long)e->last_used);
    return 0;
}

static int ls_run(int argc, char **argv)
{
    static const struct cli_option *const tables[] = {json_options, NULL};
    struct store_args a;
    const char *dir;
    bool help;
    int code = parse("store ls", argc, argv, tables, &a, &dir, &help);
    if (code != CLI_EXIT_OK || help) {
        if (help)
            cli_store_ls_command.help(stdout);
        return code;
    }
    kvrt_store *s;
    if ((code = open_dir(dir, &s)) != CLI_EXIT_OK)
        return code;
    struct ls_ctx c = {a.json ? json_array() : NULL, 0, false};
    if (!a.json)
        printf("%-64s %4s %10s %10s\n", "key", "head", "bytes", "last used");
    int rc = kvrt_store_list(s, ls_one, &c);
    kvrt_store_close(s);
    if (rc != KVRT_OK || c.failed) {
        json_decref(c.list);
        return c.failed ? cli_error(CLI_EXIT_INTERNAL, "store ls: out of memory") : cli_fail_status(rc);
    }
    if (!a.json) {
        printf("%llu entries\n", (unsigned long long)c.n);
        return CLI_EXIT_OK;
    }
    json_t *o = json_object();
    if (!o || !kvrt_json_put(o, "path", kvrt_json_str(dir)) || !kvrt_json_put(o, "entries", c.list)) {
        json_decref(o);
        return cli_error(CLI_EXIT_INTERNAL, "store ls: out of memory");
    }
    return cli_json_print(o);
}

/* ---- verify ------------------------------------------------------------------ */

struct verify_ctx {
    json_t *bad; /* --json */
};

static void verify_bad(void *user, const struct kvrt_store_entry_info *e, const char *why)
{
    struct verify_ctx *c = user;
    char hex[65];
    kvrt_store_hex(e->key, hex);
    if (!c->bad) {
        printf("bad %s/head %llu: %s\n", hex, (unsigned long long)e->head, why);
        return;
    }
    json_t *o = entry_json(e);
    if (o && kvrt_json_put(o, "why", kvrt_json_str(why)))
        kvrt_json_append(c->bad, o);
}

static int verify_run(int argc, char **argv)
{
    static const struct cli_option *const tables[] = {verify_options, json_options, NULL};
    struct store_args a;
    const char *dir;
    bool help;
    int code = parse("store verify", argc, argv, tables, &a, &dir, &help);
    if (code != CLI_EXIT_OK || help) {
        if (help)
            cli_store_verify_command.help(stdout);
        return code;
    }
    kvrt_store *s;
    if ((code = open_dir(dir, &s)) != CLI_EXIT_OK)
        return code;
    struct verify_ctx c = {a.json ? json_array() : NULL};
    struct kvrt_store_verify_report r = {0};
    int rc = kvrt_store_verify(s, a.drop, verify_bad, &c, &r);
    kvrt_store_close(s);
    if (rc != KVRT_OK) {
        json_decref(c.bad);
        return cli_fail_status(rc);
    }
    code = r.bad ? CLI_EXIT_INTERNAL : CLI_EXIT_OK;
    if (!a.json) {
        printf("%llu entries verified: %llu bad%s\n", (unsigned long long)r.entries, (unsigned long long)r.bad,
               a.drop && r.bad ? ", dropped" : "");
        return code;
    }
    json_t *o = json_object();
    bool ok = o && kvrt_json_put(o, "path", kvrt_json_str(dir)) &&
              kvrt_json_put(o, "entries", cli_json_u64(r.entries, "entries")) &&
              kvrt_json_put(o, "bad", cli_json_u64(r.bad, "bad")) &&
              kvrt_json_put(o, "dropped", cli_json_u64(r.dropped, "dropped")) && kvrt_json_put(o, "problems", c.bad);
    if (!ok) {
        json_decref(o);
        return cli_error(CLI_EXIT_INTERNAL, "store verify: out of memory");
    }
    int pc = cli_json_print(o);
    return pc != CLI_EXIT_OK ? pc : code;
}

/* ---- gc -------------------------------------------------------------------- */

static int gc_run(int argc, char **argv)
{
    static const struct cli_option *const tables[] = {gc_options, json_options, NULL};
    struct store_args a;
    const char *dir;
    bool help;
    int code = parse("store gc", argc, argv, tables, &a, &dir, &help);
    if (code != CLI_EXIT_OK || help) {
        if (help)
            cli_store_gc_command.help(stdout);
        return code;
    }
    kvrt_store *s;
    if ((code = open_dir(dir, &s)) != CLI_EXIT_OK)
        return code;
    uint64_t evicted = 0;
    struct kvrt_store_stats st = {0};
    int rc = kvrt_store_gc(s, a.target, &evicted);
    if (rc == KVRT_OK)
        rc = kvrt_store_stats(s, &st);
    kvrt_store_close(s);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    if (!a.json) {
        char b1[32], b2[32];
        cli_format_bytes(st.disk_bytes, b1, sizeof(b1));
        cli_format_bytes(st.disk_capacity, b2, sizeof(b2));
        printf("evicted %llu entries; %llu left, %s (capacity %s)\n", (unsigned long long)evicted,
               (unsigned long long)st.disk_entries, b1, b2);
        return CLI_EXIT_OK;
    }
    json_t *o = json_object();
    bool ok = o && kvrt_json_put(o, "path", kvrt_json_str(dir)) &&
              kvrt_json_put(o, "evicted", cli_json_u64(evicted, "evicted")) &&
              kvrt_json_put(o, "entries", cli_json_u64(st.disk_entries, "entries")) &&
              kvrt_json_put(o, "bytes", cli_json_u64(st.disk_bytes, "bytes")) &&
              kvrt_json_put(o, "capacity", cli_json_u64(st.disk_capacity, "capacity"));
    if (!ok) {
        json_decref(o);
        return cli_error(CLI_EXIT_INTERNAL, "store gc: out of memory");
    }
    return cli_json_print(o);
}

/* ---- help and the command ---------------------------------------------------- */

static void stat_help(FILE *out)
{
    fprintf(out, "kvrt store stat DIR [--json | --prometheus]\n"
                 "  The store in folder DIR: its format version, the model it is for (id,\n"
                 "  fingerprint, layers, heads, types), the chunk and entry sizes, the\n"
                 "  entries and bytes stored against the capacity, and the hits, misses,\n"
                 "  writes and evictions every process using it has recorded.\n");
    cli_print_options(out, json_options, 22);
    cli_print_options(out, prometheus_options, 22);
}

static void ls_help(FILE *out)
{
    fprintf(out, "kvrt store ls DIR [--json]\n"
                 "  Every entry in key order: its chunk key, model head, bytes and the\n"
                 "  store's clock when it was last written or read (older goes first).\n");
    cli_print_options(out, json_options, 22);
}

static void verify_help(FILE *out)
{
    fprintf(out, "kvrt store verify DIR [--drop] [--json]\n"
                 "  Check every entry (header, fingerprint, key, sizes, checksum) and print\n"
                 "  each bad one with what is wrong.  Exit status 1 when any is bad.\n");
    cli_print_options(out, verify_options, 22);
    cli_print_options(out, json_options, 22);
}

static void gc_help(FILE *out)
{
    fprintf(out, "kvrt store gc DIR [--target SIZE] [--json]\n"
                 "  Evict least recently used entries until the store holds at most SIZE\n"
                 "  (default: its capacity).  LMDB reuses the pages it frees.\n");
    cli_print_options(out, gc_options, 22);
    cli_print_options(out, json_options, 22);
}

static const struct cli_option *const stat_tables[] = {json_options, prometheus_options, NULL};
static const struct cli_option *const ls_tables[] = {json_options, NULL};
static const struct cli_option *const verify_tables[] = {verify_options, json_options, NULL};
static const struct cli_option *const gc_tables[] = {gc_options, json_options, NULL};

const struct cli_command cli_store_stat_command = {"stat", "describe a store", stat_run, stat_help, stat_tables, NULL};
const struct cli_command cli_store_ls_command = {"ls", "list its entries", ls_run, ls_help, ls_tables, NULL};
const struct cli_command cli_store_verify_command = {"verify",    "check every entry", verify_run,
                                                     verify_help, verify_tables,       NULL};
const struct cli_command cli_store_gc_command = {"gc", "trim it to a size", gc_run, gc_help, gc_tables, NULL};

static const struct cli_command *const store_subcommands[] = {&cli_store_stat_command, &cli_store_ls_command,
                                                              &cli_store_verify_command, &cli_store_gc_command, NULL};

static void store_help(FILE *out)
{
    fprintf(out, "Usage: kvrt store stat|ls|verify|gc DIR [options]\n"
                 "\n"
                 "A libkvrt-store folder as it is, read without the model (docs/store.md):\n"
                 "what it holds, its entries, a check of every entry, a trim to a size.\n"
                 "Engines write it through libkvrt-store (C) or kvrt.Store (Python).\n"
                 "\n");
    for (size_t i = 0; store_subcommands[i]; i++) {
        store_subcommands[i]->help(out);
        fputc('\n', out);
    }
    fprintf(out, "Exit status: 0 done; 1 bad entries found (verify) or a failure; 2 a folder\n"
                 "that is not a store of this format, or bad usage.\n"
                 "\n"
                 "Example:\n"
                 "  kvrt store stat /var/cache/kvrt --json\n"
                 "  kvrt store stat /var/cache/kvrt --prometheus\n"
                 "  kvrt store verify /var/cache/kvrt --drop\n"
                 "  kvrt store gc /var/cache/kvrt --target 8GiB\n");
}

static int store_run(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        if (argc < 2)
            return cli_error(CLI_EXIT_USAGE,
                             "store: a subcommand is required: stat, ls, verify or gc (see 'kvrt store --help')");
        store_help(stdout);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; store_subcommands[i]; i++)
        if (strcmp(argv[1], store_subcommands[i]->name) == 0)
            return store_subcommands[i]->run(argc - 1, argv + 1);
    return cli_error(CLI_EXIT_USAGE, "store: unknown subcommand \"%s\"; valid are stat, ls, verify and gc", argv[1]);
}

const struct cli_command cli_store_command = {
    .name = "store",
    .summary = "describe, list, verify and trim a KV store folder",
    .run = store_run,
    .help = store_help,
    .subcommands = store_subcommands,
};
