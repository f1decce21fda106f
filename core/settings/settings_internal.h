/* Internal: reading a setting where the caller already holds a valid one.
 *
 * Layer 2 of libkvrt (core/settings/; CONTRIBUTING.md, "Where things live").
 */
#ifndef KVRT_CORE_SETTINGS_INTERNAL_H
#define KVRT_CORE_SETTINGS_INTERNAL_H

#include <kvrt/settings.h>

/* kvrt_setting_get's value without the check: `argument` when not NULL,
 * else the environment variable, else NULL; *source (may be NULL) says
 * which. */
const char *kvrt_setting_value(enum kvrt_setting setting, const char *argument, enum kvrt_setting_source *source);

#endif
