/*
 * Deliberately broken and special-purpose plugins for the loader tests.
 * One source, compiled once per variant with -DVARIANT_<NAME>; each variant
 * breaks exactly one rule so that each skip reason is tested on its own.
 * Device work is a trivial host-memory implementation: these plugins exist
 * to be loaded, refused and bound, not to be fast.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/plugin.h>

#ifndef PLUGIN_NAME
#define PLUGIN_NAME "test"
#endif

struct kvrt_plugin_device {
    int layout;
};

static void note(const char *what, int layout)
{
    /* The test reads this file to learn whether bind ran. */
    const char *path = getenv("KVRT_TEST_MARKER");
    if (!path)
        return;
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, "%s %s %d\n", PLUGIN_NAME, what, layout);
        fclose(f);
    }
}

static int probe(kvrt_plugin_error *why)
{
#ifdef VARIANT_NODEV
    snprintf(why->message, sizeof(why->message), "TEST_NO_DEVICE: no test device present");
    return KVRT_ERR_NODEV;
#else
    (void)why;
    return KVRT_OK;
#endif
}

static int bind(const struct kvrt_plugin_bind_info *info, kvrt_plugin_device **out, kvrt_plugin_error *err)
{
    note("bind", info->layout);
#ifdef VARIANT_FAILBIND
    snprintf(err->message, sizeof(err->message), "TEST_BIND_FAILED: the test device refuses to open");
    return KVRT_ERR_DEVICE;
#else
    (void)err;
    *out = calloc(1, sizeof(**out));
    if (!*out)
        return KVRT_ERR_NOMEM;
    (*out)->layout = info->layout;
    return KVRT_OK;
#endif
}

#ifndef VARIANT_NOUNBIND
static void unbind(kvrt_plugin_device *dev)
{
    free(dev);
}
#endif

static int buffer_alloc(kvrt_plugin_device *dev, uint64_t bytes, kvrt_plugin_buffer **out, kvrt_plugin_error *err)
{
    (void)dev;
    *out = calloc(1, bytes);
    if (!*out) {
        snprintf(err->message, sizeof(err->message), "cannot allocate %llu bytes", (unsigned long long)bytes);
        return KVRT_ERR_NOMEM;
    }
    return KVRT_OK;
}

static void buffer_free(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf)
{
    (void)dev;
    free(buf);
}

static int buffer_zero(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t off, uint64_t n,
                       kvrt_plugin_error *err)
{
    (void)dev, (void)err;
    memset((char *)buf + off, 0, n);
    return KVRT_OK;
}

static int buffer_upload(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t off, const void *src, uint64_t n,
                         kvrt_plugin_error *err)
{
    (void)dev, (void)err;
    memcpy((char *)buf + off, src, n);
    return KVRT_OK;
}

static int buffer_download(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, uint64_t off, void *dst, uint64_t n,
                           kvrt_plugin_error *err)
{
    (void)dev, (void)err;
    memcpy(dst, (char *)buf + off, n);
    return KVRT_OK;
}

#if defined(VARIANT_DEVTYPE) || defined(VARIANT_DESCRIBE_FAIL)
/* ABI 1.1 describe: a device of the type the variant names, or a failure
 * that must only cost the description. */
static int describe(struct kvrt_plugin_device_info *info, kvrt_plugin_error *err)
{
#ifdef VARIANT_DESCRIBE_FAIL
    snprintf(err->message, sizeof(err->message), "TEST_DESCRIBE_FAILED");
    (void)info;
    return KVRT_ERR_DEVICE;
#else
    (void)err;
    info->type = VARIANT_DEVTYPE;
    info->memory = KVRT_MEMORY_HOST;
    snprintf(info->name, sizeof(info->name), "test device\nof type %d", VARIANT_DEVTYPE);
    return KVRT_OK;
#endif
}

/* Buffers are the allocation itself (see buffer_alloc). */
static int buffer_address(kvrt_plugin_device *dev, kvrt_plugin_buffer *buf, void **address, kvrt_plugin_error *err)
{
    (void)dev, (void)err;
    *address = buf;
    return KVRT_OK;
}
#endif

#ifdef VARIANT_BADIMPORT
/* Declared with an alignment that is no power of two: never called. */
static int buffer_import(kvrt_plugin_device *dev, const struct kvrt_plugin_import *memory, kvrt_plugin_buffer **out,
                         kvrt_plugin_error *err)
{
    (void)dev, (void)memory, (void)out, (void)err;
    abort();
}
#endif

#ifdef VARIANT_ABI10
static int never_describe(struct kvrt_plugin_device_info *info, kvrt_plugin_error *err)
{
    (void)info, (void)err;
    abort(); /* past the descriptor's size: reading it is the core's bug */
}
#endif

static const int32_t layouts[] = {
#if defined(VARIANT_BADLAYOUT)
    KVRT_LAYOUT_LBHNC,
    17,
#elif defined(VARIANT_DUPLAYOUT)
    KVRT_LAYOUT_LBHNC,
    KVRT_LAYOUT_LBHNC,
#else
    KVRT_LAYOUT_LBHNC,
    KVRT_LAYOUT_LBNHC,
#endif
};

#define TEXT10 "abcdefghij"
#define TEXT100 TEXT10 TEXT10 TEXT10 TEXT10 TEXT10 TEXT10 TEXT10 TEXT10 TEXT10 TEXT10
#ifdef VARIANT_LONGNAME
/* 100 valid name bytes and no NUL: the array drops the literal's NUL. */
static const char long_name[100] = TEXT100;
#endif
#ifdef VARIANT_LONGDESC
static const char long_description[600] = TEXT100 TEXT100 TEXT100 TEXT100 TEXT100 TEXT100;
#endif

static const struct kvrt_plugin_descriptor descriptor = {
#if defined(VARIANT_TRUNCATED)
    .size = 24,
#elif defined(VARIANT_ABI10)
    .size = KVRT_PLUGIN_DESCRIPTOR_MIN_SIZE, /* built before ABI 1.1 */
#else
    .size = sizeof(struct kvrt_plugin_descriptor),
#endif
#ifdef VARIANT_ABI
    .abi_major = KVRT_PLUGIN_ABI_MAJOR + 1,
#else
    .abi_major = KVRT_PLUGIN_ABI_MAJOR,
#endif
#if defined(VARIANT_ABI10)
    .abi_minor = 0,
#elif defined(VARIANT_NEWER_MINOR)
    .abi_minor = KVRT_PLUGIN_ABI_MINOR + 1,
#else
    .abi_minor = KVRT_PLUGIN_ABI_MINOR,
#endif
#if defined(VARIANT_NONAME)
    .name = NULL,
#elif defined(VARIANT_LONGNAME)
    .name = long_name,
#else
    .name = PLUGIN_NAME,
#endif
#ifdef VARIANT_CTLVERSION
    .version = "0.0\n\x1b[2Jtest",
#else
    .version = "0.0-test",
#endif
#ifdef VARIANT_LONGDESC
    .description = long_description,
#else
    .description = "loader test plugin",
#endif
#ifdef VARIANT_NOLAYOUTS
    .num_layouts = 0,
#else
    .num_layouts = 2,
#endif
    .layouts = layouts,
    .dtypes = (1u << KVRT_DTYPE_FP32) | (1u << KVRT_DTYPE_FP16) | (1u << KVRT_DTYPE_BF16),
    .ops = 0,
    .probe = probe,
    .bind = bind,
#ifndef VARIANT_NOUNBIND
    .unbind = unbind,
#endif
    .buffer_alloc = buffer_alloc,
    .buffer_free = buffer_free,
    .buffer_zero = buffer_zero,
    .buffer_upload = buffer_upload,
    .buffer_download = buffer_download,
#if defined(VARIANT_BADDECODE)
    .decode_dtypes = 1u << KVRT_DTYPE_INT8, /* not among dtypes */
#elif defined(VARIANT_ABI10)
    /* Past `size`: the core must never read these. */
    .decode_dtypes = 0xdeadu,
    .describe = never_describe,
#endif
#if defined(VARIANT_DEVTYPE) || defined(VARIANT_DESCRIBE_FAIL)
    .describe = describe,
    .buffer_address = buffer_address,
#endif
#ifdef VARIANT_BADIMPORT
    .import_alignment = 3,
    .buffer_import = buffer_import,
#endif
};

#if defined(VARIANT_NEWER_MINOR)
/* Built against a later minor of the ABI: the descriptor is larger, with
 * fields this core does not know (marked so that reading them would show).
 * The core must load it and read nothing past its own descriptor. */
static struct {
    struct kvrt_plugin_descriptor d;
    uint64_t later[4];
} newer;
KVRT_PLUGIN_EXPORT const struct kvrt_plugin_descriptor *kvrt_plugin_entry(void);
KVRT_PLUGIN_EXPORT const struct kvrt_plugin_descriptor *kvrt_plugin_entry(void)
{
    newer.d = descriptor;
    newer.d.size = sizeof(newer);
    newer.d.abi_minor = KVRT_PLUGIN_ABI_MINOR + 1;
    for (int i = 0; i < 4; i++)
        newer.later[i] = 0xdeadbeefdeadbeefull;
    return &newer.d;
}
#elif !defined(VARIANT_NOENTRY)
KVRT_PLUGIN_DEFINE_ENTRY(descriptor)
#else
/* Exported, but under the wrong name. */
KVRT_PLUGIN_EXPORT const struct kvrt_plugin_descriptor *kvrt_plugin_entry_v0(void);
KVRT_PLUGIN_EXPORT const struct kvrt_plugin_descriptor *kvrt_plugin_entry_v0(void)
{
    return &descriptor;
}
#endif
