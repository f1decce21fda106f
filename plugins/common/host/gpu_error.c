#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "gpu_error.h"

int kvrt_gpu_fail(kvrt_plugin_error *err, int status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
    }
    return status;
}

const char *kvrt_gpu_dtype_name(int dtype, char buf[16])
{
    static const char *const names[] = {"fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "int8", "uint8"};
    if (dtype >= 0 && dtype < (int)(sizeof(names) / sizeof(names[0])))
        return names[dtype];
    snprintf(buf, 16, "dtype %d", dtype);
    return buf;
}

void kvrt_gpu_host_from_bind(const struct kvrt_plugin_bind_info *info, struct kvrt_plugin_host *out)
{
    const size_t need = offsetof(struct kvrt_plugin_bind_info, host) + sizeof(void *);
    memset(out, 0, sizeof(*out));
    if (info->size >= need && info->host && info->host->size >= sizeof(struct kvrt_plugin_host))
        *out = *info->host;
}

void kvrt_gpu_log(const struct kvrt_plugin_host *host, int level, const char *fmt, ...)
{
    if (!host || host->size < sizeof(struct kvrt_plugin_host) || !host->log)
        return;
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    host->log(host->user, level, text);
}
