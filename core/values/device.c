/* Names of device types and memory kinds (kvrt/device.h), written once: the
 * tool's JSON, the Python package and messages read them from here.
 *
 * Layer 3 of libkvrt (core/values/; CONTRIBUTING.md, "Where things live").
 */
#include <kvrt/device.h>

static const char *const device_types[] = {
    [KVRT_DEVICE_TYPE_UNKNOWN] = "unknown",
    [KVRT_DEVICE_TYPE_CPU] = "cpu",
    [KVRT_DEVICE_TYPE_GPU] = "gpu",
    [KVRT_DEVICE_TYPE_ACCELERATOR] = "accelerator",
};

static const char *const memory_kinds[] = {
    [KVRT_MEMORY_OPAQUE] = "opaque",
    [KVRT_MEMORY_HOST] = "host",
    [KVRT_MEMORY_CUDA] = "cuda",
    [KVRT_MEMORY_ROCM] = "rocm",
};

const char *kvrt_device_type_name(enum kvrt_device_type type)
{
    return (unsigned)type < sizeof(device_types) / sizeof(device_types[0]) ? device_types[type] : NULL;
}

const char *kvrt_memory_kind_name(enum kvrt_memory_kind kind)
{
    return (unsigned)kind < sizeof(memory_kinds) / sizeof(memory_kinds[0]) ? memory_kinds[kind] : NULL;
}
