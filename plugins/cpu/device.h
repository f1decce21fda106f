/*
 * kvrt CPU backend — the device and buffer handles, and error/log helpers
 * shared by the module's files.
 */
#ifndef KVRT_CPU_DEVICE_H
#define KVRT_CPU_DEVICE_H

#include <stdbool.h>

#include <kvrt/plugin.h>

#include "isa.h"
#include "pool.h"

/* Work smaller than this runs on the calling thread: waking a worker costs
 * more than it saves. */
#define CPU_PARALLEL_MIN_BYTES ((uint64_t)256 * 1024)

struct kvrt_plugin_device {
    int32_t layout;
    struct cpu_pool *pool;
    enum cpu_isa isa;   /* the decode kernel */
    uint64_t llc_bytes; /* block moves above this use streaming stores */
    /* A copy of the host services: the core's struct need not outlive bind. */
    void *log_user;
    void (*log)(void *user, int level, const char *message);
};

/* "Device memory" is host memory, 64-byte aligned, or the caller's
 * (imported: never freed here), CPU_IMPORT_ALIGN-byte aligned. */
struct kvrt_plugin_buffer {
    unsigned char *data;
    uint64_t bytes;
    bool imported;
};

/* The alignment imported memory needs: elements are read through their C
 * types, the widest (fp32) being 4 bytes; vector loads and stores are the
 * unaligned kinds, and streaming stores align themselves. */
#define CPU_IMPORT_ALIGN 4u

/* Write "cpu: <message>" into err (if any) and return status. */
int cpu_fail(kvrt_plugin_error *err, int status, const char *fmt, ...) KVRT_PRINTF(3, 4);

/* Log through the host, if it gave a logger. */
void cpu_log(const kvrt_plugin_device *dev, int level, const char *fmt, ...) KVRT_PRINTF(3, 4);

/* Threads a job may use on this device. */
static inline unsigned cpu_threads(const kvrt_plugin_device *dev)
{
    return cpu_pool_threads(dev->pool);
}

#endif
