/* Internal: what the JSON of a resolution reads from a resolver.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_RESOLVE_INTERNAL_H
#define KVRT_CORE_RESOLVE_INTERNAL_H

#include <stdbool.h>

#include <kvrt/resolve.h>

/* VLLM_KV_CACHE_LAYOUT as the resolver holds it, as spelled; NULL: unset. */
const char *kvrt_resolver_env(const kvrt_resolver *r);

/* true when the last resolve succeeded, and its layout (out may be NULL). */
bool kvrt_resolver_last(const kvrt_resolver *r, enum kvrt_layout *out);

#endif
