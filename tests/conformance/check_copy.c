/* copy_blocks: whole blocks of every layer, pairs applied in order. */
#include <stdlib.h>

#include "conformance.h"

static bool copy(struct conf_case *cs, uint64_t n, const int64_t *pairs)
{
    int status = kvrt_cache_copy_blocks(cs->cache.cache, n, pairs);
    if (status != KVRT_OK) {
        conf_diag_status("kvrt_cache_copy_blocks", status);
        return false;
    }
    conf_model_copy(&cs->cache, n, pairs);
    return conf_cache_matches(&cs->cache);
}

void conf_check_copy(struct conf_case *cs)
{
    if (!conf_has_op(cs, KVRT_OP_COPY_BLOCKS)) {
        tap_skip("%s: copy_blocks: the backend does not declare it", cs->label);
        return;
    }
    int64_t *b = conf_rng_permutation(&cs->plugin->rng, cs->cache.num_blocks);
    if (!b) {
        tap_ok(false, "%s: copy_blocks: out of host memory", cs->label);
        return;
    }
    /* Disjoint pairs first: what every engine does after a fork. */
    int64_t pairs[4] = {b[0], b[1], b[2], b[3]};
    tap_ok(copy(cs, 2, pairs), "%s: copy_blocks %lld->%lld, %lld->%lld copies every layer, nothing else", cs->label,
           (long long)pairs[0], (long long)pairs[1], (long long)pairs[2], (long long)pairs[3]);
    /* A chain: the second pair reads what the first wrote (plugin.h: pairs
     * are applied in order). */
    int64_t chain[4] = {b[4], b[5], b[5], b[0]};
    tap_ok(copy(cs, 2, chain), "%s: copy_blocks applies pairs in order (%lld->%lld, %lld->%lld)", cs->label,
           (long long)chain[0], (long long)chain[1], (long long)chain[2], (long long)chain[3]);
    free(b);
}
