/*
 * Names of OpenCL status codes, for error messages ("CL_OUT_OF_RESOURCES").
 */
#ifndef KVRT_CL_NAMES_H
#define KVRT_CL_NAMES_H

#include "cl_api.h"

/* The constant's name, or "unknown OpenCL error" for a code we don't know. */
const char *kvrt_cl_error_name(cl_int code);

#endif
