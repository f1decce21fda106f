/*
 * The one place kvrt-opencl includes the OpenCL API.  The target version is
 * fixed at 1.2: everything the plugin calls exists there, and newer headers
 * then hide (rather than deprecate-warn about) later entry points.
 */
#ifndef KVRT_CL_API_H
#define KVRT_CL_API_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#endif
