/*
 * Which OpenCL device kvrt-opencl uses: KVRT_OPENCL_DEVICE=platform:device
 * (indices as clinfo -l lists them), else the first usable device of any
 * type on the first platform that has one.  Runs no device code and
 * allocates nothing on the device, so probe can call it.
 */
#ifndef KVRT_CL_SELECT_H
#define KVRT_CL_SELECT_H

#include <kvrt/plugin.h>

#include "cl_api.h"

#define KVRT_CL_DEVICE_ENV "KVRT_OPENCL_DEVICE"

struct kvrt_cl_choice {
    cl_platform_id platform;
    cl_device_id device;
    unsigned platform_index;
    unsigned device_index;
    char name[128];
};

/* KVRT_OK, or KVRT_ERR_NODEV with the reason in why. */
int kvrt_cl_select(struct kvrt_cl_choice *out, kvrt_plugin_error *why);

/* The chosen device for `kvrt plugins` and selection: name, OpenCL device
 * type, opaque memory. */
int kvrt_cl_describe(struct kvrt_plugin_device_info *info, kvrt_plugin_error *err);

#endif
