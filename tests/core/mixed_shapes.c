/*
 * Mixed shapes (docs/design.md §5, §7): kvrt_placement_mixed_shapes is the
 * one answer, and resolution told the groups keeps exactly the layouts
 * kvrt_placement_create then accepts, in one group and in two overlaid
 * groups: one rule decides both.  Layers that differ only in element type
 * or only in block size mix shapes (their pages differ); padding every page
 * to one size, as vLLM does for hybrid models, does not.
 */
#include <string.h>

#include <kvrt/kvrt.h>

#include "fixtures.h"
#include "tap.h"

struct mix_case {
    const char *what;
    struct kvrt_spec a, b;
    bool mixed;
};

/* Resolution for one backend that declares only `layout`, told the groups
 * (or, with groups NULL, the mixed-shapes flag). */
static bool resolution_keeps(enum kvrt_layout layout, const struct kvrt_group *groups, size_t num_groups, bool mixed)
{
    kvrt_resolver *r = NULL;
    enum kvrt_layout got;
    bool kept = kvrt_resolver_create(&r) == KVRT_OK && kvrt_resolver_set_env(r, NULL) == KVRT_OK &&
                kvrt_resolver_declare(r, "x", &layout, 1) == KVRT_OK &&
                (groups ? kvrt_resolver_set_groups(r, groups, num_groups) : kvrt_resolver_set_mixed_shapes(r, mixed)) ==
                    KVRT_OK &&
                kvrt_resolver_resolve(r, &got) == KVRT_OK;
    kvrt_resolver_destroy(r);
    return kept;
}

static bool placement_accepts(enum kvrt_layout layout, const struct kvrt_group *groups, size_t num_groups)
{
    kvrt_placement *p = NULL;
    int rc = kvrt_placement_create(layout, groups, num_groups, 4, 0, &p);
    kvrt_placement_destroy(p);
    if (rc != KVRT_OK && rc != KVRT_ERR_REFUSED)
        tap_diag("  %s: %s", kvrt_layout_name(layout), kvrt_error_message());
    return rc == KVRT_OK;
}

static void check_case(const struct mix_case *c)
{
    struct kvrt_layer_entry both[2] = {{"a", c->a}, {"b", c->b}};
    struct kvrt_layer_entry ga[1] = {{"a", c->a}}, gb[1] = {{"b", c->b}};
    const struct kvrt_group together = {both, 2};
    const struct kvrt_group apart[2] = {{ga, 1}, {gb, 1}};
    bool in_one = !c->mixed, in_two = !c->mixed;
    tap_ok(kvrt_placement_mixed_shapes(&together, 1, &in_one) == KVRT_OK && in_one == c->mixed, "%s, one group: %s",
           c->what, c->mixed ? "mixed" : "not mixed");
    tap_ok(kvrt_placement_mixed_shapes(apart, 2, &in_two) == KVRT_OK && in_two == c->mixed, "%s, two groups: %s",
           c->what, c->mixed ? "mixed" : "not mixed");

    bool agree_one = true, agree_two = true, flag = true;
    for (int i = 0; i < KVRT_NUM_LAYOUTS; i++) {
        const enum kvrt_layout l = (enum kvrt_layout)i;
        /* Rules about one layer alone (a padded page needs its padding
         * outermost) are not this test's. */
        const bool alone = placement_accepts(l, &apart[0], 1) && placement_accepts(l, &apart[1], 1);
        const bool in1 = resolution_keeps(l, &together, 1, false), in2 = resolution_keeps(l, apart, 2, false);
        const bool ok1 = placement_accepts(l, &together, 1), ok2 = placement_accepts(l, apart, 2);
        if (alone && in1 != ok1) {
            tap_diag("  one group, %s: resolution %s it, placement %s it", kvrt_layout_name(l), in1 ? "keeps" : "drops",
                     ok1 ? "accepts" : "refuses");
            agree_one = false;
        }
        if (alone && in2 != ok2) {
            tap_diag("  two groups, %s: resolution %s it, placement %s it", kvrt_layout_name(l),
                     in2 ? "keeps" : "drops", ok2 ? "accepts" : "refuses");
            agree_two = false;
        }
        /* Told only the flag, resolution keeps layouts one group of these
         * layers can be placed in. */
        if (resolution_keeps(l, NULL, 0, in_one) && alone && !ok1) {
            tap_diag("  the flag, %s: resolution keeps it, placement refuses one group", kvrt_layout_name(l));
            flag = false;
        }
    }
    tap_ok(agree_one, "%s, one group: placement accepts exactly the layouts resolution keeps", c->what);
    tap_ok(agree_two, "%s, two groups: placement accepts exactly the layouts resolution keeps", c->what);
    tap_ok(flag, "%s, one group: every layout resolution keeps told the flag is placed", c->what);
}

/* Two overlaid groups of one page size, other head slots: under LHBNC (H
 * outside B) one group's block would reach into another block of the other;
 * every other layout keeps a block in one span or each page in one run. */
static void check_overlap(void)
{
    struct kvrt_layer_entry ga[1] = {{"a", fixture_attention(KVRT_DTYPE_FP16, 4, 2, 16)}};
    struct kvrt_layer_entry gb[1] = {{"b", fixture_attention(KVRT_DTYPE_FP16, 4, 4, 8)}};
    const struct kvrt_group apart[2] = {{ga, 1}, {gb, 1}};
    const struct kvrt_group together = {(struct kvrt_layer_entry[]){ga[0], gb[0]}, 2};
    bool ok = !placement_accepts(KVRT_LAYOUT_LHBNC, apart, 2) &&
              strstr(kvrt_error_message(), "block-compact or block-outermost") &&
              strstr(kvrt_error_message(), "use one of LBHNC, LBNHC, BLHNC, BLNHC, BHLNC");
    for (int i = 0; i < KVRT_NUM_LAYOUTS; i++)
        ok = ok && (i == KVRT_LAYOUT_LHBNC || placement_accepts((enum kvrt_layout)i, apart, 2)) &&
             placement_accepts((enum kvrt_layout)i, &together, 1);
    tap_ok(ok, "overlaid groups of one page size, other head slots: LHBNC refused, naming what fits; the rest and "
               "one group placed");
    /* BHLNC is block-outermost but not block-compact: placement takes it for
     * these groups, so resolution must keep it too. */
    tap_ok(resolution_keeps(KVRT_LAYOUT_BHLNC, apart, 2, false) &&
               !resolution_keeps(KVRT_LAYOUT_LHBNC, apart, 2, false),
           "resolution keeps BHLNC for those groups, as placement takes it, and drops LHBNC");
}

static void check_errors(void)
{
    struct kvrt_spec s = fixture_attention(KVRT_DTYPE_FP16, 16, 2, 64);
    struct kvrt_layer_entry one[1] = {{"a", s}};
    const struct kvrt_group g = {one, 1};
    bool mixed = true;
    tap_ok(kvrt_placement_mixed_shapes(&g, 1, &mixed) == KVRT_OK && !mixed, "a single layer does not mix shapes");
    tap_ok(kvrt_placement_mixed_shapes(&g, 1, NULL) == KVRT_ERR_INVALID &&
               strstr(kvrt_error_message(), "kvrt_placement_mixed_shapes"),
           "NULL output: KVRT_ERR_INVALID naming the function");
    tap_ok(kvrt_placement_mixed_shapes(NULL, 0, &mixed) == KVRT_ERR_INVALID &&
               strstr(kvrt_error_message(), "at least 1 group"),
           "no groups: refused");
    struct kvrt_layer_entry bad[2] = {{"fine", s}, {"broken.layer", s}};
    bad[1].spec.num_kv_heads = 0;
    const struct kvrt_group gb = {bad, 2};
    tap_ok(kvrt_placement_mixed_shapes(&gb, 1, &mixed) == KVRT_ERR_INVALID &&
               strstr(kvrt_error_message(), "\"broken.layer\"") && strstr(kvrt_error_message(), "num_kv_heads 0"),
           "an invalid spec: refused, naming the layer");
    kvrt_resolver *r = NULL;
    tap_ok(kvrt_resolver_create(&r) == KVRT_OK && kvrt_resolver_set_groups(r, &gb, 1) == KVRT_ERR_INVALID &&
               strstr(kvrt_error_message(), "\"broken.layer\""),
           "kvrt_resolver_set_groups refuses the same spec with the same message");
    kvrt_resolver_destroy(r);
}

int main(void)
{
    tap_plan_dynamic();
    const struct kvrt_spec base = fixture_attention(KVRT_DTYPE_FP16, 16, 2, 64);
    struct mix_case cases[6];
    size_t n = 0;
    cases[n++] = (struct mix_case){"identical specs", base, base, false};
    cases[n] = (struct mix_case){"only the element type differs", base, base, true};
    cases[n++].b.dtype = KVRT_DTYPE_FP32;
    cases[n] = (struct mix_case){"only the block size differs", base, base, true};
    cases[n++].b.block_size = 32;
    /* 2 heads of 64 and 4 heads of 32: pages of one size, other head slots. */
    cases[n++] =
        (struct mix_case){"only the head slots differ", base, fixture_attention(KVRT_DTYPE_FP16, 16, 4, 32), true};
    cases[n] = (struct mix_case){"only the states per block differ", base, base, true};
    cases[n].b.tokens_per_state_num = 2;
    cases[n++].b.page_size_padded = 8192;
    /* fp8 pages padded to the fp16 page: one shape again. */
    cases[n] = (struct mix_case){"element types differ, pages padded to one size", base, base, false};
    cases[n].b.dtype = KVRT_DTYPE_FP8_E4M3;
    cases[n++].b.page_size_padded = 8192;
    for (size_t i = 0; i < n; i++)
        check_case(&cases[i]);
    check_overlap();
    check_errors();
    return tap_done();
}
