/*
 * A GPU plugin's declaration, read the way the core reads it: dlopen, call
 * the entry, check the descriptor.  Runs no device code, so it runs (and
 * must pass) on machines without the device.
 */
#include <stdlib.h>

#include "gpu_plugin.h"
#include "tap.h"

int main(void)
{
    tap_plan_dynamic();
    const struct kvrt_plugin_descriptor *d = gpu_plugin_load();
    const char *name = getenv("KVRT_TEST_PLUGIN_NAME");
    if (d)
        gpu_plugin_check_descriptor(d, name ? name : "?");
    return tap_done();
}
