/* Internal: helpers shared by the layout and resolution code. */
#ifndef KVRT_CORE_LAYOUT_INTERNAL_H
#define KVRT_CORE_LAYOUT_INTERNAL_H

#include <stddef.h>

#include <kvrt/layout.h>

/* Copy a user-supplied value for quoting in a message: control bytes, quotes
 * and backslashes are escaped so the message stays one readable line.  Long
 * values are truncated to fit `size`. */
void kvrt_layout_quote(const char *value, char *buf, size_t size);

/* "LBHNC, LBNHC, ...": the six layouts in table (enum) order. */
const char *kvrt_layout_table_text(void);

/* "0 (LBHNC), 1 (LBNHC), ...": the valid enum values, for messages. */
const char *kvrt_layout_values_text(void);

#endif
