/* Internal: what the layout table gives the rest of the core.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_LAYOUT_INTERNAL_H
#define KVRT_CORE_LAYOUT_INTERNAL_H

#include <stddef.h>

#include <kvrt/layout.h>

/* "LBHNC, LBNHC, ...": the six layouts in table (enum) order. */
const char *kvrt_layout_table_text(void);

/* "0 (LBHNC), 1 (LBNHC), ...": the valid enum values, for messages. */
const char *kvrt_layout_values_text(void);

/* The default preference (docs/design.md §7, step 1): all KVRT_NUM_LAYOUTS
 * layouts, best first; kvrt_layout_default() is its first. */
const enum kvrt_layout *kvrt_layout_default_preference(void);

#endif
