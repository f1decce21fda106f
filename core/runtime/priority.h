/* Internal: the order automatic selection tries backends in (priority.c).
 *
 * Layer 8 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_PRIORITY_H
#define KVRT_CORE_PRIORITY_H

#include <stdbool.h>
#include <stddef.h>

/* The rank of a backend named `name` (0 first); emulates_cpu: its device is
 * the host CPU and it is not "cpu" itself. */
size_t kvrt_priority_rank(const char *name, bool emulates_cpu);

/* How many ranks there are: every rank is below it. */
size_t kvrt_priority_num_ranks(void);

#endif
