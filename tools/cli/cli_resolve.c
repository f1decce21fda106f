/* kvrt resolve: choose one layout for a set of backend declarations, and
 * explain why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/resolve.h>

#include "commands.h"
#include "cli.h"

/* "A, B, ..." of `n` layouts. */
static void join_names(const enum kvrt_layout *at, size_t n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", kvrt_layout_name(at[i]));
}

/* The orders the help states, asked of the library rather than retyped: the
 * default preference is what a resolver with no declarations ranks, and the
 * tie-break order is the enum's (table) order. */
static void resolve_orders(char *defaults, char *table, size_t size)
{
    enum kvrt_layout at[KVRT_NUM_LAYOUTS];
    size_t n = 0;
    kvrt_resolver *r = NULL;
    if (kvrt_resolver_create(&r) == KVRT_OK && kvrt_resolver_set_env(r, NULL) == KVRT_OK) {
        enum kvrt_layout chosen;
        if (kvrt_resolver_resolve(r, &chosen) == KVRT_OK)
            n = kvrt_resolver_candidates(r, at);
    }
    kvrt_resolver_destroy(r);
    join_names(at, n, defaults, size);
    for (int i = 0; i < KVRT_NUM_LAYOUTS; i++)
        at[i] = (enum kvrt_layout)i;
    join_names(at, KVRT_NUM_LAYOUTS, table, size);
}

enum resolve_opt { OPT_JSON, OPT_DECLARE, OPT_PREFER, OPT_MIXED };

static const struct cli_option resolve_options[] = {
    {"--declare", "NAME=LIST", OPT_DECLARE, true,
     "backend NAME supports LIST: layouts or aliases,\n"
     "comma-separated, best first; or \"any\".  Repeat per\n"
     "backend (none given: the default preference applies)"},
    {"--prefer", "LAYOUT", OPT_PREFER, false,
     "a soft preference (e.g. a transfer connector's); if it\n"
     "is not a candidate, a warning is reported instead"},
    {"--mixed-shapes", NULL, OPT_MIXED, false,
     "the layers' specs differ in head slots, states or page\n"
     "size"},
    {"--json", NULL, OPT_JSON, false,
     "print one JSON object: layout, candidates, warning,\n"
     "env (as spelled, or null), trace (one string per step),\n"
     "steps (kind, text, and layout and backend where set)"},
    CLI_HELP_ROW,
    CLI_OPTIONS_END,
};

static const struct cli_option *const resolve_tables[] = {resolve_options, NULL};

static void resolve_help(FILE *out)
{
    char defaults[128], table[128];
    resolve_orders(defaults, table, sizeof(defaults));
    fprintf(out,
            "Usage: kvrt resolve [--json] --declare NAME=LIST ... [--prefer LAYOUT]\n"
            "                    [--mixed-shapes]\n"
            "\n"
            "Choose the one layout every backend can handle, following the resolution\n"
            "rules of kvrt (and vLLM): with no declared list the default preference\n"
            "%s applies; identical lists keep\n"
            "their order; different lists are intersected and ranked by how many\n"
            "backends name each layout first (ties in table order:\n"
            "%s); mixed shapes keep\n"
            "only block-compact layouts; %s is a hard constraint; a\n"
            "preference is only a wish.  Prints the choice, the ranked candidates, and\n"
            "the trace of every step.\n"
            "\n"
            "Options:\n",
            defaults, table, KVRT_LAYOUT_ENV);
    cli_print_options(out, resolve_options, 23);
    fprintf(out,
            "\n"
            "Environment:\n"
            "  %s  the layout the user requires; refused (exit 3) when it\n"
            "      is not a candidate, an error (exit 2) when set but not a valid name\n"
            "\n"
            "Example:\n"
            "  kvrt resolve --declare cuda=LBNHC,LBHNC --declare cpu=any --prefer HND\n",
            KVRT_LAYOUT_ENV);
}

/* --declare NAME=LIST into the resolver; `option` names it in messages. */
static int declare(kvrt_resolver *r, const char *option, const char *spec)
{
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || eq[1] == '\0')
        return cli_error(CLI_EXIT_USAGE,
                         "%s \"%s\" is not NAME=LIST: give a backend name, "
                         "\"=\", and comma-separated layouts or \"any\" (e.g. cuda=LBNHC,LBHNC)",
                         option, spec);
    char name[256];
    size_t n = (size_t)(eq - spec);
    if (n >= sizeof(name))
        return cli_error(CLI_EXIT_USAGE, "%s: the backend name is longer than %zu characters", option,
                         sizeof(name) - 1);
    memcpy(name, spec, n);
    name[n] = '\0';
    const char *list = eq + 1;
    int rc;
    if (strcmp(list, "any") == 0) {
        rc = kvrt_resolver_declare_any(r, name);
    } else {
        enum kvrt_layout layouts[KVRT_NUM_LAYOUTS + 1];
        size_t count = 0;
        for (const char *p = list;; p++) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            char item[64];
            if (len == 0 || len >= sizeof(item))
                return cli_error(CLI_EXIT_USAGE,
                                 "%s %s: the list \"%s\" has %s item; give "
                                 "layouts separated by single commas, or \"any\"",
                                 option, name, list, len == 0 ? "an empty" : "an over-long");
            memcpy(item, p, len);
            item[len] = '\0';
            if (count == KVRT_NUM_LAYOUTS)
                return cli_error(CLI_EXIT_USAGE,
                                 "%s %s: the list \"%s\" has more than %d "
                                 "layouts; each layout may appear once",
                                 option, name, list, KVRT_NUM_LAYOUTS);
            if (kvrt_layout_parse(item, &layouts[count]) != KVRT_OK)
                return cli_error(CLI_EXIT_USAGE, "%s %s: %s (or \"any\")", option, name, kvrt_error_message());
            count++;
            if (!comma)
                break;
            p = comma;
        }
        rc = kvrt_resolver_declare(r, name, layouts, count);
    }
    return rc == KVRT_OK ? CLI_EXIT_OK : cli_fail_status(rc);
}

struct resolve_request {
    kvrt_resolver *r;
    bool json;
};

static int apply(void *request, const struct cli_option *opt, const char *value)
{
    struct resolve_request *q = request;
    char source[64];
    switch (opt->id) {
    case OPT_JSON: q->json = true; break;
    case OPT_DECLARE: return declare(q->r, opt->name, value);
    case OPT_PREFER:
        snprintf(source, sizeof(source), "the command line (%s)", opt->name);
        if (kvrt_resolver_set_preference(q->r, value, source) != KVRT_OK)
            return cli_error(CLI_EXIT_USAGE, "%s", kvrt_error_message());
        break;
    case OPT_MIXED: kvrt_resolver_set_mixed_shapes(q->r, true); break;
    }
    return CLI_EXIT_OK;
}

static int parse(kvrt_resolver *r, int argc, char **argv, bool *json, bool *help)
{
    struct resolve_request q = {r, false};
    int code = cli_parse_options("resolve", argc, argv, resolve_tables, apply, &q, help);
    *json = q.json;
    return code;
}

static int report(const kvrt_resolver *r, enum kvrt_layout chosen, bool json)
{
    enum kvrt_layout c[KVRT_NUM_LAYOUTS];
    size_t n = kvrt_resolver_candidates(r, c);
    bool warned = kvrt_resolver_warned(r);
    if (json) {
        /* libkvrt's own answer, which kvrt.resolve() returns too. */
        char *text = NULL;
        int rc = kvrt_resolver_json(r, &text);
        return cli_print_json_text(rc, text);
    }
    printf("layout:     %s\ncandidates:", kvrt_layout_name(chosen));
    for (size_t i = 0; i < n; i++)
        printf("%s %s", i ? "," : "", kvrt_layout_name(c[i]));
    printf("\n");
    if (warned)
        printf("warning:    the --prefer layout is not a candidate, so it was ignored\n");
    printf("\nwhy:\n");
    const char *t = kvrt_resolver_trace(r);
    for (const char *p = t; *p;) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        printf("  %.*s\n", len, p);
        p += len + (nl ? 1 : 0);
    }
    return CLI_EXIT_OK;
}

static int resolve_run(int argc, char **argv)
{
    kvrt_resolver *r = NULL;
    bool json = false, help = false;
    enum kvrt_layout chosen;
    /* Reads VLLM_KV_CACHE_LAYOUT as spelled; it is validated by resolve. */
    int rc = kvrt_resolver_create(&r);
    if (rc != KVRT_OK)
        return cli_fail_status(rc);
    int code = parse(r, argc, argv, &json, &help);
    if (help)
        resolve_help(stdout);
    else if (code == CLI_EXIT_OK)
        code = (rc = kvrt_resolver_resolve(r, &chosen)) == KVRT_OK ? report(r, chosen, json) : cli_fail_status(rc);
    kvrt_resolver_destroy(r);
    return code;
}

const struct cli_command cli_resolve_command = {
    .name = "resolve",
    .summary = "choose one layout for a set of backend declarations, and say why",
    .run = resolve_run,
    .help = resolve_help,
    .options = resolve_tables,
};
