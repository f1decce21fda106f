/* kvrt plan for a whole model (cli_plan_model.c). */
#ifndef KVRT_TOOLS_CLI_PLAN_H
#define KVRT_TOOLS_CLI_PLAN_H

#include <stdbool.h>

#include <kvrt/model.h>

#include "cli_model.h"

/* Place the model of f (cli_model_build) as `req` asks and print it, per
 * group and in total, with the values the sizing used and vLLM's capacity
 * for a budget; --json prints libkvrt's plan as it is.  Returns a CLI exit
 * status. */
int plan_model(const struct cli_model_flags *f, const struct kvrt_model_plan_request *req, bool json);

#endif
