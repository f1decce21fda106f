/*
 * kvrt explain: why this layout.  Runs the real resolution across the
 * backends that would be bound (kvrt_runtime_resolve) and retells its trace
 * in sections a person can follow without knowing kvrt, then checks every
 * layout against each rule so each refusal is visible.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/placement.h>
#include <kvrt/resolve.h>
#include <kvrt/runtime.h>

#include "commands.h"
#include "cli_model.h"

#define MAX_BACKENDS 8

enum explain_opt { OPT_JSON, OPT_BACKEND, OPT_PREFER };

static const struct cli_option explain_options[] = {
    {"--backend", "NAME", OPT_BACKEND, true,
     "a backend that touches the cache; repeat for several (a\n"
     "GPU backend and a transfer engine, say).  Default:\n"
     "$" KVRT_BACKEND_ENV ", else the first available backend"},
    {"--prefer", "LAYOUT", OPT_PREFER, false, "a soft preference (e.g. a KV-transfer connector's)"},
    {"--json", NULL, OPT_JSON, false,
     "print one JSON object: backends, steps (the raw trace,\n"
     "one object per step), layout, refused, error, layouts"},
    CLI_HELP_ROW,
    CLI_OPTIONS_END,
};

static const struct cli_option *const explain_tables[] = {explain_options, cli_model_options, NULL};

static void explain_help(FILE *out)
{
    fprintf(out,
            "Usage: kvrt explain [--json] [--backend NAME ...] [--prefer LAYOUT]\n"
            "                    [--model FILE | model flags]\n"
            "\n"
            "Explain, step by step, which KV-cache layout kvrt would choose and why:\n"
            "  - which backends would touch the cache, and what each declares (the\n"
            "    layouts its kernels handle, best first, or \"any\");\n"
            "  - how the declarations are combined: kept as they are when identical,\n"
            "    otherwise intersected and ranked by votes (how many backends name a\n"
            "    layout first);\n"
            "  - the narrowing for a model whose layers mix head, state or page shapes\n"
            "    (only the layouts placement accepts for them remain);\n"
            "  - the environment variable %s (a hard constraint);\n"
            "  - the soft preference (--prefer; only a wish);\n"
            "  - every refusal, and the final choice;\n"
            "then checks all six layouts against each of these rules and against the\n"
            "model's placement, so you can see why any other layout was not chosen.\n"
            "Nothing is allocated and no device code runs.\n"
            "\n"
            "Options:\n",
            KVRT_LAYOUT_ENV);
    cli_print_options(out, explain_options, 19);
    cli_model_print_options(out);
    fprintf(out,
            "(--blocks and --memory are accepted and ignored here.)\n"
            "\n"
            "Environment:\n"
            "  %s  the hard layout constraint being explained\n"
            "  %s  the default backend\n"
            "  %s  plugin folders or files searched first\n"
            "\n"
            "Exit status: 0 a layout was chosen (and the model can be placed in it);\n"
            "3 refused (the explanation is still printed on stdout); 4 no backend.\n"
            "\n"
            "Example:\n"
            "  VLLM_KV_CACHE_LAYOUT=HND kvrt explain --model examples/models/qwen3-next-80b-a3b.json\n",
            KVRT_LAYOUT_ENV, KVRT_BACKEND_ENV, KVRT_PLUGIN_PATH_ENV);
}

struct explain {
    bool json;
    const char *backends[MAX_BACKENDS];
    size_t num_backends;
    const char *backend_source; /* kvrt_setting_origin's word */
    bool backend_default;       /* chosen by priority, not named */
    const char *prefer;
    struct cli_model_flags flags;
    const struct kvrt_model_info *model;
    kvrt_runtime *rt;
    bool mixed;
    bool shapes_admit[KVRT_NUM_LAYOUTS]; /* the layouts the model's shapes allow */
    bool chosen_ok;
    bool placement_refused; /* resolution chose a layout the model cannot be placed in */
    enum kvrt_layout chosen;
    int status;
    char error[1024];
};

/* The trace's steps, grouped under headings for people. */
static const struct {
    const char *heading;
    const char *intro;
    enum kvrt_trace_kind kinds[5];
    size_t num_kinds;
} sections[] = {
    {"1. What each backend can handle",
     "Every backend plugin declares the layouts its kernels can read and write, best first\n"
     "   (or \"any\").  kvrt reads these declarations without running any plugin code.",
     {KVRT_TRACE_DECLARATION, KVRT_TRACE_NO_DECLARATIONS},
     2},
    {"2. Agreeing on candidates",
     "All backends must use one layout.  Identical lists keep their order; otherwise only\n"
     "   layouts every backend supports survive, ranked by how many backends put each first.",
     {KVRT_TRACE_DEFAULT, KVRT_TRACE_FAST_PATH, KVRT_TRACE_INTERSECTION, KVRT_TRACE_VOTES, KVRT_TRACE_RANKING},
     5},
    {"3. The model's shapes",
     "If the layers differ in page size, each page must be one contiguous run of bytes\n"
     "   (L and B outermost), and across groups each block one span (B outermost); overlaid\n"
     "   groups of other head slots or states need either; other layouts are ruled out.",
     {KVRT_TRACE_SHAPES, KVRT_TRACE_NARROWING, KVRT_TRACE_CANDIDATES},
     3},
    {"4. Your environment",
     "VLLM_KV_CACHE_LAYOUT, when set, is a hard requirement: if it is not a candidate,\n"
     "   kvrt refuses rather than silently picking something else.",
     {KVRT_TRACE_ENV},
     1},
    {"5. Soft preference",
     "A preference (for example a KV-transfer connector's) is honoured only if it is a\n"
     "   candidate; otherwise it is ignored with a warning.",
     {KVRT_TRACE_PREFERENCE},
     1},
    {"6. Result", NULL, {KVRT_TRACE_CHOICE, KVRT_TRACE_RECORDED, KVRT_TRACE_REFUSED}, 3},
};
#define NUM_SECTIONS (sizeof(sections) / sizeof(sections[0]))

/* The section a kind of step is told in; -1 for the steps of backend
 * selection, which are told elsewhere or not at all. */
static int section_of(enum kvrt_trace_kind kind)
{
    for (size_t s = 0; s < NUM_SECTIONS; s++)
        for (size_t k = 0; k < sections[s].num_kinds; k++)
            if (sections[s].kinds[k] == kind)
                return (int)s;
    return -1;
}

static int apply(void *request, const struct cli_option *opt, const char *v)
{
    struct explain *e = request;
    bool ok = true;
    if (cli_model_flags_apply(&e->flags, opt, v, &ok))
        return ok ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (opt->id == OPT_JSON) {
        e->json = true;
    } else if (opt->id == OPT_PREFER) {
        enum kvrt_layout l;
        if (kvrt_layout_parse(v, &l) != KVRT_OK)
            return cli_error(CLI_EXIT_USAGE, "%s: %s", opt->name, kvrt_error_message());
        e->prefer = v;
    } else if (e->num_backends == MAX_BACKENDS) {
        return cli_error(CLI_EXIT_USAGE, "explain: at most %d %s options", MAX_BACKENDS, opt->name);
    } else {
        e->backends[e->num_backends++] = v;
    }
    return CLI_EXIT_OK;
}

static int parse(int argc, char **argv, struct explain *e, bool *help)
{
    cli_model_flags_init(&e->flags, "explain");
    return cli_parse_options("explain", argc, argv, explain_tables, apply, e, help);
}

/* Model flags are optional here: no model means uniform shapes. */
static bool any_model_flag(const struct cli_model_flags *f)
{
    for (int id = CLI_MODEL_OPT_FIRST; id < CLI_MODEL_OPT_END; id++)
        if (id != CLI_OPT_BLOCKS && id != CLI_OPT_MEMORY && cli_model_flag_given(f, id))
            return true;
    return false;
}

static void layouts_text(const kvrt_runtime *rt, size_t i, char *buf, size_t size)
{
    struct kvrt_plugin_info in;
    size_t used = 0;
    buf[0] = '\0';
    if (kvrt_runtime_plugin_info(rt, i, &in) != KVRT_OK)
        return;
    if (in.any_layout) {
        snprintf(buf, size, "any layout");
        return;
    }
    for (size_t k = 0; k < in.num_layouts && used < size; k++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", k ? ", " : "", kvrt_layout_name(in.layouts[k]));
}

/* Why a layout is or is not usable, rule by rule. */
struct verdict {
    bool declared, shapes, env, placeable, checked_placement;
    char why[512];
};

static void judge(const struct explain *e, enum kvrt_layout l, struct verdict *v)
{
    memset(v, 0, sizeof(*v));
    v->declared = true;
    for (size_t b = 0; b < e->num_backends; b++) {
        size_t i;
        if (kvrt_runtime_find_plugin(e->rt, e->backends[b], &i) == KVRT_OK &&
            !kvrt_runtime_plugin_admits(e->rt, i, l)) {
            v->declared = false;
            snprintf(v->why, sizeof(v->why), "backend \"%s\" does not declare it", e->backends[b]);
            break;
        }
    }
    v->shapes = e->shapes_admit[l];
    if (v->declared && !v->shapes)
        snprintf(v->why, sizeof(v->why), "the model mixes shapes, which %s cannot hold (step 3)", kvrt_layout_name(l));
    bool set = false;
    enum kvrt_layout env;
    v->env = kvrt_layout_from_env(&set, &env) != KVRT_OK ? false : !set || env == l;
    if (v->declared && v->shapes && !v->env)
        snprintf(v->why, sizeof(v->why), "%s asks for another layout", KVRT_LAYOUT_ENV);
    v->placeable = true;
    if (e->model) {
        kvrt_placement *p = NULL;
        int rc = kvrt_placement_create(l, e->model->placement_groups, e->model->num_groups, 1, 0, &p);
        v->checked_placement = true;
        v->placeable = rc == KVRT_OK;
        if (!v->placeable && v->declared && v->shapes && v->env)
            snprintf(v->why, sizeof(v->why), "the model cannot be placed: %s", kvrt_error_message());
        kvrt_placement_destroy(p);
    }
}

/* The layouts the model's shapes allow, asked of libkvrt: a resolver told
 * nothing but the groups keeps exactly those (docs/design.md §7, step 3). */
static int judge_shapes(struct explain *e, const struct kvrt_group *groups)
{
    for (int l = 0; l < KVRT_NUM_LAYOUTS; l++)
        e->shapes_admit[l] = !groups;
    if (!groups)
        return KVRT_OK;
    kvrt_resolver *r = NULL;
    enum kvrt_layout chosen, kept[KVRT_NUM_LAYOUTS];
    int rc = kvrt_resolver_create(&r);
    if (rc == KVRT_OK)
        rc = kvrt_resolver_set_env(r, NULL);
    if (rc == KVRT_OK)
        rc = kvrt_resolver_set_groups(r, groups, e->model->num_groups);
    if (rc == KVRT_OK)
        rc = kvrt_resolver_resolve(r, &chosen);
    size_t n = rc == KVRT_OK ? kvrt_resolver_candidates(r, kept) : 0;
    for (size_t i = 0; i < n; i++)
        e->shapes_admit[kept[i]] = true;
    kvrt_resolver_destroy(r);
    return rc;
}

static void print_human(const struct explain *e)
{
    printf("Why this layout?\n\n");
    if (e->backend_default)
        printf("Backends that would touch the cache (%s: the first available in priority order %s):\n",
               e->backend_source, kvrt_runtime_backend_priority());
    else
        printf("Backends that would touch the cache (from %s):\n", e->backend_source);
    for (size_t b = 0; b < e->num_backends; b++) {
        size_t i;
        struct kvrt_plugin_info in;
        char layouts[160];
        if (kvrt_runtime_find_plugin(e->rt, e->backends[b], &i) != KVRT_OK ||
            kvrt_runtime_plugin_info(e->rt, i, &in) != KVRT_OK)
            continue;
        layouts_text(e->rt, i, layouts, sizeof(layouts));
        printf("  %-8s %s; device %s%s%s\n", in.name, layouts, in.available ? "available" : "not available",
               in.available ? "" : ": ", in.available ? "" : in.reason);
    }
    cli_print_selection(e->rt, "  ");
    if (e->model) {
        printf("\nModel: %s, %llu layers in %zu group%s; shapes %s.\n", e->model->source,
               (unsigned long long)e->model->num_layers, e->model->num_groups, e->model->num_groups == 1 ? "" : "s",
               e->mixed ? "mixed (head slots, states per block or page sizes differ)" : "all alike");
    } else {
        printf("\nNo model given: the layers are taken to share one shape.\n");
    }
    size_t num_steps = kvrt_runtime_num_trace_steps(e->rt);
    for (size_t s = 0; s < NUM_SECTIONS; s++) {
        bool heading = false;
        struct kvrt_trace_step prev = {.kind = KVRT_TRACE_RESOLVE, .layout = KVRT_TRACE_NO_LAYOUT};
        for (size_t i = 0; i < num_steps; i++) {
            struct kvrt_trace_step st;
            if (kvrt_runtime_trace_step(e->rt, i, &st) != KVRT_OK)
                continue;
            /* The runtime records what the resolver just recorded: say it once. */
            bool repeat =
                st.kind == KVRT_TRACE_RECORDED && prev.kind == KVRT_TRACE_RECORDED && prev.layout == st.layout;
            prev = st;
            if (section_of(st.kind) != (int)s || repeat)
                continue;
            if (!heading) {
                printf("\n%s\n", sections[s].heading);
                if (sections[s].intro)
                    printf("   %s\n", sections[s].intro);
                heading = true;
            }
            printf("   - %s: %s\n", kvrt_trace_kind_name(st.kind), st.text);
        }
    }
    if (e->placement_refused)
        printf("   - placement: %s\n", e->error);
    printf("\nEvery layout against each rule:\n");
    printf("  %-7s %-9s %-6s %-5s %-10s %s\n", "layout", "declared", "shape", "env", "placement", "verdict");
    for (int l = 0; l < KVRT_NUM_LAYOUTS; l++) {
        struct verdict v;
        judge(e, (enum kvrt_layout)l, &v);
        bool ok = v.declared && v.shapes && v.env && v.placeable;
        bool chosen = e->chosen_ok && e->chosen == (enum kvrt_layout)l;
        printf("  %-7s %-9s %-6s %-5s %-10s %s\n", kvrt_layout_name((enum kvrt_layout)l), v.declared ? "yes" : "no",
               v.shapes ? "yes" : "no", v.env ? "yes" : "no",
               !v.checked_placement ? "-"
               : v.placeable        ? "yes"
                                    : "no",
               chosen ? "chosen"
               : ok   ? "usable, ranked lower"
                      : v.why);
    }
    printf("  (declared: by every backend; shape: allowed for the model's shapes; env: allowed by\n"
           "  %s; placement: the model's groups fit this layout%s)\n",
           KVRT_LAYOUT_ENV, e->model ? "" : ", '-' without a model");
    if (e->chosen_ok)
        printf("\nChoice: %s.\n", kvrt_layout_name(e->chosen));
    else
        printf("\nNo layout: %s\n", e->error);
}

static int print_json(const struct explain *e)
{
    json_t *root = json_object(), *backends = json_array(), *layouts = json_array(), *steps = NULL;
    for (size_t b = 0; b < e->num_backends; b++) {
        size_t i;
        struct kvrt_plugin_info in;
        if (kvrt_runtime_find_plugin(e->rt, e->backends[b], &i) != KVRT_OK ||
            kvrt_runtime_plugin_info(e->rt, i, &in) != KVRT_OK)
            continue;
        json_t *o = json_object(), *list = in.any_layout ? kvrt_json_str("any") : json_array();
        for (size_t k = 0; !in.any_layout && k < in.num_layouts; k++)
            json_array_append_new(list, kvrt_json_str(kvrt_layout_name(in.layouts[k])));
        kvrt_json_put(o, "name", kvrt_json_str(in.name));
        kvrt_json_put(o, "path", kvrt_json_str(in.path));
        kvrt_json_put(o, "layouts", list);
        kvrt_json_put(o, "available", json_boolean(in.available));
        kvrt_json_put(o, "reason", kvrt_json_str(in.reason));
        json_array_append_new(backends, o);
    }
    /* The steps as libkvrt writes them for every trace. */
    char *text = NULL;
    int rc = kvrt_runtime_trace_json(e->rt, &text);
    if (rc != KVRT_OK) {
        json_decref(root);
        json_decref(backends);
        json_decref(layouts);
        return cli_fail_status(rc);
    }
    steps = json_loads(text, 0, NULL);
    kvrt_free(text);
    for (int l = 0; l < KVRT_NUM_LAYOUTS; l++) {
        struct verdict v;
        judge(e, (enum kvrt_layout)l, &v);
        json_t *o = json_object();
        kvrt_json_put(o, "name", kvrt_json_str(kvrt_layout_name((enum kvrt_layout)l)));
        kvrt_json_put(o, "declared", json_boolean(v.declared));
        kvrt_json_put(o, "shapes", json_boolean(v.shapes));
        kvrt_json_put(o, "env", json_boolean(v.env));
        kvrt_json_put(o, "placeable", v.checked_placement ? json_boolean(v.placeable) : json_null());
        kvrt_json_put(o, "usable", json_boolean(v.declared && v.shapes && v.env && v.placeable));
        kvrt_json_put(o, "reason", kvrt_json_str(v.why));
        json_array_append_new(layouts, o);
    }
    const char *env = NULL;
    kvrt_setting_get(KVRT_SETTING_LAYOUT, NULL, &env, NULL);
    bool ok = kvrt_json_put(root, "backends", backends) &&
              kvrt_json_put(root, "backend_source", kvrt_json_str(e->backend_source)) &&
              kvrt_json_put(root, "model", e->model ? cli_model_json(&e->flags) : json_null()) &&
              kvrt_json_put(root, "mixed_shapes", json_boolean(e->mixed)) &&
              kvrt_json_put(root, "env", env ? kvrt_json_str(env) : json_null()) &&
              kvrt_json_put(root, "preference", e->prefer ? kvrt_json_str(e->prefer) : json_null()) &&
              kvrt_json_put(root, "steps", steps) &&
              kvrt_json_put(root, "layout", e->chosen_ok ? kvrt_json_str(kvrt_layout_name(e->chosen)) : json_null()) &&
              kvrt_json_put(root, "refused", json_boolean(!e->chosen_ok)) &&
              kvrt_json_put(root, "error", e->chosen_ok ? json_null() : kvrt_json_str(e->error)) &&
              kvrt_json_put(root, "layouts", layouts);
    if (!ok) {
        json_decref(root);
        return cli_error(CLI_EXIT_INTERNAL, "explain: could not build the JSON output");
    }
    return cli_json_print(root);
}

static int explain_run(int argc, char **argv)
{
    struct explain e;
    bool help = false;
    memset(&e, 0, sizeof(e));
    int code = parse(argc, argv, &e, &help);
    if (help) {
        explain_help(stdout);
        return CLI_EXIT_OK;
    }
    if (code == CLI_EXIT_OK && (e.flags.file || any_model_flag(&e.flags)))
        code = cli_model_build(&e.flags, true, &e.model);
    int rc = KVRT_OK;
    if (code == CLI_EXIT_OK && (rc = kvrt_runtime_open(NULL, &e.rt)) != KVRT_OK)
        code = cli_fail_status(rc);
    enum kvrt_setting_source source = KVRT_SOURCE_ARGUMENT;
    if (code == CLI_EXIT_OK && e.num_backends == 0) {
        const char *name = NULL;
        if ((rc = kvrt_runtime_choose_backend(e.rt, NULL, &name, &source)) != KVRT_OK)
            code = cli_fail_status(rc);
        else
            e.backends[e.num_backends++] = name;
    }
    e.backend_source = kvrt_setting_origin(KVRT_SETTING_BACKEND, source, cli_option_name(explain_tables, OPT_BACKEND));
    e.backend_default = source == KVRT_SOURCE_DEFAULT;
    for (size_t b = 0; code == CLI_EXIT_OK && b < e.num_backends; b++) {
        size_t i;
        if ((rc = kvrt_runtime_find_plugin(e.rt, e.backends[b], &i)) != KVRT_OK)
            code = cli_fail_status(rc);
    }
    if (code != CLI_EXIT_OK) {
        cli_model_flags_free(&e.flags);
        kvrt_runtime_close(e.rt);
        return code;
    }
    e.mixed = e.model && kvrt_model_mixed_shapes(e.flags.model);
    const struct kvrt_group *groups = e.model ? e.model->placement_groups : NULL;
    rc = judge_shapes(&e, groups);
    if (rc != KVRT_OK) {
        cli_model_flags_free(&e.flags);
        kvrt_runtime_close(e.rt);
        return cli_fail_status(rc);
    }
    rc = groups ? kvrt_runtime_resolve_groups(e.rt, e.backends, e.num_backends, groups, e.model->num_groups, e.prefer,
                                              &e.chosen)
                : kvrt_runtime_resolve(e.rt, e.backends, e.num_backends, false, e.prefer, &e.chosen);
    e.chosen_ok = rc == KVRT_OK;
    if (!e.chosen_ok) {
        e.status = rc;
        snprintf(e.error, sizeof(e.error), "%s", kvrt_error_message());
    } else if (e.model) {
        struct verdict v;
        judge(&e, e.chosen, &v);
        if (!v.placeable) {
            e.chosen_ok = false;
            e.placement_refused = true;
            e.status = KVRT_ERR_REFUSED;
            snprintf(e.error, sizeof(e.error), "%s was chosen, but %s", kvrt_layout_name(e.chosen), v.why);
        }
    }
    code = e.json ? print_json(&e) : (print_human(&e), CLI_EXIT_OK);
    if (code == CLI_EXIT_OK && !e.chosen_ok) {
        fflush(stdout);
        code = cli_error(cli_exit_for_status(e.status), "%s", e.error);
    }
    cli_model_flags_free(&e.flags);
    kvrt_runtime_close(e.rt);
    return code;
}

const struct cli_command cli_explain_command = {
    .name = "explain",
    .summary = "explain step by step which layout would be chosen, and why not the others",
    .run = explain_run,
    .help = explain_help,
    .options = explain_tables,
};
