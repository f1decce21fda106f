/*
 * kvrt — resolution: choosing one layout for every backend that touches a cache.
 *
 * 1. No backend declares a list: the default preference
 *    LBNHC, LBHNC, BLNHC, BLHNC, BHLNC, LHBNC.
 * 2. Identical declarations keep their order; otherwise the intersection,
 *    ranked by how many backends declare each layout first, ties in table
 *    order.  An empty intersection is an error listing every declaration.
 * 3. Mixed shapes keep only the layouts placement accepts for them: pages
 *    of different sizes block-compact ones (block-outermost too across
 *    groups), overlaid groups of other head slots or states block-compact
 *    or block-outermost ones.
 * 4. VLLM_KV_CACHE_LAYOUT is a hard constraint; a soft preference only warns.
 * 5. The result is recorded once; a later different result is an error.
 * Every step is kept in a trace: as steps with a kind (kvrt/trace.h) and,
 * rendered from them, as text for people.
 */
#ifndef KVRT_RESOLVE_H
#define KVRT_RESOLVE_H

#include <stdbool.h>
#include <kvrt/common.h>
#include <kvrt/layout.h>
#include <kvrt/placement.h>
#include <kvrt/trace.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kvrt_resolver kvrt_resolver;

KVRT_API int kvrt_resolver_create(kvrt_resolver **out);
KVRT_API void kvrt_resolver_destroy(kvrt_resolver *r);

/** Declare a backend's ordered list (copied). Duplicates or invalid values: KVRT_ERR_INVALID. */
KVRT_API int kvrt_resolver_declare(kvrt_resolver *r, const char *backend, const enum kvrt_layout *layouts,
                                   size_t num_layouts);
/** Declare a backend that takes any layout. */
KVRT_API int kvrt_resolver_declare_any(kvrt_resolver *r, const char *backend);

/** The specs mix (H, N, page) shapes: keep only block-compact layouts,
 *  which hold any mix in one group.  With the layers at hand, prefer
 *  kvrt_resolver_set_groups, which keeps exactly what placement accepts. */
KVRT_API int kvrt_resolver_set_mixed_shapes(kvrt_resolver *r, bool mixed);

/**
 * The layers the cache will hold (read now, not kept): resolution then
 * keeps exactly the layouts kvrt_placement_create can place them in, by
 * the one rule both apply (docs/design.md §5): all when they share one
 * shape or mix head slots or states within one group of one page size;
 * block-compact ones when page sizes differ, and of those only the
 * block-outermost ones across several groups; block-compact or
 * block-outermost ones for overlaid groups of one page size but other head
 * slots or states.  Replaces what kvrt_resolver_set_mixed_shapes said.
 * @return KVRT_OK; the errors of kvrt_placement_mixed_shapes.
 */
KVRT_API int kvrt_resolver_set_groups(kvrt_resolver *r, const struct kvrt_group *groups, size_t num_groups);

/**
 * The hard constraint as the user spelled it (NULL = unset).  Validated at
 * kvrt_resolver_resolve time.  kvrt_resolver_create() reads
 * VLLM_KV_CACHE_LAYOUT from the environment; call this to override.
 */
KVRT_API int kvrt_resolver_set_env(kvrt_resolver *r, const char *value);

/** A soft preference as spelled (NULL = none). Invalid names: KVRT_ERR_INVALID. */
KVRT_API int kvrt_resolver_set_preference(kvrt_resolver *r, const char *name, const char *who);

/**
 * Resolve.  The first successful result is recorded; a later call whose
 * result differs fails with KVRT_ERR_STATE (the record is kept).
 * @return KVRT_OK; KVRT_ERR_INVALID for a malformed env value;
 *   KVRT_ERR_REFUSED when the constraint is not a candidate or nothing is.
 */
KVRT_API int kvrt_resolver_resolve(kvrt_resolver *r, enum kvrt_layout *out);

/** Candidates of the last resolve in rank order; returns their count (out
 *  may be NULL to ask only the count). */
KVRT_API size_t kvrt_resolver_candidates(const kvrt_resolver *r, enum kvrt_layout out[KVRT_NUM_LAYOUTS]);

/** true when the last resolve overruled the soft preference. */
KVRT_API bool kvrt_resolver_warned(const kvrt_resolver *r);

/** true when a layout has been recorded, and which (out may be NULL). */
KVRT_API bool kvrt_resolver_recorded(const kvrt_resolver *r, enum kvrt_layout *out);

/**
 * The trace of every step so far, one step per line ("why this layout?"):
 * each step's kind name, ": " and its text ("resolve #N: " for the Nth
 * resolve).  Valid until the next resolve or destroy.
 */
KVRT_API const char *kvrt_resolver_trace(const kvrt_resolver *r);

/**
 * The last resolve as one JSON object: "layout", "candidates", "warning",
 * "env" (VLLM_KV_CACHE_LAYOUT as spelled, or null), "trace" (one string per
 * line) and "steps" (each step's kind name, text, and layout and backend
 * where set): what `kvrt resolve --json` prints and kvrt.resolve() returns.
 * *out is the caller's: kvrt_free it.
 * @return KVRT_ERR_STATE when the last resolve failed or there was none.
 */
KVRT_API int kvrt_resolver_json(const kvrt_resolver *r, char **out);

/** How many steps the trace holds (every resolve adds its steps). */
KVRT_API size_t kvrt_resolver_num_trace_steps(const kvrt_resolver *r);

/**
 * Step i (0 = oldest) of the trace into *out; its strings stay valid until
 * the next resolve or destroy.  KVRT_ERR_INVALID for i out of range.
 */
KVRT_API int kvrt_resolver_trace_step(const kvrt_resolver *r, size_t i, struct kvrt_trace_step *out);

#ifdef __cplusplus
}
#endif
#endif
