/* kvrt plan for a whole model (cli_plan_model.c). */
#ifndef KVRT_TOOLS_CLI_PLAN_H
#define KVRT_TOOLS_CLI_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include <kvrt/layout.h>

#include "model.h"

/* Place the model's groups and print them, per group and in total.
 * budget 0: the blocks were given, not computed from --memory. */
int plan_model(const struct kvrt_model *m, enum kvrt_layout layout, const char *layout_source,
               uint64_t num_blocks, uint64_t kernel_block_size, uint64_t budget, bool json);

#endif
