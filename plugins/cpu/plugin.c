/*
 * kvrt CPU backend — the descriptor, probe, bind and unbind.
 *
 * Host memory stands in for device memory and every operation is plain C
 * on a small worker pool, so the backend works on every machine, with no
 * device and no driver: the embedded default.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isa.h"
#include "ops.h"

#ifndef KVRT_CPU_VERSION
#error "KVRT_CPU_VERSION must be defined by the build (the project version)"
#endif

/*
 * Most preferred first, from bench-cpu's measurements (README.md has the
 * numbers and the reasoning).  Write and read cost the same everywhere.
 * Block-compact layouts come first: a page is one run, decode reads the
 * heads of a block from one region, and mixed page sizes need them.  Among
 * those, [H, N, C] pages gather without a transpose, and block-outermost
 * ones make a whole block (all layers) one run.  The two layouts that
 * scatter a block's heads across the cache (BHLNC, LHBNC) decode ~15%
 * slower and copy in one run per head.
 */
static const int32_t cpu_layouts[] = {
    KVRT_LAYOUT_BLHNC, KVRT_LAYOUT_LBHNC, KVRT_LAYOUT_BLNHC, KVRT_LAYOUT_LBNHC, KVRT_LAYOUT_BHLNC, KVRT_LAYOUT_LHBNC,
};

#define DTYPE_BIT(t) (1u << (t))

static const struct kvrt_plugin_descriptor cpu_descriptor = {
    .size = sizeof(struct kvrt_plugin_descriptor),
    .abi_major = KVRT_PLUGIN_ABI_MAJOR,
    .abi_minor = KVRT_PLUGIN_ABI_MINOR,
    .name = "cpu",
    .version = KVRT_CPU_VERSION,
    .description = "portable C11 backend: host memory, pthread worker pool",
    .flags = 0,
    .num_layouts = sizeof(cpu_layouts) / sizeof(cpu_layouts[0]),
    .layouts = cpu_layouts,
    /* Byte-moving operations take every type; decode checks its own. */
    .dtypes = DTYPE_BIT(KVRT_DTYPE_FP32) | DTYPE_BIT(KVRT_DTYPE_FP16) | DTYPE_BIT(KVRT_DTYPE_BF16) |
              DTYPE_BIT(KVRT_DTYPE_FP8_E4M3) | DTYPE_BIT(KVRT_DTYPE_FP8_E5M2) | DTYPE_BIT(KVRT_DTYPE_INT8) |
              DTYPE_BIT(KVRT_DTYPE_UINT8),
    .ops = KVRT_OP_ALL,

    .probe = cpu_probe,
    .bind = cpu_bind,
    .unbind = cpu_unbind,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .buffer_zero = cpu_buffer_zero,
    .buffer_upload = cpu_buffer_upload,
    .buffer_download = cpu_buffer_download,
    .write = cpu_write,
    .read = cpu_read,
    .copy_blocks = cpu_copy_blocks,
    .gather = cpu_gather,
    .scatter = cpu_scatter,
    .decode = cpu_decode,
    /* int8/uint8 carry no scale to compute with: stored and moved only. */
    .decode_dtypes = DTYPE_BIT(KVRT_DTYPE_FP32) | DTYPE_BIT(KVRT_DTYPE_FP16) | DTYPE_BIT(KVRT_DTYPE_BF16) |
                     DTYPE_BIT(KVRT_DTYPE_FP8_E4M3) | DTYPE_BIT(KVRT_DTYPE_FP8_E5M2),
    .describe = cpu_describe,
    .buffer_address = cpu_buffer_address,
    .import_alignment = CPU_IMPORT_ALIGN,
    .buffer_import = cpu_buffer_import,
};

KVRT_PLUGIN_DEFINE_ENTRY(cpu_descriptor)

int cpu_probe(kvrt_plugin_error *why)
{
    /* The host CPU is always there; only a KVRT_CPU_ISA it cannot honour
     * makes the backend unavailable, with the reason. */
    enum cpu_isa isa;
    return cpu_isa_choose(&isa, why);
}

/* The last-level cache one core reaches: what the C library reports, at
 * most 32 MiB.  The report is the whole L3 of the package on many-chiplet
 * CPUs and in guests (508 MiB on the 2-vCPU EPYC guest the numbers in
 * README.md come from), while a core reaches only its chiplet's slice
 * (32 MiB there); a guest that reports nothing gets the same 32 MiB. */
static uint64_t cpu_llc_bytes(void)
{
    const uint64_t slice = (uint64_t)32 << 20;
    long n = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    n = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (n <= 0)
        n = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return n > 0 && (uint64_t)n < slice ? (uint64_t)n : slice;
}

/* The processor's marketing name, so `kvrt plugins` can show which CPU
 * "cpu" runs on next to an OpenCL CPU device on the same chip. */
int cpu_describe(struct kvrt_plugin_device_info *info, kvrt_plugin_error *err)
{
    (void)err;
    info->type = KVRT_DEVICE_TYPE_CPU;
    info->memory = KVRT_MEMORY_HOST;
    info->device_id = 0;
    char model[160] = "host CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[256];
        while (fgets(line, sizeof(line), f)) {
            const char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) == 0 && colon) {
                colon++;
                while (*colon == ' ' || *colon == '\t')
                    colon++;
                snprintf(model, sizeof(model), "%s", colon);
                model[strcspn(model, "\n")] = '\0';
                break;
            }
        }
        fclose(f);
    }
    /* A bad KVRT_CPU_THREADS is reported by bind; the description only
     * names the CPU then. */
    unsigned threads = 0;
    const char *bad = NULL;
    if (cpu_pool_default_threads(&threads, &bad))
        snprintf(info->name, sizeof(info->name), "%s (%u threads)", model, threads);
    else
        snprintf(info->name, sizeof(info->name), "%s", model);
    return KVRT_OK;
}

int cpu_bind(const struct kvrt_plugin_bind_info *info, kvrt_plugin_device **out, kvrt_plugin_error *err)
{
    *out = NULL;
    unsigned want = 1;
    const char *bad = NULL;
    if (!cpu_pool_default_threads(&want, &bad))
        return cpu_fail(err, KVRT_ERR_INVALID,
                        "KVRT_CPU_THREADS=\"%s\" is not a thread count; give a "
                        "whole number from 1 to %d, or unset it to use every CPU",
                        bad, CPU_POOL_MAX_THREADS);
    kvrt_plugin_device *dev = calloc(1, sizeof(*dev));
    if (!dev)
        return cpu_fail(err, KVRT_ERR_NOMEM, "cannot allocate the device context (%zu bytes)", sizeof(*dev));
    dev->layout = info->layout;
    const struct kvrt_plugin_host *host = info->host;
    if (host && host->size >= offsetof(struct kvrt_plugin_host, log) + sizeof(host->log)) {
        dev->log_user = host->user;
        dev->log = host->log;
    }

    int rc = cpu_isa_choose(&dev->isa, err);
    if (rc != KVRT_OK) {
        free(dev);
        return rc;
    }
    dev->llc_bytes = cpu_llc_bytes();
    dev->pool = cpu_pool_create(want);
    if (!dev->pool) {
        free(dev);
        return cpu_fail(err, KVRT_ERR_NOMEM, "cannot allocate a worker pool of %u threads", want);
    }
    unsigned got = cpu_pool_threads(dev->pool);
    if (got < want)
        cpu_log(dev, 1, "could start only %u of %u worker threads; running on %u", got - 1, want - 1, got);
    cpu_log(dev, 3, "bound: %u thread%s, %s decode kernel", got, got == 1 ? "" : "s", cpu_isa_name(dev->isa));
    *out = dev;
    return KVRT_OK;
}

void cpu_unbind(kvrt_plugin_device *dev)
{
    if (!dev)
        return;
    cpu_pool_destroy(dev->pool);
    free(dev);
}
