/*
 * Loading a GPU plugin module for a test: the path comes from the
 * environment (meson passes the built module), the descriptor from its entry.
 */
#ifndef KVRT_TESTS_GPU_PLUGIN_H
#define KVRT_TESTS_GPU_PLUGIN_H

#include <kvrt/plugin.h>

/* dlopen $KVRT_TEST_PLUGIN and call its entry; on failure a TAP "not ok"
 * with the dlerror text is printed and NULL returned. */
const struct kvrt_plugin_descriptor *gpu_plugin_load(void);

/* One TAP point per descriptor property; returns true when all held. */
bool gpu_plugin_check_descriptor(const struct kvrt_plugin_descriptor *d, const char *name);

/* Layout name for messages ("LBHNC"). */
const char *gpu_layout_name(int layout);

#endif
