#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/host/gpu_error.h"
#include "cl_names.h"
#include "cl_select.h"

#define MAX_PLATFORMS 16
#define MAX_DEVICES 64

static void platform_name(cl_platform_id p, char *buf, size_t size)
{
    if (clGetPlatformInfo(p, CL_PLATFORM_NAME, size, buf, NULL) != CL_SUCCESS)
        snprintf(buf, size, "?");
    buf[size - 1] = '\0';
}

static void device_name(cl_device_id d, char *buf, size_t size)
{
    if (clGetDeviceInfo(d, CL_DEVICE_NAME, size, buf, NULL) != CL_SUCCESS)
        snprintf(buf, size, "?");
    buf[size - 1] = '\0';
}

static cl_uint list_devices(cl_platform_id p, cl_device_id *out)
{
    cl_uint n = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, MAX_DEVICES, out, &n) != CL_SUCCESS)
        return 0; /* CL_DEVICE_NOT_FOUND: a platform without devices */
    return n < MAX_DEVICES ? n : MAX_DEVICES;
}

/* Why the kernels cannot run on d, or NULL when they can. */
static const char *unusable(cl_device_id d, char *buf, size_t size)
{
    cl_bool yes = CL_FALSE;
    if (clGetDeviceInfo(d, CL_DEVICE_AVAILABLE, sizeof(yes), &yes, NULL) != CL_SUCCESS || !yes)
        return "the device reports CL_DEVICE_AVAILABLE = false";
    yes = CL_FALSE;
    if (clGetDeviceInfo(d, CL_DEVICE_COMPILER_AVAILABLE, sizeof(yes), &yes, NULL) != CL_SUCCESS || !yes)
        return "the device has no OpenCL C compiler (kvrt builds its kernels from source)";
    char version[128] = "";
    clGetDeviceInfo(d, CL_DEVICE_OPENCL_C_VERSION, sizeof(version), version, NULL);
    version[sizeof(version) - 1] = '\0';
    int major = 0, minor = 0;
    if (sscanf(version, "OpenCL C %d.%d", &major, &minor) != 2 || major * 10 + minor < 12) {
        snprintf(buf, size, "the device offers '%s'; kvrt's kernels need OpenCL C 1.2", version);
        return buf;
    }
    return NULL;
}

/* "0 'PoCL' (1 device), 1 '...' (0 devices)" for messages. */
static void describe_platforms(const cl_platform_id *ps, cl_uint n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (cl_uint i = 0; i < n && used < size; i++) {
        char pname[96];
        cl_device_id devs[MAX_DEVICES];
        platform_name(ps[i], pname, sizeof(pname));
        int w = snprintf(buf + used, size - used, "%s%u '%s' (%u device(s))", i ? ", " : "", i, pname,
                         list_devices(ps[i], devs));
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

static int parse_choice(const char *text, unsigned *pi, unsigned *di)
{
    char *end;
    unsigned long a = strtoul(text, &end, 10);
    if (end == text || *end != ':' || text[0] == '-')
        return -1;
    const char *second = end + 1;
    unsigned long b = strtoul(second, &end, 10);
    if (end == second || *end != '\0' || second[0] == '-' || a > MAX_PLATFORMS || b > MAX_DEVICES)
        return -1;
    *pi = (unsigned)a;
    *di = (unsigned)b;
    return 0;
}

static int pick(struct kvrt_cl_choice *out, cl_platform_id p, unsigned pi, cl_device_id d, unsigned di)
{
    out->platform = p;
    out->device = d;
    out->platform_index = pi;
    out->device_index = di;
    device_name(d, out->name, sizeof(out->name));
    return KVRT_OK;
}

int kvrt_cl_select(struct kvrt_cl_choice *out, kvrt_plugin_error *why)
{
    cl_platform_id ps[MAX_PLATFORMS];
    cl_uint np = 0;
    cl_int rc = clGetPlatformIDs(MAX_PLATFORMS, ps, &np);
    if (rc != CL_SUCCESS) {
        const char *vendors = getenv("OCL_ICD_VENDORS");
        return kvrt_gpu_fail(why, KVRT_ERR_NODEV,
                             "clGetPlatformIDs failed: %s (%d); no OpenCL platform is installed "
                             "or visible to the ICD loader%s%s%s",
                             kvrt_cl_error_name(rc), (int)rc, vendors ? " (OCL_ICD_VENDORS=" : "",
                             vendors ? vendors : "", vendors ? ")" : "");
    }
    if (np == 0)
        return kvrt_gpu_fail(why, KVRT_ERR_NODEV,
                             "clGetPlatformIDs found no OpenCL platform; install an ICD such as "
                             "pocl-opencl-icd");
    if (np > MAX_PLATFORMS)
        np = MAX_PLATFORMS;

    char reason[160];
    char platforms[320];
    const char *env = getenv(KVRT_CL_DEVICE_ENV);
    if (env) {
        unsigned pi, di;
        if (parse_choice(env, &pi, &di) != 0)
            return kvrt_gpu_fail(why, KVRT_ERR_NODEV,
                                 KVRT_CL_DEVICE_ENV "='%s' is not 'platform:device' (two "
                                                    "indices, e.g. '0:0')",
                                 env);
        describe_platforms(ps, np, platforms, sizeof(platforms));
        if (pi >= np)
            return kvrt_gpu_fail(why, KVRT_ERR_NODEV,
                                 KVRT_CL_DEVICE_ENV "='%s': there is no platform %u; platforms: %s", env, pi,
                                 platforms);
        cl_device_id devs[MAX_DEVICES];
        cl_uint nd = list_devices(ps[pi], devs);
        if (di >= nd)
            return kvrt_gpu_fail(why, KVRT_ERR_NODEV,
                                 KVRT_CL_DEVICE_ENV "='%s': platform %u has no device %u; "
                                                    "platforms: %s",
                                 env, pi, di, platforms);
        const char *bad = unusable(devs[di], reason, sizeof(reason));
        if (bad) {
            char dname[96];
            device_name(devs[di], dname, sizeof(dname));
            return kvrt_gpu_fail(why, KVRT_ERR_NODEV, KVRT_CL_DEVICE_ENV "='%s' ('%s'): %s", env, dname, bad);
        }
        return pick(out, ps[pi], pi, devs[di], di);
    }

    const char *last = NULL;
    for (cl_uint pi = 0; pi < np; pi++) {
        cl_device_id devs[MAX_DEVICES];
        cl_uint nd = list_devices(ps[pi], devs);
        for (cl_uint di = 0; di < nd; di++) {
            const char *bad = unusable(devs[di], reason, sizeof(reason));
            if (!bad)
                return pick(out, ps[pi], pi, devs[di], di);
            last = bad;
        }
    }
    describe_platforms(ps, np, platforms, sizeof(platforms));
    return kvrt_gpu_fail(why, KVRT_ERR_NODEV, "no usable OpenCL device (platforms: %s)%s%s", platforms,
                         last ? "; last device refused: " : "", last ? last : "");
}

int kvrt_cl_describe(struct kvrt_plugin_device_info *info, kvrt_plugin_error *err)
{
    struct kvrt_cl_choice c;
    memset(&c, 0, sizeof(c));
    int status = kvrt_cl_select(&c, err);
    if (status != KVRT_OK)
        return status;
    cl_device_type type = 0;
    if (clGetDeviceInfo(c.device, CL_DEVICE_TYPE, sizeof(type), &type, NULL) != CL_SUCCESS)
        type = 0;
    /* A GPU bit wins: some drivers report GPU|DEFAULT. */
    const char *text = "other";
    if (type & CL_DEVICE_TYPE_GPU) {
        info->type = KVRT_DEVICE_TYPE_GPU;
        text = "GPU";
    } else if (type & CL_DEVICE_TYPE_ACCELERATOR) {
        info->type = KVRT_DEVICE_TYPE_ACCELERATOR;
        text = "accelerator";
    } else if (type & CL_DEVICE_TYPE_CPU) {
        info->type = KVRT_DEVICE_TYPE_CPU;
        text = "CPU";
    }
    /* cl_mem objects have no address the process could register or export. */
    info->memory = KVRT_MEMORY_OPAQUE;
    info->device_id = (int32_t)(c.platform_index * 256u + c.device_index);
    char pname[96];
    platform_name(c.platform, pname, sizeof(pname));
    snprintf(info->name, sizeof(info->name), "%s: %s (%s, device %u:%u)", pname, c.name, text, c.platform_index,
             c.device_index);
    return KVRT_OK;
}
