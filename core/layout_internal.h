/* Internal: helpers shared by the layout and resolution code. */
#ifndef KVRT_CORE_LAYOUT_INTERNAL_H
#define KVRT_CORE_LAYOUT_INTERNAL_H

#include <stddef.h>

#include <kvrt/layout.h>

/* "LBHNC, LBNHC, ...": the six layouts in table (enum) order. */
const char *kvrt_layout_table_text(void);

/* "0 (LBHNC), 1 (LBNHC), ...": the valid enum values, for messages. */
const char *kvrt_layout_values_text(void);

#endif
