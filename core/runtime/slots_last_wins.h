/* Internal: the "last token wins" rule for duplicate slots in one write.
 *
 * Layer 7 of libkvrt (core/runtime/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_SLOTS_LAST_WINS_H
#define KVRT_CORE_SLOTS_LAST_WINS_H

#include <stdint.h>

/*
 * A write may name one slot for several tokens; the last of them wins.
 * Backends write tokens in parallel (a GPU would even tear a cell between
 * two writers), so the core hands them slots that never repeat: *out is
 * NULL when `slots` has no duplicate, else a malloc'd copy in which every
 * earlier duplicate is -1 (skipped).  Returns KVRT_OK or KVRT_ERR_NOMEM.
 */
int kvrt_slots_last_wins(uint64_t n, const int64_t *slots, int64_t **out);

#endif
