/* Internal: the JSON of a trace, written once for every answer that carries
 * one (kvrt_resolver_json, kvrt_runtime_trace_json).
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_JSON_REPORTS_H
#define KVRT_CORE_JSON_REPORTS_H

#include <jansson.h>

#include "trace.h"

/* Every step of `trace`, oldest first, each {"step": its kind's name,
 * "text", and "layout" and "backend" when the step is about one}; NULL
 * when memory runs out. */
json_t *kvrt_json_trace_steps(const struct kvrt_trace *trace);

#endif
