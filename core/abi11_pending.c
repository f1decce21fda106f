/* TEMPORARY stand-in for the ABI 1.1 functions, until that change is
 * merged; removed then.  Reads the cpu plugin's buffer handle directly. */
#include <string.h>

#include "abi11_pending.h"
#include "error.h"
#include "runtime_internal.h"

struct cpu_handle_peek {
    unsigned char *data;
    uint64_t bytes;
};

int kvrt_backend_device_info(const kvrt_backend *b, struct kvrt_device_info *out)
{
    if (!b || !out)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_backend_device_info: NULL argument");
    memset(out, 0, sizeof(*out));
    int cpu = strcmp(b->plugin->desc->name, "cpu") == 0;
    out->type = cpu ? KVRT_DEVICE_TYPE_CPU : KVRT_DEVICE_TYPE_UNKNOWN;
    out->memory = cpu ? KVRT_MEMORY_HOST : KVRT_MEMORY_OPAQUE;
    strncpy(out->name, b->plugin->desc->name, sizeof(out->name) - 1);
    return KVRT_OK;
}

int kvrt_buffer_address(kvrt_buffer *buf, void **addr, enum kvrt_memory_kind *kind)
{
    if (!buf || !addr || !kind)
        return kvrt_fail(KVRT_ERR_INVALID, "kvrt_buffer_address: NULL argument");
    if (strcmp(buf->backend->plugin->desc->name, "cpu") != 0)
        return kvrt_fail(KVRT_ERR_UNSUPPORTED, "kvrt_buffer_address: backend \"%s\" has no address for its memory",
                         buf->backend->plugin->desc->name);
    *addr = ((struct cpu_handle_peek *)(void *)buf->handle)->data;
    *kind = KVRT_MEMORY_HOST;
    return KVRT_OK;
}
