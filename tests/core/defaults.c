/*
 * The defaults libkvrt exports (kvrt_spec_apply_defaults, kvrt_layout_default,
 * kvrt_layout_from_env_or_default), which the tool and the Python package
 * read instead of restating: the default layout is what resolution picks
 * when nothing constrains it, and the environment variable wins when set.
 */
#include <stdlib.h>
#include <string.h>

#include <kvrt/kvrt.h>

#include "tap.h"

static void check_spec(void)
{
    struct kvrt_spec s;
    kvrt_spec_default(&s);
    tap_ok(kvrt_spec_apply_defaults(&s) == KVRT_OK && s.block_size == KVRT_DEFAULT_BLOCK_SIZE && s.num_kv_heads == 0 &&
               s.kind == KVRT_SPEC_ATTENTION,
           "attention: block size %d filled in, KV heads left to the caller", KVRT_DEFAULT_BLOCK_SIZE);
    for (int k = KVRT_SPEC_MLA; k <= KVRT_SPEC_STATE; k++) {
        kvrt_spec_default(&s);
        s.kind = (enum kvrt_spec_kind)k;
        tap_ok(kvrt_spec_apply_defaults(&s) == KVRT_OK && s.num_kv_heads == 1, "%s: one KV head by default",
               kvrt_spec_kind_name(s.kind));
    }
    kvrt_spec_default(&s);
    s.kind = KVRT_SPEC_MLA;
    s.block_size = 64;
    s.num_kv_heads = 4;
    tap_ok(kvrt_spec_apply_defaults(&s) == KVRT_OK && s.block_size == 64 && s.num_kv_heads == 4,
           "values given are kept");
    tap_ok(kvrt_spec_apply_defaults(NULL) == KVRT_ERR_INVALID, "NULL spec: KVRT_ERR_INVALID");
}

static void check_layout(void)
{
    kvrt_resolver *r = NULL;
    enum kvrt_layout chosen = KVRT_LAYOUT_BHLNC;
    bool resolved = kvrt_resolver_create(&r) == KVRT_OK && kvrt_resolver_set_env(r, NULL) == KVRT_OK &&
                    kvrt_resolver_resolve(r, &chosen) == KVRT_OK;
    kvrt_resolver_destroy(r);
    tap_ok(resolved && chosen == kvrt_layout_default(),
           "kvrt_layout_default() (%s) is what an unconstrained resolve picks",
           kvrt_layout_name(kvrt_layout_default()));

    enum kvrt_layout l = KVRT_LAYOUT_BHLNC;
    bool from_env = true;
    unsetenv(KVRT_LAYOUT_ENV);
    tap_ok(kvrt_layout_from_env_or_default(&l, &from_env) == KVRT_OK && l == kvrt_layout_default() && !from_env,
           "unset %s: the default layout", KVRT_LAYOUT_ENV);
    setenv(KVRT_LAYOUT_ENV, "HND", 1);
    tap_ok(kvrt_layout_from_env_or_default(&l, &from_env) == KVRT_OK && l == KVRT_LAYOUT_LBHNC && from_env,
           "%s=HND: LBHNC, from the environment", KVRT_LAYOUT_ENV);
    tap_ok(kvrt_layout_from_env_or_default(&l, NULL) == KVRT_OK && l == KVRT_LAYOUT_LBHNC, "from_env may be NULL");
    setenv(KVRT_LAYOUT_ENV, "", 1);
    tap_ok(kvrt_layout_from_env_or_default(&l, &from_env) == KVRT_ERR_INVALID &&
               strstr(kvrt_error_message(), KVRT_LAYOUT_ENV),
           "set but empty: KVRT_ERR_INVALID naming the variable");
    unsetenv(KVRT_LAYOUT_ENV);
    tap_ok(kvrt_layout_from_env_or_default(NULL, &from_env) == KVRT_ERR_INVALID, "NULL out: KVRT_ERR_INVALID");
}

int main(void)
{
    tap_plan_dynamic();
    check_spec();
    check_layout();
    return tap_done();
}
