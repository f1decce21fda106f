/*
 * Plugin ABI 1.1: what a backend says about its device decides automatic
 * selection (a backend whose device is the host CPU ranks after "cpu"),
 * buffers expose their address when the memory has one, a decode type mask
 * outside the declared types is refused, and plugins built for an older or
 * a newer minor keep loading without the core reading past their size.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvrt/kvrt.h>
#include <kvrt/plugin.h>

#include "fixtures.h"
#include "tap.h"

static const char *dir, *cpu_path;
static char logged[4096];

static void capture_log(void *user, enum kvrt_log_level level, const char *message)
{
    (void)user, (void)level;
    size_t len = strlen(logged);
    snprintf(logged + len, sizeof(logged) - len, "%s\n", message);
}

/* A runtime over exactly the named test plugins, then the cpu plugin. */
static kvrt_runtime *open_with(const char *a, const char *b)
{
    char path[4096];
    int n = snprintf(path, sizeof(path), "%s/kvrt-%s.so", dir, a);
    if (b)
        n += snprintf(path + n, sizeof(path) - (size_t)n, ":%s/kvrt-%s.so", dir, b);
    snprintf(path + n, sizeof(path) - (size_t)n, ":%s", cpu_path);
    logged[0] = '\0';
    return fixture_runtime(path, capture_log);
}

static bool info_of(kvrt_runtime *rt, const char *name, struct kvrt_plugin_info *in)
{
    size_t i;
    return kvrt_runtime_find_plugin(rt, name, &i) == KVRT_OK && kvrt_runtime_plugin_info(rt, i, in) == KVRT_OK;
}

static void test_cpu_device_ranks_after_cpu(void)
{
    kvrt_runtime *rt = open_with("emucpu", NULL);
    const char *name = NULL;
    tap_ok(rt && kvrt_runtime_default_backend(rt, &name) == KVRT_OK && name && strcmp(name, "cpu") == 0,
           "a backend whose device is the host CPU ranks after \"cpu\" (default: %s)", name ? name : "none");
    tap_ok(rt && strstr(kvrt_runtime_trace(rt), "preferred: backend \"cpu\" over \"emucpu\"") != NULL,
           "the trace says why \"cpu\" was preferred");
    kvrt_backend *b = NULL;
    tap_ok(rt && kvrt_runtime_bind(rt, NULL, "LBHNC", &b) == KVRT_OK && strcmp(kvrt_backend_name(b), "cpu") == 0,
           "automatic binding takes \"cpu\" too");
    struct kvrt_plugin_info in;
    tap_ok(rt && info_of(rt, "emucpu", &in) && in.device_type == KVRT_DEVICE_TYPE_CPU &&
               in.memory == KVRT_MEMORY_HOST && strstr(in.device_name, "test device") && !strchr(in.device_name, '\n'),
           "plugin info carries the device type, memory kind and a one-line name (\"%s\")",
           rt && info_of(rt, "emucpu", &in) ? in.device_name : "");
    kvrt_runtime_close(rt);

    setenv(KVRT_BACKEND_ENV, "emucpu", 1);
    rt = open_with("emucpu", NULL);
    b = NULL;
    tap_ok(rt && kvrt_runtime_bind(rt, NULL, "LBHNC", &b) == KVRT_OK && strcmp(kvrt_backend_name(b), "emucpu") == 0,
           "KVRT_BACKEND=emucpu still binds the CPU-device backend when asked");
    unsetenv(KVRT_BACKEND_ENV);
    kvrt_runtime_close(rt);
}

static void test_gpu_device_keeps_its_place(void)
{
    kvrt_runtime *rt = open_with("realgpu", NULL);
    const char *name = NULL;
    tap_ok(rt && kvrt_runtime_default_backend(rt, &name) == KVRT_OK && name && strcmp(name, "realgpu") == 0,
           "a third-party GPU backend still ranks before \"cpu\" (default: %s)", name ? name : "none");
    kvrt_backend *b = NULL;
    struct kvrt_device_info di;
    tap_ok(rt && kvrt_runtime_bind(rt, "realgpu", "LBHNC", &b) == KVRT_OK &&
               kvrt_backend_device_info(b, &di) == KVRT_OK && di.type == KVRT_DEVICE_TYPE_GPU,
           "kvrt_backend_device_info reports the bound device's type");
    kvrt_buffer *buf = NULL;
    void *addr = NULL;
    enum kvrt_memory_kind kind = KVRT_MEMORY_OPAQUE;
    unsigned char bytes[64];
    for (int i = 0; i < 64; i++)
        bytes[i] = (unsigned char)(i * 7 + 1);
    bool ok = b && kvrt_buffer_create(b, sizeof(bytes), &buf) == KVRT_OK &&
              kvrt_buffer_upload(buf, 0, bytes, sizeof(bytes)) == KVRT_OK &&
              kvrt_buffer_address(buf, &addr, &kind) == KVRT_OK;
    tap_ok(ok && kind == KVRT_MEMORY_HOST && addr && memcmp(addr, bytes, sizeof(bytes)) == 0,
           "kvrt_buffer_address gives the host address of the uploaded bytes");
    tap_ok(kvrt_buffer_address(buf, NULL, NULL) == KVRT_ERR_INVALID, "kvrt_buffer_address: NULL addr refused");
    kvrt_buffer_destroy(buf);
    kvrt_runtime_close(rt);
}

static void test_failed_describe(void)
{
    kvrt_runtime *rt = open_with("mute", NULL);
    struct kvrt_plugin_info in;
    tap_ok(rt && info_of(rt, "mute", &in) && in.available && in.device_type == KVRT_DEVICE_TYPE_UNKNOWN &&
               in.memory == KVRT_MEMORY_OPAQUE && strstr(logged, "TEST_DESCRIBE_FAILED"),
           "a failing describe leaves the backend available, its device unknown, and is logged");
    kvrt_backend *b = NULL;
    kvrt_buffer *buf = NULL;
    void *addr = &addr;
    int status = KVRT_ERR_INTERNAL;
    if (rt && kvrt_runtime_bind(rt, "mute", "LBHNC", &b) == KVRT_OK && kvrt_buffer_create(b, 16, &buf) == KVRT_OK)
        status = kvrt_buffer_address(buf, &addr, NULL);
    tap_ok(status == KVRT_ERR_UNSUPPORTED && addr == NULL && strstr(kvrt_error_message(), "\"mute\""),
           "kvrt_buffer_address of memory with no known address: KVRT_ERR_UNSUPPORTED naming the backend (%s)",
           kvrt_error_message());
    kvrt_buffer_destroy(buf);
    kvrt_runtime_close(rt);
}

static const char *skip_reason(kvrt_runtime *rt, const char *file)
{
    for (size_t i = 0; rt && i < kvrt_runtime_num_skipped(rt); i++) {
        const char *path, *reason;
        kvrt_runtime_skipped(rt, i, &path, &reason);
        if (strstr(path, file))
            return reason;
    }
    return NULL;
}

static void test_descriptor_versions(void)
{
    kvrt_runtime *rt = open_with("baddecode", "old");
    const char *why = skip_reason(rt, "kvrt-baddecode.so");
    tap_ok(why && strstr(why, "decode_dtypes"), "decode_dtypes outside dtypes is refused: %s", why ? why : "(loaded)");
    struct kvrt_plugin_info in;
    tap_ok(rt && info_of(rt, "old", &in) && in.abi_minor == 0 && in.device_type == KVRT_DEVICE_TYPE_UNKNOWN,
           "an ABI 1.0 descriptor loads and its fields past `size` are never read");
    kvrt_runtime_close(rt);

    rt = open_with("newer", NULL);
    tap_ok(rt && info_of(rt, "newer", &in) && in.abi_minor == KVRT_PLUGIN_ABI_MINOR + 1 && in.available,
           "a plugin built for a newer minor (1.%u) loads; the core reads the fields it knows",
           (unsigned)KVRT_PLUGIN_ABI_MINOR + 1);
    kvrt_backend *b = NULL;
    tap_ok(rt && kvrt_runtime_bind(rt, "newer", "LBNHC", &b) == KVRT_OK, "and binds");
    kvrt_runtime_close(rt);
}

int main(void)
{
    fixture_test_plugins(&dir, &cpu_path);
    unsetenv(KVRT_BACKEND_ENV);
    tap_plan_dynamic();
    test_cpu_device_ranks_after_cpu();
    test_gpu_device_keeps_its_place();
    test_failed_describe();
    test_descriptor_versions();
    return tap_done();
}
