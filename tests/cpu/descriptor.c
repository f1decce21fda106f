/*
 * The CPU backend's descriptor, probe/bind, buffers and error messages, and
 * concurrent use of one device from several threads (the core serialises
 * nothing).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tap.h"

/* The sanitizers' allocators abort on impossible allocations instead of
 * failing them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TEST_SANITIZER_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define TEST_SANITIZER_ALLOCATOR 1
#endif
#endif

#ifndef EXPECTED_VERSION
#error "EXPECTED_VERSION must be the project version"
#endif

static void test_descriptor(void)
{
    const struct kvrt_plugin_descriptor *d = cpu;
    kvrt_plugin_entry_fn again = NULL;
    (void)again;
    tap_ok(d->size == sizeof(struct kvrt_plugin_descriptor) && d->size >= KVRT_PLUGIN_DESCRIPTOR_MIN_SIZE,
           "descriptor size %u is this ABI's", d->size);
    tap_ok(d->abi_major == KVRT_PLUGIN_ABI_MAJOR && d->abi_minor == KVRT_PLUGIN_ABI_MINOR, "ABI %u.%u", d->abi_major,
           d->abi_minor);
    tap_ok(d->name && strcmp(d->name, "cpu") == 0, "name is \"cpu\"");
    tap_ok(d->version && strcmp(d->version, EXPECTED_VERSION) == 0, "version \"%s\" is the project version",
           d->version ? d->version : "(null)");
    tap_ok(d->description && *d->description, "has a description");
    bool seen[6] = {false};
    bool ok = d->num_layouts == 6 && d->layouts && !(d->flags & KVRT_PLUGIN_ANY_LAYOUT);
    for (uint32_t i = 0; ok && i < d->num_layouts; i++) {
        int l = d->layouts[i];
        ok = l >= 0 && l < 6 && !seen[l];
        if (ok)
            seen[l] = true;
    }
    tap_ok(ok, "declares each of the six layouts exactly once, in a preference order");
    uint32_t want = 0;
    for (int t = KVRT_DTYPE_FP32; t <= KVRT_DTYPE_UINT8; t++)
        want |= 1u << t;
    tap_ok(d->dtypes == want, "element types: all seven (0x%x)", d->dtypes);
    tap_ok(d->ops == KVRT_OP_ALL, "operations: all (0x%x)", d->ops);
    tap_ok(d->probe && d->bind && d->unbind && d->buffer_alloc && d->buffer_free && d->buffer_zero &&
               d->buffer_upload && d->buffer_download && d->write && d->read && d->copy_blocks && d->gather &&
               d->scatter && d->decode,
           "every function is present");
    kvrt_plugin_error why = {{0}};
    tap_ok(d->probe(&why) == KVRT_OK, "probe succeeds");
}

static void test_bind(void)
{
    bool ok = true;
    for (int l = 0; l < 6; l++) {
        kvrt_plugin_device *a = harness_bind(l), *b = harness_bind(l);
        ok = ok && a && b && a != b;
        cpu->unbind(b);
        cpu->unbind(a);
    }
    tap_ok(ok, "bind/unbind every layout, two devices at once");
    setenv("KVRT_CPU_THREADS", "1", 1);
    kvrt_plugin_device *one = harness_bind(0);
    unsetenv("KVRT_CPU_THREADS");
    kvrt_plugin_buffer *b = harness_alloc(one, 1u << 20);
    unsigned char *src = malloc(1u << 20), *dst = malloc(1u << 20);
    rnd_bytes(src, 1u << 20);
    harness_upload(one, b, src, 1u << 20);
    harness_download(one, b, dst, 1u << 20);
    tap_ok(memcmp(src, dst, 1u << 20) == 0, "a one-thread device (KVRT_CPU_THREADS=1) works");
    cpu->buffer_free(one, b);
    cpu->unbind(one);
    free(src);
    free(dst);
}

/* KVRT_CPU_ISA: every kernel name the CPU runs binds; a bad value and a
 * kernel the CPU lacks fail probe and bind with a one-line message. */
static void test_isa(void)
{
    static const char *const isas[] = {"auto", "generic", "avx2", "avx512"};
    const char *saved = getenv("KVRT_CPU_ISA");
    char *keep = saved ? strdup(saved) : NULL;
    for (size_t i = 0; i < sizeof(isas) / sizeof(isas[0]); i++) {
        setenv("KVRT_CPU_ISA", isas[i], 1);
        kvrt_plugin_error why = {{0}};
        int rc = cpu->probe(&why);
        kvrt_plugin_device *dev = NULL;
        struct kvrt_plugin_bind_info info = {sizeof(info), KVRT_LAYOUT_LBHNC, NULL};
        kvrt_plugin_error berr = {{0}};
        int brc = cpu->bind(&info, &dev, &berr);
        if (rc == KVRT_OK) {
            tap_ok(brc == KVRT_OK && dev, "KVRT_CPU_ISA=%s: probe and bind succeed", isas[i]);
        } else {
            /* Only an x86 kernel may be missing, and it must say why. */
            tap_ok(rc == KVRT_ERR_UNSUPPORTED && brc == KVRT_ERR_UNSUPPORTED && !dev && strstr(why.message, isas[i]) &&
                       strstr(why.message, "generic") && !strchr(why.message, '\n'),
                   "KVRT_CPU_ISA=%s, which this CPU cannot run: unsupported, with the "
                   "reason",
                   isas[i]);
            tap_diag("  %s", why.message);
        }
        if (dev)
            cpu->unbind(dev);
    }
    setenv("KVRT_CPU_ISA", "avx9000", 1);
    kvrt_plugin_error why = {{0}};
    kvrt_plugin_device *dev = NULL;
    struct kvrt_plugin_bind_info info = {sizeof(info), KVRT_LAYOUT_LBHNC, NULL};
    int rc = cpu->probe(&why);
    tap_ok(rc == KVRT_ERR_INVALID && strstr(why.message, "\"avx9000\"") && strstr(why.message, "avx512") &&
               strstr(why.message, "avx2") && strstr(why.message, "generic") && !strchr(why.message, '\n'),
           "KVRT_CPU_ISA=avx9000: probe fails naming the value and the valid ones");
    tap_diag("  %s", why.message);
    tap_ok(cpu->bind(&info, &dev, &why) == KVRT_ERR_INVALID && !dev, "KVRT_CPU_ISA=avx9000: bind fails too");
    if (keep)
        setenv("KVRT_CPU_ISA", keep, 1);
    else
        unsetenv("KVRT_CPU_ISA");
    free(keep);
}

static void test_buffers(void)
{
    kvrt_plugin_device *dev = harness_bind(KVRT_LAYOUT_LBNHC);
    kvrt_plugin_buffer *b = NULL;
    int rc = cpu->buffer_alloc(dev, 100, &b, &cpu_err);
    tap_ok(rc == KVRT_OK && b, "alloc of 100 bytes");
    const uint64_t big = 9u << 20;
    kvrt_plugin_buffer *c = harness_alloc(dev, big);
    unsigned char *src = malloc(big), *dst = malloc(big);
    rnd_bytes(src, big);
    harness_upload(dev, c, src, big);
    harness_download(dev, c, dst, big);
    tap_ok(memcmp(src, dst, big) == 0, "upload/download of 9 MiB (split across threads)");
    rc = cpu->buffer_zero(dev, c, 1000, big - 3000, &cpu_err);
    harness_download(dev, c, dst, big);
    bool ok = rc == KVRT_OK && memcmp(dst, src, 1000) == 0 && memcmp(dst + big - 2000, src + big - 2000, 2000) == 0;
    for (uint64_t i = 1000; ok && i < big - 2000; i++)
        ok = dst[i] == 0;
    tap_ok(ok, "zero of a sub-range leaves the rest alone");
    rc = cpu->buffer_upload(dev, c, 7, "kvrt", 4, &cpu_err);
    char word[5] = {0};
    rc |= cpu->buffer_download(dev, c, 7, word, 4, &cpu_err);
    tap_ok(rc == KVRT_OK && strcmp(word, "kvrt") == 0, "upload/download at an offset");

    kvrt_plugin_buffer *huge = NULL;
#if defined(TEST_SANITIZER_ALLOCATOR)
    tap_skip("impossible allocations: the sanitizer's allocator aborts instead of failing");
#else
    memset(cpu_err.message, 0, sizeof(cpu_err.message));
    rc = cpu->buffer_alloc(dev, UINT64_MAX / 4, &huge, &cpu_err);
    tap_ok(rc == KVRT_ERR_NOMEM && huge == NULL && strstr(cpu_err.message, "4611686018427387903"),
           "an impossible allocation is KVRT_ERR_NOMEM naming the size");
    tap_diag("  %s", cpu_err.message);
#endif
    /* Refused before any allocator sees it: runs under sanitizers too. */
    memset(cpu_err.message, 0, sizeof(cpu_err.message));
    rc = cpu->buffer_alloc(dev, UINT64_MAX, &huge, &cpu_err);
    tap_ok(rc == KVRT_ERR_NOMEM && huge == NULL && strstr(cpu_err.message, "18446744073709551615"),
           "UINT64_MAX bytes: KVRT_ERR_NOMEM, no wrap-around");
    tap_diag("  %s", cpu_err.message);
    cpu->buffer_free(dev, b);
    cpu->buffer_free(dev, c);
    cpu->buffer_free(dev, NULL);
    cpu->unbind(dev);
    free(src);
    free(dst);
}

/* Several threads, one device, each with its own cache: write, gather,
 * scatter elsewhere, read back. */
struct worker {
    kvrt_plugin_device *dev;
    int layout;
    bool ok;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct geom g = {.layout = w->layout,
                     .dtype = KVRT_DTYPE_BF16,
                     .elem = 2,
                     .L = 2,
                     .B = 64,
                     .r = 1,
                     .k = 16,
                     .H = 4,
                     .D = 64,
                     .Dv = 64};
    struct test_cache tc;
    geom_build(&g, &tc);
    const uint64_t T = 512, row = 4 * 64 * 2;
    kvrt_plugin_buffer *c = harness_alloc(w->dev, tc.cache.bytes);
    kvrt_plugin_buffer *k = harness_alloc(w->dev, T * row), *v = harness_alloc(w->dev, T * row);
    const uint64_t bb = 2 * 4 * 16 * 256;
    kvrt_plugin_buffer *st = harness_alloc(w->dev, 32 * bb);
    unsigned char *kh = malloc(T * row), *vh = malloc(T * row), *kr = malloc(T * row), *vr = malloc(T * row);
    int64_t slots[512], ids[32], ids2[32];
    w->ok = true;
    for (int iter = 0; iter < 20 && w->ok; iter++) {
        rnd_bytes(kh, T * row);
        rnd_bytes(vh, T * row);
        for (uint64_t t = 0; t < T; t++)
            slots[t] = (int64_t)t;
        for (int i = 0; i < 32; i++) {
            ids[i] = i;
            ids2[i] = 32 + i;
        }
        int rc = cpu->buffer_upload(w->dev, k, 0, kh, T * row, &cpu_err);
        rc |= cpu->buffer_upload(w->dev, v, 0, vh, T * row, &cpu_err);
        rc |= cpu->write(w->dev, &tc.cache, c, 1, T, slots, k, 0, v, 0, &cpu_err);
        rc |= cpu->gather(w->dev, &tc.cache, c, 32, ids, st, 0, &cpu_err);
        rc |= cpu->scatter(w->dev, &tc.cache, c, 32, ids2, st, 0, &cpu_err);
        for (uint64_t t = 0; t < T; t++)
            slots[t] = (int64_t)(T + t);
        rc |= cpu->read(w->dev, &tc.cache, c, 1, T, slots, k, 0, v, 0, &cpu_err);
        rc |= cpu->buffer_download(w->dev, k, 0, kr, T * row, &cpu_err);
        rc |= cpu->buffer_download(w->dev, v, 0, vr, T * row, &cpu_err);
        w->ok = rc == KVRT_OK && memcmp(kh, kr, T * row) == 0 && memcmp(vh, vr, T * row) == 0;
    }
    free(kh), free(vh), free(kr), free(vr);
    cpu->buffer_free(w->dev, c);
    cpu->buffer_free(w->dev, k);
    cpu->buffer_free(w->dev, v);
    cpu->buffer_free(w->dev, st);
    return NULL;
}

static void test_concurrency(void)
{
    kvrt_plugin_device *dev = harness_bind(KVRT_LAYOUT_BLHNC);
    struct worker w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){dev, (i * 5) % 6, false};
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    bool ok = true;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ok = ok && w[i].ok;
    }
    tap_ok(ok, "four threads sharing one device: write, gather, scatter, read stay exact");
    cpu->unbind(dev);
}

/* A child forked after bind has no worker threads: jobs must still run. */
static void test_fork(void)
{
    kvrt_plugin_device *dev = harness_bind(KVRT_LAYOUT_LBHNC);
    const uint64_t big = 8u << 20;
    kvrt_plugin_buffer *b = harness_alloc(dev, big);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        unsigned char *src = malloc(big), *dst = malloc(big);
        memset(src, 0x5a, big);
        int rc = cpu->buffer_upload(dev, b, 0, src, big, &cpu_err);
        rc |= cpu->buffer_download(dev, b, 0, dst, big, &cpu_err);
        int status = rc == KVRT_OK && memcmp(src, dst, big) == 0 ? 0 : 3;
        free(src); /* valgrind runs check the child too */
        free(dst);
        cpu->buffer_free(dev, b);
        cpu->unbind(dev); /* the parent's workers are not here: must not wait */
        _exit(status);
    }
    int status = -1;
    if (pid > 0)
        waitpid(pid, &status, 0);
    tap_ok(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "a forked child uses and unbinds the device without the parent's workers");
    cpu->buffer_free(dev, b);
    cpu->unbind(dev);
}

int main(void)
{
    harness_load();
    tap_plan_dynamic();
    test_descriptor();
    test_bind();
    test_isa();
    test_buffers();
    test_concurrency();
    test_fork();
    return tap_done();
}
