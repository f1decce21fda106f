/* kvrt plan for a whole model (cli_plan_model.c). */
#ifndef KVRT_TOOLS_CLI_PLAN_H
#define KVRT_TOOLS_CLI_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include <kvrt/layout.h>

#include "model.h"

/* What vLLM's capacity figures need beyond the model (0: not given). */
struct plan_vllm {
    uint64_t max_model_len;
    uint64_t batched_tokens;
    const char *max_model_len_source; /* the options that gave them */
    const char *batched_tokens_source;
};

/* Place the model's groups and print them, per group and in total, with
 * the values the sizing used and vLLM's capacity for a --memory budget.
 * budget 0: the blocks were given, not computed from --memory. */
int plan_model(const struct kvrt_model *m, enum kvrt_layout layout, const char *layout_source, uint64_t num_blocks,
               uint64_t kernel_block_size, uint64_t budget, const struct plan_vllm *vllm, bool json);

#endif
