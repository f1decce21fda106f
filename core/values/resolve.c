/*
 * Resolution (docs/design.md §7): choosing one layout that every backend touching
 * a cache can handle, with a trace that explains each step to a person who
 * has never read this file.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/resolve.h>

#include "error.h"
#include "layout_internal.h"
#include "resolve_internal.h"
#include "settings_internal.h"
#include "shapes.h"
#include "trace.h"

struct declaration {
    char *backend;
    bool any;
    enum kvrt_layout list[KVRT_NUM_LAYOUTS];
    size_t count;
};

/* A list of layouts in rank order; at most one of each. */
struct ranking {
    enum kvrt_layout at[KVRT_NUM_LAYOUTS];
    size_t count;
};

struct kvrt_resolver {
    struct declaration *decls;
    size_t num_decls, cap_decls;
    enum kvrt_shape_need shapes; /* what the layers' shapes demand (shapes.h) */
    bool mixed;                  /* whether they mix shapes at all */

    char *env;            /* as spelled; NULL = unset */
    bool env_from_caller; /* set by kvrt_resolver_set_env, not the process env */

    char *pref; /* as spelled; NULL = none */
    char *pref_who;
    enum kvrt_layout pref_layout;

    struct ranking candidates; /* of the last resolve */
    bool last_ok;              /* the last resolve chose `last` */
    enum kvrt_layout last;
    bool warned;
    bool recorded;
    enum kvrt_layout record;
    unsigned resolves;

    struct kvrt_trace trace;
    bool trace_oom; /* a step could not be kept: resolve reports NOMEM */
};

/* ---- small helpers ----------------------------------------------------- */

static bool ranking_has(const struct ranking *r, enum kvrt_layout l)
{
    for (size_t i = 0; i < r->count; i++)
        if (r->at[i] == l)
            return true;
    return false;
}

static bool declaration_has(const struct declaration *d, enum kvrt_layout l)
{
    if (d->any)
        return true;
    for (size_t i = 0; i < d->count; i++)
        if (d->list[i] == l)
            return true;
    return false;
}

/* "LBNHC, LBHNC" into buf. */
static const char *join_layouts(const enum kvrt_layout *l, size_t n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", kvrt_layout_name(l[i]));
    if (n == 0)
        snprintf(buf, size, "(none)");
    return buf;
}

/* The constraint as the user typed it, with the canonical name when the
 * spelling was an alias, so "HND" never reads like a different layout. */
static const char *spelled(const char *as_typed, enum kvrt_layout l, char *buf, size_t size)
{
    char quoted[128];
    kvrt_quote(quoted, sizeof(quoted), as_typed);
    if (strcmp(as_typed, kvrt_layout_name(l)) == 0)
        snprintf(buf, size, "%s", quoted);
    else
        snprintf(buf, size, "%s (%s)", quoted, kvrt_layout_name(l));
    return buf;
}

#define NO_LAYOUT KVRT_TRACE_NO_LAYOUT

/* Append one step to the trace: its kind, the layout (or NO_LAYOUT) and the
 * backend (or NULL) it is about, and its sentence. */
static void step(kvrt_resolver *r, enum kvrt_trace_kind kind, int32_t layout, const char *backend, const char *fmt, ...)
    KVRT_PRINTF(5, 6);
static void step(kvrt_resolver *r, enum kvrt_trace_kind kind, int32_t layout, const char *backend, const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (!kvrt_trace_add(&r->trace, kind, layout, backend, "%s", line))
        r->trace_oom = true;
}

/* Record a refusal (of `layout`, or NO_LAYOUT) in both the trace and the
 * thread's message. */
static void refusal(kvrt_resolver *r, int32_t layout, const char *fmt, ...) KVRT_PRINTF(3, 4);
static void refusal(kvrt_resolver *r, int32_t layout, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    step(r, KVRT_TRACE_REFUSED, layout, NULL, "%s", msg);
    kvrt_error_set("%s", msg);
}

/* `return refuse(r, status, layout, ...);` records the refusal and fails
 * with `status`; a macro for the reason given at kvrt_fail in error.h. */
#define refuse(r, status, layout, ...) (refusal((r), (layout), __VA_ARGS__), (status))

/* "backend "cpu" declares LBNHC, LBHNC; backend "x" accepts any layout" */
static void describe_declarations(const kvrt_resolver *r, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < r->num_decls && used < size; i++) {
        const struct declaration *d = &r->decls[i];
        char name[128], list[128];
        kvrt_quote(name, sizeof(name), d->backend);
        if (d->any)
            used +=
                (size_t)snprintf(buf + used, size - used, "%sbackend \"%s\" accepts any layout", i ? "; " : "", name);
        else
            used += (size_t)snprintf(buf + used, size - used, "%sbackend \"%s\" declares %s", i ? "; " : "", name,
                                     join_layouts(d->list, d->count, list, sizeof(list)));
    }
}

/* ---- life cycle and inputs --------------------------------------------- */

int kvrt_resolver_create(kvrt_resolver **out)
{
    if (!out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_resolver_create: out is NULL");
    kvrt_resolver *r = calloc(1, sizeof(*r));
    if (!r)
        return kvrt_fail(KVRT_ERR_NOMEM, "kvrt_resolver_create: out of memory");
    /* Kept as spelled and validated at resolve time, so that an error names
     * exactly what the user exported, and the resolver is never half-built. */
    const char *env = kvrt_setting_value(KVRT_SETTING_LAYOUT, NULL, NULL);
    if (env && !(r->env = strdup(env))) {
        free(r);
        return kvrt_fail(KVRT_ERR_NOMEM, "kvrt_resolver_create: out of memory");
    }
    *out = r;
    kvrt_clear_error();
    return KVRT_OK;
}

void kvrt_resolver_destroy(kvrt_resolver *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->num_decls; i++)
        free(r->decls[i].backend);
    free(r->decls);
    free(r->env);
    free(r->pref);
    free(r->pref_who);
    kvrt_trace_free(&r->trace);
    free(r);
}

static int add_declaration(kvrt_resolver *r, const char *backend, struct declaration **out)
{
    if (!backend || !backend[0])
        return kvrt_fail(KVRT_ERR_INVALID,
                         "kvrt_resolver_declare: the backend name is %s; give each backend a "
                         "non-empty name so messages can say which one is meant",
                         backend ? "empty" : "NULL");
    for (size_t i = 0; i < r->num_decls; i++) {
        if (strcmp(r->decls[i].backend, backend) == 0) {
            char name[128];
            kvrt_quote(name, sizeof(name), backend);
            return kvrt_fail(KVRT_ERR_INVALID,
                             "backend \"%s\" is already declared; each backend declares its "
                             "layouts once",
                             name);
        }
    }
    if (r->num_decls == r->cap_decls) {
        size_t cap = r->cap_decls ? 2 * r->cap_decls : 4;
        struct declaration *d = realloc(r->decls, cap * sizeof(*d));
        if (!d)
            return kvrt_fail(KVRT_ERR_NOMEM, "kvrt_resolver_declare: out of memory");
        r->decls = d;
        r->cap_decls = cap;
    }
    struct declaration *d = &r->decls[r->num_decls];
    memset(d, 0, sizeof(*d));
    if (!(d->backend = strdup(backend)))
        return kvrt_fail(KVRT_ERR_NOMEM, "kvrt_resolver_declare: out of memory");
    r->num_decls++;
    *out = d;
    return KVRT_OK;
}

int kvrt_resolver_declare(kvrt_resolver *r, const char *backend, const enum kvrt_layout *layouts, size_t num_layouts)
{
    if (!r)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_resolver_declare: resolver is NULL");
    char name[128];
    kvrt_quote(name, sizeof(name), backend ? backend : "");
    if (num_layouts == 0 || !layouts)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "backend \"%s\" declares no layouts; declare at least one, or use "
                         "kvrt_resolver_declare_any for a backend that takes any layout",
                         name);
    if (num_layouts > KVRT_NUM_LAYOUTS)
        return kvrt_fail(KVRT_ERR_INVALID,
                         "backend \"%s\" declares %zu layouts, but there are only %d; each "
                         "layout may appear once",
                         name, num_layouts, KVRT_NUM_LAYOUTS);
    for (size_t i = 0; i < num_layouts; i++) {
        if (!kvrt_layout_valid((int)layouts[i]))
            return kvrt_fail(KVRT_ERR_INVALID,
                             "backend \"%s\": layout value %d at position %zu is not one of the "
                             "%d layouts (0..%d)",
                             name, (int)layouts[i], i, KVRT_NUM_LAYOUTS, KVRT_NUM_LAYOUTS - 1);
        for (size_t j = 0; j < i; j++)
            if (layouts[j] == layouts[i])
                return kvrt_fail(KVRT_ERR_INVALID,
                                 "backend \"%s\" lists %s twice (positions %zu and %zu); each "
                                 "layout may appear once",
                                 name, kvrt_layout_name(layouts[i]), j, i);
    }
    struct declaration *d;
    int rc = add_declaration(r, backend, &d);
    if (rc != KVRT_OK)
        return rc;
    memcpy(d->list, layouts, num_layouts * sizeof(*layouts));
    d->count = num_layouts;
    kvrt_clear_error();
    return KVRT_OK;
}

int kvrt_resolver_declare_any(kvrt_resolver *r, const char *backend)
{
    if (!r)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_resolver_declare_any: resolver is NULL");
    struct declaration *d;
    int rc = add_declaration(r, backend, &d);
    if (rc != KVRT_OK)
        return rc;
    d->any = true;
    kvrt_clear_error();
    return KVRT_OK;
}

int kvrt_resolver_set_mixed_shapes(kvrt_resolver *r, bool mixed)
{
    if (!r)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_resolver_set_mixed_shapes: resolver is NULL");
    /* Without the layers, the need of pages that differ in one group: the
     * answer for any mix in one group, and a superset of the others'. */
    r->shapes = mixed ? KVRT_SHAPES_BLOCK_COMPACT : KVRT_SHAPES_ANY;
    r->mixed = mixed;
    return KVRT_OK;
}

int kvrt_resolver_set_groups(kvrt_resolver *r, const struct kvrt_group *groups, size_t num_groups)
{
    if (!r)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_resolver_set_groups: resolver is NULL");
    struct kvrt_shapes shapes;
    int rc = kvrt_groups_shapes(groups, num_groups, &shapes);
    if (rc != KVRT_OK)
        return rc;
    r->shapes = kvrt_shapes_need(&shapes, num_groups);
    r->mixed = kvrt_shapes_mixed(&shapes);
    return KVRT_OK;
}

int kvrt_resolver_set_env(kvrt_resolver *r, const char *value)
{
    if (!r)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_resolver_set_env: resolver is NULL");
    char *copy = NULL;
    if (value && !(copy = strdup(value)))
        return kvrt_fail(KVRT_ERR_NOMEM, "kvrt_resolver_set_env: out of memory");
    free(r->env);
    r->env = copy;
    r->env_from_caller = true;
    return KVRT_OK;
}

int kvrt_resolver_set_preference(kvrt_resolver *r, const char *name, const char *who)
{
    if (!r)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_resolver_set_preference: resolver is NULL");
    if (!name) {
        free(r->pref);
        free(r->pref_who);
        r->pref = r->pref_who = NULL;
        return KVRT_OK;
    }
    enum kvrt_layout l;
    int rc = kvrt_layout_parse(name, &l);
    if (rc != KVRT_OK)
        return kvrt_fail_context(rc, "soft layout preference%s%s", who ? " of " : "", who ? who : "");
    char *p = strdup(name);
    char *w = strdup(who ? who : "the caller");
    if (!p || !w) {
        free(p);
        free(w);
        return kvrt_fail(KVRT_ERR_NOMEM, "kvrt_resolver_set_preference: out of memory");
    }
    free(r->pref);
    free(r->pref_who);
    r->pref = p;
    r->pref_who = w;
    r->pref_layout = l;
    kvrt_clear_error();
    return KVRT_OK;
}

/* ---- the steps of docs/design.md §7 -------------------------------------- */

static void trace_declarations(kvrt_resolver *r)
{
    if (r->num_decls == 0)
        step(r, KVRT_TRACE_NO_DECLARATIONS, NO_LAYOUT, NULL, "no backend has declared anything");
    for (size_t i = 0; i < r->num_decls; i++) {
        const struct declaration *d = &r->decls[i];
        char name[128], list[128];
        kvrt_quote(name, sizeof(name), d->backend);
        if (d->any)
            step(r, KVRT_TRACE_DECLARATION, NO_LAYOUT, d->backend,
                 "backend \"%s\" accepts any layout (it adds no constraint)", name);
        else
            step(r, KVRT_TRACE_DECLARATION, NO_LAYOUT, d->backend,
                 "backend \"%s\" supports %s (its first choice first)", name,
                 join_layouts(d->list, d->count, list, sizeof(list)));
    }
}

/* Steps 1 and 2: the ranked candidates before any narrowing. */
static int rank_candidates(kvrt_resolver *r, struct ranking *out)
{
    char buf[512];
    const struct declaration *first = NULL;
    bool identical = true;
    size_t listing = 0;
    for (size_t i = 0; i < r->num_decls; i++) {
        const struct declaration *d = &r->decls[i];
        if (d->any)
            continue;
        listing++;
        if (!first)
            first = d;
        else if (d->count != first->count || memcmp(d->list, first->list, d->count * sizeof(d->list[0])) != 0)
            identical = false;
    }

    if (!first) {
        memcpy(out->at, kvrt_layout_default_preference(), KVRT_NUM_LAYOUTS * sizeof(out->at[0]));
        out->count = KVRT_NUM_LAYOUTS;
        step(r, KVRT_TRACE_DEFAULT, NO_LAYOUT, NULL,
             "no backend declares a list of layouts, so kvrt's default preference applies: %s",
             join_layouts(out->at, out->count, buf, sizeof(buf)));
        return KVRT_OK;
    }
    if (identical) {
        memcpy(out->at, first->list, first->count * sizeof(first->list[0]));
        out->count = first->count;
        step(r, KVRT_TRACE_FAST_PATH, NO_LAYOUT, NULL, "%s, so that order is kept as is: %s",
             listing == 1 ? "only one backend declares a list"
                          : "every backend that declares a list declares the same one",
             join_layouts(out->at, out->count, buf, sizeof(buf)));
        return KVRT_OK;
    }

    /* Intersection, collected in table order so that the stable ranking
     * below breaks ties in table order. */
    struct ranking common = {.count = 0};
    for (int l = 0; l < KVRT_NUM_LAYOUTS; l++) {
        bool everyone = true;
        for (size_t i = 0; i < r->num_decls && everyone; i++)
            everyone = declaration_has(&r->decls[i], (enum kvrt_layout)l);
        if (everyone)
            common.at[common.count++] = (enum kvrt_layout)l;
    }
    if (common.count == 0) {
        char decls[1536];
        describe_declarations(r, decls, sizeof(decls));
        step(r, KVRT_TRACE_INTERSECTION, NO_LAYOUT, NULL, "no layout is supported by every backend");
        return refuse(r, KVRT_ERR_REFUSED, NO_LAYOUT,
                      "no layout is supported by every backend (%s); use backends that share at "
                      "least one layout",
                      decls);
    }
    step(r, KVRT_TRACE_INTERSECTION, NO_LAYOUT, NULL,
         "the declarations differ, so only layouts every backend supports remain: %s",
         join_layouts(common.at, common.count, buf, sizeof(buf)));

    unsigned votes[KVRT_NUM_LAYOUTS] = {0};
    for (size_t i = 0; i < r->num_decls; i++)
        if (!r->decls[i].any)
            votes[r->decls[i].list[0]]++;
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < common.count; i++)
        used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%s %u", i ? ", " : "",
                                 kvrt_layout_name(common.at[i]), votes[common.at[i]]);
    step(r, KVRT_TRACE_VOTES, NO_LAYOUT, NULL,
         "how many backends name each remaining layout as their first choice: %s "
         "(ties are broken in table order %s)",
         buf, kvrt_layout_table_text());

    /* Insertion sort: stable, so equal votes keep table order. */
    for (size_t i = 1; i < common.count; i++) {
        enum kvrt_layout l = common.at[i];
        size_t j = i;
        for (; j > 0 && votes[common.at[j - 1]] < votes[l]; j--)
            common.at[j] = common.at[j - 1];
        common.at[j] = l;
    }
    *out = common;
    step(r, KVRT_TRACE_RANKING, NO_LAYOUT, NULL, "%s", join_layouts(out->at, out->count, buf, sizeof(buf)));
    return KVRT_OK;
}

/* Step 3. */
static int narrow_for_mixed_shapes(kvrt_resolver *r, struct ranking *c)
{
    char kept_s[128], dropped_s[128], holds[128];
    if (r->shapes == KVRT_SHAPES_ANY) {
        step(r, KVRT_TRACE_SHAPES, NO_LAYOUT, NULL, "%s, so no layout is ruled out by shape",
             r->mixed ? "the layers mix head slots or states, but in one group of one page size"
                      : "every spec has the same head, state and page shape");
        return KVRT_OK;
    }
    struct ranking kept = {.count = 0}, dropped = {.count = 0};
    for (size_t i = 0; i < c->count; i++) {
        struct ranking *to = kvrt_shape_need_admits(r->shapes, c->at[i]) ? &kept : &dropped;
        to->at[to->count++] = c->at[i];
    }
    /* What the layers mix, and which layouts can hold it: the rule's own
     * words (shapes.c). */
    const char *mix = kvrt_shape_need_mix(r->shapes), *need = kvrt_shape_need_name(r->shapes);
    const char *order = kvrt_shape_need_order(r->shapes);
    kvrt_shape_need_layouts(r->shapes, holds, sizeof(holds));
    join_layouts(dropped.at, dropped.count, dropped_s, sizeof(dropped_s));
    if (kept.count == 0) {
        join_layouts(c->at, c->count, kept_s, sizeof(kept_s));
        c->count = 0;
        return refuse(r, KVRT_ERR_REFUSED, NO_LAYOUT,
                      "%s, which only a %s layout (%s: %s) can hold, but none of the candidates (%s) is %s; have "
                      "a backend declare such a layout, or give every layer the same shape",
                      mix, need, order, holds, kept_s, need);
    }
    step(r, KVRT_TRACE_NARROWING, NO_LAYOUT, NULL, "%s, so only %s layouts (%s, %s) remain: %s; ruled out: %s", mix,
         need, order, kvrt_shape_need_why(r->shapes), join_layouts(kept.at, kept.count, kept_s, sizeof(kept_s)),
         dropped.count ? dropped_s : "none");
    *c = kept;
    return KVRT_OK;
}

/* Why `l` is not a candidate, naming the backend(s) that exclude it. */
static void explain_exclusion(const kvrt_resolver *r, enum kvrt_layout l, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < r->num_decls && used < size; i++) {
        const struct declaration *d = &r->decls[i];
        if (declaration_has(d, l))
            continue;
        char name[128], list[128];
        kvrt_quote(name, sizeof(name), d->backend);
        used += (size_t)snprintf(buf + used, size - used, "%sbackend \"%s\" does not support it (it declares %s)",
                                 used ? "; " : "", name, join_layouts(d->list, d->count, list, sizeof(list)));
    }
    if (used == 0 && !kvrt_shape_need_admits(r->shapes, l))
        snprintf(buf, size, "it is not %s, and %s, which only such a layout can hold", kvrt_shape_need_name(r->shapes),
                 kvrt_shape_need_mix(r->shapes));
    else if (used == 0)
        snprintf(buf, size, "it is not among the candidates");
}

/* Step 4.  *choice is set on success. */
static int apply_env_and_preference(kvrt_resolver *r, const struct ranking *c, enum kvrt_layout *choice)
{
    char cands[128], who[128], buf[256];
    join_layouts(c->at, c->count, cands, sizeof(cands));
    const char *source = r->env_from_caller ? "given by the caller" : "from the environment";

    bool have_env = false;
    enum kvrt_layout env_layout = KVRT_LAYOUT_LBNHC;
    if (!r->env) {
        step(r, KVRT_TRACE_ENV, NO_LAYOUT, NULL, "%s is not set, so there is no hard constraint", KVRT_LAYOUT_ENV);
    } else {
        char quoted[128];
        kvrt_quote(quoted, sizeof(quoted), r->env);
        int rc = kvrt_layout_parse(r->env, &env_layout);
        char why[1024];
        snprintf(why, sizeof(why), "%s", rc == KVRT_OK ? "" : kvrt_error_message());
        step(r, KVRT_TRACE_ENV, rc == KVRT_OK ? (int32_t)env_layout : NO_LAYOUT, NULL, "%s is set to \"%s\" (%s)",
             KVRT_LAYOUT_ENV, quoted, source);
        if (rc != KVRT_OK)
            return refuse(r, rc, NO_LAYOUT, "%s=\"%s\" is not a valid layout: %s; fix or unset it", KVRT_LAYOUT_ENV,
                          quoted, why);
        spelled(r->env, env_layout, buf, sizeof(buf));
        if (!ranking_has(c, env_layout)) {
            explain_exclusion(r, env_layout, why, sizeof(why));
            return refuse(r, KVRT_ERR_REFUSED, (int32_t)env_layout,
                          "%s=%s cannot be used: %s; the valid candidates are %s; set %s to one "
                          "of them or unset it",
                          KVRT_LAYOUT_ENV, buf, why, cands, KVRT_LAYOUT_ENV);
        }
        have_env = true;
        step(r, KVRT_TRACE_ENV, (int32_t)env_layout, NULL, "%s=%s is a hard constraint, and it is a candidate",
             KVRT_LAYOUT_ENV, buf);
    }

    r->warned = false;
    if (!r->pref) {
        step(r, KVRT_TRACE_PREFERENCE, NO_LAYOUT, NULL, "no soft preference was given");
    } else {
        kvrt_quote(who, sizeof(who), r->pref_who);
        spelled(r->pref, r->pref_layout, buf, sizeof(buf));
        if (!ranking_has(c, r->pref_layout)) {
            /* A soft preference (e.g. a transfer connector) must never break a
             * configuration that works; it only tells the user it was ignored. */
            r->warned = true;
            step(r, KVRT_TRACE_PREFERENCE, (int32_t)r->pref_layout, NULL,
                 "%s prefers %s, but it is not a candidate (%s), so it is ignored with a warning", who, buf, cands);
        } else if (have_env && env_layout != r->pref_layout) {
            step(r, KVRT_TRACE_PREFERENCE, (int32_t)r->pref_layout, NULL, "%s prefers %s, but %s takes precedence", who,
                 buf, KVRT_LAYOUT_ENV);
        } else {
            step(r, KVRT_TRACE_PREFERENCE, (int32_t)r->pref_layout, NULL, "%s prefers %s, and it is a candidate", who,
                 buf);
        }
    }

    if (have_env) {
        *choice = env_layout;
        step(r, KVRT_TRACE_CHOICE, (int32_t)*choice, NULL, "%s, because %s requires it", kvrt_layout_name(*choice),
             KVRT_LAYOUT_ENV);
    } else if (r->pref && !r->warned) {
        *choice = r->pref_layout;
        step(r, KVRT_TRACE_CHOICE, (int32_t)*choice, NULL, "%s, the soft preference of %s", kvrt_layout_name(*choice),
             who);
    } else {
        *choice = c->at[0];
        step(r, KVRT_TRACE_CHOICE, (int32_t)*choice, NULL, "%s, the best-ranked candidate", kvrt_layout_name(*choice));
    }
    return KVRT_OK;
}

/* Step 5: a cache's bytes are laid out once; changing the layout later would
 * silently reinterpret them. */
static int record(kvrt_resolver *r, enum kvrt_layout choice)
{
    if (!r->recorded) {
        r->recorded = true;
        r->record = choice;
        step(r, KVRT_TRACE_RECORDED, (int32_t)choice, NULL,
             "%s is now this cache's layout; later resolves must agree with it", kvrt_layout_name(choice));
        return KVRT_OK;
    }
    if (r->record == choice) {
        step(r, KVRT_TRACE_RECORDED, (int32_t)choice, NULL, "%s agrees with the layout recorded earlier",
             kvrt_layout_name(choice));
        return KVRT_OK;
    }
    return refuse(r, KVRT_ERR_STATE, (int32_t)choice,
                  "the layout was already recorded as %s, but this resolve chose %s; a cache's "
                  "layout cannot change once chosen (create a new resolver for a new cache)",
                  kvrt_layout_name(r->record), kvrt_layout_name(choice));
}

int kvrt_resolver_resolve(kvrt_resolver *r, enum kvrt_layout *out)
{
    if (!r || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_resolver_resolve: resolver and out must not be NULL");
    r->candidates.count = 0;
    r->last_ok = false;
    r->warned = false;
    r->trace_oom = false;
    char head[32];
    snprintf(head, sizeof(head), "resolve #%u", ++r->resolves);
    if (!kvrt_trace_add_headed(&r->trace, KVRT_TRACE_RESOLVE, NO_LAYOUT, NULL, head,
                               "choosing one layout for every backend that touches the cache"))
        r->trace_oom = true;
    trace_declarations(r);

    struct ranking c;
    enum kvrt_layout choice;
    int rc = rank_candidates(r, &c);
    if (rc == KVRT_OK)
        rc = narrow_for_mixed_shapes(r, &c);
    if (rc == KVRT_OK) {
        char buf[128];
        r->candidates = c;
        step(r, KVRT_TRACE_CANDIDATES, NO_LAYOUT, NULL, "%s (best first)",
             join_layouts(c.at, c.count, buf, sizeof(buf)));
        rc = apply_env_and_preference(r, &c, &choice);
    }
    if (rc == KVRT_OK)
        rc = record(r, choice);
    if (rc == KVRT_OK && r->trace_oom)
        return kvrt_fail(KVRT_ERR_NOMEM, "kvrt_resolver_resolve: out of memory for the trace");
    if (rc != KVRT_OK)
        return rc;
    *out = choice;
    r->last_ok = true;
    r->last = choice;
    kvrt_clear_error();
    return KVRT_OK;
}

const char *kvrt_resolver_env(const kvrt_resolver *r)
{
    return r->env;
}

bool kvrt_resolver_last(const kvrt_resolver *r, enum kvrt_layout *out)
{
    if (r->last_ok && out)
        *out = r->last;
    return r->last_ok;
}

/* ---- results ----------------------------------------------------------- */

size_t kvrt_resolver_candidates(const kvrt_resolver *r, enum kvrt_layout out[KVRT_NUM_LAYOUTS])
{
    if (!r)
        return 0;
    if (out)
        memcpy(out, r->candidates.at, r->candidates.count * sizeof(out[0]));
    return r->candidates.count;
}

bool kvrt_resolver_warned(const kvrt_resolver *r)
{
    return r && r->warned;
}

bool kvrt_resolver_recorded(const kvrt_resolver *r, enum kvrt_layout *out)
{
    if (!r || !r->recorded)
        return false;
    if (out)
        *out = r->record;
    return true;
}

const char *kvrt_resolver_trace(const kvrt_resolver *r)
{
    return r ? kvrt_trace_text(&r->trace) : "";
}

const struct kvrt_trace *kvrt_resolver_steps(const kvrt_resolver *r)
{
    return &r->trace;
}

size_t kvrt_resolver_num_trace_steps(const kvrt_resolver *r)
{
    return r ? r->trace.count : 0;
}

int kvrt_resolver_trace_step(const kvrt_resolver *r, size_t i, struct kvrt_trace_step *out)
{
    if (!r || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_resolver_trace_step: resolver and out must not be NULL");
    return kvrt_trace_get(&r->trace, i, out, "kvrt_resolver_trace_step");
}
